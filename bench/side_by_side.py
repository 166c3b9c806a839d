#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Side by side in one run, alternating: wall time and peak RSS of each command on one snapshot.
Every command runs REPEATS times in turn (A B C A B C ...), so drift on a shared machine hits all
alike; the table gives the median wall time, the peak RSS (wait4's ru_maxrss) and the ratio to
the first command.

  bench/side_by_side.py FILE --repeats 3 \
      --run "rlmem=build/rlmem inspect --json {file}" \
      --run "pickle.load=python3 -c 'import pickle,sys; pickle.load(open(sys.argv[1],\"rb\"))' {file}" \
      --run "memory_viz stats=python3 -m torch.cuda._memory_viz stats {file}"
"""
import argparse
import os
import shlex
import statistics
import subprocess
import time


def run_once(argv):
    start = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.monotonic() - start
    stderr = process.stderr.read().decode("utf-8", "replace")
    process.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{argv[0]} exited {code}: {stderr.strip()[:300]}")
    return elapsed, usage.ru_maxrss * 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("file")
    parser.add_argument("--run", action="append", required=True, help="NAME=COMMAND with {file}")
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    commands = []
    for spec in options.run:
        name, command = spec.split("=", 1)
        commands.append((name, shlex.split(command.replace("{file}", shlex.quote(options.file)))))
    walls = {name: [] for name, _ in commands}
    rss = {name: 0 for name, _ in commands}
    for _ in range(options.repeats):
        for name, argv in commands:
            elapsed, peak = run_once(argv)
            walls[name].append(elapsed)
            rss[name] = max(rss[name], peak)
    size = os.path.getsize(options.file)
    first = commands[0][0]
    base = statistics.median(walls[first])
    print(f"file {os.path.basename(options.file)}: {size:,} bytes; median of {options.repeats}, alternating")
    print("| command | wall s (median) | runs | MB/s | peak RSS MB | RSS / file | time / " + first + " |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for name, _ in commands:
        median = statistics.median(walls[name])
        runs = " ".join(f"{w:.2f}" for w in walls[name])
        print(f"| {name} | {median:.2f} | {runs} | {size / 1e6 / median:.0f} | {rss[name] / 1e6:.0f} | "
              f"{rss[name] / size:.2f} | {median / base:.2f} |")


if __name__ == "__main__":
    main()
