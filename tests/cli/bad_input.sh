#!/usr/bin/env bash
# Bad input to `rlmem inspect`: exit code 2, exactly one line on stderr, nothing on stdout.
set -u
rlmem=$1
testdata=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

expect_bad() {
  local name=$1; shift
  "$rlmem" "$@" >"$work/out" 2>"$work/err"
  local code=$?
  local lines
  lines=$(wc -l <"$work/err")
  if [ "$code" -ne 2 ] || [ "$lines" -ne 1 ] || [ -s "$work/out" ]; then
    echo "FAIL $name: expected exit 2, one stderr line, empty stdout; saw exit $code, $lines stderr lines, $(wc -c <"$work/out") stdout bytes"
    cat "$work/err"
    failures=$((failures + 1))
  else
    echo "ok   $name: $(cat "$work/err")"
  fi
}

: >"$work/empty.pickle"
printf 'not a pickle at all' >"$work/text.pickle"
printf '\x80\x04cos\nsystem\n(X\x02\x00\x00\x00idtR.' >"$work/hostile.pickle"
printf '\x80\x04K\x05.' >"$work/int.pickle"
head -c 5000 "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" >"$work/truncated.pickle"
printf '\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x40' >"$work/huge_length.pickle"
head -c 100000 "$testdata/snapshots/grpo_clean.pickle.zst" >"$work/truncated.pickle.zst"

expect_bad "empty file" inspect "$work/empty.pickle"
expect_bad "wrong magic" inspect "$work/text.pickle"
expect_bad "hostile GLOBAL+REDUCE" inspect "$work/hostile.pickle"
expect_bad "pickle that is not a snapshot" inspect "$work/int.pickle"
expect_bad "truncated pickle" inspect "$work/truncated.pickle"
expect_bad "absurd length prefix" inspect "$work/huge_length.pickle"
expect_bad "truncated zstd" inspect "$work/truncated.pickle.zst"
expect_bad "missing file" inspect "$work/does-not-exist.pickle"
mkdir -p "$work/no_snapshots" "$work/ranks"
cp "$work/truncated.pickle" "$work/ranks/rank1.pickle"
cp "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" "$work/ranks/rank0.pickle"
expect_bad "a folder without snapshots" inspect "$work/no_snapshots"
"$rlmem" inspect "$work/ranks" >"$work/out" 2>"$work/err"
if [ $? -ne 2 ] || [ "$(wc -l <"$work/err")" -ne 1 ] || ! grep -q "ERROR" "$work/out"; then
  echo "FAIL a folder with one bad rank: expected exit 2, one stderr line and the rank marked ERROR"; failures=$((failures + 1))
else
  echo "ok   a folder with one bad rank: $(cat "$work/err")"
fi
expect_bad "invalid --step-marker" inspect "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" --step-marker "("
expect_bad "--limit that is not a size" inspect "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" --limit lots
expect_bad "--limit below what the recording reserved" inspect --quiet "$testdata/snapshots/frag_default_oom.pickle.zst" --limit 2GiB
expect_bad "--limit above what its OOM allows" inspect --quiet "$testdata/snapshots/frag_default_oom.pickle.zst" --limit 80GiB
printf 'weight foo\n' >"$work/bad_rules.txt"
expect_bad "bad --categories file" inspect "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" --categories "$work/bad_rules.txt"
expect_bad "diff with a bad snapshot" diff "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" "$work/truncated.pickle"
expect_bad "diff with one file" diff "$testdata/snapshots/tiny_oom_cpp_stacks.pickle"
expect_bad "replay with a bad --alloc-conf" replay "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" --alloc-conf "backend:cudaMallocAsync"
expect_bad "replay with a bad --capacity" replay "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" --capacity -5
expect_bad "replay of an expandable recording without expandable segments (refused, not guessed)" replay "$testdata/snapshots/tiny_oom_expandable_compile.pickle" --alloc-conf ""
expect_bad "replay of a truncated snapshot" replay "$work/truncated.pickle"
expect_bad "unknown device" inspect "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" --device 7
expect_bad "unknown option" inspect "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" --frobnicate
expect_bad "no file" inspect
expect_bad "unknown command" frobnicate

grep -q "os" "$work/hostile.pickle" && [ ! -e "$work/pwned" ] || true
if [ "$failures" -ne 0 ]; then echo "$failures failed"; exit 1; fi
echo "all bad inputs rejected cleanly"
