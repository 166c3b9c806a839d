#!/usr/bin/env bash
# Bad input to `rlmem inspect`, `diff` and `replay`: exit code 2, exactly one line on stderr that
# says what is wrong (each check names the text that line must hold), nothing on stdout.
set -u
rlmem=$1
testdata=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# expect_bad NAME MESSAGE ARGS...: MESSAGE is a fixed string the one stderr line must contain.
expect_bad() {
  local name=$1 message=$2; shift 2
  "$rlmem" "$@" >"$work/out" 2>"$work/err"
  local code=$?
  local lines
  lines=$(wc -l <"$work/err")
  if [ "$code" -ne 2 ] || [ "$lines" -ne 1 ] || [ -s "$work/out" ] || ! grep -qF -- "$message" "$work/err"; then
    echo "FAIL $name: expected exit 2, one stderr line holding '$message', empty stdout;" \
         "saw exit $code, $lines stderr lines, $(wc -c <"$work/out") stdout bytes"
    cat "$work/err"
    failures=$((failures + 1))
  else
    echo "ok   $name: $(cat "$work/err")"
  fi
}

: >"$work/empty.pickle"
printf 'not a pickle at all' >"$work/text.pickle"
# os.system("touch $work/pwned") (GLOBAL, MARK, BINUNICODE, TUPLE, REDUCE): Python's pickle.loads
# would make the file; rlmem must refuse it without doing so.
command="touch $work/pwned"
printf '\x80\x04cos\nsystem\n(X%b%stR.' "$(printf '\\x%02x\\x00\\x00\\x00' ${#command})" "$command" >"$work/hostile.pickle"
printf '\x80\x04K\x05.' >"$work/int.pickle"
head -c 5000 "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" >"$work/truncated.pickle"
printf '\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x40' >"$work/huge_length.pickle"
head -c 100000 "$testdata/snapshots/grpo_clean.pickle.zst" >"$work/truncated.pickle.zst"

expect_bad "empty file" "EMPTY_INPUT: the file is empty" inspect "$work/empty.pickle"
expect_bad "wrong magic" "UNKNOWN_FORMAT at byte 0: not a pickle, gzip or zstd file" inspect "$work/text.pickle"
expect_bad "hostile GLOBAL+REDUCE" "FORBIDDEN_OPCODE at byte 2: the pickle wants to import or call code" inspect "$work/hostile.pickle"
expect_bad "pickle that is not a snapshot" "NOT_A_SNAPSHOT at byte 5: a valid pickle, but not a PyTorch memory snapshot (the pickle holds an int, not a dict)" inspect "$work/int.pickle"
expect_bad "truncated pickle" "TRUNCATED at byte 5000: the pickle ends before its STOP opcode" inspect "$work/truncated.pickle"
expect_bad "absurd length prefix" "LIMIT_STRING_BYTES at byte 2: a string is longer than the limit (4611686018427387904 bytes)" inspect "$work/huge_length.pickle"
expect_bad "truncated zstd" "DECOMPRESS_ERROR" inspect "$work/truncated.pickle.zst"
expect_bad "missing file" "IO_ERROR: the file cannot be read" inspect "$work/does-not-exist.pickle"
mkdir -p "$work/no_snapshots" "$work/ranks"
cp "$work/truncated.pickle" "$work/ranks/rank1.pickle"
cp "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" "$work/ranks/rank0.pickle"
expect_bad "a folder without snapshots" "no_snapshots: holds no snapshot files" inspect "$work/no_snapshots"
"$rlmem" inspect "$work/ranks" >"$work/out" 2>"$work/err"
code=$?
if [ $code -ne 2 ] || [ "$(wc -l <"$work/err")" -ne 1 ] || ! grep -qF "1 of 2 snapshots in $work/ranks could not be read" "$work/err" \
   || ! grep -E "rank1\.pickle" "$work/out" | grep -q "ERROR"; then
  echo "FAIL a folder with one bad rank: expected exit 2, one stderr line '1 of 2 snapshots in $work/ranks could not be read'" \
       "and rank1.pickle marked ERROR in the table; saw exit $code, stderr: $(cat "$work/err")"
  cat "$work/out"; failures=$((failures + 1))
else
  echo "ok   a folder with one bad rank: $(cat "$work/err")"
fi
expect_bad "invalid --step-marker" "step marker '(' is not a valid regular expression" inspect "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" --step-marker "("
expect_bad "--limit that is not a size" "--limit 'lots' is not a size" inspect "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" --limit lots
expect_bad "--limit below what the recording reserved" "--limit 2,147,483,648 B is below the 2,803,892,224 B the recording reserved" inspect --quiet "$testdata/snapshots/frag_default_oom.pickle.zst" --limit 2GiB
expect_bad "--limit above what its OOM allows" "--limit 85,899,345,920 B is above the 2,805,989,375 B the recording shows the limit was at most" inspect --quiet "$testdata/snapshots/frag_default_oom.pickle.zst" --limit 80GiB
printf 'weight foo\n' >"$work/bad_rules.txt"
expect_bad "bad --categories file" "line 1: unknown category 'weight'" inspect "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" --categories "$work/bad_rules.txt"
expect_bad "diff with a bad snapshot" "truncated.pickle: TRUNCATED at byte 5000" diff "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" "$work/truncated.pickle"
expect_bad "diff with one file" "B is required (see rlmem diff --help)" diff "$testdata/snapshots/tiny_oom_cpp_stacks.pickle"
expect_bad "replay with a bad --alloc-conf" "--alloc-conf: backend:cudaMallocAsync is not the caching allocator rlmem models" replay "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" --alloc-conf "backend:cudaMallocAsync"
expect_bad "replay with a bad --capacity" "--capacity '-5' is not a size" replay "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" --capacity -5
expect_bad "replay of an expandable recording without expandable segments (refused, not guessed)" "cannot replay: the trace was recorded with expandable segments" replay "$testdata/snapshots/tiny_oom_expandable_compile.pickle" --alloc-conf ""
expect_bad "replay of a truncated snapshot" "truncated.pickle: TRUNCATED at byte 5000" replay "$work/truncated.pickle"
expect_bad "unknown device" "has no device 7 (devices: 0)" inspect "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" --device 7
expect_bad "unknown option" "unknown option or extra argument: --frobnicate" inspect "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" --frobnicate
expect_bad "no file" "FILE is required (see rlmem inspect --help)" inspect
expect_bad "unknown command" "unknown command 'frobnicate' (one of inspect, report, diff, replay, plan, watch; see rlmem --help)" frobnicate
expect_bad "no command" "A subcommand is required (see rlmem --help)"
expect_bad "unknown option before any command" "unknown option or extra argument: --frobnicate (see rlmem --help)" --frobnicate

# The hostile pickle was refused above without running its call: the file it would make is absent.
if [ -e "$work/pwned" ]; then
  echo "FAIL hostile GLOBAL+REDUCE: expected $work/pwned never created, saw it created"; failures=$((failures + 1))
else
  echo "ok   hostile GLOBAL+REDUCE: $work/pwned was never created"
fi
if [ "$failures" -ne 0 ]; then echo "$failures failed"; exit 1; fi
echo "all bad inputs rejected cleanly"
