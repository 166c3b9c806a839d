"""torch's own statistics under rlmem.runtime.install(): torch._C's three statistics functions
answered from rlmem's counters on the host-backed fake device, through a stand-in for torch._C
and through the real torch.cuda.memory functions (the CPU torch here has no CUDA: its torch._C
attributes are set by the test). On a GPU: tools/runtime/gpu_checks_torch.py --only torch_stats."""

from __future__ import annotations

import types
import warnings

import pytest

from rlmem import _torch_stats, runtime

MiB = 1 << 20
DEVICE = 6  # a device number no test on a real GPU would use
OTHER = 5  # a device whose runtime is never opened


class PluggableRefusal(RuntimeError):
    pass


def pluggable_originals() -> dict:
    """What torch._C's functions do under torch's pluggable allocator: raise."""

    def refuse(name):
        def original(device):
            raise PluggableRefusal(f"CUDAPluggableAllocator does not yet support {name}")

        return original

    return {name: refuse(name) for name in _torch_stats.REPLACED}


@pytest.fixture
def fake(monkeypatch):
    runtime._open_fake(DEVICE, 64 * MiB, 2 * MiB)
    monkeypatch.setattr(runtime, "_installed", True)
    yield DEVICE
    _torch_stats.disable()
    runtime._close(DEVICE)


@pytest.fixture
def torch_c(fake):
    stand_in = types.SimpleNamespace(**pluggable_originals())
    originals = dict(vars(stand_in))
    _torch_stats.enable(stand_in)
    stand_in.originals = originals
    return stand_in


def every_torch_key(nested: dict) -> None:
    for name in _torch_stats.STAT_ARRAYS:
        assert set(nested[name]) == {"all", "small_pool", "large_pool"}, name
        for pool in ("all", "small_pool", "large_pool"):
            assert set(nested[name][pool]) == {"current", "peak", "allocated", "freed"}, (name, pool)
    for name in ("oversize_allocations", "oversize_segments"):
        assert set(nested[name]) == {"current", "peak", "allocated", "freed"}
    for name in ("num_alloc_retries", "num_ooms", "max_split_size", "num_sync_all_streams", "num_device_alloc",
                 "num_device_free"):
        assert isinstance(nested[name], int), name


def test_allocated_peak_and_freed_are_exact_after_known_allocations_and_frees(torch_c, fake):
    first = runtime._allocate(fake, 3 * MiB)
    second = runtime._allocate(fake, 5 * MiB)
    runtime._free(fake, first)
    nested = torch_c._cuda_memoryStats(fake)
    every_torch_key(nested)
    allocated = nested["allocated_bytes"]["all"]
    assert allocated == {"current": 5 * MiB, "peak": 8 * MiB, "allocated": 8 * MiB, "freed": 3 * MiB}
    assert nested["allocated_bytes"]["large_pool"] == allocated, "one kind of pool: everything is large"
    assert nested["allocated_bytes"]["small_pool"] == {"current": 0, "peak": 0, "allocated": 0, "freed": 0}
    assert nested["active_bytes"]["all"] == allocated and nested["requested_bytes"]["all"] == allocated
    assert nested["allocation"]["all"] == {"current": 1, "peak": 2, "allocated": 2, "freed": 1}
    totals = runtime.statistics(fake)["totals"]
    assert nested["reserved_bytes"]["all"]["current"] == totals["reserved_bytes"]["current"] == 8 * MiB, \
        "4 pages of 2 MiB mapped; the freed block's page stays cached"
    assert nested["inactive_split_bytes"]["all"]["current"] == 0
    assert nested["segment"]["all"]["current"] == 0
    assert (nested["num_ooms"], nested["num_alloc_retries"], nested["max_split_size"]) == (0, 0, -1)

    torch_c._cuda_resetPeakMemoryStats(fake)
    after = torch_c._cuda_memoryStats(fake)
    assert after["allocated_bytes"]["all"]["peak"] == 5 * MiB, "the peak is back to what is allocated now"
    assert after["allocation"]["all"]["peak"] == 1
    runtime._free(fake, second)


def test_accumulated_figures_count_from_a_reset_of_their_device(torch_c, fake):
    kept = runtime._allocate(fake, 5 * MiB)
    runtime._free(fake, runtime._allocate(fake, 3 * MiB))
    torch_c._cuda_resetAccumulatedMemoryStats(fake)
    nested = torch_c._cuda_memoryStats(fake)
    assert nested["allocated_bytes"]["all"] == {"current": 5 * MiB, "peak": 8 * MiB, "allocated": 0, "freed": 0}
    runtime._free(fake, runtime._allocate(fake, MiB))
    nested = torch_c._cuda_memoryStats(fake)
    assert nested["allocated_bytes"]["all"]["allocated"] == MiB
    assert nested["allocated_bytes"]["all"]["freed"] == MiB
    assert nested["allocated_bytes"]["all"]["current"] == 5 * MiB
    runtime._free(fake, kept)


def test_peaks_reset_per_device(torch_c, fake):
    runtime._open_fake(OTHER, 64 * MiB, 2 * MiB)
    try:
        here = runtime._allocate(fake, 3 * MiB)
        there = runtime._allocate(OTHER, 7 * MiB)
        runtime._free(fake, here)
        runtime._free(OTHER, there)
        torch_c._cuda_resetPeakMemoryStats(fake)
        assert torch_c._cuda_memoryStats(fake)["allocated_bytes"]["all"]["peak"] == 0
        assert torch_c._cuda_memoryStats(OTHER)["allocated_bytes"]["all"]["peak"] == 7 * MiB
    finally:
        runtime._close(OTHER)


def test_a_device_without_a_runtime_reads_zeros(torch_c, fake):
    nested = torch_c._cuda_memoryStats(OTHER)
    every_torch_key(nested)
    assert nested["allocated_bytes"]["all"]["current"] == 0 and nested["reserved_bytes"]["all"]["peak"] == 0
    torch_c._cuda_resetPeakMemoryStats(OTHER)  # nothing to reset: no error
    torch_c._cuda_resetAccumulatedMemoryStats(OTHER)


def test_the_originals_answer_while_the_runtime_is_not_installed_and_come_back_on_disable(torch_c, fake, monkeypatch):
    monkeypatch.setattr(runtime, "_installed", False)
    with pytest.raises(PluggableRefusal, match="does not yet support"):
        torch_c._cuda_memoryStats(fake)
    _torch_stats.enable(torch_c)  # again: idempotent, the originals stay the originals
    _torch_stats.disable()
    assert not _torch_stats.enabled()
    for name in _torch_stats.REPLACED:
        assert getattr(torch_c, name) is torch_c.originals[name], name


def test_torch_cuda_memory_callers_see_rlmems_figures_even_imported_before(fake, monkeypatch):
    torch = pytest.importorskip("torch")
    import torch.cuda.memory as memory
    from torch.cuda.memory import max_memory_allocated as imported_early

    for name, original in pluggable_originals().items():
        monkeypatch.setattr(torch._C, name, original, raising=False)
    monkeypatch.setattr(memory, "is_initialized", lambda: True)  # this CPU torch never initialises CUDA
    _torch_stats.enable()
    try:
        first = runtime._allocate(fake, 3 * MiB)
        second = runtime._allocate(fake, 5 * MiB)
        runtime._free(fake, first)
        assert torch.cuda.memory_allocated(fake) == 5 * MiB
        assert torch.cuda.max_memory_allocated(fake) == imported_early(fake) == 8 * MiB
        assert torch.cuda.memory_reserved(fake) == 8 * MiB
        assert torch.cuda.max_memory_reserved(fake) == 8 * MiB
        stats = torch.cuda.memory_stats(fake)
        assert stats["allocated_bytes.all.current"] == 5 * MiB
        assert stats["allocated_bytes.large_pool.peak"] == 8 * MiB
        assert stats["num_ooms"] == 0
        summary = torch.cuda.memory_summary(fake)
        assert "Allocated memory" in summary and "GPU reserved memory" in summary
        torch.cuda.reset_peak_memory_stats(fake)
        assert torch.cuda.max_memory_allocated(fake) == 5 * MiB
        runtime._allocate(fake, MiB)
        assert torch.cuda.max_memory_allocated(fake) == 6 * MiB
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            torch.cuda.reset_max_memory_allocated(fake)
        torch.cuda.reset_accumulated_memory_stats(fake)
        assert torch.cuda.memory_stats(fake)["allocated_bytes.all.allocated"] == 0
        runtime._free(fake, second)
        assert torch.cuda.memory_allocated(fake) == MiB
    finally:
        _torch_stats.disable()
    with pytest.raises(PluggableRefusal):
        torch._C._cuda_memoryStats(fake)


def test_install_answers_torchs_statistics_from_rlmem(fake, monkeypatch):
    """install() itself needs CUDA: its torch calls are stood in for, librlmem's are real."""
    torch = pytest.importorskip("torch")
    for name, original in pluggable_originals().items():
        monkeypatch.setattr(torch._C, name, original, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_customAllocator", lambda malloc, free: ("allocator", malloc, free),
                        raising=False)
    monkeypatch.setattr(torch.cuda.memory, "_CUDAAllocator", lambda allocator: allocator, raising=False)
    monkeypatch.setattr(torch.cuda.memory, "change_current_allocator", lambda allocator: None, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(runtime, "_installed", False)
    try:
        runtime.install()
        assert _torch_stats.enabled()
        runtime._allocate(fake, 3 * MiB)
        assert torch._C._cuda_memoryStats(fake)["allocated_bytes"]["all"]["current"] == 3 * MiB
    finally:
        _torch_stats.disable()
        runtime._call("rlmem_runtime_configure", None)  # install()'s options back to the defaults
