"""StepMonitor(record_on_leak=3) on a GPU, end to end: three leaks a user makes, each held by a
different Python object; the monitor must alert, record, name the allocation site and name the
object that holds the leaked tensors. Also the cost of step() beside the step.

    PYTHONPATH=python RLMEM_LIBRARY=build/librlmem.so python3 tools/monitor/holder_check.py --out $OUT/holders

Leaks (from step --leak-at on, a tiny Qwen2-shaped GRPO loop of tools/monitor/grpo_common.py):
  metrics_list  trainer.metrics["entropy"].append(logits row, detached)   (a list in a dict attribute)
  kept_graph    HISTORY.append(entropy of a fresh forward, not detached)   (a module global; the graph holds the memory)
  cat_attribute STATE.history = torch.cat([STATE.history, x])              (one tensor in an object attribute)
Writes summary.json to --out: per leak the alerts (step, message, holder) and step()/step timings.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import grpo_common as common  # noqa: E402


class Trainer:
    def __init__(self):
        self.metrics = {"entropy": []}


class State:
    def __init__(self, history):
        self.history = history


TRAINER = Trainer()
HISTORY: list = []
STATE = State(None)


def run(shape: str, args, rlmem, torch) -> dict:
    device = torch.device(args.device)
    grpo = common.GRPO(args.model, device, prompts=2, group=4, prompt_len=32, new_tokens=[16, 24, 32], seed=1)
    STATE.history = torch.zeros(0, 4096, device=device)
    out_dir = args.out / shape
    monitor = rlmem.StepMonitor(out_dir / "mem.jsonl", record_on_leak=3, holder_budget=1.0)
    step_seconds, monitor_seconds, alerts = [], [], []
    for step in range(1, args.steps + 1):
        common.synchronize(device)
        started = time.perf_counter()
        leaking = step >= args.leak_at
        if shape == "metrics_list":
            grpo.kept = TRAINER.metrics["entropy"]
        grpo.step(leak=leaking and shape == "metrics_list")
        if leaking and shape == "kept_graph":
            sequences = torch.randint(1, grpo.vocab, (8, 48), device=device)
            logits = grpo.policy(sequences).logits[:, -4:].float()
            entropy = -(torch.softmax(logits, -1) * torch.log_softmax(logits, -1)).sum(-1).mean()
            HISTORY.append(entropy)  # the graph keeps softmax and log_softmax saved
        if leaking and shape == "cat_attribute":
            STATE.history = torch.cat([STATE.history, torch.randn(512, 4096, device=device)])
        common.synchronize(device)
        step_seconds.append(time.perf_counter() - started)
        raised = monitor.step()
        monitor_seconds.append(monitor.last_overhead_seconds)
        for alert in raised:
            alerts.append({"step": step, "kind": alert.kind, "message": alert.message, "site": alert.site,
                           "holder": alert.holder, "since_step": alert.since_step,
                           "bytes_per_step": alert.bytes_per_step, "steps_to_limit": alert.steps_to_limit})
            print(f"[{shape}] step {step}: {alert.message}", flush=True)
    monitor.close()
    TRAINER.metrics["entropy"] = []
    HISTORY.clear()
    STATE.history = None
    del grpo
    torch.cuda.empty_cache()
    # the steps that recorded (K after the alert) and dumped are not ordinary: leave them out
    recorded = {a["step"] + k for a in alerts if a["kind"] == "leak" and a["site"] is None for k in range(0, 7)}
    plain = [i for i in range(len(step_seconds)) if i + 1 not in recorded and i > 0]
    share = [monitor_seconds[i] / step_seconds[i] for i in plain]
    return {"alerts": alerts, "holder_named": any(a["holder"] for a in alerts),
            "step_seconds_median": statistics.median(step_seconds[i] for i in plain),
            "monitor_step_seconds_median": statistics.median(monitor_seconds[i] for i in plain),
            "monitor_share_median": statistics.median(share), "monitor_share_max": max(share)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--steps", type=int, default=18)
    parser.add_argument("--leak-at", type=int, default=7)
    parser.add_argument("--model", default="tiny", choices=sorted(common.MODELS))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shapes", default="metrics_list,kept_graph,cat_attribute")
    args = parser.parse_args(argv)
    rlmem = common.import_rlmem()
    import torch

    summary = {"environment": common.environment(), "leak_at": args.leak_at, "model": args.model, "runs": {}}
    for shape in args.shapes.split(","):
        summary["runs"][shape] = run(shape, args, rlmem, torch)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    for shape, result in summary["runs"].items():
        print(f"{shape}: holder named {result['holder_named']}; step {result['step_seconds_median'] * 1e3:.1f} ms,"
              f" monitor {result['monitor_step_seconds_median'] * 1e6:.0f} us"
              f" ({result['monitor_share_median']:.3%} median, {result['monitor_share_max']:.3%} max)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
