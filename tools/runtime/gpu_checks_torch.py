#!/usr/bin/env python3
"""GPU checks of torch's own statistics under rlmem.runtime.install() and of the torch_memory_saver
stand-in (rlmem.compat.torch_memory_saver); docs/runtime-compat.md.

    python3 tools/runtime/gpu_checks_torch.py OUT_DIR [--only torch_stats,tms_compat,tms_graph,graph_empty_cache]

Each check runs in a process of its own (install() is once per process), writes OUT_DIR/NAME.json
(partial figures first where a step could bring the process down) and returns its figures:

- torch_stats: a transformers Trainer (tiny Qwen2, random weights and tokens, logging_steps=1,
  the Trainer's own memory metrics on) under install(), with a callback that calls
  torch.cuda.memory_allocated / max_memory_allocated / memory_reserved / max_memory_reserved /
  memory_stats / reset_peak_memory_stats every step: nothing raises, every figure equals
  rlmem.runtime.statistics(), and memory_stats() has the keys of torch's own allocator (read in
  a process without rlmem).
- tms_compat: SGLang's sequence through `import torch_memory_saver` aliased to the stand-in:
  a GEMM before any region, weights under region("weights", enable_cpu_backup=True), the KV cache
  under region("kv_cache"), release in SGLang's order (the driver's free memory rises by the tags'
  bytes), resume in verl's order (weights bit-exact, KV cache zero), pause() / partial resume(),
  disable().
- tms_graph: cuda_graph(...) under the stand-in: the capture, replays, graphs sharing a tag, the
  refused pause, and (last) what a pause and resume of the graph's tag does to its next replay.
- graph_empty_cache: a plain torch.cuda.graph under install(), then rlmem.runtime.empty_cache():
  does the next replay survive? (a finding about the runtime, not a pass/fail of this work)

Needs torch, transformers (torch_stats) and librlmem (RLMEM_LIBRARY or the checkout's
build/librlmem.so). Exit status 0 when every check ran and is ok.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "python"))
MiB = 1 << 20


def write(out_dir, name: str, result: dict) -> dict:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=2, sort_keys=True, default=str) + "\n")
    return result


def tag_figures(rt) -> dict:
    return {tag["name"]: {"paused": tag["paused"], "allocated": tag["allocated_bytes"]["current"],
                          "mapped": tag["mapped_bytes"]["current"], "host_backup": tag["host_backup_bytes"]}
            for tag in rt.statistics()["tags"]}


# -- torch_stats ------------------------------------------------------------------------------------

NATIVE_KEYS = """
import json, torch
x = torch.ones(1 << 20, device="cuda")
print(json.dumps({"nested": sorted(torch._C._cuda_memoryStats(0)), "flat": sorted(torch.cuda.memory_stats())}))
"""


def native_stat_keys() -> dict:
    """The keys of torch's own allocator's statistics, from a process without rlmem."""
    done = subprocess.run([sys.executable, "-c", NATIVE_KEYS], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return {"error": done.stderr[-2000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def gpu_check_torch_stats(out_dir) -> dict:
    import dataclasses
    import tempfile
    import warnings

    import torch
    from torch.cuda import max_memory_allocated as max_allocated_imported_before_install

    import rlmem.runtime as rt

    rt.install()
    import transformers
    from transformers import Qwen2Config, Qwen2ForCausalLM, Trainer, TrainerCallback, TrainingArguments

    result: dict = {"torch": torch.__version__, "transformers": transformers.__version__}
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=1024, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         tie_word_embeddings=True)
    model = Qwen2ForCausalLM(config)

    class RandomTokens(torch.utils.data.Dataset):
        def __init__(self, rows: int = 64, length: int = 64):
            generator = torch.Generator().manual_seed(1)
            self.ids = torch.randint(0, config.vocab_size, (rows, length), generator=generator)

        def __len__(self):
            return len(self.ids)

        def __getitem__(self, index):
            ids = self.ids[index]
            return {"input_ids": ids, "labels": ids.clone(), "attention_mask": torch.ones_like(ids)}

    steps: list[dict] = []
    log_entries: list[dict] = []

    def own() -> dict:
        totals = rt.statistics()["totals"]
        return {"allocated": totals["allocated_bytes"]["current"], "max_allocated": totals["allocated_bytes"]["peak"],
                "reserved": totals["reserved_bytes"]["current"], "max_reserved": totals["reserved_bytes"]["peak"],
                "ooms": totals["ooms"], "alloc_retries": totals["alloc_retries"]}

    class MemoryCallback(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            torch.cuda.synchronize()
            seen = {"allocated": torch.cuda.memory_allocated(), "max_allocated": torch.cuda.max_memory_allocated(),
                    "reserved": torch.cuda.memory_reserved(), "max_reserved": torch.cuda.max_memory_reserved()}
            stats = torch.cuda.memory_stats()
            seen["ooms"] = stats["num_ooms"]
            seen["alloc_retries"] = stats["num_alloc_retries"]
            rlmem_figures = own()
            imported = max_allocated_imported_before_install()
            torch.cuda.reset_peak_memory_stats()
            after_reset = torch.cuda.max_memory_allocated()
            own_after = own()
            steps.append({
                "step": state.global_step, "torch": seen, "rlmem": rlmem_figures,
                "stats_current": stats["allocated_bytes.all.current"],
                "equal": seen == rlmem_figures and stats["allocated_bytes.all.current"] == rlmem_figures["allocated"]
                and stats["reserved_bytes.all.peak"] == rlmem_figures["max_reserved"]
                and imported == rlmem_figures["max_allocated"],
                "max_allocated_after_reset": after_reset,
                "reset_ok": after_reset == own_after["max_allocated"] == own_after["allocated"],
            })

        def on_log(self, args, state, control, logs=None, **kwargs):
            entry = dict(logs or {})
            entry["memory_allocated"] = torch.cuda.memory_allocated()  # a logging callback's reading
            entry["max_memory_allocated"] = torch.cuda.max_memory_allocated()
            log_entries.append(entry)

    fields = {field.name for field in dataclasses.fields(TrainingArguments)}
    options = dict(output_dir=tempfile.mkdtemp(prefix="rlmem_trainer_"), per_device_train_batch_size=8, max_steps=4,
                   logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=True,
                   dataloader_num_workers=0, learning_rate=1e-3, seed=0)
    if "skip_memory_metrics" in fields:
        options["skip_memory_metrics"] = False  # the Trainer's own tracker calls torch's functions too
    try:
        trainer = Trainer(model=model, args=TrainingArguments(**options), train_dataset=RandomTokens(),
                          callbacks=[MemoryCallback()])
        trained = trainer.train()
        result["train_metrics"] = {key: value for key, value in trained.metrics.items()
                                   if "mem" in key or key == "train_loss"}
        result["trainer_error"] = None
    except Exception as error:  # noqa: BLE001 - the check reports it
        result["trainer_error"] = f"{type(error).__name__}: {error}"
    result["steps"] = steps
    result["logs"] = log_entries
    losses = [entry.get("loss") for entry in log_entries if "loss" in entry]

    torch.cuda.synchronize()
    final = {"memory_allocated": torch.cuda.memory_allocated(), "rlmem_allocated": own()["allocated"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        torch.cuda.reset_max_memory_allocated()
    final["max_after_reset_max_memory_allocated"] = torch.cuda.max_memory_allocated()
    torch.cuda.reset_accumulated_memory_stats()
    final["allocated_total_after_reset_accumulated"] = torch.cuda.memory_stats()["allocated_bytes.all.allocated"]
    summary = torch.cuda.memory_summary()
    (Path(out_dir)).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "torch_stats_memory_summary.txt").write_text(summary)
    final["summary_has_allocated_line"] = "Allocated memory" in summary
    result["final"] = final

    ours_nested = sorted(torch._C._cuda_memoryStats(torch.cuda.current_device()))
    ours_flat = sorted(torch.cuda.memory_stats())
    native = native_stat_keys()
    result["native_keys_error"] = native.get("error")
    if "nested" in native:
        result["keys_missing"] = sorted(set(native["nested"]) - set(ours_nested)) + \
            sorted(set(native["flat"]) - set(ours_flat))
        result["keys_extra"] = sorted(set(ours_nested) - set(native["nested"])) + \
            sorted(set(ours_flat) - set(native["flat"]))
    result["ok"] = bool(
        result["trainer_error"] is None and len(steps) == options["max_steps"] and len(losses) == options["max_steps"]
        and all(step["equal"] and step["reset_ok"] for step in steps)
        and final["memory_allocated"] == final["rlmem_allocated"]
        and final["max_after_reset_max_memory_allocated"] == final["memory_allocated"]
        and final["allocated_total_after_reset_accumulated"] == 0 and final["summary_has_allocated_line"]
        and not result.get("keys_missing", ["native keys not read"]))
    return write(out_dir, "torch_stats", result)


# -- tms_compat ----------------------------------------------------------------------------------

def gpu_check_tms_compat(out_dir) -> dict:
    import rlmem.compat

    rlmem.compat.alias_torch_memory_saver()  # what a framework's launcher does, before torch touches CUDA
    import torch
    import torch_memory_saver

    import rlmem.runtime as rt

    tms = torch_memory_saver.torch_memory_saver
    result: dict = {"module": torch_memory_saver.__name__, "installed_at_import": rt.installed(),
                    "torch": torch.__version__}
    torch.manual_seed(0)
    a = torch.randn(4096, 4096, device="cuda")
    gemm = a @ a  # before any region: cuBLAS's workspace is untagged
    torch.cuda.synchronize()
    with tms.region(tag="weights", enable_cpu_backup=True):
        weights = [torch.randn(64 << 20, device="cuda"), torch.randn(32 << 20, device="cuda")]  # 256 + 128 MiB
    with tms.region(tag="kv_cache"):
        kv = torch.full((512 << 20,), 0x7F, dtype=torch.uint8, device="cuda")
    host = [w.view(torch.int32).cpu() for w in weights]
    torch.cuda.synchronize()

    def weights_exact() -> bool:
        return all(torch.equal(w.view(torch.int32).cpu(), h) for w, h in zip(weights, host))

    before = tag_figures(rt)
    tag_bytes = before["weights"]["mapped"] + before["kv_cache"]["mapped"]
    result["tags_before"] = before
    free_before = torch.cuda.mem_get_info()[0]
    started = time.perf_counter()
    for tag in ("kv_cache", "weights", "cuda_graph"):  # SGLang's release_memory_occupation()
        tms.pause(tag)
    result["release_seconds"] = time.perf_counter() - started
    free_paused = torch.cuda.mem_get_info()[0]
    result["tags_paused"] = tag_figures(rt)
    result["free_rise"] = free_paused - free_before
    result["tag_bytes"] = tag_bytes
    result["free_rise_matches"] = abs((free_paused - free_before) - tag_bytes) <= 8 * MiB
    result["gemm_while_paused"] = bool(torch.equal(a @ a, gemm))

    torch.cuda.synchronize()
    free_paused = torch.cuda.mem_get_info()[0]
    started = time.perf_counter()
    tms.resume("cuda_graph")  # SGLang resumes the graphs first (none here)
    tms.resume("weights")  # verl: weights, then the update, then the KV cache
    resumed_weights = tag_figures(rt)
    result["kv_paused_while_weights_resumed"] = resumed_weights["kv_cache"]["paused"]
    result["weights_exact_before_kv_resume"] = weights_exact()
    tms.resume("kv_cache")
    torch.cuda.synchronize()
    result["resume_seconds"] = time.perf_counter() - started
    result["resume_took"] = free_paused - torch.cuda.mem_get_info()[0]
    result["resume_took_matches"] = abs(result["resume_took"] - tag_bytes) <= 8 * MiB
    result["weights_exact"] = weights_exact()
    result["kv_zero"] = bool((kv == 0).all())

    # pause() with no tag, resume of one tag, then resume() of the rest.
    kv.fill_(0x55)
    free_before = torch.cuda.mem_get_info()[0]
    tms.pause()
    paused_all = tag_figures(rt)
    result["pause_all_rise"] = torch.cuda.mem_get_info()[0] - free_before
    result["pause_all_tags"] = sorted(name for name, tag in paused_all.items() if tag["paused"])
    tms.resume("weights")
    result["partial_resume_tags"] = sorted(name for name, tag in tag_figures(rt).items() if tag["paused"])
    tms.resume()
    result["second_cycle_weights_exact"] = weights_exact()
    result["second_cycle_kv_zero"] = bool((kv == 0).all())

    # disable(): not tracked, never paused.
    with tms.region(tag="weights", enable_cpu_backup=True):
        with tms.disable():
            untracked = torch.full((64 << 20,), 3, dtype=torch.uint8, device="cuda")
    tms.pause()
    result["disabled_readable_while_paused"] = int(untracked.sum()) == 3 * (64 << 20)
    tms.resume()
    result["third_cycle_weights_exact"] = weights_exact()
    result["tags_after"] = tag_figures(rt)
    result["ok"] = bool(
        result["installed_at_import"] and result["free_rise_matches"] and result["gemm_while_paused"]
        and result["resume_took_matches"]
        and result["weights_exact_before_kv_resume"] and result["kv_paused_while_weights_resumed"]
        and result["weights_exact"] and result["kv_zero"] and result["pause_all_tags"] == ["kv_cache", "weights"]
        and result["partial_resume_tags"] == ["kv_cache"] and result["second_cycle_weights_exact"]
        and result["second_cycle_kv_zero"] and result["disabled_readable_while_paused"]
        and result["third_cycle_weights_exact"])
    return write(out_dir, "tms_compat", result)


# -- tms_graph -----------------------------------------------------------------------------------

def gpu_check_tms_graph(out_dir) -> dict:
    import rlmem.compat

    rlmem.compat.alias_torch_memory_saver()
    import torch
    import torch_memory_saver

    import rlmem.runtime as rt

    tms = torch_memory_saver.torch_memory_saver
    result: dict = {"torch": torch.__version__}
    torch.manual_seed(0)
    x = torch.randn(1024, 1024, device="cuda")
    w = torch.randn(1024, 1024, device="cuda")

    def eager():
        return ((x @ w).relu() * 2).sum(1)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            eager()
    torch.cuda.current_stream().wait_stream(side)

    def capture(graph, addresses):
        with tms.cuda_graph(cuda_graph=graph, tag="cuda_graph"):
            product = x @ w
            relu = product.relu()
            addresses.extend([(product.data_ptr(), product.nbytes), (relu.data_ptr(), relu.nbytes)])
            out = (relu * 2).sum(1)
            del product, relu
        return out

    first, second = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    first_addresses: list = []
    second_addresses: list = []
    try:
        out_first = capture(first, first_addresses)
        result["tag_after_first_capture"] = tag_figures(rt).get("cuda_graph")
        out_second = capture(second, second_addresses)
    except Exception as error:  # noqa: BLE001
        result["capture_error"] = f"{type(error).__name__}: {error}"
        result["ok"] = False
        return write(out_dir, "tms_graph", result)
    result["tag_after_captures"] = tag_figures(rt).get("cuda_graph")
    # The tag also holds cuBLAS's workspace for the capture stream (live); the intermediates, freed
    # when the capture dropped them, are mapped pages no block uses.
    after = result["tag_after_first_capture"]
    result["intermediate_bytes"] = sum(nbytes for _, nbytes in first_addresses)
    result["free_mapped_bytes_in_tag"] = after["mapped"] - after["allocated"]
    result["intermediates_freed_at_capture"] = result["free_mapped_bytes_in_tag"] >= result["intermediate_bytes"]
    overlap = lambda one, other: any(a < b + m and b < a + n for a, n in one for b, m in other)  # noqa: E731
    result["second_graph_reuses_first_graphs_intermediates"] = overlap(first_addresses, second_addresses)

    first.replay()
    torch.cuda.synchronize()
    result["replay_right"] = bool(torch.allclose(out_first, eager(), rtol=1e-4, atol=1e-2))
    x.copy_(torch.randn_like(x))
    untagged = torch.full((1024, 1024), 7.0, device="cuda")
    result["untagged_on_intermediates"] = overlap([(untagged.data_ptr(), untagged.nbytes)], first_addresses)
    first.replay()
    second.replay()
    torch.cuda.synchronize()
    result["replays_right_after_new_input"] = bool(torch.allclose(out_first, eager(), rtol=1e-4, atol=1e-2)
                                                   and torch.allclose(out_second, eager(), rtol=1e-4, atol=1e-2))
    result["untagged_intact"] = bool((untagged == 7).all())
    result["ok"] = bool(result["replay_right"] and result["replays_right_after_new_input"]
                        and result["untagged_intact"] and not result["untagged_on_intermediates"])
    write(out_dir, "tms_graph", result)

    # The graph's tag paused and resumed as SGLang does (discard: a replay recomputes what the
    # capture allocated), then a replay: rlmem kept the capture's blocks, so it runs right.
    tms.pause("cuda_graph")
    tms.resume("cuda_graph")
    result["tag_after_raw_pause_resume"] = tag_figures(rt).get("cuda_graph")
    write(out_dir, "tms_graph", result)
    try:
        first.replay()
        torch.cuda.synchronize()
        result["replay_after_raw_pause_resume"] = "ran"
        result["replay_after_raw_pause_resume_right"] = bool(torch.allclose(out_first, eager(), rtol=1e-4, atol=1e-2))
    except Exception as error:  # noqa: BLE001
        result["replay_after_raw_pause_resume"] = f"{type(error).__name__}: {str(error)[:300]}"
    return write(out_dir, "tms_graph", result)


def gpu_check_graph_empty_cache(out_dir) -> dict:
    """A plain torch.cuda.graph under install() (no stand-in, no region): its intermediates are
    free pages of rlmem's "default" tag on the capture stream; rlmem.runtime.empty_cache() (or
    memory pressure) unmaps them. Does the next replay survive? (This process may go down.)"""
    import torch

    import rlmem.runtime as rt

    rt.install()
    result: dict = {"torch": torch.__version__}
    x = torch.randn(1024, 1024, device="cuda")
    w = torch.randn(1024, 1024, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ((x @ w).relu() * 2).sum(1)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ((x @ w).relu() * 2).sum(1)
    graph.replay()
    torch.cuda.synchronize()
    result["replay_right_before"] = bool(torch.allclose(out, ((x @ w).relu() * 2).sum(1), rtol=1e-4, atol=1e-2))
    before = rt.statistics()["totals"]["reserved_bytes"]["current"]
    rt.empty_cache()
    result["empty_cache_unmapped"] = before - rt.statistics()["totals"]["reserved_bytes"]["current"]
    write(out_dir, "graph_empty_cache", result)
    try:
        graph.replay()
        torch.cuda.synchronize()
        result["replay_after_empty_cache"] = "ran"
    except Exception as error:  # noqa: BLE001
        result["replay_after_empty_cache"] = f"{type(error).__name__}: {str(error)[:200]}"
    # ok: the check ran; the finding is replay_after_empty_cache.
    result["ok"] = result["replay_right_before"]
    return write(out_dir, "graph_empty_cache", result)


CHECKS = {"torch_stats": gpu_check_torch_stats, "tms_compat": gpu_check_tms_compat, "tms_graph": gpu_check_tms_graph,
          "graph_empty_cache": gpu_check_graph_empty_cache}


def run_child(name: str, out_dir: Path, timeout: float = 480) -> dict:
    command = [sys.executable, __file__, "--child", name, str(out_dir)]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"check": name, "error": f"timed out after {timeout} s", "ok": False}
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode == 0 and lines:
        result = json.loads(lines[-1][len("RESULT "):])
    else:
        written = out_dir / f"{name}.json"
        result = json.loads(written.read_text()) if written.is_file() else {}
        result.update(exit_status=done.returncode, stderr=done.stderr[-4000:])
        if not lines:
            result["ok"] = False if "ok" not in result else result["ok"]
            result["error"] = f"exit {done.returncode} before the end"
    result["process_seconds"] = time.perf_counter() - started
    return write(out_dir, name, result)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--only", default=",".join(CHECKS), help="checks to run, comma-separated: " + ", ".join(CHECKS))
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = CHECKS[args.child](args.out_dir)
        print("RESULT " + json.dumps(result, default=str), flush=True)
        return 0
    names = [name for name in args.only.split(",") if name]
    unknown = [name for name in names if name not in CHECKS]
    if unknown:
        parser.error(f"unknown checks {unknown}; known: {', '.join(CHECKS)}")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    every_ok = True
    for name in names:
        result = run_child(name, args.out_dir)
        summary = {key: value for key, value in result.items() if not isinstance(value, (list, dict))}
        print(name, json.dumps(summary, default=str)[:3000], flush=True)
        every_ok = every_ok and bool(result.get("ok"))
    return 0 if every_ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
