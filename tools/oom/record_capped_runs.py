"""Records a fragmenting training workload under memory fractions near its demand, to check
rlmem's OOM verdicts on runs where the limit must be read (in the job) or bounded (offline).

    PYTHONPATH=python python3 tools/oom/record_capped_runs.py OUT [--caps 0.98,1.00,...] [--orders 2]

For each cap (a factor of the workload's demand) and each order of its sequence lengths, two
processes: torch's default allocator inside ``rlmem.record(OUT/...)`` (the snapshot and the verdict
line rlmem prints in the job, with the limit it read), and expandable segments at the same cap,
not recorded (whether it completes: the answer a FRAGMENTATION verdict promises). Writes
OUT/capped-F-oORDER.pickle for each native run that hit an OOM and OUT/capped.json: per run the
cap in bytes, the fraction, the device total, completed or torch's OOM message, the verdict line.

The workload is the fixture's (tools/runtime/validate_gpu.py's check_frag): a Qwen2-architecture
model (hidden 512, 8 layers, vocab 32000, bf16, AdamW), about 4096 tokens a step in rows of
512..2560, the ten lengths twice over.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

LENGTHS = [512, 1024, 2048, 768, 2560, 1536, 1280, 2304, 896, 1792]
DEMAND = 2_614_785_024  # peak allocated of the workload, uncapped (validate_gpu.py frag)


def lengths_for(order: int) -> list[int]:
    if order == 0:
        return LENGTHS * 2
    shuffled = LENGTHS * 2
    random.Random(order).shuffle(shuffled)
    return shuffled


def child(allocator: str, factor: float, order: int, out: Path) -> dict:
    if allocator == "expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    total = torch.cuda.mem_get_info()[1]
    cap = int(DEMAND * factor)
    torch.cuda.set_per_process_memory_fraction(cap / total)
    result = {"allocator": allocator, "factor": factor, "order": order, "cap_bytes": cap, "device_total": total,
              "fraction": cap / total, "torch_allowed_bytes": int(cap / total * total)}
    torch.manual_seed(0)
    config = Qwen2Config(hidden_size=512, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2,
                         intermediate_size=1408, vocab_size=32000, tie_word_embeddings=True)
    model = AutoModelForCausalLM.from_config(config).to(device="cuda", dtype=torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train() -> None:
        for length in lengths_for(order):
            rows = max(1, 4096 // length)
            tokens = torch.randint(0, 32000, (rows, length), device="cuda")
            model(input_ids=tokens, labels=tokens).loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    try:
        if allocator == "native":
            import rlmem

            stream = io.StringIO()
            path = out / f"capped-{factor:.3f}-o{order}.pickle"
            recorder = rlmem.record(str(path), dump_at_exit=False, verdict_stream=stream)
            try:
                with recorder:
                    train()
            finally:
                result["verdict_line"] = stream.getvalue().strip() or None
                result["snapshot"] = path.name if path.exists() else None
        else:
            train()
        torch.cuda.synchronize()
        result["completed"] = True
    except torch.OutOfMemoryError as error:
        result["completed"] = False
        result["oom_message"] = str(error)[:600]
    stats = torch.cuda.memory_stats()
    result["peak_allocated"] = stats["allocated_bytes.all.peak"]
    result["peak_reserved"] = stats["reserved_bytes.all.peak"]
    result["num_alloc_retries"] = stats["num_alloc_retries"]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--caps", default="0.98,1.00,1.01,1.02,1.03,1.05,1.08,1.12")
    parser.add_argument("--orders", type=int, default=2)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--child", nargs=3, metavar=("ALLOCATOR", "FACTOR", "ORDER"))
    options = parser.parse_args()
    options.out.mkdir(parents=True, exist_ok=True)
    if options.child:
        allocator, factor, order = options.child
        print("RESULT " + json.dumps(child(allocator, float(factor), int(order), options.out)), flush=True)
        return 0
    jobs = [(allocator, factor, order) for factor in options.caps.split(",") for order in range(options.orders)
            for allocator in ("native", "expandable")]

    def run(job: tuple[str, str, int]) -> dict:
        allocator, factor, order = job
        done = subprocess.run([sys.executable, __file__, str(options.out), "--child", allocator, factor, str(order)],
                              capture_output=True, text=True, timeout=400)
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if not lines:
            return {"allocator": allocator, "factor": float(factor), "order": order, "error": done.stderr[-2000:]}
        return json.loads(lines[-1][len("RESULT "):])

    with ThreadPoolExecutor(options.parallel) as pool:
        rows = list(pool.map(run, jobs))
    (options.out / "capped.json").write_text(json.dumps({"demand_bytes": DEMAND, "rows": rows}, indent=1))
    for row in rows:
        print(json.dumps({k: row.get(k) for k in ("allocator", "factor", "order", "completed", "error")}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
