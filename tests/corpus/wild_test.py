#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""rlmem against the corpus of real snapshots from public repositories (testdata/wild/MANIFEST.json):
for every device of every snapshot present, `rlmem inspect --json --device D` must give the
reference's event count and peak reserved exactly, and a peak allocated within the bounds that
whole-block accounting allows; with no --device it must pick the device with the most data (tools/corpus/reference.py says how they are found); `rlmem replay --json` under the
recorded settings must reproduce every recorded segment event, unless the manifest's
replay_divergence says why not (then it must still report a fidelity). The 15 files with a
licence that allows it are carried in testdata/wild/files/ (testdata/wild/README.md); the others
are checked where present (testdata/wild/local/, from tools/corpus/fetch.py) and otherwise
skipped, each with a line.

Always checked, with or without the corpus: the reference agrees with torch's own counters on
the project's snapshots whose runs recorded them; snapshots with nothing recorded get a clear
report (exit 0, zero events and zero peaks) or a clear refusal (exit 2, one line), never a crash.

  tests/corpus/wild_test.py --rlmem build/rlmem --manifest testdata/wild/MANIFEST.json \\
      --corpus testdata/wild/files --corpus testdata/wild/local [--corpus DIR ...] [-k NAME]
Exit 0: all present hold; 1: some did not (each printed with expected and seen); 77 (ctest:
skipped): none of the corpus was present (or -k matched none), so nothing of it was checked.
"""
import argparse
import hashlib
import json
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "corpus"))
import reference  # noqa: E402  (the independent reference the manifest's figures come from)


def decompressed(path):
    return subprocess.run(["zstd", "-dc", str(path)], check=True, capture_output=True).stdout


def inspect_json(rlmem, path, device=None):
    argv = [rlmem, "inspect", "--json", str(path)] + ([] if device is None else ["--device", str(device)])
    done = subprocess.run(argv, capture_output=True, timeout=300)
    return done.returncode, done.stdout, done.stderr.decode("utf-8", "replace")


def check_device(rlmem, path, figures):
    """Problems (expected, seen) of one device; an empty list when it holds."""
    code, out, err = inspect_json(rlmem, path, figures["device"])
    if code != 0:
        return [f"exit {code}, expected 0; stderr: {err.strip()[:300]!r}"]
    summary = json.loads(out)["summary"]
    problems = []
    if summary["events"] != figures["events"]:
        problems.append(f"events: expected {figures['events']}, saw {summary['events']}")
    if summary["peak_reserved_bytes"] != figures["peak_reserved"]:
        problems.append(f"peak reserved: expected {figures['peak_reserved']}, saw {summary['peak_reserved_bytes']}")
    low, high = figures["peak_allocated_low"], figures["peak_allocated_high"]
    seen = summary["peak_allocated_bytes"]
    if not low <= seen <= high:
        problems.append(f"peak allocated: expected within [{low}, {high}], saw {seen}")
    return problems


def check_replay(rlmem, path, entry):
    """Problems of `rlmem replay --json` under the recorded settings: it reports a fidelity (or
    refuses a file without a trace in one line), and reproduces every recorded segment event
    unless the manifest says why not. Returns (problems, what it saw)."""
    done = subprocess.run([rlmem, "replay", "--json", str(path)], capture_output=True, timeout=600)
    err = done.stderr.decode("utf-8", "replace")
    if done.returncode == 2 and "has no trace" in err and len(err.strip().splitlines()) == 1:
        return [], "no trace"
    if done.returncode != 0:
        return [f"replay: exit {done.returncode}, expected 0; stderr: {err.strip()[:300]!r}"], "refused"
    fidelity = json.loads(done.stdout)["fidelity"]
    matched, expected = fidelity["segment_events_matched"], fidelity["segment_events_expected"]
    seen = f"{matched} of {expected}" + (f" ({fidelity['first_mismatch']})" if fidelity["first_mismatch"] else "")
    if entry.get("replay_divergence"):
        return [], seen + f"; known: {entry['replay_divergence']}"
    if fidelity["first_mismatch"] or matched != expected:
        return [f"replay: expected all {expected} recorded segment events reproduced, saw {seen}"], seen
    return [], seen


def check_corpus(rlmem, manifest, corpus_dirs, only):
    checked, skipped, failures = 0, 0, []
    for entry in manifest["snapshots"]:
        if only not in entry["file"]:
            continue
        path = next((d / entry["file"] for d in corpus_dirs if (d / entry["file"]).is_file()), None)
        if path is None:
            print(f"skip {entry['file']}: not present here ({entry['source']['repo']}, licence {entry['source']['licence']})")
            skipped += 1
            continue
        if hashlib.sha256(decompressed(path)).hexdigest() != entry["sha256"]:
            failures.append(f"{entry['file']}: its sha256 is not the manifest's: another file under that name")
            continue
        if entry["default_device"] is not None:
            code, out, err = inspect_json(rlmem, path)
            seen = json.loads(out)["device"] if code == 0 else f"exit {code}: {err.strip()[:200]!r}"
            if seen != entry["default_device"]:
                failures.append(f"{entry['file']}: with no --device, expected the device with the most data, "
                                f"{entry['default_device']}, saw {seen}")
        for figures in entry["devices"]:
            problems = check_device(rlmem, path, figures)
            status = "ok" if not problems else "FAIL"
            print(f"{status:4} {entry['file']} device {figures['device']}")
            failures += [f"{entry['file']} device {figures['device']}: {p}" for p in problems]
        problems, seen = check_replay(rlmem, path, entry)
        print(f"{'ok' if not problems else 'FAIL':4} {entry['file']} replay: {seen}")
        failures += [f"{entry['file']}: {p}" for p in problems]
        checked += 1
    print(f"{checked} snapshots checked, {skipped} not present")
    return failures, checked


def check_empty_snapshots(rlmem):
    """Nothing recorded: a clear report or a clear refusal."""
    failures = []
    empties = {"no segments, no traces": {"segments": [], "device_traces": []},
               "no segments, one empty trace": {"segments": [], "device_traces": [[]]},
               "an empty segment list (the early layout)": []}
    with tempfile.TemporaryDirectory(prefix="rlmem-empty-") as tmp:
        for what, snapshot in empties.items():
            path = Path(tmp) / "empty.pickle"
            path.write_bytes(pickle.dumps(snapshot, protocol=4))
            code, out, err = inspect_json(rlmem, path)
            lines = [line for line in err.splitlines() if line.strip()]
            if code == 2 and len(lines) == 1:
                continue
            if code != 0:
                failures.append(f"empty snapshot ({what}): exit {code}, expected 0 or 2 with one line; stderr: {err.strip()[:300]!r}")
                continue
            summary = json.loads(out)["summary"]
            seen = (summary["events"], summary["peak_allocated_bytes"], summary["peak_reserved_bytes"])
            if seen != (0, 0, 0):
                failures.append(f"empty snapshot ({what}): expected 0 events and zero peaks, saw {seen}")
    return failures


def check_reference_against_torch(testdata):
    """The reference itself, against torch's own counters (max_memory_reserved/allocated) of the
    runs that recorded three of the project's snapshots (testdata/snapshots/frag_capacity.json)."""
    failures = []
    rows = json.loads((testdata / "snapshots" / "frag_capacity.json").read_text())
    runs = {"frag_default.pickle.zst": ("default", 0), "frag_default_oom.pickle.zst": ("default", 2805590497),
            "frag_expandable.pickle.zst": ("expandable", 0)}
    for name, (conf, cap) in runs.items():
        torch_row = next(r for r in rows if r["conf"] == conf and r["cap"] == cap)
        figures = reference.describe(reference.read_bytes(testdata / "snapshots" / name))["devices"][0]
        if figures["peak_reserved"] != torch_row["peak_reserved"]:
            failures.append(f"reference on {name}: peak reserved {figures['peak_reserved']}, torch said {torch_row['peak_reserved']}")
        if not figures["peak_allocated_low"] <= torch_row["peak_alloc"] <= figures["peak_allocated_high"]:
            failures.append(f"reference on {name}: peak allocated bounds [{figures['peak_allocated_low']}, "
                            f"{figures['peak_allocated_high']}] miss torch's {torch_row['peak_alloc']}")
    print(f"reference checked against torch's counters on {len(runs)} snapshots")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rlmem", required=True)
    parser.add_argument("--manifest", required=True, type=Path)
    parser.add_argument("--corpus", action="append", type=Path, default=[], help="a folder that may hold corpus files")
    parser.add_argument("-k", dest="only", default="", help="only files whose name contains this")
    options = parser.parse_args()
    manifest = json.loads(options.manifest.read_text())
    failures = check_reference_against_torch(options.manifest.resolve().parents[1])
    failures += check_empty_snapshots(options.rlmem)
    corpus_failures, checked = check_corpus(options.rlmem, manifest, options.corpus, options.only)
    failures += corpus_failures
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    if failures:
        return 1
    if checked == 0:
        print("skipped: no snapshot of the corpus was checked (none is present here, or none matched -k)")
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main())
