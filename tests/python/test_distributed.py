"""StepMonitor in a torch.distributed job: 3 processes on this machine over a real gloo process
group, each replaying its own memory_stats() series; rank 1 leaks, rank 2 peaks higher. Rank 0's
log must carry every rank's figures and name rank 1's leak (with the allocation site rank 1's own
recording found) and the imbalance towards rank 2."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from conftest import PYTHON_DIR, SNAPSHOTS
from fakes import GiB, MiB, FakeCuda, synthetic
from schema_check import check_steplog

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
WORLD = 3
STEPS = 20


def _worker(rank: int, directory: str) -> None:
    sys.path[:0] = [str(PYTHON_DIR), str(Path(__file__).resolve().parent)]
    import rlmem

    dist.init_process_group("gloo", init_method=f"file://{directory}/rendezvous", rank=rank, world_size=WORLD)
    try:
        if rank == 1:
            series = synthetic(STEPS, leak_at=8, leak_bytes=47 * MiB, jitter=1, seed=rank)
        elif rank == 2:
            series = synthetic(STEPS, working=6 * GiB, jitter=0, seed=rank)
        else:
            series = synthetic(STEPS, jitter=0, seed=rank)
        cuda = FakeCuda(series, device=rank, snapshot_bytes=(SNAPSHOTS / "grpo_leak_logits.pickle.zst").read_bytes())
        seen = []
        monitor = rlmem.StepMonitor(f"{directory}/mem-{{rank}}.jsonl", cuda=cuda, gather_every=5, record_on_leak=2,
                                    snapshot_dir=f"{directory}/snapshots", on_alert=seen.append)
        for index in range(STEPS):
            cuda.goto(index)
            monitor.step()
        monitor.close()
        with open(f"{directory}/alerts-{rank}.json", "w", encoding="utf-8") as out:
            json.dump([[a.step, a.kind, a.rank, a.message, a.site] for a in seen], out)
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    directory = tmp_path_factory.mktemp("dist")
    import torch.multiprocessing as mp

    mp.spawn(_worker, args=(str(directory),), nprocs=WORLD, join=True)
    return directory


def test_rank0_log_carries_every_rank(job):
    records = check_steplog(job / "mem-0.jsonl")
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))
    gathered = [r for r in records if "ranks" in r]
    assert [r["step"] for r in gathered] == [5, 10, 15, 20], "gather_every=5"
    host = socket.gethostname()
    for record in gathered:
        assert [row["rank"] for row in record["ranks"]] == [0, 1, 2]
        assert [row["device"] for row in record["ranks"]] == [0, 1, 2]
        assert all(row["host"] == host for row in record["ranks"])
        assert record["world_size"] == 3 and record["rank"] == 0
    at_20 = gathered[-1]["ranks"]
    assert at_20[1]["allocated"] == 3 * GiB + 13 * 47 * MiB, f"rank 1 leaked 13 x 47 MiB by step 20: {at_20[1]}"
    assert at_20[2]["step_peak_allocated"] == 9 * GiB and at_20[0]["allocated"] == 3 * GiB


def test_rank0_names_the_leaking_rank_and_its_site(job):
    alerts = [(r["step"], a) for r in check_steplog(job / "mem-0.jsonl") for a in r["alerts"]]
    leaks = [(step, a) for step, a in alerts if a["kind"] == "leak"]
    host = socket.gethostname()
    assert [(step, a["rank"]) for step, a in leaks] == [(10, 1), (15, 1)], f"saw {leaks}"
    first, named = leaks[0][1], leaks[1][1]
    assert first["message"].startswith(f"rank 1 ({host}, cuda:1): leak: allocated memory at step end grows "
                                       f"+47.0 MiB/step since step 8"), first["message"]
    assert first["since_step"] == 8 and first["bytes_per_step"] == 47 * MiB
    assert named["site"] == "rl/record.py:41 logprobs_of", named
    assert named["message"].endswith("; the growing allocation site: rl/record.py:41 logprobs_of")
    assert not any(a["rank"] == 0 and a["kind"] == "leak" for _, a in alerts), "rank 0 does not leak"


def test_rank0_raises_the_imbalance(job):
    alerts = [(r["step"], a) for r in check_steplog(job / "mem-0.jsonl") for a in r["alerts"]]
    imbalance = [(step, a) for step, a in alerts if a["kind"] == "imbalance"]
    assert [step for step, _ in imbalance] == [5], f"one imbalance alert at the first gather: {imbalance}"
    message = imbalance[0][1]["message"]
    assert imbalance[0][1]["rank"] == 2
    assert message.startswith("imbalance: peak allocated ranges from 5.00 GiB (rank 0) to 9.00 GiB (rank 2), "
                              "4.00 GiB or 44.4% apart across 3 ranks: rank 2 sets the memory"), message


def test_each_rank_logs_its_own_alerts(job):
    rank1 = check_steplog(job / "mem-1.jsonl")
    assert all("ranks" not in r for r in rank1), "only rank 0 carries the gathered figures"
    own = [(r["step"], a["kind"], a.get("site")) for r in rank1 for a in r["alerts"]]
    assert own == [(10, "leak", None), (12, "leak", "rl/record.py:41 logprobs_of")], own
    assert (job / "snapshots" / "rlmem-rank1-leak-step000012.pickle").is_file()
    rank2 = check_steplog(job / "mem-2.jsonl")
    assert [a for r in rank2 for a in r["alerts"]] == [], "rank 2 alone sees no imbalance"
    on_alert = json.loads((job / "alerts-1.json").read_text())
    assert [(step, kind) for step, kind, *_ in on_alert] == [(10, "leak"), (12, "leak")]
