"""tools/runtime/fsdp2_pause.py --compare over the records of its run on two H200s (issue 15,
testdata/runtime/fsdp2_pause_h200x2): what it reports, and that it fails a run whose losses,
parameters or collectives differ."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from conftest import ROOT

SCRIPT = ROOT / "tools" / "runtime" / "fsdp2_pause.py"
RECORDED = ROOT / "testdata" / "runtime" / "fsdp2_pause_h200x2"


def compare(folder):
    return subprocess.run([sys.executable, str(SCRIPT), str(folder), "--compare"], capture_output=True, text=True,
                          timeout=60)


def test_the_two_gpu_run_compares_equal_and_reports_the_memory_returned():
    done = compare(RECORDED)
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in (0, 1):
        assert f"rank {rank}: NVML used memory fell by 2.60 GiB (least of 4)" in done.stdout
        assert f"rank {rank}: reserved_bytes.all.current fell by 2.60 GiB (least of 4)" in done.stdout
        assert (f"rank {rank}: losses and parameters identical to the run without pauses: True; collectives right: True; "
                "rollouts right: True; returned while paused: 2.60 GiB (least of 4)") in done.stdout


def test_a_changed_loss_or_a_wrong_collective_fails_the_comparison(tmp_path):
    for change in ("loss", "collective"):
        folder = tmp_path / change
        shutil.copytree(RECORDED, folder)
        path = folder / "pause_rank1.json"
        record = json.loads(path.read_text())
        if change == "loss":
            record["losses"][2] = float.hex(float.fromhex(record["losses"][2]) + 2 ** -20)
        else:
            record["collectives"][3]["after_resume"]["all_gather_ok"] = False
        path.write_text(json.dumps(record))
        done = compare(folder)
        assert done.returncode == 1, f"a changed {change} should fail: {done.stdout}"
        assert "rank 0: losses and parameters identical to the run without pauses: True" in done.stdout
        assert "rank 1: losses and parameters identical to the run without pauses: " + (
            "False" if change == "loss" else "True; collectives right: False") in done.stdout


def test_an_empty_folder_is_one_clear_line_and_exit_2(tmp_path):
    done = compare(tmp_path)
    assert done.returncode == 2
    assert "run the two torchrun commands first" in done.stderr
