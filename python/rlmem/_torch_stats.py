"""torch's own memory statistics answered by rlmem under :func:`rlmem.runtime.install`.

Under torch's pluggable allocator, ``torch.cuda.memory_allocated``, ``max_memory_allocated``,
``memory_reserved``, ``max_memory_reserved``, ``memory_stats``, ``memory_summary``,
``reset_peak_memory_stats`` (and ``reset_max_memory_allocated``, ``reset_accumulated_memory_stats``)
raise: ``CUDAPluggableAllocator`` keeps no statistics. Every one of those Python functions ends
in one of three functions of ``torch._C``, looked up at call time:

- ``_cuda_memoryStats(device)``: the nested dict ``memory_stats`` flattens;
- ``_cuda_resetPeakMemoryStats(device)``;
- ``_cuda_resetAccumulatedMemoryStats(device)``.

:func:`enable` (called by ``install()`` once rlmem is the allocator) replaces those three
attributes with functions that answer from rlmem's counters, keeping the originals: a replacement
hands the call to torch's original while the runtime is not installed, and :func:`disable` puts
the originals back. Since the lookup happens at call time, code that imported
``torch.cuda.memory_allocated`` (transformers, accelerate, verl) before ``install()`` gets
rlmem's figures too.

What the figures mean under rlmem (``rlmem.runtime.memory_stats()`` maps its counters to torch's
keys; this module nests them as torch's ``_cuda_memoryStats`` does and fills in the rest):

- ``allocated_bytes`` / ``active_bytes`` / ``requested_bytes``: bytes of live blocks (requests
  rounded up to 512 B, which is what rlmem hands out); a free completes at once, so active equals
  allocated.
- ``reserved_bytes``: bytes of pages rlmem has mapped (live blocks' pages and free pages kept
  mapped until ``empty_cache()`` or memory pressure). A paused tag's pages are unmapped, so they
  leave ``reserved`` while its tensors stay in ``allocated``.
- ``allocation`` / ``active``: live blocks.
- ``inactive_split`` / ``inactive_split_bytes``: 0 (rlmem keeps no split blocks).
- ``segment``, ``oversize_allocations``, ``oversize_segments``, ``num_sync_all_streams``,
  ``num_device_alloc``, ``num_device_free``: 0 (rlmem maps pages, not segments, and does not count
  these). ``max_split_size``: -1 (no limit, as torch reports it unset).
- pools: rlmem has one kind of pool, so every figure is counted under ``large_pool`` (equal to
  ``all``) and ``small_pool`` is all zeros.
- ``num_alloc_retries`` / ``num_ooms``: rlmem's own (a request that first had to release cached
  pages; a request that failed).

Peaks reset per device (``rlmem_runtime_reset_peaks``). rlmem's accumulated counters cannot be
reset, so ``reset_accumulated_memory_stats(device)`` records them for that device and later
figures (``*.allocated``, ``*.freed``, ``num_alloc_retries``, ``num_ooms``) count from there, as
torch's do. A device whose runtime is not open yet reads all zeros, as torch reads a device it
has not used.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

__all__ = ["enable", "disable", "enabled", "nested_stats", "reset_peaks", "reset_accumulated"]

# The figures of torch's DeviceStats (c10/core/CachingDeviceAllocator.h, nested by
# torch/csrc/cuda/Module.cpp's _cuda_memoryStats): arrays per pool, single stats, counters.
STAT_ARRAYS = (
    "allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
    "active_bytes", "inactive_split_bytes", "requested_bytes",
)
STAT_FIELDS = ("current", "peak", "allocated", "freed")
POOLS = ("all", "small_pool", "large_pool")
SINGLE_STATS = ("oversize_allocations", "oversize_segments")
COUNTERS = {
    "num_alloc_retries": 0, "num_ooms": 0, "max_split_size": -1, "num_sync_all_streams": 0,
    "num_device_alloc": 0, "num_device_free": 0,
}
# What torch's reset_accumulated_memory_stats resets: every "allocated" and "freed", and these.
ACCUMULATED_COUNTERS = ("num_alloc_retries", "num_ooms")

REPLACED = ("_cuda_memoryStats", "_cuda_resetPeakMemoryStats", "_cuda_resetAccumulatedMemoryStats")

_lock = threading.Lock()
_MISSING = object()
_target: Any = None  # the torch._C (or stand-in) whose attributes are replaced
_originals: dict[str, Any] = {}
_baselines: dict[int, dict[str, int]] = {}  # device -> accumulated counters at its last reset


def _runtime():
    from . import runtime  # here, not at the top: runtime imports this module

    return runtime


def _open(device: int) -> bool:
    from . import _lib

    lib, _ = _lib.load()
    return bool(lib.rlmem_runtime_is_open(_lib.whole_number("device", device, _lib.C_INT, f"device {device} is out of range")))


def _is_accumulated(key: str) -> bool:
    return key.endswith(".allocated") or key.endswith(".freed") or key in ACCUMULATED_COUNTERS


def _flat(device: int) -> dict[str, int]:
    """rlmem.runtime.memory_stats() for ``device`` with the accumulated counters counted from the
    device's last reset; {} when its runtime is not open."""
    if not _open(device):
        return {}
    flat = dict(_runtime().memory_stats(device))
    with _lock:
        baseline = _baselines.get(device)
        if baseline is not None and any(flat.get(key, 0) < value for key, value in baseline.items()):
            # The counters went back: this device's runtime was closed and opened again.
            del _baselines[device]
            baseline = None
    if baseline:
        for key, value in baseline.items():
            if key in flat:
                flat[key] -= value
    return flat


def nested_stats(device: int) -> dict[str, Any]:
    """torch's ``_cuda_memoryStats(device)`` dict, every key of it (torch 2.11's, checked against
    its own allocator on an H100), from rlmem's counters."""
    nested: dict[str, Any] = {}
    for key, value in _flat(int(device)).items():
        node = nested
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    for name in STAT_ARRAYS:
        stat = nested.setdefault(name, {})
        every = stat.setdefault("all", {})
        for field in STAT_FIELDS:
            every.setdefault(field, 0)
        stat["large_pool"] = dict(every)  # one kind of pool: everything counts as large
        stat["small_pool"] = dict.fromkeys(STAT_FIELDS, 0)
    for name in SINGLE_STATS:
        nested.setdefault(name, dict.fromkeys(STAT_FIELDS, 0))
    for name, value in COUNTERS.items():
        nested.setdefault(name, value)
    return nested


def reset_peaks(device: int) -> None:
    """Every peak of ``device`` back to its current value (torch's reset_peak_memory_stats)."""
    if _open(int(device)):
        _runtime().reset_peak_memory_stats(int(device))


def reset_accumulated(device: int) -> None:
    """From now on ``device``'s accumulated figures count from zero (torch's
    reset_accumulated_memory_stats)."""
    device = int(device)
    if not _open(device):
        return
    with _lock:
        _baselines.pop(device, None)
    flat = _flat(device)
    with _lock:
        _baselines[device] = {key: value for key, value in flat.items() if _is_accumulated(key)}


def _answer(name: str, rlmem_answer: Callable[[int], Any]) -> Callable[[Any], Any]:
    def replacement(device: Any) -> Any:
        if _runtime().installed():
            return rlmem_answer(int(device))
        original = _originals.get(name, _MISSING)
        if original is _MISSING or original is None:
            raise RuntimeError(f"torch._C.{name}: this torch has none, and rlmem's runtime is not installed")
        return original(device)

    replacement.__name__ = name
    replacement.__qualname__ = name
    replacement.__doc__ = f"torch._C.{name}, answered by rlmem while rlmem.runtime.install() is in effect."
    replacement._rlmem_stats = True  # type: ignore[attr-defined]
    return replacement


def enable(torch_c: Optional[Any] = None) -> None:
    """Replaces torch._C's three statistics functions (or ``torch_c``'s: a stand-in in tests) with
    rlmem's; idempotent. The originals are kept for :func:`disable`."""
    global _target
    if torch_c is None:
        import torch

        torch_c = torch._C
    answers = {
        "_cuda_memoryStats": nested_stats,
        "_cuda_resetPeakMemoryStats": reset_peaks,
        "_cuda_resetAccumulatedMemoryStats": reset_accumulated,
    }
    with _lock:
        if _target is not None and _target is not torch_c:
            raise RuntimeError("rlmem: torch's statistics are already answered for another torch._C")
        for name in REPLACED:
            current = getattr(torch_c, name, _MISSING)
            if getattr(current, "_rlmem_stats", False):
                continue
            _originals[name] = current
            setattr(torch_c, name, _answer(name, answers[name]))
        _target = torch_c


def disable() -> None:
    """Puts torch._C's original statistics functions back (removes those torch never had)."""
    global _target
    with _lock:
        if _target is None:
            return
        for name in REPLACED:
            original = _originals.pop(name, _MISSING)
            if original is _MISSING:
                if hasattr(_target, name):
                    delattr(_target, name)
            else:
                setattr(_target, name, original)
        _target = None
        _baselines.clear()


def enabled() -> bool:
    """Whether torch's statistics functions are rlmem's now."""
    return _target is not None
