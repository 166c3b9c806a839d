"""One-line integrations of :class:`rlmem.StepMonitor`.

transformers' Trainer (and the RL trainers built on it, e.g. TRL's GRPOTrainer)::

    trainer.add_callback(rlmem.integrations.RlmemCallback(log="mem.jsonl"))

A plain loop::

    for batch in rlmem.monitored(loader, log="mem.jsonl"):
        train_step(batch)

``RlmemCallback`` is a ``transformers.TrainerCallback`` subclass, created when first asked for,
so that importing rlmem never imports transformers.
"""

from __future__ import annotations

import threading
from typing import Any

from .monitor import StepMonitor, monitored

__all__ = ["RlmemCallback", "monitored"]

_lock = threading.Lock()
_classes: dict[type, type] = {}  # a cache: TrainerCallback base class -> RlmemCallback built on it


class _CallbackBody:
    """What RlmemCallback does; mixed into a subclass of transformers.TrainerCallback."""

    def __init__(self, monitor: StepMonitor | None = None, **options: Any) -> None:
        """``RlmemCallback(log="mem.jsonl", record_on_leak=3)`` creates a StepMonitor with those
        options; ``RlmemCallback(monitor)`` uses yours."""
        if monitor is not None and options:
            raise TypeError("pass either a StepMonitor or the options to create one, not both")
        self.monitor = monitor if monitor is not None else StepMonitor(**options)

    def on_step_end(self, args, state, control, **kwargs):
        """After each optimizer step: the monitor's step end, numbered with ``state.global_step``."""
        self.monitor.step(state.global_step)
        return control

    def on_train_end(self, args, state, control, **kwargs):
        self.monitor.close()
        return control


def callback_class():
    """RlmemCallback: ``transformers.TrainerCallback`` with the monitor's step at each step end."""
    try:
        from transformers import TrainerCallback  # noqa: PLC0415 (lazy on purpose)
    except ImportError as error:
        raise ImportError(f"rlmem.integrations.RlmemCallback needs transformers ({error})") from None
    with _lock:
        cls = _classes.get(TrainerCallback)
        if cls is None:
            cls = type("RlmemCallback", (_CallbackBody, TrainerCallback), {
                "__doc__": "A transformers TrainerCallback that calls rlmem.StepMonitor.step(state.global_step)"
                           " at each step end. " + (_CallbackBody.__init__.__doc__ or ""),
                "__module__": __name__,
            })
            _classes[TrainerCallback] = cls
        return cls


def __getattr__(name: str):
    if name == "RlmemCallback":
        return callback_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
