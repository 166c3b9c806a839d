#!/usr/bin/env bash
# `rlmem inspect` on real snapshots: text and JSON succeed, and --help teaches.
set -eu
rlmem=$1
testdata=$2
out=$("$rlmem" inspect "$testdata/snapshots/grpo_clean.pickle.zst" --top 5 --frames 2)
echo "$out" | grep -q "peak reserved     774.0 MiB" || { echo "FAIL: text report lacks the peak reserved line"; echo "$out"; exit 1; }
json=$("$rlmem" inspect "$testdata/snapshots/frag_expandable.pickle.zst" --json)
echo "$json" | grep -q '"peak_reserved_bytes": 2931818496' || { echo "FAIL: JSON lacks peak_reserved_bytes 2931818496"; exit 1; }
"$rlmem" inspect --help | grep -q -- "--frames" || { echo "FAIL: inspect --help does not list --frames"; exit 1; }
"$rlmem" --help | grep -q "_record_memory_history" || { echo "FAIL: rlmem --help does not say how to record"; exit 1; }
"$rlmem" inspect "$testdata/snapshots/tiny_oom_expandable_compile.pickle.gz" >/dev/null
echo "inspect CLI ok"
