"""rlmem.StepMonitor: PyTorch memory figures at every step end, a JSON-lines log, and alerts.

::

    monitor = rlmem.StepMonitor("mem.jsonl", record_on_leak=3, snapshot_dir="snapshots/")
    for batch in loader:
        train_step(batch)
        monitor.step()

The figures, the alert rules and their thresholds are described in docs/monitor.md; the log's
line format is docs/schema/steplog.schema.json (``rlmem watch --log`` reads it).
"""

from __future__ import annotations

import json
import logging
import os
import time
import warnings
import zlib
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Optional

from . import _dist, _torch
from ._format import format_bytes, format_percent, format_signed_bytes
from ._limit import fraction_limit
from .core import inspect
from .errors import RlmemError
from .holders import find_holders
from .recording import record
from .rules import StepRules, judge_imbalance, judge_step

__all__ = ["StepMonitor", "Alert", "AlertWarning", "monitored", "SCHEMA", "ALERT_KINDS"]

SCHEMA = "rlmem.steplog/1"
ALERT_KINDS = ("leak", "fragmentation", "alloc_retries", "headroom", "oom", "imbalance")
logger = logging.getLogger("rlmem")

MiB = 1024**2
GiB = 1024**3

# The memory_stats() keys the monitor reads (every one exists on torch 1.13 to 2.x).
STAT_KEYS = {
    "allocated": "allocated_bytes.all.current",
    "reserved": "reserved_bytes.all.current",
    "active": "active_bytes.all.current",
    "inactive_split": "inactive_split_bytes.all.current",
    "step_peak_allocated": "allocated_bytes.all.peak",
    "step_peak_reserved": "reserved_bytes.all.peak",
    "allocations": "allocation.all.current",
    "num_alloc_retries": "num_alloc_retries",
    "num_ooms": "num_ooms",
}


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
class _Sample:
    step: int
    time: float
    step_seconds: Optional[float]
    rank: int
    world_size: int
    device: int
    allocated: int
    reserved: int
    active: int
    inactive_split: int
    step_peak_allocated: int
    step_peak_reserved: int
    allocations: int
    num_alloc_retries: int
    num_ooms: int
    device_free: int
    device_total: int
    tags: Optional[list] = None   # rlmem.runtime.statistics()["tags"] when the runtime is installed
    # derived
    peak_allocated_seen: int = 0   # the largest allocated peak seen so far
    unused_reserved: int = 0       # reserved beyond that peak: memory no step has needed at once
    free_at_peak: int = 0          # device_total - (device use at the step's reserved peak)
    flags: int = 0                 # alert kinds whose condition held (bit i = ALERT_KINDS[i])
    leak_bytes_per_step: int = 0
    leak_since_step: int = 0
    limit: int = 0                 # the process's cap (memory fraction x total), 0: none
    steps_to_limit: Optional[int] = None  # at the leak's rate, steps until the step peak passes the limit

    def figures(self) -> dict[str, int]:
        """The figures the rules read (rlmem.rules.SAMPLE_FIELDS)."""
        return {"step": self.step, "allocated": self.allocated, "reserved": self.reserved,
                "inactive_split": self.inactive_split, "step_peak_allocated": self.step_peak_allocated,
                "step_peak_reserved": self.step_peak_reserved, "allocations": self.allocations,
                "num_alloc_retries": self.num_alloc_retries, "num_ooms": self.num_ooms,
                "device_free": self.device_free, "device_total": self.device_total, "limit": self.limit}


@dataclass
class _Repeat:
    """When an alert of one kind for one rank is raised again: when its figure changed materially
    (by ``repeat_change`` relative, or for OOMs by any amount), or when the condition went away
    for ``rearm_after`` samples and came back."""

    figure: Optional[float] = None
    last_seen: int = -1


@dataclass
class _LeakRecording:
    recorder: record
    remaining: int
    started_step: int
    steps: int
    bytes_per_step: int
    since_step: int


def _stats_value(stats: dict, key: str) -> int:
    value = stats.get(key, 0)
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _pack_text(text: str, words: int) -> list[int]:
    raw = text.encode("utf-8")[: words * 8]
    raw = raw + b"\0" * (words * 8 - len(raw))
    return [int.from_bytes(raw[i: i + 8], "little", signed=True) for i in range(0, words * 8, 8)]


def _unpack_text(values: list[int]) -> str:
    raw = b"".join(int(v).to_bytes(8, "little", signed=True) for v in values)
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


# The gathered vector: one int64 per field, then the host name and the leak site as UTF-8 bytes.
_GATHER_FIELDS = ("rank", "device", "step", "allocated", "reserved", "inactive_split", "step_peak_allocated",
                  "step_peak_reserved", "num_alloc_retries", "num_ooms", "device_free", "device_total",
                  "allocations", "peak_allocated_seen", "unused_reserved", "free_at_peak", "flags",
                  "leak_bytes_per_step", "leak_since_step")
_HOST_WORDS = 8    # 64 bytes
_SITE_WORDS = 16   # 128 bytes
GATHER_BYTES = 8 * (len(_GATHER_FIELDS) + _HOST_WORDS + _SITE_WORDS)


class StepMonitor:
    """Reads PyTorch's memory figures at each step end, logs them, and raises alerts.

    Call :meth:`step` at the end of every training step (or use :func:`monitored`, or
    ``rlmem.integrations.RlmemCallback`` with a transformers Trainer). Each sampled step reads
    ``torch.cuda.memory_stats()`` (allocated, reserved, active, inactive-split bytes, the peaks,
    live allocations, ``num_alloc_retries``, ``num_ooms``) and ``torch.cuda.mem_get_info()``. It
    never synchronizes the device, and it leaves your counters alone: only ``reset_peak=True``
    resets the peak statistics, at each step end, so that the logged peak is the step's own (the
    log says which with ``peak_is_per_step``).

    Alerts (thresholds are the parameters below; docs/monitor.md explains each rule):

    * **leak**: librlmem's growth rule (:func:`rlmem.judge_step`, the code ``rlmem watch`` runs)
      on the step-end allocated bytes of the last ``leak_window`` (64) samples: a change point,
      a Theil-Sen slope significant against the series' own noise, step ends that rose above it
      (3 every step; 2 alike ones every few steps) or, over a noisy series, a Mann-Kendall trend,
      still going at the newest step end. The alert carries the forecast ``steps_to_limit`` (step
      ends until the step's allocated peak no longer fits the card, or ``limit``); when the rule
      stops holding (a cache that filled), one ``cleared`` alert says so. With
      ``record_on_leak=K`` the monitor then records the next K steps (5 when the growth came
      with fewer new allocations than steps), dumps a snapshot into ``snapshot_dir``, runs
      :func:`rlmem.inspect` on it and raises the alert again naming the allocation site that
      grows and, within ``holder_budget`` seconds, the Python object that holds the leaked
      tensors (``holder_roots``: ``{name: object}`` to name paths through). ``leak_steady_steps``
      is accepted and no longer used.
    * **fragmentation**: reserved memory beyond the largest allocated peak seen (memory no step
      has needed at once) at least ``fragmentation_bytes`` and ``fragmentation_fraction`` of
      reserved, and grown over the last ``fragmentation_window`` samples.
    * **alloc_retries**: ``num_alloc_retries`` rose: cudaMalloc failed, the allocator emptied
      its cache and retried; the job runs at the memory limit.
    * **headroom**: at the step's reserved peak, less than ``headroom`` (a fraction) of the device
      (or of ``limit``) was left free, or a leak's forecast is under ``headroom_steps`` (500).
      ``limit``: the process's cap in bytes; by default torch's per-process memory fraction of the
      device when one below 1 is set.
    * **oom**: ``num_ooms`` rose (an OOM was raised, perhaps caught).
    * **imbalance** (rank 0 of a distributed job): allocated or peak bytes across ranks differ by
      ``imbalance`` of the largest and ``imbalance_bytes``.

    An alert is raised again only when its figure changes by ``repeat_change`` (relative) or after
    its condition was absent for ``rearm_after`` samples. Each goes to the log line (``alerts``),
    to the ``logging`` logger ``"rlmem"`` at WARNING, to ``warnings`` (``use_warnings=True``) and to
    ``on_alert(alert)``.

    ``log``: a path for the JSON-lines log (appended, one flushed line per sampled step), or None.
    In a torch.distributed job rank 0 writes it; other ranks write their own only when the path
    contains ``{rank}``. ``every``: sample every N calls of :meth:`step`. ``device_info_every``:
    call ``mem_get_info`` (a driver call) every N samples; the log repeats the last value between.

    Many GPUs: every ``gather_every`` samples (0: never) each rank's figures and alert state are
    gathered over the job's default process group (one int64 tensor of {GATHER_BYTES} bytes per
    rank, ``all_gather``: on NCCL on the current CUDA device, on gloo on the CPU); rank 0's log
    line then carries ``ranks``, and rank 0 raises the alerts of other ranks, naming them, and the
    imbalance alert. While gathering, ranks other than 0 keep their alerts out of ``logging``
    (rank 0 reports them); ``step()`` must then be called equally often on every rank.

    ``cuda``: the ``torch.cuda``-like module to read; tests pass a stand-in.
    """

    def __init__(
        self,
        log: Optional[str | os.PathLike] = None,
        *,
        every: int = 1,
        reset_peak: bool = False,
        leak_window: int = 64,
        leak_steady_steps: Optional[int] = None,
        headroom: float = 0.10,
        headroom_steps: int = 500,
        limit: Optional[int] = None,
        fragmentation_bytes: int = 512 * MiB,
        fragmentation_fraction: float = 0.20,
        fragmentation_window: int = 5,
        imbalance: float = 0.20,
        imbalance_bytes: int = 512 * MiB,
        repeat_change: float = 0.25,
        rearm_after: int = 10,
        record_on_leak: int = 0,
        snapshot_dir: Optional[str | os.PathLike] = None,
        record_max_entries: int = 1_000_000,
        record_stacks: str = "python",
        holder_budget: float = 1.0,
        holder_roots: Optional[dict] = None,
        gather_every: int = 10,
        device_info_every: int = 1,
        on_alert: Optional[Callable[[Alert], Any]] = None,
        use_warnings: bool = False,
        cuda=None,
    ) -> None:
        def positive(name, value, low=1):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, not {value!r}")

        positive("every", every)
        positive("leak_window", leak_window, 3)
        if leak_window > 256:
            raise ValueError(f"leak_window must be at most 256 (the rule's cost is cubic in it), not {leak_window}")
        if leak_steady_steps is not None:
            warnings.warn("StepMonitor(leak_steady_steps=) is no longer used: the leak rule is statistical"
                          " (docs/monitor.md)", DeprecationWarning, stacklevel=2)
        positive("headroom_steps", headroom_steps, 0)
        if limit is not None:
            positive("limit", limit, 1)
        positive("fragmentation_window", fragmentation_window)
        positive("rearm_after", rearm_after)
        positive("record_on_leak", record_on_leak, 0)
        positive("gather_every", gather_every, 0)
        positive("device_info_every", device_info_every)
        positive("record_max_entries", record_max_entries)
        for name, value in (("headroom", headroom), ("fragmentation_fraction", fragmentation_fraction),
                            ("imbalance", imbalance), ("repeat_change", repeat_change)):
            if not (isinstance(value, (int, float)) and 0 <= value < 1) or isinstance(value, bool):
                raise ValueError(f"{name} must be a fraction in [0, 1), not {value!r}")
        for name, value in (("fragmentation_bytes", fragmentation_bytes), ("imbalance_bytes", imbalance_bytes)):
            positive(name, value, 0)
        if record_on_leak and snapshot_dir is None and log is None:
            raise ValueError("record_on_leak needs a snapshot_dir (or a log, whose directory gets rlmem-snapshots/)")
        if isinstance(holder_budget, bool) or not isinstance(holder_budget, (int, float)) or not 0 <= holder_budget <= 60:
            raise ValueError(f"holder_budget must be seconds in [0, 60], not {holder_budget!r}")
        if holder_roots is not None and not isinstance(holder_roots, dict):
            raise TypeError("holder_roots must be a dict of {name: object}")
        if on_alert is not None and not callable(on_alert):
            raise TypeError("on_alert must be callable")
        self.log_path = os.fspath(log) if log is not None else None
        self.every = every
        self.headroom_steps = headroom_steps
        #: the process's memory cap in bytes; None: torch's per-process memory fraction when set
        self.limit = limit
        self.reset_peak = reset_peak
        self.leak_window = leak_window
        self.headroom = headroom
        self.fragmentation_bytes = fragmentation_bytes
        self.fragmentation_fraction = fragmentation_fraction
        self.fragmentation_window = fragmentation_window
        self.imbalance = imbalance
        self.imbalance_bytes = imbalance_bytes
        self.repeat_change = repeat_change
        self.rearm_after = rearm_after
        self.record_on_leak = record_on_leak
        if snapshot_dir is None and self.log_path is not None:
            snapshot_dir = os.path.join(os.path.dirname(self.log_path) or ".", "rlmem-snapshots")
        self.snapshot_dir = os.fspath(snapshot_dir) if snapshot_dir is not None else None
        self.record_max_entries = record_max_entries
        self.record_stacks = record_stacks
        self.holder_budget = holder_budget
        self.holder_roots = holder_roots
        self.gather_every = gather_every
        self.device_info_every = device_info_every
        self.on_alert = on_alert
        self.use_warnings = use_warnings
        self._cuda_given = cuda
        self._cuda = None
        #: step() calls so far, and samples taken
        self.calls = 0
        self.samples = 0
        #: every alert raised so far, oldest first
        self.alerts: list[Alert] = []
        #: seconds spent inside step() in total, and in the last call
        self.overhead_seconds = 0.0
        self.last_overhead_seconds = 0.0
        #: the allocation site the last leak recording named, and its snapshot
        self.leak_site: Optional[str] = None
        self.leak_snapshot: Optional[str] = None
        self._rules = StepRules(leak_window=leak_window, fragmentation_bytes=fragmentation_bytes,
                                fragmentation_fraction=fragmentation_fraction, fragmentation_window=fragmentation_window,
                                headroom_fraction=headroom, headroom_steps=headroom_steps)
        self._history: deque[_Sample] = deque(maxlen=max(leak_window, fragmentation_window + 1))
        self._peak_before_history = 0  # the largest allocated peak of samples that left the history
        self._leak_alerted = False      # a leak alert holds: its end is said when the rule clears
        self._leak_last_rate = 0
        self._repeats: dict[tuple[str, int], _Repeat] = {}
        self._last_time: Optional[float] = None
        self._device_info: Optional[tuple[int, int]] = None
        self._log_file = None
        self._log_opened_for: Optional[int] = None
        self._recording: Optional[_LeakRecording] = None
        self._leak_recorded = False
        self._flags_since_gather = 0
        self._previous_remote: dict[int, dict[str, int]] = {}
        self._disabled_reason: Optional[str] = None
        self._pending: list[Alert] = []
        self._log_failed = False
        self._closed = False

    # -- public ---------------------------------------------------------------------------------

    def step(self, step: Optional[int] = None) -> list[Alert]:
        """Call at the end of each step. ``step``: your own step number (default: the count of
        calls, from 1). Returns the alerts raised at this call (usually none)."""
        started = time.perf_counter()
        try:
            return self._step(step)
        finally:
            self.last_overhead_seconds = time.perf_counter() - started
            self.overhead_seconds += self.last_overhead_seconds

    def wrap(self, iterable: Iterable) -> Iterator:
        """Yields the items of ``iterable``; the end of each loop body is a step end."""
        return monitored(iterable, self)

    def close(self) -> None:
        """Closes the log and stops a leak recording still running (the monitor can be used as a
        context manager, which calls this)."""
        if self._recording is not None:
            recording, self._recording = self._recording, None
            recording.recorder.__exit__(None, None, None)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        self._closed = True

    def __enter__(self) -> "StepMonitor":
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    # -- one step -------------------------------------------------------------------------------

    def _step(self, step: Optional[int]) -> list[Alert]:
        self.calls += 1
        number = int(step) if step is not None else self.calls
        if self._disabled_reason is not None:
            return []
        if self._cuda is None:
            self._cuda = _torch.default_cuda(self._cuda_given)
            if not self._cuda.is_available():
                self._disabled_reason = "torch.cuda.is_available() is False"
                logger.warning("rlmem.StepMonitor: no CUDA device (%s); the monitor does nothing", self._disabled_reason)
                return []
        raised: list[Alert] = []
        if self._recording is not None:
            raised += self._advance_recording(number)
        if self.calls % self.every != 0:
            self._pending += raised  # they go into the next line written
            self._emit(raised)
            return raised
        sample = self._read(number)
        self.samples += 1
        if len(self._history) == self._history.maxlen:
            oldest = self._history[0]
            self._peak_before_history = max(self._peak_before_history, oldest.step_peak_allocated, oldest.allocated)
        self._history.append(sample)
        raised += self._local_alerts(sample)
        self._flags_since_gather |= sample.flags
        ranks = None
        if self.gather_every and sample.world_size > 1 and self.samples % self.gather_every == 0:
            ranks, remote = self._gather(sample)
            raised += remote
        self._write(sample, self._pending + raised, ranks)
        self._pending = []
        self._emit(raised)
        return raised

    def _read(self, number: int) -> _Sample:
        cuda = self._cuda
        # Under rlmem's runtime torch's stats raise (its pluggable allocator keeps none): read
        # rlmem's, with the same keys, and its figures per tag for the log.
        from . import runtime

        tags = None
        if runtime.installed():
            device = int(cuda.current_device())
            stats = runtime.memory_stats(device)
            tags = runtime.statistics(device)["tags"]
        else:
            stats = cuda.memory_stats()
        figures = {name: _stats_value(stats, key) for name, key in STAT_KEYS.items()}
        if self.reset_peak:
            if runtime.installed():
                runtime.reset_peak_memory_stats(int(cuda.current_device()))
            else:
                cuda.reset_peak_memory_stats()
        if self._device_info is None or self.samples % self.device_info_every == 0:
            free, total = cuda.mem_get_info()
            self._device_info = (int(free), int(total))
        free, total = self._device_info
        now = time.time()
        clock = time.perf_counter()
        seconds = None if self._last_time is None else clock - self._last_time
        self._last_time = clock
        rank, world = _dist.rank_and_world()
        sample = _Sample(step=number, time=now, step_seconds=seconds, rank=rank, world_size=world,
                         device=int(cuda.current_device()), device_free=free, device_total=total, tags=tags, **figures)
        sample.limit = self._process_limit(total)
        return sample

    def _process_limit(self, total: int) -> int:
        """The cap the process runs under: ``limit``, else torch's per-process memory fraction of
        the device when one below 1 is set, else 0 (the card's total applies)."""
        if self.limit is not None:
            return self.limit
        found = fraction_limit(self._cuda, total=total)
        return found.bytes if found is not None else 0

    # -- alert rules ----------------------------------------------------------------------------

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

    def _local_alerts(self, sample: _Sample) -> list[Alert]:
        # Every rule is librlmem's (rlmem.judge_step, the code `rlmem watch` runs); the monitor
        # keeps the figures, the repeats and the words.
        alerts: list[Alert] = []
        history = list(self._history)
        previous = history[-2] if len(history) >= 2 else None
        judged = judge_step([s.figures() for s in history], self._peak_before_history, self._rules)
        sample.peak_allocated_seen = judged.peak_allocated_seen
        sample.unused_reserved = judged.unused_reserved
        sample.free_at_peak = judged.free_at_peak
        sample.steps_to_limit = judged.steps_to_limit

        leak = judged.leak
        if leak.leaking:
            first = history[leak.first_step]
            per_step = leak.bytes_per_step
            sample.flags |= 1 << ALERT_KINDS.index("leak")
            sample.leak_bytes_per_step = per_step
            sample.leak_since_step = first.step
            if self._should_raise("leak", sample.rank, per_step) or not self._leak_alerted:
                alerts.append(self._leak_alert(sample, per_step, first.step, judged.leak_count_before))
            self._leak_alerted = True
            self._leak_last_rate = per_step
        elif self._leak_alerted:
            # Said on the step end where the rule stops holding: within 3 steps of the growth's end.
            self._leak_alerted = False
            self._repeats.pop(("leak", sample.rank), None)
            alerts.append(self._leak_cleared_alert(sample, leak))
        elif self._recording is None and self.samples - self._repeats.get(("leak", sample.rank), _Repeat()).last_seen > self.rearm_after:
            # The leak is over: a new one later is recorded, and named, afresh.
            self._leak_recorded = False
            self.leak_site = self.leak_snapshot = None

        if judged.fragmentation:
            sample.flags |= 1 << ALERT_KINDS.index("fragmentation")
            if self._should_raise("fragmentation", sample.rank, sample.unused_reserved):
                alerts.append(Alert("fragmentation", sample.rank,
                                    self._fragmentation_message(sample, judged.fragmentation_growth,
                                                                sample.step - history[-1 - judged.fragmentation_steps].step),
                                    sample.step))
        if judged.alloc_retries:
            sample.flags |= 1 << ALERT_KINDS.index("alloc_retries")
            if self._should_raise("alloc_retries", sample.rank, sample.num_alloc_retries):
                alerts.append(Alert("alloc_retries", sample.rank,
                                    self._retries_message(sample, judged.new_alloc_retries, previous.step), sample.step))
        if judged.headroom:
            sample.flags |= 1 << ALERT_KINDS.index("headroom")
            if self._should_raise("headroom", sample.rank, max(sample.free_at_peak, 0)):
                alerts.append(Alert("headroom", sample.rank, self._headroom_message(sample), sample.step,
                                    steps_to_limit=sample.steps_to_limit))
        if judged.oom:
            sample.flags |= 1 << ALERT_KINDS.index("oom")
            if self._should_raise("oom", sample.rank, sample.num_ooms, any_change=True):
                alerts.append(Alert("oom", sample.rank, self._oom_message(sample, judged.new_ooms, previous.step),
                                    sample.step))
        return alerts

    def _leak_cleared_alert(self, sample: _Sample, leak) -> Alert:
        history = list(self._history)
        if leak.stopped and leak.events:
            last = history[leak.last_event].step
            why = (f"step-end allocated last rose at step {last} and has not grown since"
                   f" ({format_bytes(sample.allocated)} now): a cache that filled, or a buffer grown to the longest"
                   f" length seen, not a leak")
        else:
            why = f"step-end allocated no longer grows ({format_bytes(sample.allocated)} now)"
        return Alert("leak", sample.rank, f"leak: cleared at step {sample.step}: {why}", sample.step,
                     bytes_per_step=0, cleared=True)

    # inspect names a site whose own allocation count does not grow with it (a tensor re-made
    # larger each step, `history = torch.cat([history, x])`) only after four growing step ends.
    FLAT_COUNT_RECORD_STEPS = 5

    def _leak_alert(self, sample: _Sample, per_step: int, since: int, allocations_before: int) -> Alert:
        message = self._leak_message(sample, per_step, since, allocations_before)
        alert = Alert("leak", sample.rank, message, sample.step, bytes_per_step=per_step, since_step=since,
                      steps_to_limit=sample.steps_to_limit)
        if self.leak_site is not None:
            alert.site = self.leak_site
            alert.snapshot = self.leak_snapshot
            alert.message += f"; the growing allocation site (from {self.leak_snapshot}): {self.leak_site}"
        elif self.record_on_leak and not self._leak_recorded and self._recording is None:
            steps = self.record_on_leak
            if sample.allocations - allocations_before < sample.step - since + 1:  # fewer new allocations than steps
                steps = max(steps, self.FLAT_COUNT_RECORD_STEPS)
            self._start_recording(sample, per_step, since, steps)
            alert.message += (f"; recording the next {steps} steps to name the allocation site"
                              f" (snapshot in {self.snapshot_dir})")
        return alert

    @staticmethod
    def _forecast(sample: _Sample) -> str:
        """ "at this rate the step peak passes the 79.2 GiB card in about 880 steps" """
        if sample.steps_to_limit is None:
            return ""
        what = f"the {format_bytes(sample.limit)} limit" if sample.limit else f"the {format_bytes(sample.device_total)} card"
        if sample.steps_to_limit <= 0:
            return f"; the step peak is past {what} already"
        steps = sample.steps_to_limit
        return f"; at this rate the step peak passes {what} in about {steps:,} step{'s' if steps != 1 else ''}"

    @classmethod
    def _leak_message(cls, sample: _Sample, per_step: int, since: int, allocations_before: Optional[int]) -> str:
        grown = sample.step - since + 1
        counts = ""
        if allocations_before is not None:
            counts = f", live allocations {allocations_before:,} -> {sample.allocations:,}"
        return (f"leak: allocated memory at step end grows {format_signed_bytes(per_step)}/step since step {since}"
                f" ({grown} steps{counts}); now {format_bytes(sample.allocated)} allocated,"
                f" {format_bytes(sample.reserved)} reserved of {format_bytes(sample.device_total)}{cls._forecast(sample)}")

    @staticmethod
    def _fragmentation_message(sample: _Sample, growth: int, steps: int) -> str:
        fraction = sample.unused_reserved / sample.reserved if sample.reserved else 0.0
        conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") + "," + os.environ.get("PYTORCH_ALLOC_CONF", "")
        hint = ("; set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True so free space joins into one block"
                if "expandable_segments:true" not in conf.replace(" ", "").lower() else
                "; expandable segments are on already: look for tensors whose sizes change every step")
        return (f"fragmentation: {format_bytes(sample.unused_reserved)} reserved beyond the largest allocated peak"
                f" ({format_bytes(sample.peak_allocated_seen)}), {format_percent(fraction)} of"
                f" {format_bytes(sample.reserved)} reserved, {format_signed_bytes(growth)} over the last {steps} steps;"
                f" {format_bytes(sample.inactive_split)} sits in free pieces of split blocks{hint}")

    @staticmethod
    def _retries_message(sample: _Sample, new: int, since_step: int) -> str:
        return (f"alloc_retries: cudaMalloc failed {new} time{'s' if new != 1 else ''} since step {since_step}"
                f" ({sample.num_alloc_retries} in all) and the allocator emptied its cache to retry: the job runs at"
                f" the memory limit ({format_bytes(sample.reserved)} reserved, {format_bytes(sample.device_free)} free"
                f" of {format_bytes(sample.device_total)}); each retry synchronizes and slows the step, and the next"
                f" larger request may OOM")

    def _headroom_message(self, sample: _Sample) -> str:
        outside = max(0, sample.device_total - sample.device_free - sample.reserved)
        left = sample.free_at_peak
        limit = sample.limit or sample.device_total
        fraction = left / limit if limit else 0.0
        peak_word = "the step's" if self.reset_peak else "the"
        where = (f"of the {format_bytes(limit)} limit (a memory fraction of the {format_bytes(sample.device_total)}"
                 f" device)" if sample.limit else
                 f"plus {format_bytes(outside)} outside PyTorch's cache, {{left}} of the {format_bytes(sample.device_total)}"
                 f" device")
        where = where.replace("{left}", f"{format_bytes(max(left, 0))} ({format_percent(max(fraction, 0.0))})")
        text = (f"headroom: at {peak_word} reserved peak ({format_bytes(sample.step_peak_reserved)}, peak allocated"
                f" {format_bytes(sample.step_peak_allocated)}) ")
        if sample.limit:
            text += (f"{format_bytes(max(left, 0))} ({format_percent(max(fraction, 0.0))}) is left {where}")
        else:
            text += f"{where} is left"
        if fraction < self.headroom:
            text += f", under the {format_percent(self.headroom)} margin: a longer sequence or a larger batch may OOM"
        if sample.steps_to_limit is not None:
            text += self._forecast(sample).replace("; at this rate", "; at the leak's rate")
        return text

    @staticmethod
    def _oom_message(sample: _Sample, new: int, since_step: int) -> str:
        capped = ""
        if sample.limit and sample.limit < sample.device_total:
            capped = (f"; the process is capped at {format_bytes(sample.limit)} (a memory fraction), so the free device"
                      f" memory was not its to take")
        return (f"oom: the allocator raised {new} out-of-memory error{'s' if new != 1 else ''} since step"
                f" {since_step} ({sample.num_ooms} in all; {format_bytes(sample.reserved)} reserved,"
                f" {format_bytes(sample.device_free)} free of {format_bytes(sample.device_total)}{capped}); wrap the loop in"
                f" rlmem.record(...) to get the snapshot and rlmem's verdict")

    # -- recording a leak -----------------------------------------------------------------------

    def _start_recording(self, sample: _Sample, per_step: int, since: int, steps: int) -> None:
        recorder = record(self.snapshot_dir, keep=1_000_000, max_entries=self.record_max_entries,
                          stacks=self.record_stacks, on_oom=False, dump_at_exit=False, cuda=self._cuda)
        try:
            recorder.__enter__()
        except Exception as failure:
            logger.warning("rlmem: could not start recording to name the leak's site: %s", failure)
            self._leak_recorded = True
            return
        self._leak_recorded = True
        self._recording = _LeakRecording(recorder, steps, sample.step, 0, per_step, since)

    def _advance_recording(self, number: int) -> list[Alert]:
        recording = self._recording
        recording.recorder.step()
        recording.steps += 1
        recording.remaining -= 1
        if recording.remaining > 0:
            return []
        self._recording = None
        rank, _ = _dist.rank_and_world()
        try:
            path = recording.recorder.dump(f"leak-step{number:06d}")
        except Exception as failure:
            recording.recorder.__exit__(None, None, None)
            message = f"leak: could not write the snapshot to name the allocation site: {failure}"
            return [Alert("leak", rank, message, number)]
        recording.recorder.__exit__(None, None, None)
        return [self._site_alert(rank, number, path, recording)]

    def _site_alert(self, rank: int, number: int, path: str, recording: _LeakRecording) -> Alert:
        alert = Alert("leak", rank, "", number, bytes_per_step=recording.bytes_per_step,
                      since_step=recording.since_step, snapshot=path)
        try:
            report = inspect(path)
        except RlmemError as failure:
            alert.message = (f"leak: {format_signed_bytes(recording.bytes_per_step)}/step since step"
                             f" {recording.since_step}; the snapshot {path} could not be inspected: {failure}")
            return alert
        leaks = report.get("leaks") or []
        if leaks:
            top = leaks[0]
            site = top["site"]
            if top.get("user_frame") and top["user_frame"] not in site:
                site += f" <- {top['user_frame']}"
            self.leak_site, self.leak_snapshot = site, path
            alert.site = site
            alert.holder = self._name_holder(top)
            kept_by = f"; {alert.holder}" if alert.holder else ""
            others = f"; {len(leaks) - 1} more leak{'s' if len(leaks) > 2 else ''} in it" if len(leaks) > 1 else ""
            found = (report.get("steps") or {}).get("count", 0)
            alert.message = (f"leak: {format_signed_bytes(recording.bytes_per_step)}/step since step"
                             f" {recording.since_step} comes from {site}{kept_by}: in a recording of the next"
                             f" {recording.steps} steps it grew {format_signed_bytes(top['bytes_per_step'])}/step over"
                             f" {top['steps']} of the {found} step ends rlmem inspect found, holding"
                             f" {format_bytes(top['live_bytes_at_end'])} at the last (rlmem inspect {path}){others}")
            return alert
        steps = report.get("steps") or {}
        method = steps.get("method") or "no method"
        alert.message = (f"leak: {format_signed_bytes(recording.bytes_per_step)}/step since step"
                         f" {recording.since_step}, but no allocation site grew at every step end of the"
                         f" {recording.steps} recorded steps (rlmem inspect found {steps.get('count', 0)} step ends by"
                         f" {method}): the growth may come from memory allocated before the recording, or stopped;"
                         f" snapshot: {path}")
        return alert

    def _name_holder(self, leak: dict) -> Optional[str]:
        """The Python object that keeps the leak's live blocks alive ("kept by `trainer.metrics`,
        a list of 12 tensors (46.9 MiB)"), found within ``holder_budget`` seconds, or None."""
        blocks = [(block["address"], block["size"]) for block in leak.get("live_blocks") or []]
        if not blocks or self.holder_budget <= 0:
            return None
        try:
            found = find_holders(blocks, budget_seconds=self.holder_budget, max_results=1, roots=self.holder_roots)
        except Exception as failure:  # naming the holder must never stop training
            logger.warning("rlmem: could not name the object that holds the leak: %s", failure)
            return None
        if not found.holders:
            return None
        text = str(found.holders[0])
        if not found.complete:
            text += f" (the search stopped after {found.seconds:.1f} s: {found.reason})"
        return text

    # -- many ranks -----------------------------------------------------------------------------

    def _gather(self, sample: _Sample) -> tuple[Optional[list[dict]], list[Alert]]:
        site = self.leak_site or ""
        values = [int(getattr(sample, name)) for name in _GATHER_FIELDS]
        values[_GATHER_FIELDS.index("flags")] = self._flags_since_gather | sample.flags
        values += _pack_text(_dist.hostname(), _HOST_WORDS) + _pack_text(site, _SITE_WORDS)
        self._flags_since_gather = 0
        rows = _dist.all_gather_int64(values)
        if rows is None or sample.rank != 0:
            return None, []
        ranks = []
        alerts: list[Alert] = []
        count = len(_GATHER_FIELDS)
        for row in rows:
            figures = dict(zip(_GATHER_FIELDS, row[:count]))
            host = _unpack_text(row[count: count + _HOST_WORDS])
            site = _unpack_text(row[count + _HOST_WORDS:])
            ranks.append({"rank": figures["rank"], "host": host, "device": figures["device"],
                          "allocated": figures["allocated"], "reserved": figures["reserved"],
                          "inactive_split": figures["inactive_split"],
                          "step_peak_allocated": figures["step_peak_allocated"],
                          "num_alloc_retries": figures["num_alloc_retries"], "num_ooms": figures["num_ooms"],
                          "device_free": figures["device_free"], "device_total": figures["device_total"]})
            if figures["rank"] != sample.rank:
                alerts += self._remote_alerts(sample.step, figures, host, site)
        alerts += self._imbalance_alerts(sample.step, ranks)
        return ranks, alerts

    def _remote_alerts(self, step: int, figures: dict[str, int], host: str, site: str) -> list[Alert]:
        rank = figures["rank"]
        where = f"rank {rank} ({host}, cuda:{figures['device']})" if host else f"rank {rank} (cuda:{figures['device']})"
        remote = _Sample(step=figures["step"], time=0.0, step_seconds=None, rank=rank, world_size=0,
                         device=figures["device"], allocated=figures["allocated"], reserved=figures["reserved"],
                         active=0, inactive_split=figures["inactive_split"],
                         step_peak_allocated=figures["step_peak_allocated"],
                         step_peak_reserved=figures["step_peak_reserved"], allocations=figures["allocations"],
                         num_alloc_retries=figures["num_alloc_retries"], num_ooms=figures["num_ooms"],
                         device_free=figures["device_free"], device_total=figures["device_total"],
                         peak_allocated_seen=figures["peak_allocated_seen"],
                         unused_reserved=figures["unused_reserved"], free_at_peak=figures["free_at_peak"])
        previous = self._previous_remote.get(rank, {})
        self._previous_remote[rank] = figures
        since = previous.get("step", 0)
        flags = figures["flags"]
        alerts: list[Alert] = []

        def flagged(kind: str) -> bool:
            return bool(flags & (1 << ALERT_KINDS.index(kind)))

        if flagged("leak") and figures["leak_bytes_per_step"] > 0:
            per_step, leak_since = figures["leak_bytes_per_step"], figures["leak_since_step"]
            figure_changed = self._should_raise("leak", rank, per_step, gathered=True)
            site_is_new = bool(site) and self._should_raise("leak_site", rank, zlib.crc32(site.encode()),
                                                            any_change=True, gathered=True)
            if figure_changed or site_is_new:
                message = self._leak_message(remote, per_step, leak_since, None)
                alert = Alert("leak", rank, f"{where}: {message}", step, bytes_per_step=per_step, since_step=leak_since)
                if site:
                    alert.site = site
                    alert.message += f"; the growing allocation site: {site}"
                alerts.append(alert)
        if flagged("fragmentation") and self._should_raise("fragmentation", rank, remote.unused_reserved, gathered=True):
            growth = remote.unused_reserved - previous.get("unused_reserved", remote.unused_reserved)
            alerts.append(Alert("fragmentation", rank,
                                f"{where}: {self._fragmentation_message(remote, growth, max(1, step - since))}", step))
        if flagged("alloc_retries") and self._should_raise("alloc_retries", rank, remote.num_alloc_retries, gathered=True):
            new = remote.num_alloc_retries - previous.get("num_alloc_retries", 0)
            alerts.append(Alert("alloc_retries", rank, f"{where}: {self._retries_message(remote, new, since)}", step))
        if flagged("headroom") and self._should_raise("headroom", rank, max(remote.free_at_peak, 0), gathered=True):
            alerts.append(Alert("headroom", rank, f"{where}: {self._headroom_message(remote)}", step))
        if flagged("oom") and self._should_raise("oom", rank, remote.num_ooms, any_change=True, gathered=True):
            new = remote.num_ooms - previous.get("num_ooms", 0)
            alerts.append(Alert("oom", rank, f"{where}: {self._oom_message(remote, new, since)}", step))
        return alerts

    def _imbalance_alerts(self, step: int, ranks: list[dict]) -> list[Alert]:
        alerts = []
        for key, words in (("step_peak_allocated", "peak allocated"), ("allocated", "allocated at step end")):
            imbalanced, high_index, low_index = judge_imbalance([row[key] for row in ranks], self.imbalance,
                                                                self.imbalance_bytes)
            if not imbalanced:
                continue
            high, low = ranks[high_index], ranks[low_index]
            spread = high[key] - low[key]
            if not self._should_raise(f"imbalance:{key}", -1, spread, gathered=True):
                continue
            alerts.append(Alert(
                "imbalance", high["rank"],
                f"imbalance: {words} ranges from {format_bytes(low[key])} (rank {low['rank']}) to"
                f" {format_bytes(high[key])} (rank {high['rank']}), {format_bytes(spread)} or"
                f" {format_percent(spread / high[key])} apart across {len(ranks)} ranks: rank {high['rank']} sets the"
                f" memory every rank needs and runs out first (uneven sequence lengths or batch split?)", step))
        return alerts

    # -- output ---------------------------------------------------------------------------------

    def _log_file_for(self, rank: int, world: int):
        if self.log_path is None:
            return None
        if self._log_file is not None and self._log_opened_for == rank:
            return self._log_file
        if world > 1 and rank != 0 and "{rank}" not in self.log_path:
            return None
        path = self.log_path.replace("{rank}", str(rank))
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        if self._log_file is not None:
            self._log_file.close()
        self._log_file = open(path, "a", encoding="utf-8", buffering=1)
        self._log_opened_for = rank
        return self._log_file

    def _write(self, sample: _Sample, alerts: list[Alert], ranks: Optional[list[dict]]) -> None:
        # A log that cannot be written never stops training: one warning, then the monitor goes on
        # without it (alerts still reach logging and on_alert).
        if self._log_failed:
            return
        try:
            self._write_line(sample, alerts, ranks)
        except OSError as failure:
            self._log_failed = True
            logger.warning("rlmem.StepMonitor: cannot write the log %s (%s); going on without it", self.log_path, failure)

    def _write_line(self, sample: _Sample, alerts: list[Alert], ranks: Optional[list[dict]]) -> None:
        out = self._log_file_for(sample.rank, sample.world_size)
        if out is None:
            return
        line: dict[str, Any] = {
            "schema": SCHEMA, "time": round(sample.time, 6), "step": sample.step,
            "step_seconds": None if sample.step_seconds is None else round(sample.step_seconds, 6),
            "rank": sample.rank, "world_size": sample.world_size, "device": sample.device,
            "allocated": sample.allocated, "reserved": sample.reserved, "active": sample.active,
            "inactive_split": sample.inactive_split, "step_peak_allocated": sample.step_peak_allocated,
            "step_peak_reserved": sample.step_peak_reserved, "peak_is_per_step": self.reset_peak,
            "allocations": sample.allocations, "num_alloc_retries": sample.num_alloc_retries,
            "num_ooms": sample.num_ooms, "device_free": sample.device_free, "device_total": sample.device_total,
            "steps_to_limit": sample.steps_to_limit,
            "alerts": [alert.to_json() for alert in alerts],
        }
        if sample.limit:
            line["limit"] = sample.limit
        if ranks is not None:
            line["ranks"] = ranks
        if sample.tags is not None:
            line["runtime_tags"] = sample.tags
        out.write(json.dumps(line, separators=(",", ":")) + "\n")
        out.flush()

    def _emit(self, alerts: list[Alert]) -> None:
        if not alerts:
            return
        rank, world = _dist.rank_and_world()
        quiet = world > 1 and rank != 0 and self.gather_every > 0  # rank 0 reports them
        for alert in alerts:
            self.alerts.append(alert)
            if not quiet:
                logger.warning("%s", alert.message)
                if self.use_warnings:
                    warnings.warn(alert.message, AlertWarning, stacklevel=4)
            if self.on_alert is not None:
                self.on_alert(alert)


def monitored(iterable: Iterable, monitor: Optional[StepMonitor] = None, **options) -> Iterator:
    """``for batch in rlmem.monitored(loader, log="mem.jsonl"):`` — a StepMonitor whose step ends
    are the ends of the loop body (``monitor.step()`` runs when the next item is asked for, and
    after the last). ``options`` create the monitor when none is given; that one is closed when
    the loop ends."""
    own = monitor is None
    if own:
        monitor = StepMonitor(**options)
    elif options:
        raise TypeError("pass either a monitor or the options to create one, not both")
    try:
        iterator = iter(iterable)
        started = False
        while True:
            if started:
                monitor.step()  # the body of the last item is done: before the next batch is fetched
            try:
                item = next(iterator)
            except StopIteration:
                return
            started = True
            yield item
    finally:
        if own:
            monitor.close()


StepMonitor.__doc__ = StepMonitor.__doc__.replace("{GATHER_BYTES}", str(GATHER_BYTES))
