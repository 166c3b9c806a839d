"""Writes grpo_qwen0.5b_h100_leak.jsonl: a synthetic StepMonitor log of a Qwen2.5-0.5B GRPO job on
an H100 80GB, modelled by hand on the schema (docs/schema/steplog.schema.json); see README.md.
Usage: python3 testdata/steplog/make_grpo_qwen0.5b_h100_leak.py (deterministic: seeded)."""
import json, math, os, random
random.seed(9)
GiB = 1 << 30
MiB = 1 << 20
total = 85520809984          # what an H100 80GB HBM3 reports (81,559 MiB)
context = 537 * MiB          # CUDA context and cuBLAS workspaces outside the allocator
steps = 120
leak_from = 96
leak_per_step = 48 * MiB
t = 1717243200.0
lines = []
retries = 0
reserved = 0
for step in range(1, steps + 1):
    # Mean response length of the step's rollouts, 300..1400 tokens, drifting as RL training does.
    length = 850 + 420 * math.sin(step / 9.0) + random.uniform(-40, 40)
    f = (length - 300) / 1100
    kept = max(0, step - leak_from + 1) * leak_per_step if step >= leak_from else 0
    # Weights, gradients and AdamW state (~5.5 GiB) plus the reference model and the rollout
    # buffers the loop keeps between steps, which follow the response length.
    allocated = int(5.52 * GiB + 0.93 * GiB + f * 1.5 * GiB) + kept
    allocated -= allocated % 512
    peak_alloc = int(allocated + (9.5 + 15.0 * f) * GiB)
    peak_alloc -= peak_alloc % 512
    # The caching allocator keeps what it reserved (no empty_cache in this loop): reserved only
    # grows, to the longest step's peak and a little over.
    reserved = max(reserved, (int(peak_alloc * (1.07 + 0.04 * random.random())) // (2 * MiB)) * 2 * MiB)
    peak_res = reserved
    inactive_split = int((0.25 + 0.9 * random.random()) * GiB) // 512 * 512
    active = allocated + random.randint(0, 64) * MiB
    seconds = 7.5 + 6.5 * f + random.uniform(-0.4, 0.4)
    t += seconds
    alerts = []
    if step == leak_from + 4:
        alerts.append({"kind": "leak", "rank": 0,
                       "message": "allocated at step end grows 48.0 MiB/step since step 96 (5 steps); arming rlmem.record for 3 steps to name the site",
                       "bytes_per_step": leak_per_step, "since_step": leak_from})
    if step == leak_from + 8:
        alerts.append({"kind": "leak", "rank": 0,
                       "message": "leak at rl/grpo.py:212 compute_logprobs: +48.0 MiB/step since step 96 (snapshot runs/leak_step104.pickle)",
                       "bytes_per_step": leak_per_step, "since_step": leak_from,
                       "site": "rl/grpo.py:212 compute_logprobs", "snapshot": "runs/leak_step104.pickle"})
    record = {
        "schema": "rlmem.steplog/1", "time": round(t, 3), "step": step,
        "step_seconds": None if step == 1 else round(seconds, 3),
        "rank": 0, "world_size": 1, "device": 0,
        "allocated": allocated, "reserved": reserved, "active": active, "inactive_split": inactive_split,
        "step_peak_allocated": peak_alloc, "step_peak_reserved": peak_res, "peak_is_per_step": True,
        "allocations": 1650 + int(f * 300) + (step - leak_from + 1 if step >= leak_from else 0) * 4,
        "num_alloc_retries": retries, "num_ooms": 0,
        "device_free": total - reserved - context, "device_total": total, "alerts": alerts,
    }
    lines.append(json.dumps(record, separators=(", ", ": ")))
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "grpo_qwen0.5b_h100_leak.jsonl"), "w").write("\n".join(lines) + "\n")
