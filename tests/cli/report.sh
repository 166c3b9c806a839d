#!/usr/bin/env bash
# `rlmem report` as a user meets it: the page is written whole under its name (never a partial
# file), bad input is one line and exit 2, an unwritable destination exit 3, --help teaches.
set -u
rlmem=$1
testdata=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

(cd "$work" && "$rlmem" report "$testdata/snapshots/frag_default_oom.pickle.zst" --quiet) || fail "report exited $?, expected 0"
[ -s "$work/frag_default_oom.html" ] || fail "expected frag_default_oom.html in the current folder, found: $(ls "$work")"
head -c 15 "$work/frag_default_oom.html" | grep -q '<!DOCTYPE html>' || fail "the page does not start with <!DOCTYPE html>"
[ -z "$(ls -A "$work" | grep partial)" ] || fail "a .partial file was left behind"
"$rlmem" report "$testdata/snapshots/frag_default.pickle.zst" -o - --quiet | grep -q 'Content-Security-Policy' ||
  fail "-o - does not write the page to standard output"

err=$("$rlmem" report "$work/missing.pickle" -o "$work/x.html" 2>&1 >/dev/null); code=$?
[ $code -eq 2 ] || fail "a missing snapshot exited $code, expected 2"
[ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "expected one line on stderr, seen: $err"
[ ! -e "$work/x.html" ] || fail "a page was written for a missing snapshot"

err=$("$rlmem" report "$testdata/snapshots/frag_default.pickle.zst" -o "$work/no/such/folder/x.html" 2>&1 >/dev/null); code=$?
[ $code -eq 3 ] || fail "an unwritable destination exited $code, expected 3 ($err)"
echo "$err" | grep -q "cannot write" || fail "expected 'cannot write' on stderr, seen: $err"

err=$("$rlmem" report "$testdata/snapshots/frag_default.pickle.zst" --device 9 -o "$work/y.html" 2>&1 >/dev/null); code=$?
[ $code -eq 2 ] || fail "--device 9 exited $code, expected 2"
echo "$err" | grep -q "has no device 9" || fail "expected 'has no device 9', seen: $err"

# Two snapshots: their diff, named after both.
(cd "$work" && "$rlmem" report "$testdata/snapshots/grpo_clean.pickle.zst" "$testdata/snapshots/grpo_leak_logits.pickle.zst" --quiet) ||
  fail "report A B exited $?, expected 0"
grep -q '"kind":"diff"' "$work/grpo_clean-vs-grpo_leak_logits.html" || fail "expected the diff page grpo_clean-vs-grpo_leak_logits.html"
err=$("$rlmem" report "$testdata/snapshots/grpo_clean.pickle.zst" "$testdata/snapshots" -o "$work/z.html" 2>&1 >/dev/null); code=$?
[ $code -eq 2 ] || fail "report FILE DIR exited $code, expected 2"
echo "$err" | grep -q "is a folder" || fail "expected 'is a folder', seen: $err"

# A folder of ranks: the page, named after the folder; a rank that cannot be read is on the page,
# and the exit code and one line say so.
mkdir -p "$work/ranks"
ln -s "$testdata/snapshots/grpo_clean.pickle.zst" "$work/ranks/rank0.pickle.zst"
ln -s "$testdata/snapshots/grpo_leak_logits.pickle.zst" "$work/ranks/rank1.pickle.zst"
(cd "$work" && "$rlmem" report ranks --quiet) || fail "report DIR exited $?, expected 0"
grep -q '"kind":"ranks"' "$work/ranks.html" || fail "expected the ranks page ranks.html"
head -c 100 "$testdata/snapshots/tiny_oom_cpp_stacks.pickle" > "$work/ranks/rank2.pickle"
err=$("$rlmem" report "$work/ranks" -o "$work/ranks2.html" --quiet 2>&1 >/dev/null); code=$?
[ $code -eq 2 ] || fail "a folder with a truncated rank exited $code, expected 2"
[ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "expected one line on stderr, seen: $err"
grep -q '"ok":false' "$work/ranks2.html" || fail "expected the unreadable rank on the page"

# replay --compare --html: the settings table as a page.
"$rlmem" replay "$testdata/snapshots/frag_default_oom.pickle.zst" --compare --html "$work/replay.html" --quiet ||
  fail "replay --compare --html exited $?, expected 0"
grep -q '"kind":"replay"' "$work/replay.html" || fail "expected the replay page in replay.html"
grep -q '"compare":\[' "$work/replay.html" || fail "expected the settings compared in replay.html"
err=$("$rlmem" replay "$testdata/snapshots/frag_default_oom.pickle.zst" --html "$work/no/such/folder/r.html" --quiet 2>&1 >/dev/null); code=$?
[ $code -eq 3 ] || fail "replay --html to an unwritable destination exited $code, expected 3 ($err)"

# plan --html: the phases and the fit as a page.
"$rlmem" plan --model qwen2.5-0.5b --phase grpo-step --prompts 8 --group 8 --prompt-len 512 --new-tokens 512 \
  --micro-batch 16 --ref-model --fit h100-80g --html "$work/plan.html" ||
  fail "plan --html exited $?, expected 0"
grep -q '"kind":"plan"' "$work/plan.html" || fail "expected the plan page in plan.html"
grep -q '"what_if":\[' "$work/plan.html" || fail "expected the what-ifs in plan.html"

"$rlmem" report --help | grep -q "Content-Security-Policy" || fail "report --help does not say the page is offline"
"$rlmem" --help | grep -q "report" || fail "rlmem --help does not list report"
echo "report CLI ok"
