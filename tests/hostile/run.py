#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs rlmem on every hostile input class and checks it holds: exit 0 or 2, one line on stderr
when it refuses, and no blow-up. Each `*_cases.py` next to this file lists the classes of one
area (`CASES`, a list of Case). Every input is generated here, at the size the issue names.

  tests/hostile/run.py --rlmem build/rlmem            # the test (ctest runs this)
  tests/hostile/run.py --rlmem build/rlmem --table    # the benchmark table for docs/benchmarks.md
  tests/hostile/run.py --rlmem build/rlmem -k memo    # only cases whose name contains "memo"

Limits: every run gets an 8 GiB address-space limit (RLIMIT_AS) unless --sanitized (ASan
reserves terabytes of shadow memory); peak RSS must stay under --max-rss-mib (2048); a run still
going after --hang-seconds is a hang. Times are reported, not asserted: targets live in the
benchmark table, a timed test would be noise.
"""
import argparse
import dataclasses
import importlib.util
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Optional


@dataclasses.dataclass
class Case:
    name: str                                   # "memo-dag-allocator-settings"
    args: list                                  # argv after the binary; {input} and {dir} are replaced
    make_input: Optional[Callable[[], bytes]] = None  # bytes written to {input}
    suffix: str = ".pickle"                     # the name {input} gets
    setup: Optional[Callable[[Path], None]] = None    # makes more files in {dir} (ranks, FIFOs)
    exits: tuple = (0, 2)                       # exit codes that mean "held"
    note: str = ""                              # what the class is, for the table


def load_cases(only: str):
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    cases = []
    for module_path in sorted(here.glob("*_cases.py")):
        spec = importlib.util.spec_from_file_location(module_path.stem, module_path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        cases.extend(c for c in module.CASES if only in c.name)
    return cases


def run_case(rlmem: str, case: Case, work: Path, address_limit: Optional[int], hang_seconds: float):
    case_dir = work / case.name
    case_dir.mkdir()
    input_path = case_dir / ("input" + case.suffix)
    if case.make_input is not None:
        input_path.write_bytes(case.make_input())
    if case.setup is not None:
        case.setup(case_dir)
    argv = [rlmem] + [a.replace("{input}", str(input_path)).replace("{dir}", str(case_dir)) for a in case.args]

    def limit():
        if address_limit:
            resource.setrlimit(resource.RLIMIT_AS, (address_limit, address_limit))

    start = time.monotonic()
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, preexec_fn=limit)
    stderr_chunks = []
    reader = threading.Thread(target=lambda: stderr_chunks.append(process.stderr.read()), daemon=True)
    reader.start()
    timed_out = False
    while True:
        # wait4 gives this child's own peak RSS, which RUSAGE_CHILDREN (a maximum over all) cannot.
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid != 0:
            break
        if time.monotonic() - start > hang_seconds:
            timed_out = True
            process.kill()
            pid, status, usage = os.wait4(process.pid, 0)
            break
        time.sleep(0.005)
    elapsed = time.monotonic() - start
    reader.join()
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = b"".join(stderr_chunks).decode("utf-8", "replace")
    return process.returncode, stderr, elapsed, timed_out, usage.ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rlmem", required=True)
    parser.add_argument("-k", dest="only", default="")
    parser.add_argument("--table", action="store_true", help="print a markdown table of time and RSS")
    parser.add_argument("--sanitized", action="store_true", help="no address-space limit, no RSS check")
    parser.add_argument("--max-rss-mib", type=int, default=2048)
    parser.add_argument("--hang-seconds", type=float, default=60.0)
    options = parser.parse_args()

    cases = load_cases(options.only)
    if not cases:
        print(f"no hostile cases match '{options.only}'", file=sys.stderr)
        return 2
    address_limit = None if options.sanitized else 8 << 30
    failures = []
    rows = []
    with tempfile.TemporaryDirectory(prefix="rlmem-hostile-") as tmp:
        for case in cases:
            code, stderr, elapsed, timed_out, rss_mib = run_case(options.rlmem, case, Path(tmp), address_limit,
                                                                 options.hang_seconds)
            lines = [line for line in stderr.splitlines() if line.strip()]
            problem = None
            if timed_out:
                problem = f"still running after {options.hang_seconds:.0f} s (a hang)"
            elif code not in case.exits:
                problem = f"exit {code}, expected one of {case.exits}; stderr: {stderr.strip()[:500]!r}"
            elif code == 2 and len(lines) != 1:
                problem = f"exit 2 with {len(lines)} lines on stderr, expected one: {stderr.strip()[:500]!r}"
            elif not options.sanitized and rss_mib > options.max_rss_mib:
                problem = f"peak RSS {rss_mib:.0f} MiB, expected at most {options.max_rss_mib} MiB"
            first_line = lines[0] if lines else ""
            rows.append((case, code, elapsed, rss_mib, first_line))
            status = "ok" if problem is None else "FAIL"
            print(f"{status:4} {case.name:40} exit {code} {elapsed:6.2f} s  {first_line[:120]}", flush=True)
            if problem:
                failures.append(f"{case.name}: {problem}")
    if options.table:
        print("\n| class | what | exit | wall s | peak RSS MiB | first line |")
        print("|---|---|---:|---:|---:|---|")
        for case, code, elapsed, rss, line in rows:
            line = line.replace("|", "\\|")[:90]
            print(f"| {case.name} | {case.note} | {code} | {elapsed:.2f} | {rss:.0f} | {line} |")
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
