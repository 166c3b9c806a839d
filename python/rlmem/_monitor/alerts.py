"""What a StepMonitor alert is, and when an alert of one kind for one rank is raised again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

ALERT_KINDS = ("leak", "fragmentation", "alloc_retries", "headroom", "oom", "imbalance")


class AlertWarning(UserWarning):
    """The warning category of StepMonitor alerts (with ``use_warnings=True``)."""


@dataclass
class Alert:
    """One alert: ``kind`` (one of ALERT_KINDS), the ``rank`` it concerns, a one-line ``message``
    with the figures, the ``step`` it was raised at, and for leaks ``bytes_per_step``,
    ``since_step``, ``steps_to_limit`` (the forecast: steps until the step peak passes the limit
    at this rate), ``cleared`` (True on the line that says a leak alert no longer holds) and, once
    a recorded snapshot named it, ``site``, ``snapshot`` and ``holder`` (the Python object that
    keeps the leaked tensors alive)."""

    kind: str
    rank: int
    message: str
    step: int
    bytes_per_step: Optional[int] = None
    since_step: Optional[int] = None
    site: Optional[str] = None
    snapshot: Optional[str] = None
    steps_to_limit: Optional[int] = None
    cleared: bool = False
    holder: Optional[str] = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "rank": self.rank, "message": self.message}
        if self.cleared:
            out["cleared"] = True
        for key in ("bytes_per_step", "since_step", "steps_to_limit", "site", "snapshot", "holder"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    def __str__(self) -> str:
        return self.message


@dataclass
class _Repeat:
    """When an alert of one kind for one rank is raised again: when its figure changed materially
    (by ``repeat_change`` relative, or for OOMs by any amount), or when the condition went away
    for ``rearm_after`` samples and came back."""

    figure: Optional[float] = None
    last_seen: int = -1


class AlertRepeats:
    """StepMonitor's repeat policy over ``self._repeats`` (one :class:`_Repeat` per kind and rank),
    counted in ``self.samples``."""

    def _should_raise(self, kind: str, rank: int, figure: float, any_change: bool = False, gathered: bool = False) -> bool:
        state = self._repeats.setdefault((kind, rank), _Repeat())
        seen_before = state.last_seen
        state.last_seen = self.samples
        # Conditions of other ranks are seen only at gathers: absence is counted in gathers there.
        rearm = self.rearm_after * (self.gather_every if gathered else 1)
        if state.figure is None or self.samples - seen_before > rearm:
            state.figure = figure
            return True
        if any_change:
            material = figure != state.figure
        else:
            base = max(abs(state.figure), 1.0)
            material = abs(figure - state.figure) >= self.repeat_change * base
        if material:
            state.figure = figure
        return material
