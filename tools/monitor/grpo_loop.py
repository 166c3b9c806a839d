"""A GRPO-like loop on one GPU with rlmem.StepMonitor attached: the leak alert, the site it names,
false alerts on a clean run, and what the monitor and recording cost.

    PYTHONPATH=python python3 tools/monitor/grpo_loop.py --out $OUT/leak --leak-at 8 --stats-out $OUT/series/grpo_leak.json
    PYTHONPATH=python python3 tools/monitor/grpo_loop.py --out $OUT/clean --stats-out $OUT/series/grpo_clean.json

The model is Qwen2.5-0.5B's architecture with random weights (from a config: no download), in
bf16: policy and frozen reference, AdamW; each step samples --group responses for each of
--prompts prompts, with a response length drawn each step from --new-tokens (the same draws in
every run of the same --seed), then reference and policy log-probs, the GRPO loss, backward and
the optimizer step. --leak-at STEP keeps, from that step on, the last token's fp32 logits of every
sequence in a list "for logging" (about 9.3 MiB per step at 16 sequences).

Writes to --out: monitor.jsonl (the StepMonitor log), snapshots/ (the leak recording), summary.json;
prints a short summary. Phases of a run:
  1. the monitored loop (--steps), timing every step and the monitor's own step() call;
  2. unless --no-overhead: --timing-steps steps without the monitor, then with it, from the same
     seed (whole-step comparison), a micro-benchmark of memory_stats() and mem_get_info(), and
     --timing-steps steps without, then inside rlmem.record() (recording overhead, dump time, size).
Step times are taken with torch.cuda.synchronize() at each step end, in this harness only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import grpo_common as common  # noqa: E402


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--steps", type=int, default=20, help="steps of the monitored loop (default 20)")
    parser.add_argument("--leak-at", type=int, default=None, help="inject the leak from this step on (1-based)")
    parser.add_argument("--record-on-leak", type=int, default=3, help="StepMonitor(record_on_leak=K) (default 3)")
    parser.add_argument("--reset-peak", action="store_true", help="StepMonitor(reset_peak=True)")
    parser.add_argument("--model", choices=sorted(common.MODELS), default="qwen2.5-0.5b")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--prompt-len", type=int, default=64)
    parser.add_argument("--new-tokens", default="32,48,64,96", help="response lengths drawn per step")
    parser.add_argument("--no-reference", action="store_true", help="no reference model")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timing-steps", type=int, default=8, help="steps per arm of the overhead comparisons")
    parser.add_argument("--no-overhead", action="store_true", help="skip the overhead phases")
    parser.add_argument("--stats-out", type=Path, default=None,
                        help="also write the raw memory_stats() series of the monitored loop (for testdata/monitor/)")
    parser.add_argument("--device", default="cuda")
    return parser.parse_args(argv)


def make_trainer(args, seed):
    import torch

    return common.GRPO(args.model, torch.device(args.device), args.prompts, args.group, args.prompt_len,
                       [int(n) for n in args.new_tokens.split(",")], seed=seed, reference=not args.no_reference)


def timed_steps(trainer, count, device, leak_from=None, after_step=None, first_step=1):
    """Runs `count` steps; returns the wall seconds of each (synchronized at each end) and the
    seconds spent in `after_step(step)` of each."""
    step_seconds, hook_seconds = [], []
    for index in range(count):
        number = first_step + index
        started = time.perf_counter()
        trainer.step(leak=leak_from is not None and number >= leak_from)
        common.synchronize(device)
        ended = time.perf_counter()
        if after_step is not None:
            after_step(number)
        hooked = time.perf_counter()
        step_seconds.append(ended - started)
        hook_seconds.append(hooked - ended)
    return step_seconds, hook_seconds


def monitored_run(args, rlmem, out):
    import torch

    device = torch.device(args.device)
    trainer = make_trainer(args, args.seed)
    series = None
    if args.stats_out is not None:
        expected = ["leak"] if args.leak_at else []
        description = (f"grpo_loop.py {args.model}, {args.prompts}x{args.group} sequences, prompt {args.prompt_len}, "
                       f"new tokens {args.new_tokens}" + (f", leak from step {args.leak_at}" if args.leak_at else ", clean"))
        series = common.StatsSeries(description, args.reset_peak, args.leak_at, expected)
    log = out / "monitor.jsonl"
    if log.exists():
        log.unlink()
    monitor = rlmem.StepMonitor(log, reset_peak=args.reset_peak, record_on_leak=args.record_on_leak,
                                snapshot_dir=out / "snapshots")
    monitor_seconds = []
    alerts = []

    def after_step(number):
        if series is not None:
            series.record(number)  # the same figures the monitor reads next
        started = time.perf_counter()
        raised = monitor.step(number)
        monitor_seconds.append(time.perf_counter() - started)
        for alert in raised:
            alerts.append({"step": number, "kind": alert.kind, "rank": alert.rank, "message": alert.message,
                           "site": alert.site, "snapshot": alert.snapshot, "bytes_per_step": alert.bytes_per_step,
                           "since_step": alert.since_step})
            print(f"  step {number}: {alert.message}", flush=True)

    step_seconds, hook_seconds = timed_steps(trainer, args.steps, device, args.leak_at, after_step)
    monitor.close()
    if series is not None:
        series.write(args.stats_out)
    del trainer
    torch.cuda.empty_cache()
    return {"step_seconds": step_seconds, "monitor_step_seconds": monitor_seconds, "alerts": alerts,
            "after_step_seconds": hook_seconds, "log": str(log)}


def overhead_runs(args, rlmem, out):
    """Whole steps without and with the monitor, and without and inside rlmem.record()."""
    import torch

    device = torch.device(args.device)
    result = {}
    trainer = make_trainer(args, args.seed + 100)
    timed_steps(trainer, 2, device)  # warm-up (first-step allocations, kernels)
    without, _ = timed_steps(trainer, args.timing_steps, device)
    trainer.rng.seed(args.seed + 100)  # the same step lengths again
    monitor = rlmem.StepMonitor(None)
    with_monitor, monitor_seconds = timed_steps(trainer, args.timing_steps, device,
                                                after_step=lambda number: monitor.step(number))
    result["monitor"] = {
        "steps_without": without, "steps_with": with_monitor, "monitor_step_seconds": monitor_seconds,
        "memory_stats_call": common.time_calls(torch.cuda.memory_stats, 200),
        "mem_get_info_call": common.time_calls(torch.cuda.mem_get_info, 200),
        "monitor_step_call": common.time_calls(lambda: monitor.step(), 200),
    }
    monitor.close()

    trainer.rng.seed(args.seed + 200)
    record_off, _ = timed_steps(trainer, args.timing_steps, device)
    trainer.rng.seed(args.seed + 200)
    target = out / "record-overhead"
    recorder = rlmem.record(target, dump_at_exit=False)
    with recorder:
        record_on, _ = timed_steps(trainer, args.timing_steps, device, after_step=lambda number: recorder.step())
        started = time.perf_counter()
        path = recorder.dump("overhead")
        dump_seconds = time.perf_counter() - started
    started = time.perf_counter()
    report = rlmem.inspect(path)
    inspect_seconds = time.perf_counter() - started
    result["record"] = {
        "steps_off": record_off, "steps_on": record_on, "dump_seconds": dump_seconds,
        "snapshot_bytes": Path(path).stat().st_size, "trace_events": report["summary"]["events"],
        "inspect_seconds": inspect_seconds, "steps_found": report["steps"]["count"],
        "steps_method": report["steps"]["method"], "leaks_in_clean_recording": [l["site"] for l in report["leaks"]],
    }
    Path(path).unlink()
    del trainer
    torch.cuda.empty_cache()
    return result


def main(argv=None) -> int:
    args = parse_arguments(argv)
    rlmem = common.import_rlmem()
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("grpo_loop.py: no CUDA device here", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {"arguments": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
               "environment": common.environment()}
    print(f"grpo_loop: {args.model}, {args.steps} steps, " + (f"leak from step {args.leak_at}" if args.leak_at else "clean"),
          flush=True)
    run = monitored_run(args, rlmem, args.out)
    summary["run"] = run
    leak_alerts = [a for a in run["alerts"] if a["kind"] == "leak"]
    named = [a for a in leak_alerts if a["site"]]
    if args.leak_at:
        summary["leak_alert_step"] = leak_alerts[0]["step"] if leak_alerts else None
        summary["leak_alert_delay_steps"] = leak_alerts[0]["step"] - args.leak_at if leak_alerts else None
        summary["leak_site"] = named[0]["site"] if named else None
        summary["leak_site_step"] = named[0]["step"] if named else None
        summary["false_alerts"] = [a for a in run["alerts"] if a["kind"] != "leak" or a["step"] < args.leak_at]
    else:
        summary["false_alerts"] = run["alerts"]
    overhead = [m / s for m, s in zip(run["monitor_step_seconds"], run["step_seconds"])]
    summary["monitor_overhead_fraction"] = common.summary_of(overhead)
    summary["step_seconds"] = common.summary_of(run["step_seconds"])
    summary["monitor_step_seconds"] = common.summary_of(run["monitor_step_seconds"])
    if not args.no_overhead:
        print("grpo_loop: overhead phases", flush=True)
        measured = overhead_runs(args, rlmem, args.out)
        summary["overhead"] = measured
        m, r = measured["monitor"], measured["record"]
        summary["overhead_summary"] = {
            "step_without_monitor_median_s": common.summary_of(m["steps_without"])["median"],
            "step_with_monitor_median_s": common.summary_of(m["steps_with"])["median"],
            "monitor_step_median_s": common.summary_of(m["monitor_step_seconds"])["median"],
            "memory_stats_call_median_s": m["memory_stats_call"]["median"],
            "mem_get_info_call_median_s": m["mem_get_info_call"]["median"],
            "step_record_off_median_s": common.summary_of(r["steps_off"])["median"],
            "step_record_on_median_s": common.summary_of(r["steps_on"])["median"],
            "record_dump_s": r["dump_seconds"], "record_snapshot_bytes": r["snapshot_bytes"],
        }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")

    print(f"grpo_loop: step median {summary['step_seconds']['median']:.3f} s; monitor step() median "
          f"{summary['monitor_step_seconds']['median'] * 1e6:.0f} us = "
          f"{summary['monitor_overhead_fraction']['median'] * 100:.3f}% of a step")
    if args.leak_at:
        print(f"grpo_loop: leak from step {args.leak_at}: first alert at step {summary['leak_alert_step']} "
              f"(+{summary['leak_alert_delay_steps']}), site {summary['leak_site']!r} at step {summary['leak_site_step']}")
    print(f"grpo_loop: false alerts: {len(summary['false_alerts'])}")
    for alert in summary["false_alerts"]:
        print(f"  step {alert['step']}: {alert['message']}")
    if "overhead_summary" in summary:
        o = summary["overhead_summary"]
        print(f"grpo_loop: steps without / with monitor {o['step_without_monitor_median_s']:.3f} / "
              f"{o['step_with_monitor_median_s']:.3f} s; memory_stats() {o['memory_stats_call_median_s'] * 1e6:.0f} us, "
              f"mem_get_info() {o['mem_get_info_call_median_s'] * 1e6:.0f} us")
        print(f"grpo_loop: steps without / inside record() {o['step_record_off_median_s']:.3f} / "
              f"{o['step_record_on_median_s']:.3f} s; dump {o['record_dump_s']:.2f} s, "
              f"{o['record_snapshot_bytes'] / 2**20:.1f} MiB")
    print(f"grpo_loop: wrote {args.out / 'summary.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
