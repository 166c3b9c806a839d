#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`rlmem inspect --json` on a few bundled snapshots equals the golden documents in
testdata/golden/, value for value (every key, every number, every string; floats as written).

No field is ignored: the document carries no timing of the run (its times are the recording's
own), and the one field that depends on how rlmem was called, `file` (the path as given), is
made fixed by running rlmem from testdata/ with the path `snapshots/NAME`.

  tests/golden/inspect_golden.py --rlmem build/rlmem            # compare (ctest cli_inspect_golden)
  tests/golden/inspect_golden.py --rlmem build/rlmem --write    # regenerate, deliberately

Regenerate only when a change of the output is intended, and commit the new documents with the
change that explains them (git diff shows which figures moved). Exit 0: all equal; 1: some
differ (each difference printed with its path, expected and seen), or rlmem failed.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

TESTDATA = Path(__file__).resolve().parents[2] / "testdata"
# Small fixtures with something to say: a clean run, a leak, a fragmentation OOM, C++ stacks.
FIXTURES = ["grpo_clean.pickle.zst", "grpo_leak_logits.pickle.zst", "frag_default_oom.pickle.zst",
            "tiny_oom_cpp_stacks.pickle"]


def golden_path(name):
    return TESTDATA / "golden" / f"{name.split('.')[0]}.inspect.json"


def inspect(rlmem, name):
    done = subprocess.run([rlmem, "inspect", "--json", "--quiet", f"snapshots/{name}"], cwd=TESTDATA,
                          capture_output=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"rlmem inspect {name}: exit {done.returncode}, expected 0; stderr: "
                           f"{done.stderr.decode('utf-8', 'replace').strip()[:300]!r}")
    return done.stdout


def differences(expected, seen, path="", out=None):
    """Every place where two documents differ, as (path, expected, seen)."""
    out = [] if out is None else out
    if type(expected) is not type(seen):
        out.append((path or "/", expected, seen))
    elif isinstance(expected, dict):
        for key in list(expected) + [k for k in seen if k not in expected]:
            if key not in seen or key not in expected:
                out.append((f"{path}/{key}", expected.get(key, "(absent)"), seen.get(key, "(absent)")))
            else:
                differences(expected[key], seen[key], f"{path}/{key}", out)
    elif isinstance(expected, list):
        if len(expected) != len(seen):
            out.append((f"{path} (length)", len(expected), len(seen)))
        for k, (a, b) in enumerate(zip(expected, seen)):
            differences(a, b, f"{path}[{k}]", out)
    elif expected != seen:
        out.append((path or "/", expected, seen))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rlmem", required=True, type=lambda p: str(Path(p).resolve()))
    parser.add_argument("--write", action="store_true", help="regenerate the golden documents (deliberately)")
    options = parser.parse_args()
    failed = 0
    for name in FIXTURES:
        try:
            output = inspect(options.rlmem, name)
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            print(f"FAIL {error}")
            failed += 1
            continue
        golden = golden_path(name)
        if options.write:
            golden.parent.mkdir(parents=True, exist_ok=True)
            golden.write_bytes(output)
            print(f"wrote {golden.relative_to(TESTDATA.parent)}")
            continue
        if not golden.is_file():
            print(f"FAIL {name}: no golden document at {golden} (write one with --write)")
            failed += 1
            continue
        found = differences(json.loads(golden.read_text()), json.loads(output))
        if not found:
            print(f"ok   {name}: equals {golden.relative_to(TESTDATA.parent)}")
            continue
        failed += 1
        print(f"FAIL {name}: {len(found)} differences from {golden.relative_to(TESTDATA.parent)}; the first:")
        for path, expected, seen in found[:20]:
            print(f"  {path}: expected {json.dumps(expected)[:200]}, saw {json.dumps(seen)[:200]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
