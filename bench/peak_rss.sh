#!/usr/bin/env bash
# Peak resident memory of `rlmem inspect` against each fixture's uncompressed size.
# Usage: bench/peak_rss.sh path/to/rlmem [testdata dir]
set -eu
rlmem=${1:-build/rlmem}
testdata=${2:-testdata}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-22s %12s %12s %8s\n' fixture "pickle bytes" "peak RSS" ratio
for name in grpo_clean grpo_leak_logits frag_default frag_expandable; do
  zstd -q -d -c "$testdata/snapshots/$name.pickle.zst" >"$work/$name.pickle"
  size=$(stat -c %s "$work/$name.pickle")
  rss_kib=$(/usr/bin/time -f %M "$rlmem" inspect --quiet "$work/$name.pickle" 2>&1 >/dev/null | tail -1)
  awk -v n="$name" -v s="$size" -v r="$rss_kib" 'BEGIN { printf "%-22s %12d %12d %8.2f\n", n, s, r * 1024, r * 1024 / s }'
done
