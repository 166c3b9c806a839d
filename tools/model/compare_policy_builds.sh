#!/bin/sh
# Two builds of rlmem place alike: `rlmem replay --allocator rlmem` (free pages cached, and
# released at once; text and --json; with --min-capacity, whose search replays under many caps)
# and `replay --compare`, byte for byte, and policy_digest's digest of every address, page and
# statistic (bench/policy_digest.cpp), on every bundled snapshot. For a change to the policy's
# bookkeeping, which must not move anything (docs/benchmarks.md, "The policy's bookkeeping in torch's shape").
#
#   tools/model/compare_policy_builds.sh OLD_BUILD OLD_BENCH_BUILD NEW_BUILD NEW_BENCH_BUILD
#
# A build is a `cmake --preset release` directory (rlmem), a bench build one `cmake --preset
# bench` directory (bench/policy_digest). Prints each difference and the count of files
# compared; exits 1 on any difference.
set -u
if [ $# -ne 4 ]; then
  echo "usage: compare_policy_builds.sh OLD_BUILD OLD_BENCH_BUILD NEW_BUILD NEW_BENCH_BUILD" >&2
  exit 2
fi
old=$1 old_bench=$2 new=$3 new_bench=$4
here=$(dirname "$0")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
files=0 outputs=0 differences=0
for snapshot in "$here"/../../testdata/snapshots/*.pickle*; do
  files=$((files + 1))
  name=$(basename "$snapshot")
  for variant in "" "--release-free-pages" "--min-capacity" "--compare"; do
    for format in "" "--json"; do
      # shellcheck disable=SC2086 # the variant and format are one word or none
      "$old/rlmem" replay --quiet --allocator rlmem $variant $format "$snapshot" >"$scratch/old" 2>&1
      old_code=$?
      # shellcheck disable=SC2086
      "$new/rlmem" replay --quiet --allocator rlmem $variant $format "$snapshot" >"$scratch/new" 2>&1
      new_code=$?
      outputs=$((outputs + 1))
      if [ "$old_code" != "$new_code" ] || ! cmp -s "$scratch/old" "$scratch/new"; then
        echo "differs: $name replay --allocator rlmem $variant $format (exit $old_code, then $new_code)"
        differences=$((differences + 1))
      fi
    done
  done
  "$old_bench/bench/policy_digest" "$snapshot" >"$scratch/old" 2>&1
  "$new_bench/bench/policy_digest" "$snapshot" >"$scratch/new" 2>&1
  outputs=$((outputs + 1))
  if ! cmp -s "$scratch/old" "$scratch/new"; then
    echo "differs: $name policy_digest"
    diff "$scratch/old" "$scratch/new"
    differences=$((differences + 1))
  fi
done
echo "$files snapshots, $outputs outputs compared, $differences differ"
[ "$differences" = 0 ]
