#!/usr/bin/env bash
# One implementation: librlmem's inspect document is the CLI's `--json`, byte for byte, on every
# bundled snapshot. Usage: document_equals_cli.sh RLMEM C_ABI_TEST TESTDATA_DIR
set -u
rlmem=$1 library=$2 testdata=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0 compared=0
for snapshot in "$testdata"/snapshots/*.pickle*; do
  "$rlmem" inspect "$snapshot" --json --quiet > "$work/cli.json" || { echo "FAIL cli on $snapshot"; status=1; continue; }
  "$library" --print-json "$snapshot" > "$work/library.json" || { echo "FAIL library on $snapshot"; status=1; continue; }
  if ! cmp -s "$work/cli.json" "$work/library.json"; then
    echo "FAIL $(basename "$snapshot"): the library's document differs from the CLI's"; status=1
  fi
  compared=$((compared + 1))
done
[ "$compared" -ge 10 ] || { echo "FAIL only $compared snapshots compared"; status=1; }
[ $status -eq 0 ] && echo "library and CLI documents equal on $compared snapshots"
exit $status
