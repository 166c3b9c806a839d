"""The leak rule on the recorded matrix (testdata/monitor/matrix/): replays every run's step ends
through librlmem's step-end rules as the StepMonitor applies them (rlmem.judge_step over the
newest 64 step ends at every step end) and prints, per run, when the leak was first alerted, the
change point it reported, the rate against the truth, and every alert on a run that does not leak.

    RLMEM_LIBRARY=build/librlmem.so PYTHONPATH=python python3 tools/monitor/leak_rule_table.py [DIR] [--markdown]

The markdown table goes into docs/monitor.md. Needs no torch and no GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def evaluate(run: dict, rlmem) -> dict:
    """The monitor's view of one run: alerts at each step end, and how they compare to the truth."""
    steps = run["steps"]
    truth = run["truth"]
    total = run.get("device_total", 0)
    history = []
    alerted_at, since, rate_at_5, alert_steps, cleared_at = None, None, None, [], None
    active = False
    for entry in steps:
        history.append({"step": entry["step"], "allocated": entry["allocated"], "reserved": entry["reserved"],
                        "inactive_split": entry.get("inactive_split", 0),
                        "step_peak_allocated": entry["step_peak_allocated"],
                        "step_peak_reserved": entry.get("step_peak_reserved", -1),
                        "allocations": entry["allocations"], "num_alloc_retries": entry.get("num_alloc_retries", 0),
                        "num_ooms": entry.get("num_ooms", 0), "device_free": entry.get("device_free", 0),
                        "device_total": total, "limit": 0})
        window = history[-64:]
        judged = rlmem.judge_step(window)
        leak = judged.leak
        if leak.leaking:
            alert_steps.append(entry["step"])
            if alerted_at is None:
                alerted_at, since = entry["step"], window[leak.first_step]["step"]
            active = True
        elif active:
            active, cleared_at = False, entry["step"]
        start = truth.get("start_step")
        if run["leaking"] and start is not None and entry["step"] == start + 4:
            rate_at_5 = leak.bytes_per_step if leak.leaking else None
            # The true slope: what the leak held over its 5 step ends; for a leak kept every k-th
            # step, its mean rate (5 step ends of a staircase are no slope of their own).
            held = entry.get("held_bytes", 0)
            every = truth.get("every") or 1
            true_rate = truth.get("mean_bytes_per_step") if every > 1 or not held else held / 5
            rate_at_5 = (rate_at_5, true_rate)
    return {"alerted_at": alerted_at, "since": since, "rate_at_5": rate_at_5, "alert_steps": alert_steps,
            "cleared_at": cleared_at}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", nargs="?", type=Path, default=ROOT / "testdata" / "monitor" / "matrix")
    parser.add_argument("--markdown", action="store_true", help="print the docs/monitor.md table")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "python"))
    import rlmem

    rows = []
    for path in sorted(args.directory.glob("*.json")):
        run = json.loads(path.read_text())
        found = evaluate(run, rlmem)
        truth = run["truth"]
        start = truth.get("start_step")
        if run["leaking"]:
            delay = None if found["alerted_at"] is None else found["alerted_at"] - start + 1
            measured, true_rate = found["rate_at_5"] or (None, None)
            error = None if not measured or not true_rate else measured / true_rate - 1
            verdict = (f"alert at step {found['alerted_at']} (step end {delay} of the leak), since step {found['since']}"
                       f" (truth {start})" if delay else "MISSED")
            rate = f"{error:+.0%}" if error is not None else "-"
        else:
            stop = truth.get("stop_step")
            late = [s for s in found["alert_steps"] if stop is None or s > stop + 3]
            verdict = "no alert" if not found["alert_steps"] else (
                f"alerts at {found['alert_steps'][0]}..{found['alert_steps'][-1]}, cleared at {found['cleared_at']}"
                + (f"; {len(late)} after growth stopped + 3" if late else "; cleared in time"))
            rate = "-"
        rows.append((path.stem, run["shape"], run["size"], len(run["steps"]), start if run["leaking"] else "-",
                     verdict, rate))
    if args.markdown:
        print("| run | shape | size | steps | leak from | monitor | rate at 5 leaking step ends vs truth |")
        print("|---|---|---|---|---|---|---|")
        for row in rows:
            print("| " + " | ".join(str(cell) for cell in row) + " |")
    else:
        for row in rows:
            print(f"{row[0]:28} {row[3]:>3} {str(row[4]):>4}  {row[5]}  {row[6]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
