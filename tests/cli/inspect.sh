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
leak=$("$rlmem" inspect "$testdata/snapshots/grpo_leak_logits.pickle.zst")
echo "$leak" | grep -q "LEAK rl/record.py:41 logprobs_of  +46.9 MiB per step over 4 steps" || { echo "FAIL: no LEAK line"; echo "$leak"; exit 1; }
oom=$("$rlmem" inspect "$testdata/snapshots/frag_default_oom.pickle.zst" --json)
echo "$oom" | grep -q '"verdict": "fragmentation"' || { echo "FAIL: OOM verdict missing"; exit 1; }
echo "$oom" | grep -q '"requested_bytes": 490880000' || { echo "FAIL: OOM requested bytes missing"; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cp "$testdata/snapshots/grpo_clean.pickle.zst" "$work/snapshot_rank0.pickle.zst"
cp "$testdata/snapshots/grpo_leak_logits.pickle.zst" "$work/snapshot_rank7.pickle.zst"
ranks=$("$rlmem" inspect "$work")
echo "$ranks" | grep -Eq "^ +7 +852.1 MiB +928.0 MiB +1 " || { echo "FAIL: rank 7 row"; echo "$ranks"; exit 1; }
echo "$ranks" | grep -q "Imbalance: peak allocated from 713.0 MiB (rank 0) to 852.1 MiB (rank 7)" || { echo "FAIL: imbalance"; echo "$ranks"; exit 1; }
diff_out=$("$rlmem" diff "$work/snapshot_rank0.pickle.zst" "$work/snapshot_rank7.pickle.zst" --json)
echo "$diff_out" | grep -q '"key": "rl/record.py:41 logprobs_of"' || { echo "FAIL: diff lacks the leaking site"; exit 1; }
replayed=$("$rlmem" replay "$testdata/snapshots/frag_default.pickle.zst" --capacity 2805590497 --json)
echo "$replayed" | grep -q '"requested_bytes": 490880000' || { echo "FAIL: replay under the cap does not OOM asking 490880000"; exit 1; }
"$rlmem" replay "$testdata/snapshots/frag_default.pickle.zst" | grep -q "fidelity         78 of 78 recorded segment events reproduced" ||
  { echo "FAIL: replay fidelity line"; exit 1; }
# Issue 11: the --compare label is the whole setting, every line within 100 columns.
compared=$("$rlmem" replay --compare "$testdata/snapshots/fidelity_train_empty_cache_expandable.pickle.zst")
echo "$compared" | grep -q "recorded: expandable_segments:True " ||
  { echo "FAIL: expected the label 'recorded: expandable_segments:True' whole, saw:"; echo "$compared"; exit 1; }
echo "$compared" | awk 'length > 100 { exit 1 }' || { echo "FAIL: expected lines within 100 columns, saw:"; echo "$compared"; exit 1; }
echo "inspect and replay CLI ok"
