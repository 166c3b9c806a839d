"""On a real GPU (skipped without one): record() around a real OOM, and StepMonitor over real steps
that leak, naming the site from a real recording, without synchronizing the device."""

from __future__ import annotations

import io

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

MiB = 1024**2


def leaky_step(kept: list, work: int) -> None:
    scratch = torch.empty(work, dtype=torch.uint8, device="cuda")
    kept.append(torch.empty(16 * MiB, dtype=torch.uint8, device="cuda"))  # the leak: 16 MiB a step
    del scratch


def test_real_oom_is_dumped_and_explained(rlmem, tmp_path):
    stream = io.StringIO()
    held = []
    with pytest.raises(torch.cuda.OutOfMemoryError):
        with rlmem.record(tmp_path, verdict_stream=stream) as rec:
            free, _ = torch.cuda.mem_get_info()
            held.append(torch.empty(64 * MiB, dtype=torch.uint8, device="cuda"))
            torch.empty(free * 4, dtype=torch.uint8, device="cuda")  # more than the device has
    del held
    assert rec.oom_snapshot == str(tmp_path / "rlmem-oom.pickle")
    report = rlmem.inspect(rec.oom_snapshot)
    assert report["oom"], "the snapshot must hold the oom event"
    assert report["oom"][-1]["verdict"] == "capacity"
    line = stream.getvalue()
    # The verdict, the limit it was judged under (record() judges under the process's own), the request.
    assert line.startswith("rlmem: OOM: CAPACITY (judged under the "), line
    assert "), requested " in line and line.count("\n") == 1, line


def test_real_leak_is_named(rlmem, tmp_path, monkeypatch):
    synchronized = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: synchronized.append(1))
    kept: list = []
    monitor = rlmem.StepMonitor(tmp_path / "m.jsonl", record_on_leak=3, snapshot_dir=tmp_path / "s")
    raised = []
    for step in range(1, 12):
        if step >= 4:
            leaky_step(kept, 64 * MiB)
        raised += [(step, alert) for alert in monitor.step()]
    monitor.close()
    assert synchronized == [], "the monitor must not synchronize the device"
    leaks = [(step, alert) for step, alert in raised if alert.kind == "leak"]
    # Growth from step 4 with three quiet step ends before it: the rule asks for min_events (3) and,
    # with under 4 step ends of history, one event more (extra_events_without_history), so step 7.
    assert leaks and leaks[0][0] <= 7, f"leak from step 4: expected an alert by step 7, saw {[s for s, _ in leaks]}"
    named = [alert for _, alert in leaks if alert.site]
    assert named and "leaky_step" in named[0].site, [alert.message for _, alert in leaks]
