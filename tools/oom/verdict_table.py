"""Prints the table of docs/inspect.md's "OOM verdicts on capped runs": for each run of
testdata/oom_capped (tools/oom/record_capped_runs.py), the range the snapshot shows, the verdict
stated over it, the verdict at the real cap, what the job printed, and whether expandable
segments completed at that cap.

    RLMEM_LIBRARY=build/librlmem.so PYTHONPATH=python python3 tools/oom/verdict_table.py
"""

import json
import sys
from pathlib import Path

import rlmem
from rlmem._format import format_bytes

DATA = Path(__file__).resolve().parents[2] / "testdata" / "oom_capped"


def main() -> int:
    rows = json.loads((DATA / "capped.json").read_text())["rows"]
    expandable = {(r["factor"], r["order"]): r["completed"] for r in rows if r["allocator"] == "expandable"}
    print("| cap | order | range the file shows | verdict over it | at the real cap | in the job | expandable segments |")
    print("|---|---|---|---|---|---|---|")
    for row in sorted((r for r in rows if r["allocator"] == "native" and r.get("snapshot")), key=lambda r: (r["order"], r["factor"])):
        path = DATA / (row["snapshot"] + ".zst")
        report = rlmem.inspect(path)
        oom, limit = report["oom"][-1], report["oom_limit"]
        over = oom["verdict"]
        if over == "depends_on_limit":
            over = f"fragmentation from {format_bytes(oom['fragmentation_from_bytes'])}"
        at_cap = rlmem.inspect(path, limit=row["torch_allowed_bytes"])["oom"][-1]["verdict"]
        job = row["verdict_line"].split(":")[2].split("(")[0].strip().lower()
        done = "completes" if expandable[(row["factor"], row["order"])] else "fails"
        print(f"| {row['factor']:.2f}x ({format_bytes(row['torch_allowed_bytes'])}) | {row['order']} | "
              f"{format_bytes(limit['proven_low_bytes'])} to {format_bytes(limit['proven_high_bytes'])} | {over} | {at_cap} | {job} | {done} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
