"""OOM verdicts on runs recorded under memory fractions rlmem was not built on (testdata/oom_capped:
tools/oom/record_capped_runs.py on an H100, torch 2.11). Each native run died at an OOM inside
rlmem.record(), which printed its verdict in the job; the same workload ran under expandable
segments at the same cap, which is what a FRAGMENTATION verdict tells the user to try."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "testdata" / "oom_capped"


def runs() -> list[dict]:
    rows = json.loads((DATA / "capped.json").read_text())["rows"]
    expandable = {(r["factor"], r["order"]): r["completed"] for r in rows if r["allocator"] == "expandable"}
    native = [r for r in rows if r["allocator"] == "native" and r.get("snapshot")]
    for row in native:
        row["expandable_completed"] = expandable[(row["factor"], row["order"])]
        row["path"] = DATA / (row["snapshot"] + ".zst")
    return native


RUNS = runs()


def test_the_corpus_is_whole():
    assert len(RUNS) == 16, f"expected 16 native runs with snapshots, found {len(RUNS)}"
    assert all(run["path"].is_file() for run in RUNS)


@pytest.mark.parametrize("run", RUNS, ids=lambda run: run["snapshot"])
def test_the_range_holds_the_real_cap_and_the_verdict_there_is_the_jobs(rlmem, run):
    report = rlmem.inspect(run["path"])
    oom = report["oom"][-1]
    limit = report["oom_limit"]
    cap = run["torch_allowed_bytes"]
    assert limit["proven_low_bytes"] <= cap <= limit["proven_high_bytes"], (
        f"the real cap {cap} outside the range the recording shows, {limit['proven_low_bytes']} to {limit['proven_high_bytes']}")
    at_cap = rlmem.inspect(run["path"], limit=cap)["oom"][-1]
    # The job read the same limit (the memory fraction) and printed the same verdict.
    assert run["verdict_line"].startswith(f"rlmem: OOM: {at_cap['verdict'].upper()} (judged under the "), run["verdict_line"]
    assert "set_per_process_memory_fraction(" in run["verdict_line"], run["verdict_line"]
    # Over the range: a verdict that depends on the limit agrees with the verdict at the real cap.
    if oom["verdict"] == "depends_on_limit":
        expected = "fragmentation" if cap >= oom["fragmentation_from_bytes"] else "capacity"
        assert at_cap["verdict"] == expected, (cap, oom["fragmentation_from_bytes"], at_cap["verdict"])
    else:
        assert at_cap["verdict"] == oom["verdict"], (oom["verdict"], at_cap["verdict"])


@pytest.mark.parametrize("run", [r for r in RUNS if r["order"] == 0], ids=lambda run: run["snapshot"])
def test_where_expandable_segments_completes_the_verdict_says_fragmentation(rlmem, run):
    """Order 0 makes its largest request while the most is live: expandable segments completes the
    run from 1.02x its demand and fails below. The verdict at the real cap must say the same, and
    so must the verdict stated offline over the range, at every cap of the matrix inside it."""
    at_cap = rlmem.inspect(run["path"], limit=run["torch_allowed_bytes"])["oom"][-1]
    expected = "fragmentation" if run["expandable_completed"] else "capacity"
    assert at_cap["verdict"] == expected, f"cap x{run['factor']}: expandable segments completed={run['expandable_completed']}, verdict {at_cap['verdict']}"
    report = rlmem.inspect(run["path"])
    offline, limit = report["oom"][-1], report["oom_limit"]
    inside = [r for r in RUNS if r["order"] == 0 and limit["proven_low_bytes"] <= r["torch_allowed_bytes"] <= limit["proven_high_bytes"]]
    assert run in inside
    for other in inside:
        part = next(p for p in offline["verdict_by_limit"] if p["from_bytes"] <= other["torch_allowed_bytes"] <= p["to_bytes"])
        assert (part["verdict"] == "fragmentation") == other["expandable_completed"], (
            f"offline verdict at {other['torch_allowed_bytes']} (x{other['factor']}): {part['verdict']}; expandable segments "
            f"completed there: {other['expandable_completed']}")
