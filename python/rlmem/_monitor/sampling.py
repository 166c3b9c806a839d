"""A StepMonitor sample: the memory figures read at a step end, and how they are read."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

from .. import _dist
from .._limit import fraction_limit

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

def _stats_value(stats: dict, key: str) -> int:
    value = stats.get(key, 0)
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0

class Sampling:
    """Reads ``self._cuda`` (or rlmem's runtime when it is installed) into a :class:`_Sample`."""

    def _read(self, number: int) -> _Sample:
        cuda = self._cuda
        # Under rlmem's runtime torch's stats raise (its pluggable allocator keeps none): read
        # rlmem's, with the same keys, and its figures per tag for the log.
        from .. import runtime

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
