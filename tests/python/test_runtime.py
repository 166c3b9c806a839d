"""rlmem.runtime over librlmem's host-backed fake device: regions, pause and resume keep every
byte, errors arrive as the right exceptions, and memory_stats() has torch's keys with rlmem's
figures. (The CUDA route, install() and pool(), runs on the GPU machine: tools/runtime/.)"""

from __future__ import annotations

import gc
import json
import os
import subprocess
from pathlib import Path

import pytest

import rlmem
from rlmem import runtime

MiB = 1 << 20
DEVICE = 7  # a device number no test on a real GPU would use


@pytest.fixture
def fake():
    runtime._open_fake(DEVICE, 64 * MiB, 2 * MiB, copy_chunk_bytes=4 * MiB)
    yield DEVICE
    runtime._close(DEVICE)


def test_a_tag_paused_to_host_comes_back_bit_exact_at_its_address(fake):
    with runtime.region("train", device=fake):
        weights = runtime._allocate(fake, 9 * MiB + 123)
    data = os.urandom(9 * MiB + 123)
    runtime._write(fake, weights, data)
    runtime.pause("train", keep="host", device=fake)
    tags = {tag["name"]: tag for tag in runtime.statistics(fake)["tags"]}
    assert tags["train"]["paused"] is True
    assert tags["train"]["mapped_bytes"]["current"] == 0, tags["train"]
    assert tags["train"]["host_backup_bytes"] == 10 * MiB, "9 MiB + 123 B take 5 pages of 2 MiB"
    runtime.resume("train", device=fake)
    assert runtime._read(fake, weights, len(data)) == data
    tags = {tag["name"]: tag for tag in runtime.statistics(fake)["tags"]}
    assert (tags["train"]["pauses"], tags["train"]["resumes"]) == (1, 1)
    assert tags["train"]["last_resume"]["copied_bytes"] == 10 * MiB


def test_a_discarded_tag_comes_back_as_zeros(fake):
    with runtime.region("kv", device=fake):
        cache = runtime._allocate(fake, 3 * MiB)
    runtime._write(fake, cache, b"\x7f" * (3 * MiB))
    runtime.pause("kv", device=fake)
    runtime.resume("kv", device=fake)
    assert runtime._read(fake, cache, 3 * MiB) == bytes(3 * MiB)


def test_allocating_in_a_paused_tag_raises_a_state_error_saying_so(fake):
    with runtime.region("train", device=fake):
        runtime._allocate(fake, MiB)
    runtime.pause("train", device=fake)
    with runtime.region("train", device=fake):
        with pytest.raises(rlmem.RuntimeStateError, match="paused"):
            runtime._allocate(fake, MiB)
    with pytest.raises(rlmem.RuntimeStateError, match="already paused"):
        runtime.pause("train", device=fake)
    runtime.resume("train", device=fake)
    with pytest.raises(rlmem.RuntimeStateError, match="not paused"):
        runtime.resume("train", device=fake)


def test_bad_arguments_and_exhausted_memory_raise_the_matching_errors(fake):
    with pytest.raises(rlmem.InvalidArgumentError, match="keep"):
        runtime.pause("train", keep="disk", device=fake)
    with pytest.raises(rlmem.InvalidArgumentError, match="tag name"):
        with runtime.region("", device=fake):
            pass
    with pytest.raises(rlmem.RlmemMemoryError, match="out of memory: 134217728 bytes requested in tag 'default'"):
        runtime._allocate(fake, 128 * MiB)
    with pytest.raises(rlmem.InvalidArgumentError, match="freed twice"):
        runtime._free(fake, 12345)
    with pytest.raises(rlmem.RuntimeStateError, match="not open"):
        runtime.statistics(DEVICE + 1)
    with pytest.raises(rlmem.RuntimeStateError, match=r"prepare_libraries\(\) needs rlmem as the allocator: call install\(\) first"):
        runtime.prepare_libraries()


def test_memory_stats_has_torchs_keys_with_rlmems_figures(fake):
    a = runtime._allocate(fake, 3 * MiB)
    b = runtime._allocate(fake, 1000)
    runtime._free(fake, a)
    stats = runtime.memory_stats(fake)
    assert stats["allocated_bytes.all.current"] == 1024, "1000 B round up to 1024"
    assert stats["allocated_bytes.all.peak"] == 3 * MiB + 1024
    assert stats["allocated_bytes.all.freed"] == 3 * MiB
    assert stats["reserved_bytes.all.current"] == 4 * MiB, "two pages stay mapped (cached) until empty_cache"
    assert stats["allocation.all.current"] == 1
    runtime.empty_cache(fake)
    assert runtime.memory_stats(fake)["reserved_bytes.all.current"] == 2 * MiB
    runtime.reset_peak_memory_stats(fake)
    assert runtime.memory_stats(fake)["allocated_bytes.all.peak"] == 1024
    runtime._free(fake, b)


def test_the_step_monitor_logs_rlmems_figures_per_tag_when_the_runtime_is_installed(fake, tmp_path, monkeypatch):
    from fakes import STAT_KEYS, FakeCuda  # the monitor tests' stand-in for torch.cuda

    with runtime.region("rollout", device=fake):
        runtime._allocate(fake, 5 * MiB)
    step = {key: 0 for key in STAT_KEYS}
    step["mem_get_info"] = [56 * MiB, 64 * MiB]
    cuda = FakeCuda({"steps": [step]}, device=fake)
    cuda.goto(0)
    monkeypatch.setattr(runtime, "_installed", True)
    log = tmp_path / "steps.jsonl"
    with rlmem.StepMonitor(log, cuda=cuda) as monitor:
        monitor.step(1)
    assert cuda.stats_calls == 0, "torch's memory_stats() raises under the runtime: never called"
    from schema_check import check_steplog

    line = check_steplog(log)[0]
    assert line["allocated"] == 5 * MiB, "allocated comes from rlmem"
    assert line["reserved"] == 6 * MiB
    assert [tag["name"] for tag in line["runtime_tags"]] == ["default", "libraries", "rollout"]
    assert line["runtime_tags"][2]["allocated_bytes"]["current"] == 5 * MiB


def test_a_growable_buffer_grows_in_place_and_keeps_its_bytes(fake):
    with runtime.region("kv", device=fake):
        buffer = runtime.GrowableBuffer(32 * MiB, device=fake)
    assert buffer.grow(3 * MiB) == 4 * MiB, "whole pages of 2 MiB"
    data = os.urandom(3 * MiB)
    runtime._write(fake, buffer.address, data)
    address = buffer.address
    assert buffer.grow(20 * MiB) == 20 * MiB
    assert buffer.address == address and runtime._read(fake, address, len(data)) == data
    with pytest.raises(rlmem.InvalidArgumentError, match="more than its max_bytes, 33554432"):
        buffer.grow(33 * MiB)
    tags = {tag["name"]: tag for tag in runtime.statistics(fake)["tags"]}
    assert tags["kv"]["allocated_bytes"]["current"] == 20 * MiB
    buffer.release()
    with pytest.raises(rlmem.RuntimeStateError, match="released"):
        buffer.grow(MiB)


def test_host_buffers_reserved_ahead_are_pinned_in_whole_slabs_and_released_on_request(fake):
    runtime.reserve_host_buffers(6 * MiB, device=fake)
    assert runtime.statistics(fake)["totals"]["host_buffer_bytes"] == 8 * MiB, "two slabs of 4 MiB"
    runtime.release_host_buffers(device=fake)
    assert runtime.statistics(fake)["totals"]["host_buffer_bytes"] == 0
    with pytest.raises(rlmem.InvalidArgumentError):
        runtime.reserve_host_buffers(-1, device=fake)


def _tag_figures(device: int) -> dict:
    return {tag["name"]: tag for tag in runtime.statistics(device)["tags"]}


@pytest.mark.parametrize("wrapped", [2**32, 2**64, -(2**32)])
def test_a_device_past_a_c_int_is_refused_never_wrapped_onto_another(fake, wrapped):
    # Issue 28: device=2**32 reached the C ABI as device 0 (here DEVICE + 2**32 as DEVICE).
    with runtime.region("train", device=fake):
        runtime._allocate(fake, MiB)
    device = DEVICE + wrapped
    expected = f"device {device} is out of range"
    for call in (lambda: runtime.pause("train", device=device), lambda: runtime.resume("train", device=device),
                 lambda: runtime.statistics(device), lambda: runtime.empty_cache(device),
                 lambda: runtime.reserve_host_buffers(MiB, device=device), lambda: runtime.GrowableBuffer(MiB, device=device)):
        with pytest.raises(rlmem.InvalidArgumentError) as caught:
            call()
        assert str(caught.value) == expected, f"expected {expected!r}, seen {str(caught.value)!r}"
    with pytest.raises(rlmem.InvalidArgumentError, match=expected):
        with runtime.region("train", device=device):
            pass
    assert not _tag_figures(fake)["train"]["paused"], "expected the tag of the device wrapped onto untouched"
    assert runtime.statistics(fake)["totals"]["host_buffer_bytes"] == 0


def test_a_negative_device_is_refused_in_the_c_librarys_words(fake):
    with pytest.raises(rlmem.InvalidArgumentError, match="^device -1 is out of range$"):
        runtime.pause("train", device=-1)


@pytest.mark.parametrize("nbytes", [2**64, 2**64 + MiB, -1, -(2**64)])
def test_sizes_past_a_uint64_are_refused_never_wrapped(fake, nbytes):
    # Issue 28: 2**64 + MiB arrived as 1 MiB: a slab pinned, a buffer reserved and grown.
    with pytest.raises(rlmem.InvalidArgumentError, match=f"nbytes = {nbytes} is outside"):
        runtime.reserve_host_buffers(nbytes, device=fake)
    assert runtime.statistics(fake)["totals"]["host_buffer_bytes"] == 0, "expected nothing pinned"
    with pytest.raises(rlmem.InvalidArgumentError, match=r"max_bytes must be a positive number of bytes up to 2\*\*64 - 1"):
        runtime.GrowableBuffer(nbytes, device=fake)
    buffer = runtime.GrowableBuffer(4 * MiB, device=fake)
    with pytest.raises(rlmem.InvalidArgumentError, match=f"nbytes = {nbytes} is outside"):
        buffer.grow(nbytes)
    assert buffer.nbytes == 0 and runtime.statistics(fake)["totals"]["allocated_bytes"]["current"] == 0
    buffer.release()
    with pytest.raises(rlmem.InvalidArgumentError, match="history must be a number of events"):
        runtime._open_fake(DEVICE + 1, 64 * MiB, history=nbytes)
    assert not runtime._lib.load()[0].rlmem_runtime_is_open(DEVICE + 1)


def test_the_private_helpers_check_every_integer_against_its_c_type_too(fake):
    with pytest.raises(rlmem.InvalidArgumentError, match=r"rlmem_runtime_allocate: argument 2 = 18446744073709551616 is outside"):
        runtime._allocate(fake, 2**64)
    with pytest.raises(TypeError, match="is a bool"):
        runtime.reserve_host_buffers(True, device=fake)
    with pytest.raises(rlmem.InvalidArgumentError, match="not a whole number"):
        runtime.reserve_host_buffers(1.5, device=fake)


def test_history_past_its_bound_is_refused_with_the_bound():
    # Issue 28: history_entries = 2**64 - 1 failed as an internal error.
    with pytest.raises(rlmem.InvalidArgumentError, match="history_entries 18446744073709551615 is more than the 16777216 events"):
        runtime._open_fake(DEVICE, 64 * MiB, history=2**64 - 1)
    assert not runtime._lib.load()[0].rlmem_runtime_is_open(DEVICE)


def test_host_buffers_past_what_the_device_could_back_up_fail_at_once_pinning_nothing(fake):
    # Issue 28: the request pinned until the host refused (a 24 GB host met the OOM killer).
    with pytest.raises(rlmem.InvalidArgumentError, match=r"more than 67108864 \(64 MiB, the device's memory, the most a pause backs up\)"):
        runtime.reserve_host_buffers(2**64 - 1, device=fake)
    with pytest.raises(rlmem.InvalidArgumentError, match="nothing pinned"):
        runtime.reserve_host_buffers(64 * MiB + 1, device=fake)
    assert runtime.statistics(fake)["totals"]["host_buffer_bytes"] == 0


@pytest.mark.parametrize("tag", ["a\0b", "\0", "train\0"])
def test_tag_names_holding_a_nul_are_refused_not_cut_short(fake, tag):
    # Issue 28: region("a\0b") entered the tag "a".
    expected = f"tag name {tag!r} contains a NUL character"
    calls = {"region": lambda: runtime.region(tag, device=fake).__enter__(),
             "pause": lambda: runtime.pause(tag, device=fake), "resume": lambda: runtime.resume(tag, device=fake),
             "release_graph_memory": lambda: runtime.release_graph_memory(tag, device=fake),
             "blocks_still_filled": lambda: runtime.blocks_still_filled(tag, device=fake)}
    for name, call in calls.items():
        with pytest.raises(rlmem.InvalidArgumentError) as caught:
            call()
        assert str(caught.value) == expected, f"{name}: expected {expected!r}, seen {str(caught.value)!r}"
    assert set(_tag_figures(fake)) == {"default", "libraries"}, "expected no tag entered"


def test_the_cuda_route_on_a_torch_without_cuda_says_what_it_needs(tmp_path):
    # Issue 28: an AttributeError from torch._C, or torch's AssertionError, instead.
    torch = pytest.importorskip("torch")
    if torch.version.cuda is not None:
        pytest.skip("this torch is built with CUDA")
    needs = "needs PyTorch {} or later built with CUDA, and a CUDA device: this torch ({}) is built without CUDA"
    with pytest.raises(rlmem.DeviceError, match=re_escaped("rlmem.runtime.install() " + needs.format("2.0", torch.__version__))):
        runtime.install()
    assert not runtime.installed()
    with pytest.raises(rlmem.DeviceError, match=re_escaped("rlmem.runtime.pool() " + needs.format("2.5", torch.__version__))):
        with runtime.pool("rollout"):
            pass
    with pytest.raises(rlmem.DeviceError, match=re_escaped("(device=None) " + needs.format("2.0", torch.__version__))):
        runtime.statistics()
    with pytest.raises(rlmem.DeviceError, match=re_escaped("rlmem.record " + needs.format("1.13", torch.__version__))):
        with rlmem.record(tmp_path / "run.pickle"):
            pass
    assert list(tmp_path.iterdir()) == [], "expected nothing written"


def re_escaped(text: str) -> str:
    import re

    return re.escape(text)


def test_a_growable_buffer_no_one_references_gives_its_memory_back(fake):
    with runtime.region("kv", device=fake):
        buffer = runtime.GrowableBuffer(32 * MiB, device=fake)
    buffer.grow(6 * MiB)
    kv = lambda: {tag["name"]: tag for tag in runtime.statistics(fake)["tags"]}["kv"]  # noqa: E731
    assert kv()["allocated_bytes"]["current"] == 6 * MiB
    del buffer
    gc.collect()
    assert kv()["allocated_bytes"]["current"] == 0, "the dropped buffer's pages were not released"
    assert kv()["mapped_bytes"]["current"] == 0


def test_the_runtimes_history_dumps_as_a_snapshot_that_rlmem_inspect_reads(tmp_path):
    runtime._open_fake(DEVICE, 64 * MiB, 2 * MiB, history=1000)
    try:
        with runtime.region("train", device=DEVICE):
            weights = runtime._allocate(DEVICE, 5 * MiB)
        activations = [runtime._allocate(DEVICE, 3 * MiB + 100 * i) for i in range(4)]
        for address in activations:
            runtime._free(DEVICE, address)
        kept = runtime._allocate(DEVICE, 1000)
        path = tmp_path / "rlmem_runtime.pickle"
        runtime.dump_snapshot(path, device=DEVICE)
        report = rlmem.inspect(str(path), device=DEVICE)
        page = rlmem.report(str(path), device=DEVICE)
        own = runtime.memory_stats(DEVICE)
    finally:
        runtime._close(DEVICE)
    blocks = 5 * MiB + sum(3 * MiB + (100 * i + 511) // 512 * 512 for i in range(4))
    summary = report["summary"]
    assert summary["peak_allocated_bytes"] == blocks, summary
    assert summary["final_allocated_bytes"] == 5 * MiB + 1024, "the weights and the 1000 B block, rounded"
    assert summary["allocated_at_trace_start_bytes"] == 0, "the history began with the runtime"
    # inspect's reading of the dumped history agrees with the runtime's own counters.
    assert summary["final_reserved_bytes"] == own["reserved_bytes.all.current"] == 20 * MiB, "3 pages of train, 7 of default"
    assert summary["peak_reserved_bytes"] == own["reserved_bytes.all.peak"]
    assert summary["peak_allocated_bytes"] == own["allocated_bytes.all.peak"]
    assert summary["expandable_segments"] == 2, "each tag's mapped run reads as an expandable segment"
    assert "<html" in page[:200].lower()
    # replay reads it too, as a trace of expandable segments, and answers its what-ifs.
    cli = Path(rlmem.library_path()).parent / "rlmem"
    replayed = subprocess.run([str(cli), "replay", str(path), "--device", str(DEVICE), "--json"], capture_output=True, text=True)
    assert replayed.returncode == 0, replayed.stderr
    replay = json.loads(replayed.stdout)
    assert replay["completed"] and replay["peak_allocated_bytes"] == blocks, replay
    assert weights and kept


def test_record_writes_the_runtimes_history_when_rlmem_is_the_processs_allocator(tmp_path, monkeypatch):
    from fakes import FakeCuda

    runtime._open_fake(DEVICE, 64 * MiB, 2 * MiB, history=1000)
    try:
        # install() itself needs CUDA; these are what it sets.
        monkeypatch.setattr(runtime, "_installed", True)
        monkeypatch.setattr(runtime, "_history_entries", 1000)
        monkeypatch.setattr(runtime, "_device", lambda device: DEVICE if device is None else int(device))
        with rlmem.record(tmp_path / "run.pickle", cuda=FakeCuda(), mark_steps=False) as recorder:
            first = runtime._allocate(DEVICE, 6 * MiB)
            runtime._allocate(DEVICE, 3 * MiB)
            runtime._free(DEVICE, first)
        own = runtime.memory_stats(DEVICE)
        summary = rlmem.inspect(str(tmp_path / "run.pickle"), device=DEVICE)["summary"]
    finally:
        runtime._close(DEVICE)
    assert recorder.paths == [str(tmp_path / "run.pickle")]
    assert summary["peak_allocated_bytes"] == own["allocated_bytes.all.peak"] == 9 * MiB
    assert summary["final_allocated_bytes"] == 3 * MiB


def test_record_under_the_runtime_without_history_says_how_to_turn_it_on(tmp_path, monkeypatch):
    from fakes import FakeCuda

    monkeypatch.setattr(runtime, "_installed", True)
    monkeypatch.setattr(runtime, "_history_entries", 0)
    with pytest.raises(rlmem.RlmemError, match=r"install\(history=N\)"):
        with rlmem.record(tmp_path / "run.pickle", cuda=FakeCuda()):
            pass


@pytest.fixture
def checking(monkeypatch):
    monkeypatch.setenv("RLMEM_CHECK_PAUSED", "1")
    runtime._open_fake(DEVICE, 64 * MiB, 2 * MiB, copy_chunk_bytes=4 * MiB)
    yield DEVICE
    runtime._close(DEVICE)


class _Tensor:
    """What blocks_still_filled reads of a tensor: its address."""

    def __init__(self, address: int):
        self.address = address

    def data_ptr(self) -> int:
        return self.address


def test_the_checking_mode_names_weights_discarded_and_never_loaded_again(checking):
    with runtime.region("weights", device=checking):
        loaded = runtime._allocate(checking, 4 * MiB)
        forgotten = runtime._allocate(checking, 6 * MiB)
    runtime.pause("weights", keep="discard", device=checking)
    runtime.resume("weights", device=checking)
    assert runtime._read(checking, forgotten, 64) == b"\xff" * 64, "NaN bytes, not zeros, in the checking mode"
    runtime._write(checking, loaded, os.urandom(4 * MiB))
    assert runtime.blocks_still_filled("weights", device=checking) == [(forgotten, 6 * MiB)]
    named = runtime.blocks_still_filled("weights", {"lm_head.weight": _Tensor(forgotten), "embed.weight": _Tensor(loaded)},
                                        device=checking)
    assert named == ["lm_head.weight"]


def test_the_checking_mode_warns_at_resume_when_paused_memory_was_written(checking):
    with runtime.region("train", device=checking):
        weights = runtime._allocate(checking, 4 * MiB)
    data = os.urandom(4 * MiB)
    runtime._write(checking, weights, data)
    runtime.pause("train", keep="host", device=checking)
    assert runtime._read(checking, weights, 16) == b"\xff" * 16, "a read while paused sees NaN bytes, not a fault"
    runtime._write(checking, weights + MiB, b"\x00")
    with pytest.warns(RuntimeWarning, match="written while paused"):
        runtime.resume("train", device=checking)
    assert runtime._read(checking, weights, len(data)) == data, "the backup wins over the stray write"


def test_the_library_tag_is_never_paused_and_no_region_names_it(fake):
    with pytest.raises(rlmem.InvalidArgumentError, match="own"):
        with runtime.region("libraries", device=fake):
            pass
    tags = [tag["name"] for tag in runtime.statistics(fake)["tags"]]
    assert "libraries" in tags
    with pytest.raises(rlmem.InvalidArgumentError, match="never paused"):
        runtime.pause("libraries", device=fake)


def test_statistics_say_where_the_device_time_went(fake):
    with runtime.region("train", device=fake):
        runtime._allocate(fake, 64 * MiB - 4 * MiB)
    calls = runtime.statistics(fake)["totals"]["device_calls"]
    assert calls["map"]["calls"] == 2, calls
    assert calls["map"]["seconds"] >= 0
