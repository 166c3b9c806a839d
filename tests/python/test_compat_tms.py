"""rlmem.compat.torch_memory_saver on the host-backed fake device: SGLang's tags paused and resumed
in SGLang's and verl's order, weights bit-exact (enable_cpu_backup=True) and the KV cache zeroed,
pause() and resume() with no tag, disable(), TMS_INIT_ENABLE (slime's training processes), and
the errors. Torch tensors cannot live on the fake device: blocks are allocated with
rlmem.runtime._allocate inside the stand-in's regions, on ordinal 0 (the device the stand-in
reads from rlmem.runtime's helper). On a GPU: tools/runtime/gpu_checks_torch.py --only tms_compat."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import rlmem
from rlmem import runtime
from rlmem.compat import shim_path, torch_memory_saver as compat

MiB = 1 << 20
DEVICE = 0
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tms(monkeypatch):
    for name in ("TMS_INIT_ENABLE", "TMS_INIT_ENABLE_CPU_BACKUP", "TMS_RETAIN_CPU_BACKUP"):
        monkeypatch.delenv(name, raising=False)
    runtime._open_fake(DEVICE, 64 * MiB, 2 * MiB, copy_chunk_bytes=4 * MiB)
    # install() needs CUDA; these are what it sets. The device comes from runtime's helper.
    monkeypatch.setattr(runtime, "_installed", True)
    monkeypatch.setattr(runtime, "_device", lambda device: DEVICE if device is None else int(device))
    monkeypatch.setattr(compat, "_state", compat._State())
    yield compat.torch_memory_saver
    runtime._close(DEVICE)


def tags() -> dict:
    return {tag["name"]: tag for tag in runtime.statistics(DEVICE)["tags"]}


def sglang_release(tms, tag_list=None):
    """SGLang's Scheduler.release_memory_occupation: KV cache, then weights, then CUDA graphs."""
    tag_list = tag_list or ["weights", "kv_cache", "cuda_graph"]  # GPU_MEMORY_ALL_TYPES
    for tag in ("kv_cache", "weights", "cuda_graph"):
        if tag in tag_list:
            tms.pause(tag)


def sglang_resume(tms, tag_list=None):
    """SGLang's Scheduler.resume_memory_occupation: CUDA graphs, then weights, then KV cache."""
    tag_list = tag_list or ["weights", "kv_cache", "cuda_graph"]
    for tag in ("cuda_graph", "weights", "kv_cache"):
        if tag in tag_list:
            tms.resume(tag)


def engine(tms):
    """What an SGLang engine allocates: an untagged buffer first (its warm-up GEMM), weights with
    a CPU backup, the KV cache without."""
    scratch = runtime._allocate(DEVICE, 2 * MiB)
    with tms.region(tag="weights", enable_cpu_backup=True):
        weights = [runtime._allocate(DEVICE, 5 * MiB + 100), runtime._allocate(DEVICE, 3 * MiB)]
    with tms.region(tag="kv_cache"):
        kv = runtime._allocate(DEVICE, 8 * MiB)
    data = [os.urandom(5 * MiB + 100), os.urandom(3 * MiB)]
    for address, payload in zip(weights, data):
        runtime._write(DEVICE, address, payload)
    runtime._write(DEVICE, kv, b"\x7f" * (8 * MiB))
    runtime._write(DEVICE, scratch, b"\x11" * (2 * MiB))
    return scratch, weights, data, kv


def weights_intact(weights, data) -> bool:
    return all(runtime._read(DEVICE, address, len(payload)) == payload for address, payload in zip(weights, data))


def test_sglangs_release_then_verls_staged_resume_keeps_weights_bit_exact_and_zeroes_the_kv_cache(tms):
    scratch, weights, data, kv = engine(tms)
    sglang_release(tms)  # release_memory_occupation(): every type, "cuda_graph" never allocated in
    now = tags()
    assert now["weights"]["paused"] and now["kv_cache"]["paused"]
    assert now["weights"]["mapped_bytes"]["current"] == 0 and now["kv_cache"]["mapped_bytes"]["current"] == 0
    assert now["weights"]["host_backup_bytes"] > 0, "enable_cpu_backup=True: kept on the host"
    assert now["kv_cache"]["host_backup_bytes"] == 0, "no backup: discarded"
    assert not now["default"]["paused"], "the untagged buffer is never paused"
    assert runtime._read(DEVICE, scratch, 2 * MiB) == b"\x11" * (2 * MiB)
    assert "cuda_graph" not in now

    # verl: wake_up(["weights"]), update the weights, then wake_up(["kv_cache"]).
    sglang_resume(tms, ["weights"])
    assert not tags()["weights"]["paused"] and tags()["kv_cache"]["paused"]
    assert weights_intact(weights, data), "the weights came back bit-exact at the same addresses"
    sglang_resume(tms, ["kv_cache"])
    assert runtime._read(DEVICE, kv, 8 * MiB) == bytes(8 * MiB), "the KV cache reads as zeros"

    # A second cycle with SGLang's own resume of every type (cuda_graph first: nothing to do).
    sglang_release(tms)
    sglang_resume(tms)
    assert weights_intact(weights, data)
    assert tags()["weights"]["pauses"] == 2 and tags()["weights"]["resumes"] == 2


def test_pause_with_no_tag_pauses_what_is_resident_and_resume_some_tags_then_the_rest(tms):
    scratch, weights, data, kv = engine(tms)
    tms.pause("kv_cache")
    tms.pause()  # the weights: the KV cache is paused already, and the untagged memory is no tag of ours
    now = tags()
    assert now["weights"]["paused"] and now["kv_cache"]["paused"] and not now["default"]["paused"]
    assert now["kv_cache"]["pauses"] == 1
    tms.resume("kv_cache")
    assert tags()["weights"]["paused"] and not tags()["kv_cache"]["paused"]
    tms.resume()  # the weights only: the KV cache is resident
    assert not tags()["weights"]["paused"]
    assert tags()["kv_cache"]["resumes"] == 1
    assert weights_intact(weights, data)
    tms.pause()
    tms.resume()
    assert weights_intact(weights, data)
    assert runtime._read(DEVICE, scratch, 2 * MiB) == b"\x11" * (2 * MiB)


def test_the_default_tag_is_its_own_rlmem_tag_and_a_tags_backup_is_kept_if_any_region_asked(tms):
    with tms.region():
        plain = runtime._allocate(DEVICE, MiB)
    with tms.region(tag="weights"):
        first = runtime._allocate(DEVICE, MiB)
    with tms.region(tag="weights", enable_cpu_backup=True, cpu_backup_backend="mmap"):
        second = runtime._allocate(DEVICE, MiB)
    runtime._write(DEVICE, first, b"\x01" * MiB)
    runtime._write(DEVICE, second, b"\x02" * MiB)
    runtime._write(DEVICE, plain, b"\x03" * MiB)
    tms.pause()
    now = tags()
    assert now[compat.RLMEM_TAG_FOR_DEFAULT]["paused"], "torch_memory_saver's default tag pauses"
    assert not now["default"]["paused"], "rlmem's own default tag (untagged memory) does not"
    tms.resume()
    assert runtime._read(DEVICE, first, MiB) == b"\x01" * MiB, "one region of the tag asked for the backup"
    assert runtime._read(DEVICE, second, MiB) == b"\x02" * MiB
    assert runtime._read(DEVICE, plain, MiB) == bytes(MiB), "no backup asked: zeros"


def test_an_allocation_under_disable_is_never_paused(tms):
    with tms.region(tag="weights", enable_cpu_backup=True):
        weights = runtime._allocate(DEVICE, 4 * MiB)
        with tms.disable():
            untracked = runtime._allocate(DEVICE, 4 * MiB)
        inside = runtime._allocate(DEVICE, MiB)
    runtime._write(DEVICE, untracked, b"\x42" * (4 * MiB))
    tms.pause()
    now = tags()
    assert now["weights"]["allocated_bytes"]["current"] == 5 * MiB, "after disable() the region's tag again"
    assert now["default"]["allocated_bytes"]["current"] == 4 * MiB and not now["default"]["paused"]
    assert runtime._read(DEVICE, untracked, 4 * MiB) == b"\x42" * (4 * MiB), "readable while the tags are paused"
    tms.resume()
    assert weights and inside


def test_init_enable_tracks_every_allocation_and_disable_gives_its_memory_back(monkeypatch, tms):
    """slime's training processes: TMS_INIT_ENABLE=1 TMS_INIT_ENABLE_CPU_BACKUP=1, pause(), work in
    disable() while paused, resume()."""
    monkeypatch.setenv("TMS_INIT_ENABLE", "1")
    monkeypatch.setenv("TMS_INIT_ENABLE_CPU_BACKUP", "1")
    model = runtime._allocate(DEVICE, 6 * MiB)  # no region: every allocation is the saver's
    payload = os.urandom(6 * MiB)
    runtime._write(DEVICE, model, payload)
    tms.pause()
    assert tags()["default"]["paused"], "the untagged memory is torch_memory_saver's default tag here"
    with pytest.raises(rlmem.RuntimeStateError, match="paused"):
        runtime._allocate(DEVICE, MiB)  # outside disable(): the paused tag
    with tms.disable():
        update = runtime._allocate(DEVICE, 10 * MiB)  # the weight update's buffers
        runtime._write(DEVICE, update, b"\x09" * (10 * MiB))
        assert runtime._read(DEVICE, update, 10 * MiB) == b"\x09" * (10 * MiB)
        runtime._free(DEVICE, update)
    untracked = tags()[compat.UNTRACKED_TAG]
    assert untracked["mapped_bytes"]["current"] == 0, "leaving disable() gave its free pages back"
    assert untracked["mapped_bytes"]["peak"] == 10 * MiB
    tms.resume()
    assert runtime._read(DEVICE, model, 6 * MiB) == payload


def test_errors_as_the_real_package_raises_them_or_clear_ones(tms):
    engine(tms)
    tms.pause("weights")
    with pytest.raises(rlmem.RuntimeStateError, match=r"torch_memory_saver.pause\('weights'\): .*already paused"):
        tms.pause("weights")  # the real package prints and exits the process
    with pytest.raises(rlmem.RuntimeStateError, match="paused"):
        with tms.region(tag="weights"):
            runtime._allocate(DEVICE, MiB)
    tms.resume("weights")
    with pytest.raises(rlmem.RuntimeStateError, match=r"torch_memory_saver.resume\('weights'\): .*not paused"):
        tms.resume("weights")
    tms.pause("never_used")  # a tag nothing was allocated in: nothing to do, as the real package
    tms.resume("never_used")
    with pytest.raises(ValueError, match="cpu_backup_backend requires enable_cpu_backup=True"):
        with tms.region(tag="weights", cpu_backup_backend="pinned"):
            pass
    with pytest.raises(ValueError, match="cpu_backup_backend must be one of"):
        with tms.region(tag="weights", enable_cpu_backup=True, cpu_backup_backend="disk"):
            pass
    with pytest.raises(AssertionError, match="mutually exclusive"):
        with tms.region(tag="weights", enable_cpu_backup=True, enable_disk_backup=True):
            pass
    with pytest.raises(NotImplementedError, match="enable_disk_backup is not supported"):
        with tms.region(tag="weights", enable_disk_backup=True):
            pass
    with pytest.raises(AssertionError, match="disable\\(\\) should be called only when tms is active"):
        with tms.disable():
            pass
    with pytest.raises(AttributeError):
        tms.hook_mode
    tms.hook_mode = "torch"
    with pytest.raises(ValueError):
        tms.hook_mode = "ld_preload"
    with pytest.raises(NotImplementedError, match="get_cpu_backup"):
        tms.get_cpu_backup(None)
    with pytest.warns(UserWarning, match="memory_margin_bytes is not enforced"):
        tms.memory_margin_bytes = 1 << 30
    assert tms.enabled is True


def test_a_captured_graphs_tag_pauses_and_resumes_like_any_other(tms, monkeypatch):
    torch = pytest.importorskip("torch")
    captured = {}

    @contextlib.contextmanager
    def graph(cuda_graph, pool=None, stream=None, capture_error_mode="global"):
        captured.update(cuda_graph=cuda_graph, pool=pool, stream=stream, mode=capture_error_mode)
        yield

    monkeypatch.setattr(torch.cuda, "graph", graph)
    engine(tms)
    with tms.cuda_graph(cuda_graph="g", pool="p", stream="s", tag="cuda_graph", enable_cpu_backup=True):
        output = runtime._allocate(DEVICE, MiB)
    assert captured == {"cuda_graph": "g", "pool": "p", "stream": "s", "mode": "global"}
    assert tags()["cuda_graph"]["allocated_bytes"]["current"] == MiB, "the capture's memory is the tag's"
    data = os.urandom(MiB)
    runtime._write(DEVICE, output, data)
    tms.pause("cuda_graph")
    assert tags()["cuda_graph"]["paused"]
    tms.resume("cuda_graph")
    assert runtime._read(DEVICE, output, MiB) == data, "a graph's memory comes back at its addresses"



def test_the_module_has_the_real_packages_names_and_subprocesses_import_it(tms, monkeypatch):
    assert isinstance(compat.torch_memory_saver, compat.TorchMemorySaver)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    with compat.configure_subprocess():
        assert os.environ["PYTHONPATH"].split(os.pathsep)[0] == shim_path()
        env = dict(os.environ)
    assert "PYTHONPATH" not in os.environ, "configure_subprocess() put PYTHONPATH back"
    env["PYTHONPATH"] += os.pathsep + str(ROOT / "python")
    done = subprocess.run(
        [sys.executable, "-c", "import torch_memory_saver as t; print(t.__name__, type(t.torch_memory_saver).__name__,"
                               " callable(t.configure_subprocess))"],
        env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["rlmem.compat.torch_memory_saver", "TorchMemorySaver", "True"]
    from rlmem.compat import alias_torch_memory_saver

    monkeypatch.delitem(sys.modules, "torch_memory_saver", raising=False)
    assert alias_torch_memory_saver() is compat
    import torch_memory_saver

    assert torch_memory_saver.torch_memory_saver is compat.torch_memory_saver
