"""rlmem.StepMonitor against a stand-in torch.cuda that replays memory_stats() series: the log
(checked against docs/schema/steplog.schema.json), each alert rule and its thresholds, repeats,
the leak recording that names the allocation site (real librlmem on real snapshots), and the
untouched user counters."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from conftest import MONITOR_SERIES, SNAPSHOTS
from fakes import GiB, MiB, FakeCuda, load_series, synthetic, write_series
from schema_check import check_steplog


def replay(monitor, cuda, steps=None):
    """Runs the series through the monitor; returns {step: [alerts]} for steps with alerts."""
    raised = {}
    for index in range(len(cuda) if steps is None else steps):
        cuda.goto(index)
        alerts = monitor.step()
        if alerts:
            raised[index + 1] = alerts
    return raised


def kinds(raised):
    return {step: [alert.kind for alert in alerts] for step, alerts in raised.items()}


def test_series_file_round_trip(tmp_path):
    series = synthetic(5, leak_at=3)
    loaded = load_series(write_series(tmp_path / "s.json", series))
    assert loaded == series


def test_clean_run_logs_every_step_and_raises_nothing(rlmem, tmp_path):
    cuda = FakeCuda(synthetic(40, jitter=1))
    log = tmp_path / "mem.jsonl"
    with rlmem.StepMonitor(log, cuda=cuda) as monitor:
        raised = replay(monitor, cuda)
    assert raised == {}, f"a clean run raised {kinds(raised)}"
    records = check_steplog(log)
    assert [r["step"] for r in records] == list(range(1, 41))
    first, last = records[0], records[-1]
    step = cuda.series["steps"][-1]
    assert last["allocated"] == step["allocated_bytes.all.current"] and last["reserved"] == step["reserved_bytes.all.current"]
    assert last["allocations"] == 700 and last["device_total"] == 80 * GiB
    assert last["device_free"] == step["mem_get_info"][0]
    assert first["step_seconds"] is None and isinstance(last["step_seconds"], float)
    assert last["peak_is_per_step"] is False and last["rank"] == 0 and last["world_size"] == 1


def test_counters_are_left_alone_unless_reset_peak(rlmem, tmp_path):
    cuda = FakeCuda(synthetic(10, jitter=1))
    with rlmem.StepMonitor(tmp_path / "a.jsonl", cuda=cuda) as monitor:
        replay(monitor, cuda)
    assert cuda.reset_calls == 0, "reset_peak_memory_stats must not be called by default"
    records = check_steplog(tmp_path / "a.jsonl")
    running = 0
    for record, step in zip(records, cuda.series["steps"]):
        running = max(running, step["allocated_bytes.all.peak"])
        assert record["step_peak_allocated"] == running, "without reset_peak the logged peak is the running peak"

    cuda = FakeCuda(synthetic(10, jitter=1))
    with rlmem.StepMonitor(tmp_path / "b.jsonl", cuda=cuda, reset_peak=True) as monitor:
        replay(monitor, cuda)
    assert cuda.reset_calls == 10, f"reset_peak=True resets at each of 10 step ends, saw {cuda.reset_calls}"
    records = check_steplog(tmp_path / "b.jsonl")
    assert [r["step_peak_allocated"] for r in records] == [s["allocated_bytes.all.peak"] for s in cuda.series["steps"]]
    assert all(r["peak_is_per_step"] for r in records)


def test_every_and_device_info_every(rlmem, tmp_path):
    cuda = FakeCuda(synthetic(12))
    with rlmem.StepMonitor(tmp_path / "m.jsonl", cuda=cuda, every=3, device_info_every=2) as monitor:
        replay(monitor, cuda)
    assert cuda.stats_calls == 4, f"every=3 over 12 steps samples 4 times, saw {cuda.stats_calls}"
    assert cuda.info_calls == 2, f"device_info_every=2 over 4 samples calls mem_get_info twice, saw {cuda.info_calls}"
    assert [r["step"] for r in check_steplog(tmp_path / "m.jsonl")] == [3, 6, 9, 12]


def test_leak_alert_within_three_steps_with_rate_start_and_forecast(rlmem, tmp_path):
    cuda = FakeCuda(synthetic(30, leak_at=15, leak_bytes=47 * MiB, jitter=1))
    with rlmem.StepMonitor(tmp_path / "m.jsonl", cuda=cuda) as monitor:
        raised = replay(monitor, cuda)
    assert kinds(raised) == {17: ["leak"]}, f"expected one leak alert at step 17, saw {kinds(raised)}"
    alert = raised[17][0]
    assert alert.bytes_per_step == 47 * MiB and alert.since_step == 15, alert
    # The allocated peak may grow into 80 GiB less the 700 MiB outside PyTorch, at 47 MiB a step;
    # without reset_peak the peak torch reports is the largest since the process started.
    def forecast(step: int) -> int:
        peak = max(entry["allocated_bytes.all.peak"] for entry in cuda.series["steps"][:step])
        return -(-(80 * GiB - 700 * MiB - peak) // (47 * MiB))

    assert alert.steps_to_limit == forecast(17) == 1607, alert
    assert alert.message == ("leak: allocated memory at step end grows +47.0 MiB/step since step 15 (3 steps, live "
                             "allocations 700 -> 703); now 3.14 GiB allocated, 6.00 GiB reserved of 80.0 GiB; at this "
                             "rate the step peak passes the 80.0 GiB card in about 1,607 steps"), alert.message
    records = check_steplog(tmp_path / "m.jsonl")
    logged = [r for r in records if r["alerts"]]
    assert [r["step"] for r in logged] == [17]
    assert logged[0]["alerts"] == [{"kind": "leak", "rank": 0, "message": alert.message,
                                    "bytes_per_step": 47 * MiB, "since_step": 15, "steps_to_limit": 1607}]
    # Every sample carries the forecast: none before the leak is seen, then from each step's peak.
    forecasts = [r["steps_to_limit"] for r in records]
    assert forecasts[:16] == [None] * 16, forecasts[:16]
    assert forecasts[16:] == [forecast(step) for step in range(17, 31)], forecasts[16:]


def test_leak_is_raised_again_when_its_rate_changes(rlmem):
    series = synthetic(30, leak_at=10, leak_bytes=10 * MiB)
    for step in series["steps"][19:]:  # from step 20 the leak grows 3x faster
        extra = (step["step"] - 19) * 20 * MiB
        for key in ("allocated_bytes.all.current", "active_bytes.all.current", "allocated_bytes.all.peak"):
            step[key] += extra
    cuda = FakeCuda(series)
    raised = replay(rlmem.StepMonitor(cuda=cuda), cuda)
    rates = {step: round(alert.bytes_per_step / MiB, 1) for step, alerts in raised.items() for alert in alerts}
    # The rate is the mean over the growth since its change point (rlmem.leak_check's): 10 MiB/step,
    # then rising; a repeat needs a 25% change: none while the rate held (steps 13-20), then at 21
    # and 24.
    assert rates == {12: 10.0, 21: 13.3, 24: 16.7}, f"saw leak alerts (MiB/step) {rates}"


def test_growth_without_new_allocations_is_a_leak_too(rlmem):
    # history = torch.cat([history, x]): the live count stays flat while the bytes grow.
    cuda = FakeCuda(synthetic(20, leak_at=8, leak_bytes=8 * MiB, leak_count=0))
    raised = replay(rlmem.StepMonitor(cuda=cuda), cuda)
    assert kinds(raised) == {10: ["leak"]}, f"growth from step 8: saw {kinds(raised)}"
    assert raised[10][0].since_step == 8 and raised[10][0].bytes_per_step == 8 * MiB, raised[10][0]


def steplog_as_series(path) -> dict:
    """A StepMonitor log turned back into the memory_stats() series that produced it."""
    steps = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        figures = json.loads(line)
        steps.append({
            "step": figures["step"],
            "allocated_bytes.all.current": figures["allocated"], "reserved_bytes.all.current": figures["reserved"],
            "active_bytes.all.current": figures["active"], "inactive_split_bytes.all.current": figures["inactive_split"],
            "allocated_bytes.all.peak": figures["step_peak_allocated"],
            "reserved_bytes.all.peak": figures["step_peak_reserved"],
            "allocation.all.current": figures["allocations"], "num_alloc_retries": figures["num_alloc_retries"],
            "num_ooms": figures["num_ooms"], "mem_get_info": [figures["device_free"], figures["device_total"]],
        })
    return {"schema": "rlmem.stats_series/1", "description": str(path), "steps": steps}


def test_batches_that_grow_four_steps_in_a_row_are_no_leak(rlmem):
    # Recorded on an H100 (testdata/steplog/h100_leak_loop.jsonl): the loop leaves its last batch
    # alive at each step end and cycles 5 batch sizes, so step-end allocated climbs +32 MiB four
    # steps in a row, then drops; a 48 MiB tensor is kept every step from step 30. With inspect's
    # 4 steady steps the monitor that wrote the log alerted at step 9; the leak starts at 30.
    path = Path(__file__).resolve().parents[2] / "testdata" / "steplog" / "h100_leak_loop.jsonl"
    cuda = FakeCuda(steplog_as_series(path))
    raised = replay(rlmem.StepMonitor(cuda=cuda, reset_peak=True), cuda)
    leak_steps = [step for step, alerts in raised.items() for alert in alerts if alert.kind == "leak"]
    assert leak_steps and 30 <= leak_steps[0] <= 35, f"leak from step 30: expected the first alert in 30..35, saw {leak_steps}"


def test_record_on_leak_names_the_allocation_site(rlmem, tmp_path):
    leak_snapshot = (SNAPSHOTS / "grpo_leak_logits.pickle.zst").read_bytes()
    cuda = FakeCuda(synthetic(25, leak_at=15), snapshot_bytes=leak_snapshot)
    log = tmp_path / "run" / "mem.jsonl"
    with rlmem.StepMonitor(log, cuda=cuda, record_on_leak=3) as monitor:
        raised = replay(monitor, cuda)
    assert kinds(raised) == {17: ["leak"], 20: ["leak"]}, kinds(raised)
    first, named = raised[17][0], raised[20][0]
    snapshots = tmp_path / "run" / "rlmem-snapshots"
    assert first.message.endswith(f"; recording the next 3 steps to name the allocation site (snapshot in {snapshots})")
    assert named.site == "rl/record.py:41 logprobs_of", named
    assert named.snapshot == str(snapshots / "rlmem-leak-step000020.pickle")
    assert named.message == (
        "leak: +47.0 MiB/step since step 15 comes from rl/record.py:41 logprobs_of: in a recording of the next 3 "
        "steps it grew +46.9 MiB/step over 4 of the 4 step ends rlmem inspect found, holding 187.5 MiB at the last "
        f"(rlmem inspect {named.snapshot})"), named.message
    assert Path(named.snapshot).read_bytes() == leak_snapshot
    assert not cuda.memory.enabled, "recording must stop after the window"
    history = [call[1] for call in cuda.memory.calls if call[0] == "record"]
    assert history == ["all", None], history
    logged = {r["step"]: r["alerts"] for r in check_steplog(log) if r["alerts"]}
    assert logged[20][0]["site"] == "rl/record.py:41 logprobs_of" and logged[20][0]["snapshot"] == named.snapshot
    assert monitor.leak_site == "rl/record.py:41 logprobs_of"


def test_record_on_leak_says_so_when_no_site_grew(rlmem, tmp_path):
    cuda = FakeCuda(synthetic(25, leak_at=15), snapshot_bytes=(SNAPSHOTS / "grpo_clean.pickle.zst").read_bytes())
    with rlmem.StepMonitor(cuda=cuda, record_on_leak=2, snapshot_dir=tmp_path) as monitor:
        raised = replay(monitor, cuda)
    assert kinds(raised) == {17: ["leak"], 19: ["leak"]}, kinds(raised)
    alert = raised[19][0]
    assert alert.site is None and alert.snapshot == str(tmp_path / "rlmem-leak-step000019.pickle")
    assert alert.message == (
        "leak: +47.0 MiB/step since step 15, but no allocation site grew at every step end of the 2 recorded steps "
        "(rlmem inspect found 3 step ends by optimizer zero_grad annotations): the growth may come from memory "
        f"allocated before the recording, or stopped; snapshot: {alert.snapshot}"), alert.message


def fragmenting_series():
    series = synthetic(20, base=3 * GiB, working=2 * GiB, reserved=int(5.5 * GiB))
    for step in series["steps"]:
        grown = max(0, step["step"] - 7) * 256 * MiB
        reserved = int(5.5 * GiB) + grown
        step["reserved_bytes.all.current"] = step["reserved_bytes.all.peak"] = reserved
        step["inactive_split_bytes.all.current"] = 300 * MiB + grown // 2
        step["mem_get_info"] = [80 * GiB - reserved - 700 * MiB, 80 * GiB]
    return series


def test_fragmentation_thresholds_and_repeats(rlmem):
    cuda = FakeCuda(fragmenting_series())
    raised = replay(rlmem.StepMonitor(cuda=cuda), cuda)
    assert kinds(raised) == {10: ["fragmentation"], 12: ["fragmentation"], 14: ["fragmentation"],
                             17: ["fragmentation"], 20: ["fragmentation"]}, kinds(raised)
    assert raised[10][0].message == (
        "fragmentation: 1.25 GiB reserved beyond the largest allocated peak (5.00 GiB), 20.0% of 6.25 GiB reserved, "
        "+768.0 MiB over the last 5 steps; 684.0 MiB sits in free pieces of split blocks; set "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True so free space joins into one block"), raised[10][0].message


def test_fragmentation_thresholds_are_parameters(rlmem):
    cuda = FakeCuda(fragmenting_series())
    raised = replay(rlmem.StepMonitor(cuda=cuda, fragmentation_bytes=4 * GiB), cuda)
    assert raised == {}, f"no step reaches 4 GiB beyond the peak: {kinds(raised)}"
    cuda = FakeCuda(fragmenting_series())
    raised = replay(rlmem.StepMonitor(cuda=cuda, fragmentation_fraction=0.1), cuda)
    assert min(raised) == 8, f"10% of reserved is reached at step 8: {kinds(raised)}"


def test_fragmentation_advice_knows_expandable_segments(rlmem, monkeypatch):
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    cuda = FakeCuda(fragmenting_series())
    raised = replay(rlmem.StepMonitor(cuda=cuda), cuda)
    assert raised[10][0].message.endswith("expandable segments are on already: look for tensors whose sizes change "
                                          "every step"), raised[10][0].message


def test_alloc_retries(rlmem):
    series = synthetic(14)
    for step in series["steps"]:
        step["num_alloc_retries"] = max(0, step["step"] - 5)
    cuda = FakeCuda(series)
    raised = replay(rlmem.StepMonitor(cuda=cuda), cuda)
    assert sorted(raised) == [6, 7, 8, 9, 10, 12, 14], f"retries 1,2,3,4,5 then +25% steps: {kinds(raised)}"
    assert raised[6][0].message == (
        "alloc_retries: cudaMalloc failed 1 time since step 5 (1 in all) and the allocator emptied its cache to retry: "
        "the job runs at the memory limit (6.00 GiB reserved, 73.3 GiB free of 80.0 GiB); each retry synchronizes "
        "and slows the step, and the next larger request may OOM"), raised[6][0].message


def test_headroom_once_while_it_holds(rlmem):
    series = synthetic(12, reserved=73 * GiB)
    cuda = FakeCuda(series)
    raised = replay(rlmem.StepMonitor(cuda=cuda), cuda)
    assert kinds(raised) == {1: ["headroom"]}, kinds(raised)
    assert raised[1][0].message == (
        "headroom: at the reserved peak (73.0 GiB, peak allocated 5.00 GiB) plus 700.0 MiB outside PyTorch's cache, "
        "6.32 GiB (7.9%) of the 80.0 GiB device is left, under the 10.0% margin: a longer sequence or a larger batch "
        "may OOM"), raised[1][0].message
    cuda = FakeCuda(series)
    assert replay(rlmem.StepMonitor(cuda=cuda, headroom=0.05), cuda) == {}, "7.9% left is above a 5% margin"


def test_oom_counter(rlmem):
    series = synthetic(12)
    for step in series["steps"]:
        step["num_ooms"] = (step["step"] >= 4) + (step["step"] >= 9)
    cuda = FakeCuda(series)
    raised = replay(rlmem.StepMonitor(cuda=cuda), cuda)
    assert kinds(raised) == {4: ["oom"], 9: ["oom"]}, kinds(raised)
    assert raised[9][0].message.startswith("oom: the allocator raised 1 out-of-memory error since step 8 (2 in all;")


def test_alerts_reach_logging_warnings_and_on_alert(rlmem, caplog):
    seen = []
    cuda = FakeCuda(synthetic(20, leak_at=10))
    monitor = rlmem.StepMonitor(cuda=cuda, on_alert=seen.append, use_warnings=True)
    with caplog.at_level(logging.WARNING, logger="rlmem"):
        with pytest.warns(rlmem.AlertWarning, match="leak: allocated memory at step end grows"):
            replay(monitor, cuda)
    assert [a.kind for a in seen] == ["leak"] and seen == monitor.alerts
    assert [r.getMessage() for r in caplog.records if r.name == "rlmem"] == [seen[0].message]


def test_monitored_loop(rlmem, tmp_path):
    cuda = FakeCuda(synthetic(6))
    log = tmp_path / "loop.jsonl"
    positions = []
    samples_when_fetched = []

    def loader():
        for index in range(6):
            samples_when_fetched.append(cuda.stats_calls)  # the step end comes before the next fetch
            yield index

    for index in rlmem.monitored(loader(), log=log, cuda=cuda):
        cuda.goto(index)  # the "training step" of this batch
        positions.append(index)
    assert positions == list(range(6))
    assert samples_when_fetched == [0, 1, 2, 3, 4, 5] and cuda.stats_calls == 6
    assert [r["step"] for r in check_steplog(log)] == [1, 2, 3, 4, 5, 6]
    assert [r["allocated"] for r in check_steplog(log)] == [s["allocated_bytes.all.current"] for s in cuda.series["steps"]]


def test_no_cuda_does_nothing_and_says_so(rlmem, tmp_path, caplog):
    cuda = FakeCuda(synthetic(3), available=False)
    monitor = rlmem.StepMonitor(tmp_path / "m.jsonl", cuda=cuda)
    with caplog.at_level(logging.WARNING, logger="rlmem"):
        assert monitor.step() == [] and monitor.step() == []
    assert [r.getMessage() for r in caplog.records] == [
        "rlmem.StepMonitor: no CUDA device (torch.cuda.is_available() is False); the monitor does nothing"]
    assert not (tmp_path / "m.jsonl").exists() and cuda.stats_calls == 0


def test_log_is_appended_and_flushed_per_line(rlmem, tmp_path):
    log = tmp_path / "m.jsonl"
    log.write_text('{"earlier": true}\n', encoding="utf-8")
    cuda = FakeCuda(synthetic(3))
    monitor = rlmem.StepMonitor(log, cuda=cuda)
    cuda.goto(0)
    monitor.step()
    lines = log.read_text(encoding="utf-8").splitlines()  # before close: already on disk
    assert len(lines) == 2 and json.loads(lines[1])["step"] == 1
    monitor.close()


def test_bad_parameters(rlmem):
    for bad in ({"every": 0}, {"headroom": 1.5}, {"leak_window": 2}, {"gather_every": -1}, {"record_on_leak": -1},
                {"fragmentation_fraction": -0.1}, {"repeat_change": True}):
        with pytest.raises(ValueError):
            rlmem.StepMonitor(**bad)
    with pytest.raises(ValueError, match="record_on_leak needs a snapshot_dir"):
        rlmem.StepMonitor(record_on_leak=3)


# -- series recorded on an H100 by tools/monitor/grpo_loop.py and oom_run.py --stats-out (testdata/monitor/)

RECORDED = sorted(MONITOR_SERIES.glob("*.json")) if MONITOR_SERIES.is_dir() else []


@pytest.mark.skipif(not RECORDED, reason="no recorded series in testdata/monitor/")
@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_recorded_series(rlmem, path, tmp_path):
    series = load_series(path)
    cuda = FakeCuda(series)
    log = tmp_path / "m.jsonl"
    with rlmem.StepMonitor(log, cuda=cuda, reset_peak=bool(series.get("peak_is_per_step"))) as monitor:
        raised = replay(monitor, cuda)
    check_steplog(log)
    expected = series.get("expected_alerts")
    if expected is not None:
        kinds_seen = sorted({alert.kind for alerts in raised.values() for alert in alerts})
        assert kinds_seen == sorted(expected), f"{path.name}: expected alerts {expected}, saw {kinds(raised)}"
    leak_at = series.get("leak_at")
    if leak_at:
        leak_steps = [s for s, alerts in raised.items() for a in alerts if a.kind == "leak"]
        assert leak_steps and leak_at <= leak_steps[0] <= leak_at + 5, \
            f"{path.name}: leak from step {leak_at}: expected an alert within 5 steps, saw leak alerts at {leak_steps}"


def test_an_unwritable_log_never_stops_training(rlmem, tmp_path, caplog):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the log's directory should be", encoding="utf-8")
    cuda = FakeCuda(synthetic(12, leak_at=6))
    monitor = rlmem.StepMonitor(blocker / "mem.jsonl", cuda=cuda)
    with caplog.at_level(logging.WARNING, logger="rlmem"):
        raised = replay(monitor, cuda)
    assert kinds(raised) == {8: ["leak"]}, "alerts go on without the log"
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].startswith(f"rlmem.StepMonitor: cannot write the log {blocker / 'mem.jsonl'} ("), messages
    assert sum("cannot write the log" in m for m in messages) == 1, "warned once"


def test_gather_vector_size_is_documented(rlmem):
    from rlmem import monitor

    assert monitor.GATHER_BYTES == 344
    assert "344 bytes" in rlmem.StepMonitor.__doc__
    docs = (Path(__file__).resolve().parents[2] / "docs" / "monitor.md").read_text(encoding="utf-8")
    assert "344 bytes per rank" in docs


class _Trainer:
    """A user's trainer that keeps a metric with every step by mistake."""

    def __init__(self):
        self.metrics = {"entropy": []}


TRAINER = _Trainer()


def test_record_on_leak_names_the_python_object_that_holds_the_leak(rlmem, tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    # CPU tensors stand in for the leaked CUDA tensors: their storages' addresses are what the
    # recorded snapshot lists as the leak's live blocks.
    TRAINER.metrics["entropy"] = [torch.zeros(4096) for _ in range(12)]
    blocks = [{"address": t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr(),
               "size": 16384} for t in TRAINER.metrics["entropy"]]
    from rlmem._monitor import leak_recording  # the module that inspects the recorded snapshot

    real_inspect = leak_recording.inspect

    def inspect_with_these_blocks(path, **options):
        report = real_inspect(path, **options)
        report["leaks"][0]["live_blocks"] = blocks
        return report

    monkeypatch.setattr(leak_recording, "inspect", inspect_with_these_blocks)
    cuda = FakeCuda(synthetic(25, leak_at=15), snapshot_bytes=(SNAPSHOTS / "grpo_leak_logits.pickle.zst").read_bytes())
    try:
        with rlmem.StepMonitor(tmp_path / "mem.jsonl", cuda=cuda, record_on_leak=3) as monitor:
            raised = replay(monitor, cuda)
    finally:
        TRAINER.metrics["entropy"] = []
    named = raised[20][0]
    assert named.holder is not None and named.holder.startswith(
        "kept by `test_monitor.TRAINER.metrics['entropy']`, a list of 12 tensors (192.0 KiB)"), named.holder
    assert f"comes from rl/record.py:41 logprobs_of; {named.holder}: in a recording" in named.message, named.message
    logged = {r["step"]: r["alerts"] for r in check_steplog(tmp_path / "mem.jsonl") if r["alerts"]}
    assert logged[20][0]["holder"] == named.holder


def test_holder_search_can_be_turned_off_and_is_bounded(rlmem):
    with pytest.raises(ValueError, match="holder_budget"):
        rlmem.StepMonitor(holder_budget=-1)
    with pytest.raises(TypeError, match="holder_roots"):
        rlmem.StepMonitor(holder_roots=["model"])
    monitor = rlmem.StepMonitor(holder_budget=0)
    assert monitor._name_holder({"live_blocks": [{"address": 4096, "size": 4096}]}) is None


def test_a_leak_with_a_flat_count_is_recorded_long_enough_for_inspect_to_name_it(rlmem, tmp_path):
    # One tensor re-made larger every step keeps the live count flat; inspect names such a site
    # after four growing step ends, so the monitor records 5 steps however few were asked for.
    cuda = FakeCuda(synthetic(25, leak_at=8, leak_bytes=8 * MiB, leak_count=0),
                    snapshot_bytes=(SNAPSHOTS / "grpo_leak_logits.pickle.zst").read_bytes())
    with rlmem.StepMonitor(cuda=cuda, record_on_leak=3, snapshot_dir=tmp_path) as monitor:
        raised = replay(monitor, cuda)
    assert kinds(raised) == {10: ["leak"], 15: ["leak"]}, kinds(raised)
    assert "; recording the next 5 steps to name the allocation site" in raised[10][0].message, raised[10][0].message


def test_a_memory_fraction_is_the_limit_of_the_forecast_and_the_headroom(rlmem, tmp_path):
    # torch.cuda.set_per_process_memory_fraction(0.1): 8 GiB of the 80 GiB card. The leak of
    # 47 MiB a step fills what the allocated peak leaves of it in about 50 steps, under
    # headroom_steps (500): the headroom alert says so, against the limit, not the card.
    cuda = FakeCuda(synthetic(24, leak_at=12))
    cuda.get_per_process_memory_fraction = lambda device=None: 0.1
    with rlmem.StepMonitor(tmp_path / "m.jsonl", cuda=cuda) as monitor:
        raised = replay(monitor, cuda)
    records = check_steplog(tmp_path / "m.jsonl")
    assert all(r["limit"] == 8 * GiB for r in records), records[0]
    leak = raised[14][0]
    peak = max(entry["allocated_bytes.all.peak"] for entry in cuda.series["steps"][:14])
    assert leak.steps_to_limit == -(-(8 * GiB - peak) // (47 * MiB)), leak
    assert "at this rate the step peak passes the 8.00 GiB limit in about" in leak.message, leak.message
    headroom = [a for alerts in raised.values() for a in alerts if a.kind == "headroom"]
    assert headroom and "of the 8.00 GiB limit (a memory fraction of the 80.0 GiB device)" in headroom[0].message, headroom

    explicit = FakeCuda(synthetic(6))
    with rlmem.StepMonitor(tmp_path / "n.jsonl", cuda=explicit, limit=40 * GiB) as monitor:
        replay(monitor, explicit)
    assert {r["limit"] for r in check_steplog(tmp_path / "n.jsonl")} == {40 * GiB}
