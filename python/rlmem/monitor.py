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

import os
import time
import warnings
from collections import deque
from typing import Any, Callable, Iterable, Iterator, Optional

from . import _torch
from ._monitor.alerts import ALERT_KINDS, Alert, AlertRepeats, AlertWarning, _Repeat
from ._monitor.gather import GATHER_BYTES, Gathering
from ._monitor.leak_recording import LeakRecording, _LeakRecording
from ._monitor.log import SCHEMA, Output, logger
from ._monitor.messages import Messages
from ._monitor.rules import LocalRules
from ._monitor.sampling import STAT_KEYS, Sampling, _Sample  # noqa: F401 (rlmem.monitor.STAT_KEYS)
from .rules import StepRules

__all__ = ["StepMonitor", "Alert", "AlertWarning", "monitored", "SCHEMA", "ALERT_KINDS"]

MiB = 1024**2
GiB = 1024**3


class StepMonitor(Sampling, LocalRules, AlertRepeats, Messages, LeakRecording, Gathering, Output):
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
