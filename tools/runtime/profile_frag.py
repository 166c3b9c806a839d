#!/usr/bin/env python3
"""Where the time of the fragmentation workload's steady-state steps goes, per allocator (issue 26,
item 3): wall and process CPU time per step, then torch.profiler over ten steps (the kernels' summed
device time, and the CPU time of the ops that allocate). Each allocator runs in its own process,
alternated round by round.

    python3 tools/runtime/profile_frag.py --out DIR [--rounds 2] [--demand BYTES]

Needs a GPU, torch and transformers; RLMEM_LIBRARY names librlmem.so for the rlmem rows.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from validate_gpu import FRAG_LENGTHS, frag_workload  # noqa: E402

# ops whose CPU time includes the allocator's malloc or free
ALLOCATING_OPS = ("aten::empty", "aten::empty_strided", "aten::empty_like", "aten::zeros", "aten::zeros_like",
                  "aten::new_empty", "aten::new_empty_strided", "aten::resize_")


def child(allocator: str, capacity: int, epochs: int) -> dict:
    if allocator == "expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import torch

    if allocator.startswith("rlmem"):
        import rlmem.runtime as rt

        rt.install(capacity=capacity or None)
        if allocator == "rlmem-prepared":  # torch's library workspaces made first: no stack reads
            rt.prepare_libraries()
    elif capacity:
        torch.cuda.set_per_process_memory_fraction(capacity / torch.cuda.get_device_properties(0).total_memory)
    model, optimizer = frag_workload()

    def step(tokens):
        loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    lengths = FRAG_LENGTHS * epochs
    wall, cpu, launch = [], [], []
    batches = [torch.randint(0, 32000, (max(1, 4096 // n), n), device="cuda") for n in lengths]
    profiled_from = len(lengths) - len(FRAG_LENGTHS)
    unwinds = []
    for index, tokens in enumerate(batches[:profiled_from]):
        if allocator.startswith("rlmem"):
            unwinds.append(rt.statistics()["totals"].get("library_check_unwinds", 0))
        torch.cuda.synchronize()
        started, started_cpu = time.perf_counter(), time.process_time()
        step(tokens)
        launched = time.perf_counter()
        torch.cuda.synchronize()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
        launch.append(launched - started)
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for tokens in batches[profiled_from:]:
            step(tokens)
        torch.cuda.synchronize()
    events = prof.key_averages()
    device_us = sum(e.self_device_time_total for e in events if str(e.device_type).endswith("CUDA"))
    ops = sorted(({"name": e.key, "count": e.count, "self_cpu_us": e.self_cpu_time_total, "cpu_us": e.cpu_time_total,
                   "self_device_us": e.self_device_time_total} for e in events), key=lambda o: -o["self_cpu_us"])
    allocating = {o["name"]: o for o in ops if o["name"] in ALLOCATING_OPS}
    result = {"allocator": allocator, "capacity": capacity, "steps": len(lengths),
              "step_seconds": wall, "step_cpu_seconds": cpu, "step_launch_seconds": launch,
              "profiled_steps": len(FRAG_LENGTHS), "kernel_device_us": device_us,
              "allocating_ops": allocating, "top_cpu_ops": ops[:25],
              "profiler_table": events.table(sort_by="self_cpu_time_total", row_limit=20, max_name_column_width=40)}
    if allocator.startswith("rlmem"):
        result["device_calls"] = rt.statistics()["totals"]["device_calls"]
        result["library_check_unwinds_per_step"] = [b - a for a, b in zip(unwinds, unwinds[1:])]
    return result


def summarize(rows: list[dict]) -> str:
    lines = [f"{'allocator':<13} {'cap':>6} {'wall ms':>8} {'cpu ms':>7} {'launch ms':>9} {'kernels ms':>10} "
             f"{'alloc-op self cpu ms':>20}  (medians of steps 11-20; profiled: 10 steps)"]
    for r in rows:
        if "error" in r:
            lines.append(f"{r.get('args')}: {r['error']}")
            continue
        later = slice(len(FRAG_LENGTHS), 2 * len(FRAG_LENGTHS))
        med = lambda xs: statistics.median(xs[later]) * 1e3  # noqa: E731
        alloc_cpu = sum(o["self_cpu_us"] for o in r["allocating_ops"].values()) / 1e3 / r["profiled_steps"]
        lines.append(f"{r['allocator']:<13} {r['factor']:>6} {med(r['step_seconds']):>8.1f} {med(r['step_cpu_seconds']):>7.1f} "
                     f"{med(r['step_launch_seconds']):>9.1f} {r['kernel_device_us'] / 1e3 / r['profiled_steps']:>10.1f} {alloc_cpu:>20.2f}")
    return "\n".join(lines)


def ratios(rows: list[dict]) -> str:
    """Steps 11-20 summed, per allocator and cap, over every round; each against expandable's."""
    sums: dict = {}
    for r in rows:
        if "error" in r:
            continue
        sums.setdefault(r["factor"], {}).setdefault(r["allocator"], []).append(sum(r["step_seconds"][len(FRAG_LENGTHS):2 * len(FRAG_LENGTHS)]))
    lines = ["steps 11-20 summed over the rounds, against expandable segments:"]
    for factor, by in sums.items():
        base = sum(by.get("expandable", [])) or None
        parts = [f"{name} {sum(v):.3f} s" + (f" ({sum(v) / base:.2f}x)" if base else "") for name, v in by.items()]
        lines.append(f"  cap {factor}: " + ", ".join(parts))
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        allocator, capacity, epochs = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
        print("RESULT " + json.dumps(child(allocator, capacity, epochs)), flush=True)
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--demand", type=int, default=2614785024, help="the workload's peak allocated, bytes")
    parser.add_argument("--factors", default="1.02,0", help="caps as multiples of the demand; 0: none")
    parser.add_argument("--allocators", default="expandable,rlmem", help="of expandable, native, rlmem and rlmem-prepared")
    options = parser.parse_args()
    options.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for _ in range(options.rounds):
        for factor in (float(f) for f in options.factors.split(",")):
            for allocator in options.allocators.split(","):
                cap = int(options.demand * factor)
                row = run_child_here(allocator, cap)
                row["factor"] = factor
                rows.append(row)
                print(summarize([row]).splitlines()[-1], flush=True)
    text = summarize(rows) + "\n\n" + ratios(rows)
    (options.out / "profile_frag.json").write_text(json.dumps(rows, indent=1))
    (options.out / "profile_frag.txt").write_text(text + "\n\n" + "\n\n".join(
        f"== {r.get('allocator')} {r.get('factor')}\n{r.get('profiler_table', '')}" for r in rows))
    print(text)
    return 0


def run_child_here(allocator: str, cap: int) -> dict:
    import subprocess

    done = subprocess.run([sys.executable, __file__, "--child", "profile", allocator, str(cap), "3"],
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        return {"args": [allocator, cap], "error": f"exit {done.returncode}", "stderr": done.stderr[-2000:]}
    return json.loads(lines[-1][len("RESULT "):])


if __name__ == "__main__":
    sys.exit(main())
