#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Fetches the corpus of snapshots from the wild into testdata/wild/local/: for each row of
tools/corpus/sources.tsv, the file at its repository's commit from raw.githubusercontent.com,
checked against the sha256 of testdata/wild/MANIFEST.json, written zstd -19 as NAME.pickle.zst.

  tools/corpus/fetch.py [-k NAME]      # needs curl and zstd; skips files already present

Files carried in testdata/wild/files/ (a licence allows it) are not fetched. Most of the others'
repositories state no licence: they are fetched for local checks and never committed. Exit 0: every file is here and checked; 1: some could not be fetched or differ.
"""
import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-k", dest="only", default="", help="only files whose name contains this")
    options = parser.parse_args()
    expected = {e["file"]: e["sha256"] for e in json.loads((ROOT / "testdata/wild/MANIFEST.json").read_text())["snapshots"]}
    local = ROOT / "testdata/wild/local"
    local.mkdir(parents=True, exist_ok=True)
    failed = []
    for line in (ROOT / "tools/corpus/sources.tsv").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        name, repo, commit, path = line.split("\t")[:4]
        target = local / f"{name}.pickle.zst"
        if options.only not in name or target.exists() or (ROOT / "testdata/wild/files" / target.name).exists():
            continue
        url = f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"
        got = subprocess.run(["curl", "-fsSL", url], capture_output=True)
        if got.returncode != 0:
            failed.append(f"{name}: curl {url}: exit {got.returncode}")
            continue
        digest = hashlib.sha256(got.stdout).hexdigest()
        if digest != expected.get(target.name):
            failed.append(f"{name}: sha256 {digest}, expected {expected.get(target.name)}")
            continue
        subprocess.run(["zstd", "-q", "-19", "-o", str(target)], input=got.stdout, check=True)
        print(f"fetched {name}")
    for failure in failed:
        print(f"FAILED {failure}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
