"""Stand-ins for torch.cuda that replay recorded memory_stats() series, and synthetic series.

Series file format (what tools/monitor/grpo_loop.py and oom_run.py write with --stats-out; JSON):

    {"schema": "rlmem.stats_series/1",
     "description": "...", "torch": "2.11.0", "device_name": "...", "leak_at": 12 or null,
     "peak_is_per_step": true,          # peaks were reset after each step's reading
     "steps": [{"step": 1, "allocated_bytes.all.current": ..., "reserved_bytes.all.current": ...,
                "active_bytes.all.current": ..., "inactive_split_bytes.all.current": ...,
                "allocated_bytes.all.peak": ..., "reserved_bytes.all.peak": ...,
                "allocation.all.current": ..., "num_alloc_retries": ..., "num_ooms": ...,
                "mem_get_info": [free, total], "step_seconds": 1.2}, ...]}

FakeCuda replays it with torch's peak semantics: a peak is the largest value since the last
reset_peak_memory_stats() call (the series holds each step's own peak).
"""

from __future__ import annotations

import json
import os
import types
from pathlib import Path

SERIES_SCHEMA = "rlmem.stats_series/1"
STAT_KEYS = ("allocated_bytes.all.current", "reserved_bytes.all.current", "active_bytes.all.current",
             "inactive_split_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.peak",
             "allocation.all.current", "num_alloc_retries", "num_ooms")
MiB = 1024**2
GiB = 1024**3


def load_series(path) -> dict:
    with open(path, encoding="utf-8") as handle:
        series = json.load(handle)
    assert series.get("schema") == SERIES_SCHEMA, f"{path}: schema {series.get('schema')!r}, expected {SERIES_SCHEMA!r}"
    for index, step in enumerate(series["steps"]):
        missing = [key for key in STAT_KEYS + ("mem_get_info",) if key not in step]
        assert not missing, f"{path}: step {index} lacks {missing}"
    return series


def write_series(path, series: dict) -> Path:
    Path(path).write_text(json.dumps(series, indent=1), encoding="utf-8")
    return Path(path)


class FakeOutOfMemoryError(RuntimeError):
    """What torch.cuda.OutOfMemoryError is to the code under test."""


class FakeMemory(types.SimpleNamespace):
    """torch.cuda.memory: history switches and a _dump_snapshot that writes given bytes."""

    def __init__(self, snapshot_bytes: bytes = b"", history_query: bool = True):
        super().__init__()
        self.snapshot_bytes = snapshot_bytes
        self.enabled = False
        self.calls: list[tuple] = []
        self.dumps: list[str] = []
        self.fail_dump_after: int | None = None  # write this many bytes, then fail
        self.crash_dump_after: int | None = None  # write this many bytes, then os._exit
        if history_query:
            self._C = types.SimpleNamespace(_cuda_isHistoryEnabled=lambda: self.enabled)

    def _record_memory_history(self, enabled="all", context="all", stacks="all", max_entries=2**63 - 1,
                               device=None, clear_history=False):
        self.calls.append(("record", enabled, context, stacks, max_entries, clear_history))
        self.enabled = enabled is not None

    def _dump_snapshot(self, filename="dump_snapshot.pickle"):
        self.calls.append(("dump", filename))
        with open(filename, "wb") as out:
            if self.crash_dump_after is not None:
                out.write(self.snapshot_bytes[: self.crash_dump_after])
                out.flush()
                os._exit(17)
            if self.fail_dump_after is not None:
                out.write(self.snapshot_bytes[: self.fail_dump_after])
                out.flush()
                raise OSError(28, "No space left on device (simulated)")
            out.write(self.snapshot_bytes)
        self.dumps.append(filename)


class FakeCuda(types.SimpleNamespace):
    """torch.cuda as the monitor and record() use it, replaying a series."""

    OutOfMemoryError = FakeOutOfMemoryError

    def __init__(self, series: dict | None = None, *, device: int = 0, snapshot_bytes: bytes = b"",
                 available: bool = True):
        super().__init__()
        self.series = series or {"steps": []}
        self.device = device
        self.available = available
        self.memory = FakeMemory(snapshot_bytes)
        self.index = -1
        self.peaks = {"allocated_bytes.all.peak": 0, "reserved_bytes.all.peak": 0}
        self.reset_calls = 0
        self.stats_calls = 0
        self.info_calls = 0

    # replay control
    def goto(self, index: int) -> None:
        """Moves to step `index` of the series: its figures become current; the peaks grow by its own."""
        self.index = index
        step = self.series["steps"][index]
        for key in self.peaks:
            self.peaks[key] = max(self.peaks[key], int(step[key]))

    def __len__(self) -> int:
        return len(self.series["steps"])

    # the torch.cuda API the code under test calls
    def is_available(self) -> bool:
        return self.available

    def current_device(self) -> int:
        return self.device

    def memory_stats(self, device=None) -> dict:
        self.stats_calls += 1
        step = self.series["steps"][self.index]
        stats = {key: int(step[key]) for key in STAT_KEYS}
        stats.update(self.peaks)
        return stats

    def mem_get_info(self, device=None):
        self.info_calls += 1
        free, total = self.series["steps"][self.index]["mem_get_info"]
        return int(free), int(total)

    def reset_peak_memory_stats(self, device=None) -> None:
        self.reset_calls += 1
        step = self.series["steps"][self.index]
        self.peaks = {"allocated_bytes.all.peak": int(step["allocated_bytes.all.current"]),
                      "reserved_bytes.all.peak": int(step["reserved_bytes.all.current"])}


# -- synthetic series: edge cases the recorded ones (testdata/monitor/) do not reach ---------------------

def synthetic(steps: int, *, base: int = 3 * GiB, reserved: int = 6 * GiB, working: int = 2 * GiB,
              total: int = 80 * GiB, allocations: int = 700, leak_at: int | None = None,
              leak_bytes: int = 47 * MiB, leak_count: int = 1, jitter: int = 0, seed: int = 1,
              description: str = "synthetic") -> dict:
    """A GRPO-like run: `base` allocated at every step end (weights, grads, AdamW state), a step
    peak of base + working (times a length factor when `jitter`), `reserved` held by the cache;
    from step `leak_at` on, `leak_bytes` more stay allocated each step in `leak_count` tensors."""
    import random

    rng = random.Random(seed)
    out = []
    kept = 0
    kept_count = 0
    for step in range(1, steps + 1):
        if leak_at is not None and step >= leak_at:
            kept += leak_bytes
            kept_count += leak_count
        factor = 1.0 if not jitter else rng.choice([0.5, 0.75, 1.0, 1.25])
        allocated = base + kept
        peak = allocated + int(working * factor)
        held = max(reserved, peak + 64 * MiB)
        out.append({
            "step": step,
            "allocated_bytes.all.current": allocated, "reserved_bytes.all.current": held,
            "active_bytes.all.current": allocated, "inactive_split_bytes.all.current": 20 * MiB,
            "allocated_bytes.all.peak": peak, "reserved_bytes.all.peak": held,
            "allocation.all.current": allocations + kept_count, "num_alloc_retries": 0, "num_ooms": 0,
            "mem_get_info": [total - held - 700 * MiB, total], "step_seconds": 1.0,
        })
    return {"schema": SERIES_SCHEMA, "description": description, "torch": None, "device_name": "synthetic",
            "leak_at": leak_at, "peak_is_per_step": True, "steps": out}
