"""Pushes a training loop into a CUDA OOM inside rlmem.record(): the snapshot it writes before the
error goes on, and rlmem's one-line verdict on it.

    PYTHONPATH=python python3 tools/monitor/oom_run.py --out $OUT/oom --stats-out $OUT/series/oom_growing_batch.json

The model is Qwen2.5-0.5B's architecture with random weights (bf16, AdamW). The process is capped
with torch.cuda.set_per_process_memory_fraction at --limit-gib; each step trains on a micro-batch
--grow larger than the last (sequence length --seq-len, varying by step so that freed blocks do not
fit the next request), with a StepMonitor attached (alerts before the OOM: alloc_retries,
fragmentation, headroom), until the allocator raises OutOfMemoryError. The verdict is computed with
the cap given as the limit (rlmem cannot read a memory fraction from a snapshot).

Writes to --out: snapshots/rlmem-oom.pickle, monitor.jsonl, summary.json; prints the verdict line.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import grpo_common as common  # noqa: E402


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--model", choices=sorted(common.MODELS), default="qwen2.5-0.5b")
    parser.add_argument("--limit-gib", type=float, default=16.0, help="memory cap of the process (GiB)")
    parser.add_argument("--seq-len", default="384,512,320,448", help="sequence lengths, cycled per step")
    parser.add_argument("--start-batch", type=int, default=2)
    parser.add_argument("--grow", type=int, default=2, help="micro-batch growth per step")
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--stats-out", type=Path, default=None, help="raw memory_stats() series (testdata/monitor/)")
    parser.add_argument("--device", default="cuda")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_arguments(argv)
    rlmem = common.import_rlmem()
    import torch

    if not torch.cuda.is_available():
        print("oom_run.py: no CUDA device here", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.device(args.device)
    total = torch.cuda.mem_get_info()[1]
    limit = int(args.limit_gib * 2**30)
    fraction = limit / total
    torch.cuda.set_per_process_memory_fraction(fraction)
    model = common.make_model(args.model, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    vocab = model.config.vocab_size
    lengths = [int(n) for n in args.seq_len.split(",")]
    series = (common.StatsSeries(f"oom_run.py {args.model} under a {args.limit_gib} GiB cap, micro-batch +{args.grow} "
                                 f"per step, lengths {args.seq_len}", False, None, None)
              if args.stats_out is not None else None)
    log = args.out / "monitor.jsonl"
    if log.exists():
        log.unlink()
    monitor = rlmem.StepMonitor(log)
    verdict_stream = io.StringIO()
    batch = args.start_batch
    steps_done = 0
    caught = None
    print(f"oom_run: {args.model}, cap {args.limit_gib} GiB ({fraction:.4f} of {total / 2**30:.1f} GiB)", flush=True)
    started = time.perf_counter()
    recorder = rlmem.record(args.out / "snapshots", limit=limit, verdict_stream=verdict_stream, dump_at_exit=False)
    try:
        with recorder:
            for step in range(1, args.max_steps + 1):
                length = lengths[(step - 1) % len(lengths)]
                tokens = torch.randint(1, vocab, (batch, length), device=device)
                logits = model(tokens).logits.float()
                loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, vocab), tokens[:, 1:].reshape(-1))
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                del tokens, logits, loss
                steps_done = step
                if series is not None:
                    series.record(step)
                for alert in monitor.step(step):
                    print(f"  step {step} (batch {batch}): {alert.message}", flush=True)
                recorder.step()
                batch += args.grow
    except torch.cuda.OutOfMemoryError as error:
        caught = error
    elapsed = time.perf_counter() - started
    monitor.close()
    if series is not None:
        series.write(args.stats_out)
    line = verdict_stream.getvalue().strip()
    print(line, file=sys.stderr)  # record() printed it to our stream: show it as a user would see it
    summary = {"environment": common.environment(), "arguments": {k: str(v) for k, v in vars(args).items()},
               "limit_bytes": limit, "fraction": fraction, "steps_completed": steps_done,
               "batch_at_oom": batch if caught else None, "oom_message": str(caught).split("\n")[0] if caught else None,
               "seconds": elapsed, "snapshot": recorder.oom_snapshot, "verdict_line": line,
               "monitor_alerts": [a.message for a in monitor.alerts]}
    if recorder.oom_snapshot:
        report = rlmem.inspect(recorder.oom_snapshot, limit=limit)
        summary["snapshot_bytes"] = Path(recorder.oom_snapshot).stat().st_size
        summary["inspect_oom"] = report["oom"]
        summary["inspect_peak_allocated_bytes"] = report["summary"]["peak_allocated_bytes"]
        unlimited = rlmem.inspect(recorder.oom_snapshot)
        summary["inspect_oom_without_limit"] = [{k: o.get(k) for k in ("verdict", "requested_bytes", "limit_low_bytes",
                                                                        "limit_high_bytes", "explanation")}
                                                for o in unlimited["oom"]]
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    if caught is None:
        print(f"oom_run: no OOM in {steps_done} steps (raise --max-steps or lower --limit-gib)")
        return 1
    print(f"oom_run: OOM at step {steps_done + 1}, micro-batch {batch}; snapshot {recorder.oom_snapshot}")
    print(f"oom_run: wrote {args.out / 'summary.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
