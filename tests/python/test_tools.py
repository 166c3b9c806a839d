"""The GPU scripts of tools/monitor/: they compile, answer --help without a GPU, torch or
transformers at import, and the series they record is the format the tests' stand-in replays."""

from __future__ import annotations

import py_compile
import subprocess
import sys

import pytest

from conftest import ROOT
from fakes import FakeCuda, load_series

TOOLS = ROOT / "tools" / "monitor"
SCRIPTS = ["grpo_loop.py", "oom_run.py", "grpo_common.py", "leak_matrix.py", "leak_rule_table.py", "holder_check.py"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_compiles(name, tmp_path):
    py_compile.compile(str(TOOLS / name), cfile=str(tmp_path / "out.pyc"), doraise=True)


@pytest.mark.parametrize("name", ["grpo_loop.py", "oom_run.py"])
def test_help(name):
    done = subprocess.run([sys.executable, str(TOOLS / name), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--out" in done.stdout and "--stats-out" in done.stdout


@pytest.mark.parametrize("name", ["leak_matrix.py", "holder_check.py"])
def test_help_of_the_leak_tools(name):
    done = subprocess.run([sys.executable, str(TOOLS / name), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--out" in done.stdout


def test_leak_rule_table_replays_the_matrix(rlmem):
    """docs/monitor.md's matrix table, from the recorded runs: every leak alerted, none missed."""
    done = subprocess.run([sys.executable, str(TOOLS / "leak_rule_table.py"), "--markdown"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 43, f"43 recorded runs, saw {len(rows)}"
    assert not any("MISSED" in row for row in rows), done.stdout


def test_stats_series_is_what_the_fake_replays(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(TOOLS))
    import grpo_common

    figures = {key: 1000 + index for index, key in enumerate(grpo_common.SERIES_KEYS)}
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda device=None: dict(figures, **{"other.key": 5}))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (70, 80))
    series = grpo_common.StatsSeries("test", False, 3, ["leak"])
    series.record(1)
    series.record(2)
    series.write(tmp_path / "s.json")
    loaded = load_series(tmp_path / "s.json")
    assert loaded["leak_at"] == 3 and loaded["expected_alerts"] == ["leak"] and loaded["peak_is_per_step"] is False
    assert [step["step"] for step in loaded["steps"]] == [1, 2]
    cuda = FakeCuda(loaded)
    cuda.goto(1)
    assert cuda.memory_stats() == figures and cuda.mem_get_info() == (70, 80)


# -- the scripts end to end on the CPU, with torch.cuda's memory functions and the model stood in for
#    (the real runs need a GPU and transformers; this catches mistakes in the harness before them)

MiB = 1024**2


class TinyModel:
    """What the scripts use of a transformers causal LM: .config.vocab_size, __call__().logits,
    .generate(...).sequences, .parameters(), .requires_grad_()."""

    def __init__(self, torch, vocab=64, oom_from_batch=None):
        import types

        self.torch = torch
        self.embedding = torch.nn.Embedding(vocab, 8)
        self.head = torch.nn.Linear(8, vocab)
        self.config = types.SimpleNamespace(vocab_size=vocab)
        self.oom_from_batch = oom_from_batch

    def __call__(self, sequences):
        import types

        if self.oom_from_batch is not None and sequences.shape[0] >= self.oom_from_batch:
            raise self.torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 468.12 MiB (stand-in)")
        return types.SimpleNamespace(logits=self.head(self.embedding(sequences)))

    def generate(self, prompt, attention_mask=None, do_sample=True, max_new_tokens=1, min_new_tokens=1,
                 return_dict_in_generate=False):
        import types

        new = self.torch.randint(1, self.config.vocab_size, (prompt.shape[0], max_new_tokens))
        return types.SimpleNamespace(sequences=self.torch.cat([prompt, new], 1))

    def parameters(self):
        return list(self.embedding.parameters()) + list(self.head.parameters())

    def requires_grad_(self, flag):
        for parameter in self.parameters():
            parameter.requires_grad_(flag)
        return self


@pytest.fixture
def stand_in_gpu(monkeypatch):
    """torch.cuda's memory API on the CPU: allocated grows by 9 MiB (one allocation) per kept
    tensor of the injected leak; snapshots dumped are real bundled ones."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(TOOLS))
    import grpo_common

    from conftest import SNAPSHOTS

    state = {"kept": 0, "history": False, "snapshot": SNAPSHOTS / "grpo_leak_logits.pickle.zst"}
    original = grpo_common.logprobs_of

    def counting_logprobs(model, sequences, n_prompt, kept=None):
        if kept is not None:
            state["kept"] += 1
        return original(model, sequences, n_prompt, kept)

    def memory_stats(device=None):
        allocated = 1024 * MiB + state["kept"] * 9 * MiB
        return {"allocated_bytes.all.current": allocated, "reserved_bytes.all.current": 4096 * MiB,
                "active_bytes.all.current": allocated, "inactive_split_bytes.all.current": 0,
                "allocated_bytes.all.peak": 3000 * MiB, "reserved_bytes.all.peak": 4096 * MiB,
                "allocation.all.current": 100 + state["kept"], "num_alloc_retries": 0, "num_ooms": 0}

    def record_memory_history(enabled="all", context="all", stacks="all", max_entries=1, clear_history=False):
        state["history"] = enabled is not None

    def dump_snapshot(filename):
        with open(filename, "wb") as out:
            out.write(state["snapshot"].read_bytes())

    monkeypatch.setattr(grpo_common, "logprobs_of", counting_logprobs)
    monkeypatch.setattr(grpo_common, "make_model", lambda name, device, seed=0: TinyModel(torch))
    for name, value in {"is_available": lambda: True, "memory_stats": memory_stats,
                        "mem_get_info": lambda device=None: (70 * 1024 * MiB, 80 * 1024 * MiB),
                        "reset_peak_memory_stats": lambda device=None: None, "current_device": lambda: 0,
                        "get_device_name": lambda device=None: "stand-in", "empty_cache": lambda: None,
                        "set_per_process_memory_fraction": lambda fraction, device=None: None}.items():
        monkeypatch.setattr(torch.cuda, name, value)
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", record_memory_history)
    monkeypatch.setattr(torch.cuda.memory, "_dump_snapshot", dump_snapshot, raising=False)
    return state


def test_grpo_loop_end_to_end_on_a_stand_in(stand_in_gpu, tmp_path, rlmem):
    import json

    import grpo_loop

    out = tmp_path / "leak"
    code = grpo_loop.main(["--out", str(out), "--device", "cpu", "--model", "tiny", "--steps", "12", "--leak-at", "4",
                           "--timing-steps", "2", "--stats-out", str(tmp_path / "series.json")])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    # A leak from step 4 has only 3 quiet step ends before it: the rule waits for a fourth rise.
    assert summary["leak_alert_step"] == 7 and summary["leak_alert_delay_steps"] == 3, summary["run"]["alerts"]
    assert summary["leak_site"] == "rl/record.py:41 logprobs_of" and summary["leak_site_step"] == 10
    assert summary["false_alerts"] == []
    assert len(summary["run"]["step_seconds"]) == 12 and len(summary["run"]["monitor_step_seconds"]) == 12
    o = summary["overhead"]
    assert len(o["monitor"]["steps_with"]) == 2 and o["monitor"]["mem_get_info_call"]["n"] == 200
    assert o["record"]["steps_found"] == 4 and o["record"]["steps_method"] == "optimizer zero_grad annotations"
    assert set(summary["overhead_summary"]) >= {"record_dump_s", "memory_stats_call_median_s"}
    series = load_series(tmp_path / "series.json")
    assert series["leak_at"] == 4 and series["expected_alerts"] == ["leak"] and len(series["steps"]) == 12
    assert not stand_in_gpu["history"], "recording is off at the end"


def test_oom_run_end_to_end_on_a_stand_in(stand_in_gpu, tmp_path, monkeypatch, rlmem):
    import json

    import grpo_common
    import oom_run
    import torch

    from conftest import SNAPSHOTS

    stand_in_gpu["snapshot"] = SNAPSHOTS / "frag_default_oom.pickle.zst"
    monkeypatch.setattr(grpo_common, "make_model", lambda name, device, seed=0: TinyModel(torch, oom_from_batch=6))
    out = tmp_path / "oom"
    code = oom_run.main(["--out", str(out), "--device", "cpu", "--model", "tiny", "--limit-gib", "2.613",
                         "--stats-out", str(tmp_path / "oom.json")])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps_completed"] == 2 and summary["batch_at_oom"] == 6, summary
    assert summary["snapshot"] == str(out / "snapshots" / "rlmem-oom.pickle")
    assert summary["verdict_line"].startswith("rlmem: OOM: FRAGMENTATION (judged under the 2.61 GiB limit of limit= given to "
                                              "record()), requested 468.1 MiB"), summary["verdict_line"]
    assert summary["inspect_oom"][0]["limit_given"] is True
    assert len(load_series(tmp_path / "oom.json")["steps"]) == 2
