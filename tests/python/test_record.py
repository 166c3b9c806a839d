"""rlmem.record: history switched on and off, snapshots every N steps with rotation, atomic files,
and the OOM path (dump first, verdict line, the OOM re-raised) -- with a stand-in torch.cuda whose
_dump_snapshot writes a real bundled snapshot, read back by the real librlmem."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import PYTHON_DIR, SNAPSHOTS
from fakes import FakeCuda, FakeOutOfMemoryError

OOM_SNAPSHOT = SNAPSHOTS / "frag_default_oom.pickle.zst"


@pytest.fixture
def cuda():
    return FakeCuda(snapshot_bytes=OOM_SNAPSHOT.read_bytes())


def listing(directory):
    return sorted(os.listdir(directory))


def test_history_on_inside_off_after(rlmem, cuda, tmp_path):
    with rlmem.record(tmp_path / "snaps", cuda=cuda) as rec:
        assert cuda.memory.enabled, "history should be on inside the block"
        assert rec.active
    assert not cuda.memory.enabled, "history should be off after the block"
    assert cuda.memory.calls[0] == ("record", "all", "all", "python", 1_000_000, True), cuda.memory.calls[0]
    assert cuda.memory.calls[-1][:2] == ("record", None), cuda.memory.calls[-1]
    assert listing(tmp_path / "snaps") == ["rlmem-exit.pickle"]
    assert (tmp_path / "snaps" / "rlmem-exit.pickle").read_bytes() == OOM_SNAPSHOT.read_bytes()


def test_a_users_own_recording_is_left_alone(rlmem, cuda, tmp_path):
    cuda.memory.enabled = True  # the user turned history on with settings rlmem cannot read back
    with rlmem.record(tmp_path / "snap.pickle", cuda=cuda, stacks="all", max_entries=5):
        pass
    assert cuda.memory.enabled, "the user's recording must stay on"
    assert [call for call in cuda.memory.calls if call[0] == "record"] == [], "settings must not be changed"
    assert (tmp_path / "snap.pickle").is_file()


def test_history_is_not_probed_before_cuda_is_initialised(rlmem, cuda, tmp_path):
    # torch 2.11's _cuda_isHistoryEnabled() crashes the process before CUDA is initialised
    # (seen on an H100): record() must not ask then, and starts recording as usual.
    def crash():
        raise AssertionError("the history probe was called before CUDA was initialised")

    cuda.memory._C = type("C", (), {"_cuda_isHistoryEnabled": staticmethod(crash)})
    cuda.is_initialized = lambda: False
    with rlmem.record(tmp_path / "snap.pickle", cuda=cuda):
        assert cuda.memory.enabled, "history should be on inside the block"
    assert (tmp_path / "snap.pickle").is_file()


def test_torch_1_13_history_api(rlmem, tmp_path):
    calls = []

    class Legacy(FakeCuda):
        pass

    cuda = Legacy(snapshot_bytes=OOM_SNAPSHOT.read_bytes())

    def _record_memory_history(enabled, device=None):  # torch 1.13's signature (Debian's build)
        calls.append(enabled)

    cuda.memory._record_memory_history = _record_memory_history
    del cuda.memory._C  # 1.13 cannot say whether history is on
    with rlmem.record(tmp_path / "s", cuda=cuda):
        pass
    assert calls == [True, False], f"expected the bool form on then off, saw {calls}"


def test_every_n_steps_with_rotation(rlmem, cuda, tmp_path):
    target = tmp_path / "snaps"
    with rlmem.record(target, every=2, keep=3, cuda=cuda) as rec:
        written = [rec.step() for _ in range(10)]
        assert written[0] is None and written[1] == str(target / "rlmem-step000002.pickle"), written[:2]
        assert listing(target) == ["rlmem-step000006.pickle", "rlmem-step000008.pickle", "rlmem-step000010.pickle"]
    assert listing(target) == ["rlmem-exit.pickle", "rlmem-step000008.pickle", "rlmem-step000010.pickle"]
    assert rec.paths == [str(target / name) for name in
                         ("rlmem-step000008.pickle", "rlmem-step000010.pickle", "rlmem-exit.pickle")], rec.paths


def test_a_file_target_holds_the_newest(rlmem, cuda, tmp_path):
    target = tmp_path / "run.pickle"
    with rlmem.record(target, every=1, cuda=cuda) as rec:
        rec.step()
        rec.step()
    assert listing(tmp_path) == ["run.pickle"]
    assert rlmem.inspect(target)["oom"][0]["verdict"] == "fragmentation"


def test_rank_names(rlmem, cuda, tmp_path, monkeypatch):
    from rlmem import _dist

    monkeypatch.setattr(_dist, "rank_and_world", lambda: (3, 8))
    with rlmem.record(tmp_path / "d", cuda=cuda):
        pass
    with rlmem.record(tmp_path / "r{rank}.pickle", cuda=cuda):
        pass
    assert listing(tmp_path / "d") == ["rlmem-rank3-exit.pickle"]
    assert (tmp_path / "r3.pickle").is_file()


def test_oom_dumps_before_reraising_and_prints_the_verdict(rlmem, cuda, tmp_path):
    stream = io.StringIO()
    error = FakeOutOfMemoryError("CUDA out of memory. Tried to allocate 468.12 MiB")
    seen_at_raise = {}
    rec = rlmem.record(tmp_path / "snaps", cuda=cuda, verdict_stream=stream)
    with pytest.raises(FakeOutOfMemoryError) as caught:
        with rec:
            seen_at_raise["files"] = listing(tmp_path / "snaps") if (tmp_path / "snaps").exists() else []
            raise error
    assert caught.value is error, "the OOM must be re-raised unchanged"
    assert seen_at_raise["files"] == [], "nothing was written before the OOM"
    path = tmp_path / "snaps" / "rlmem-oom.pickle"
    assert listing(tmp_path / "snaps") == ["rlmem-oom.pickle"], "an OOM writes the OOM snapshot and no exit snapshot"
    assert rec.oom_snapshot == str(path)
    expected = rlmem.oom_verdict_line(str(path), rlmem.inspect(path))
    assert stream.getvalue() == expected + "\n", f"expected {expected!r}, printed {stream.getvalue()!r}"
    assert expected.startswith("rlmem: OOM: FRAGMENTATION, requested 468.1 MiB: live tensors (1.86 GiB) plus the "
                               "request (468.1 MiB) need 2.31 GiB of the 2.61 GiB limit the recording proves"), expected
    assert "simulated under that limit, expandable_segments:True" in expected, expected
    assert "Advice: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in expected
    assert expected.endswith(f"Snapshot: {path}") and "\n" not in expected
    assert not cuda.memory.enabled, "history should be off after the OOM"
    # the dump happened before the history was switched off, i.e. before the error left the block
    kinds = [call[0] if call[0] == "dump" else f"record:{call[1]}" for call in cuda.memory.calls]
    assert kinds == ["record:all", "dump", "record:None"], kinds


def test_oom_with_a_given_limit(rlmem, cuda, tmp_path):
    stream = io.StringIO()
    with pytest.raises(FakeOutOfMemoryError):
        with rlmem.record(tmp_path / "s", cuda=cuda, verdict_stream=stream, limit=2_805_590_497) as rec:
            raise FakeOutOfMemoryError("oom")
    assert rec.oom_verdict == stream.getvalue().strip()
    assert "need 2.31 GiB of the 2.61 GiB limit given" in rec.oom_verdict, rec.oom_verdict
    assert rec.oom_verdict.startswith("rlmem: OOM: FRAGMENTATION (judged under the 2.61 GiB limit of limit= given to record())"), \
        rec.oom_verdict


def test_second_oom_snapshot_does_not_replace_the_first(rlmem, cuda, tmp_path):
    stream = io.StringIO()
    for _ in range(2):
        with pytest.raises(FakeOutOfMemoryError):
            with rlmem.record(tmp_path / "s", cuda=cuda, verdict_stream=stream):
                raise FakeOutOfMemoryError("oom")
    assert listing(tmp_path / "s") == ["rlmem-oom-2.pickle", "rlmem-oom.pickle"]


def test_oom_snapshot_without_an_oom_event(rlmem, tmp_path):
    cuda = FakeCuda(snapshot_bytes=(SNAPSHOTS / "grpo_clean.pickle.zst").read_bytes())
    stream = io.StringIO()
    with pytest.raises(FakeOutOfMemoryError):
        with rlmem.record(tmp_path / "s", cuda=cuda, verdict_stream=stream):
            raise FakeOutOfMemoryError("oom")
    assert stream.getvalue().startswith(f"rlmem: OOM: the snapshot {tmp_path / 's' / 'rlmem-oom.pickle'} holds no "
                                        f"oom event"), stream.getvalue()


def test_other_errors_dump_at_exit_and_propagate(rlmem, cuda, tmp_path):
    with pytest.raises(KeyError):
        with rlmem.record(tmp_path / "s", cuda=cuda):
            raise KeyError("user bug")
    assert listing(tmp_path / "s") == ["rlmem-exit.pickle"]


def test_dump_at_exit_off_writes_only_on_oom(rlmem, cuda, tmp_path):
    with rlmem.record(tmp_path / "s", cuda=cuda, dump_at_exit=False):
        pass
    assert not (tmp_path / "s").exists()


def test_a_failed_dump_leaves_no_file_under_the_final_name(rlmem, cuda, tmp_path):
    cuda.memory.fail_dump_after = 1000
    with pytest.raises(OSError, match="No space left on device"):
        with rlmem.record(tmp_path / "s", cuda=cuda):
            pass
    assert listing(tmp_path / "s") == [], "neither the final name nor the temporary file may remain"
    assert not cuda.memory.enabled, "history must be off even when the dump failed"


def test_a_failed_dump_never_hides_the_oom(rlmem, cuda, tmp_path):
    cuda.memory.fail_dump_after = 1000
    stream = io.StringIO()
    with pytest.raises(FakeOutOfMemoryError):
        with rlmem.record(tmp_path / "s", cuda=cuda, verdict_stream=stream):
            raise FakeOutOfMemoryError("oom")
    assert stream.getvalue().startswith("rlmem: OOM: could not write the snapshot: [Errno 28] No space left"), \
        stream.getvalue()
    assert listing(tmp_path / "s") == []


def test_a_crash_mid_dump_leaves_no_file_under_the_final_name(tmp_path):
    # A separate process dies (os._exit) half-way through writing the snapshot.
    script = textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(PYTHON_DIR)!r}, {os.path.dirname(__file__)!r}]
        import rlmem
        from fakes import FakeCuda
        cuda = FakeCuda(snapshot_bytes=open({str(OOM_SNAPSHOT)!r}, 'rb').read())
        cuda.memory.crash_dump_after = 4096
        with rlmem.record({str(tmp_path / 's')!r}, cuda=cuda):
            pass
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 17, f"the child should have crashed mid-dump: {done.returncode} {done.stderr}"
    left = listing(tmp_path / "s")
    assert "rlmem-exit.pickle" not in left, f"a half file under the final name: {left}"
    assert len(left) == 1 and left[0].startswith(".rlmem-exit.pickle.rlmem-tmp-"), left
    assert (tmp_path / "s" / left[0]).stat().st_size == 4096


def test_decorator(rlmem, cuda, tmp_path):
    rec = rlmem.record(tmp_path / "s", cuda=cuda)

    @rec
    def train(steps):
        assert cuda.memory.enabled
        for _ in range(steps):
            rec.step()
        return "done"

    assert train(3) == "done" and rec.steps == 3
    assert not cuda.memory.enabled
    assert listing(tmp_path / "s") == ["rlmem-exit.pickle"]
    assert train.__name__ == "train"


def test_misuse_is_refused(rlmem, cuda, tmp_path):
    rec = rlmem.record(tmp_path / "s", cuda=cuda)
    with pytest.raises(rlmem.RlmemError, match="outside its with-block"):
        rec.step()
    with rec:
        with pytest.raises(rlmem.RlmemError, match="already active"):
            rec.__enter__()
        with pytest.raises(ValueError, match="label"):
            rec.dump("a/b")
    for bad in ({"every": 0}, {"keep": 0}, {"stacks": "cpp"}, {"max_entries": -1}):
        with pytest.raises(ValueError):
            rlmem.record(tmp_path, **bad)
