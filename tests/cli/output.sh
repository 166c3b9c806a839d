#!/usr/bin/env bash
# What rlmem prints, as a user meets it: every write checked (a full disk, a closed stdout, a
# reader gone: exit 3), untrusted strings escaped in text output, every numeric option strict,
# and option files that are not regular files refused instead of read without end.
set -u
rlmem=$1
testdata=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
snap="$testdata/snapshots/tiny_oom_cpp_stacks.pickle"
log="$testdata/steplog/h100_grpo_clean.jsonl"
plan=(plan --model qwen2.5-0.5b --phase generate --batch 1 --prompt-len 1 --new-tokens 1)

# shellcheck source=expect.sh
. "$here/expect.sh"

# Every subcommand that prints a report, and help.
commands=("inspect $snap" "inspect $snap --json" "diff $snap $snap" "replay $snap" "${plan[*]}" "plan --list-models"
          "watch --once --log $log" "--help")

for command in "${commands[@]}"; do
  # shellcheck disable=SC2086
  "$rlmem" $command >/dev/full 2>"$work/err"
  code=$?
  if [ "$code" -ne 3 ] || [ "$(wc -l <"$work/err")" -ne 1 ] || ! grep -q "cannot write the report: No space left on device" "$work/err"; then
    fail "$command >/dev/full: expected exit 3 and 'cannot write the report: No space left on device'; saw exit $code, stderr: $(cat "$work/err")"
  else
    ok "$command >/dev/full: $(cat "$work/err")"
  fi
  # shellcheck disable=SC2086
  "$rlmem" $command >&- 2>"$work/err"
  code=$?
  if [ "$code" -ne 3 ] || [ "$(wc -l <"$work/err")" -ne 1 ] || ! grep -q "cannot write the report: Bad file descriptor" "$work/err"; then
    fail "$command with stdout closed: expected exit 3 and 'cannot write the report: Bad file descriptor'; saw exit $code, stderr: $(cat "$work/err")"
  else
    ok "$command with stdout closed: $(cat "$work/err")"
  fi
  # A reader that is gone before the first byte, SIGPIPE ignored: EPIPE, exit 3 and no message.
  # shellcheck disable=SC2086
  python3 - "$rlmem" $command 2>"$work/err" <<'PY'
import os, signal, subprocess, sys
read_end, write_end = os.pipe()
os.close(read_end)
done = subprocess.run(sys.argv[1:], stdout=write_end, stderr=subprocess.PIPE,
                      preexec_fn=lambda: signal.signal(signal.SIGPIPE, signal.SIG_IGN))
print(done.returncode, len(done.stderr.splitlines()), file=sys.stderr)
PY
  if [ "$(cat "$work/err")" != "3 0" ]; then
    fail "$command | a closed pipe (SIGPIPE ignored): expected exit 3 and no stderr line; saw exit and stderr lines: $(cat "$work/err")"
  else
    ok "$command | a closed pipe: exit 3, quiet"
  fi
done

# Control sequences in every string field and in the file name reach the text report escaped.
name="$work/evil$(printf '\033]0;title\007\r')name.pickle"
python3 "$here/control_strings_snapshot.py" "$name"
for command in "inspect" "inspect --frames 8" "replay" "diff"; do
  [ "$command" = diff ] && set -- "$name" || set --
  # shellcheck disable=SC2086
  "$rlmem" $command "$@" "$name" >"$work/out" 2>"$work/err"
  code=$?
  report=$(python3 - "$work/out" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
raw = sorted({hex(b) for b in data if (b < 0x20 and b != 0x0A) or b == 0x7F})
try:
    c1 = sorted({hex(ord(c)) for c in data.decode("utf-8") if 0x80 <= ord(c) <= 0x9F})
    invalid = ""
except UnicodeDecodeError as error:
    c1, invalid = [], str(error)
print(f"raw controls {raw}, C1 controls {c1}, not UTF-8: {invalid or 'none'}")
PY
)
  if [ "$code" -ne 0 ] && [ "$code" -ne 2 ]; then
    fail "$command on control strings: exit $code: $(cat "$work/err")"
  elif [ "$report" != "raw controls [], C1 controls [], not UTF-8: none" ]; then
    fail "$command on control strings: expected no raw control byte and valid UTF-8; saw $report"
  else
    ok "$command on control strings: $report"
  fi
done
"$rlmem" inspect "$name" >"$work/out" 2>&1
if ! grep -qF '\x0d  LEAK forged.py:1' "$work/out" || ! grep -qF '\x1b]0;pwned title\x07' "$work/out"; then
  fail "the forged LEAK line and the OSC title: expected them shown escaped (\\x0d  LEAK forged, \\x1b]0;pwned title\\x07)"
else
  ok "the forged LEAK line and the OSC title show as escaped text"
fi
"$rlmem" inspect "$name" --json | python3 -c 'import json, sys; json.load(sys.stdin)' 2>"$work/err" \
  && ok "JSON of control strings parses" || fail "JSON of control strings: $(cat "$work/err")"
"$rlmem" "${plan[@]}" --buffer $'\xff\x1b[2J=8:fp32' --json >"$work/out" 2>"$work/err"
code=$?
if [ "$code" -ne 0 ] || ! python3 -c 'import json, sys; json.load(open(sys.argv[1], encoding="utf-8"))' "$work/out"; then
  fail "plan --buffer with invalid UTF-8 --json: expected exit 0 and valid UTF-8 JSON; saw exit $code, $(cat "$work/err")"
else
  ok "plan --buffer with invalid UTF-8 --json: valid JSON"
fi
"$rlmem" "${plan[@]}" --buffer $'\xff\x1b[2J=8:fp32' >"$work/out" 2>&1
if grep -q $'\x1b' "$work/out" || ! grep -qF 'buffer \xff\x1b[2J 8:fp32' "$work/out"; then
  fail "plan --buffer with controls: expected the name escaped in the text"
else
  ok "plan --buffer with controls: the name escaped"
fi

# Numbers: one line naming the option, the value and the range; exit 2.
expect_refused "--top: '0' is not a whole number from 1 to 1000000" inspect "$snap" --top 0
expect_refused "--top: '1e300' is not a whole number" inspect "$snap" --top 1e300
expect_refused "--frames: '-1' is not a whole number from 0 to 10000" inspect "$snap" --frames -1
expect_refused "--width: '100.5' is not a whole number from 60 to 1000" inspect "$snap" --width 100.5
expect_refused "--device: '0x1' is not a whole number from 0 to 32767" inspect "$snap" --device 0x1
expect_refused "--limit '0.5' is not a whole number of bytes" inspect "$snap" --limit 0.5
expect_refused "--limit '1e-300' is not a size from 1 B" inspect "$snap" --limit 1e-300
expect_refused "--limit 'nan' is not a size" inspect "$snap" --limit nan
expect_refused "--limit '9223372036854775808' is out of range" inspect "$snap" --limit 9223372036854775808
expect_refused "--limit '80GBx' is not a size" inspect "$snap" --limit 80GBx
expect_refused "--top: '5x' is not a whole number from 1 to 1000000" diff "$snap" "$snap" --top 5x
expect_refused "--capacity '0.5' is not a whole number of bytes" replay "$snap" --capacity 0.5
expect_refused "--capacity '1e-300' is not a size" replay "$snap" --capacity 1e-300
expect_refused "--capacity '0.0001KiB' is out of range" replay "$snap" --capacity 0.0001KiB
expect_refused "max_split_size_mb '17592186044416' is not a whole number from 20 to 8796093022207" replay "$snap" --alloc-conf max_split_size_mb:17592186044416
expect_refused "roundup_power2_divisions '4294967296' is not a whole number from 0 to 4294967295" replay "$snap" --alloc-conf roundup_power2_divisions:4294967296
expect_refused "garbage_collection_threshold '0.5x' is not a number between 0 and 1" replay "$snap" --alloc-conf garbage_collection_threshold:0.5x
expect_refused "--gpus: '1.5' is not a whole number" "${plan[@]}" --gpus 1.5
expect_refused "--margin: '1e-3' is not a decimal number from 0 to 1" "${plan[@]}" --fit h100-80g --margin 1e-3
expect_refused "--fit '0.5': not a card" "${plan[@]}" --fit 0.5
expect_refused "--interval: '2s' is not a decimal number from 0.1 to 86400" watch --once --log "$log" --interval 2s
expect_refused "--width: '59' is not a whole number from 60 to 1000" watch --once --log "$log" --width 59

# Option files that are not regular files: a FIFO with no writer, /dev/zero.
mkfifo "$work/fifo"
expect_refused "not a regular file" inspect "$snap" --categories "$work/fifo"
expect_refused "not a regular file" inspect "$snap" --categories /dev/zero
expect_refused "not a regular file" "${plan[@]/qwen2.5-0.5b/$work/fifo}"
expect_refused "not a regular file" "${plan[@]/qwen2.5-0.5b//dev/zero}"
head -c $((16 * 1024 * 1024 + 1)) /dev/zero >"$work/big.json"
expect_refused "larger than 16 MiB" "${plan[@]/qwen2.5-0.5b/$work/big.json}"

# Issue 28 item 13: an option given '' is refused, not read as the option left out.
expect_refused "--fit is given an empty value" "${plan[@]}" --fit ''
expect_refused "--html is given an empty value" "${plan[@]}" --html ''
expect_refused "--limit is given an empty value" inspect "$snap" --limit ''
expect_refused "--capacity is given an empty value" replay "$snap" --capacity ''

# Issue 28 items 1 and 2: a page goes where the path leads without replacing what is there.
page_in_place() {  # NAME PATH [ARGS...]: the page written to PATH; fails with NAME otherwise
  local name=$1 path=$2; shift 2
  "$rlmem" report "$snap" --quiet -o "$path" "$@" 2>"$work/err"
  local code=$?
  if [ "$code" -ne 0 ]; then
    fail "$name: report -o exited $code, expected 0: $(cat "$work/err")"
    return 1
  fi
}
# A FIFO stays a FIFO, and its reader gets the whole page.
mkfifo "$work/page.fifo"
cat "$work/page.fifo" >"$work/fifo.read" &
reader=$!
if page_in_place "-o FIFO" "$work/page.fifo"; then
  wait "$reader"
  if [ ! -p "$work/page.fifo" ] || [ "$(head -c 15 "$work/fifo.read")" != '<!DOCTYPE html>' ] || ! grep -q '</html>' "$work/fifo.read"; then
    fail "-o FIFO: expected the FIFO kept and its reader given the whole page; saw type $(stat -c %F "$work/page.fifo"), $(wc -c <"$work/fifo.read") bytes read"
  else
    ok "-o FIFO: the FIFO stays, its reader got the page"
  fi
else
  kill "$reader" 2>/dev/null
fi
# A symbolic link stays a link; the file it points to gets the page.
echo old >"$work/target.html"
ln -s target.html "$work/link.html"
if page_in_place "-o symlink" "$work/link.html"; then
  if [ ! -L "$work/link.html" ] || [ "$(readlink "$work/link.html")" != target.html ] ||
    [ "$(head -c 15 "$work/target.html")" != '<!DOCTYPE html>' ]; then
    fail "-o symlink: expected the link kept and target.html given the page; saw link $(readlink "$work/link.html"), target starting '$(head -c 15 "$work/target.html")'"
  else
    ok "-o symlink: the link stays, its target got the page"
  fi
fi
# /dev/null stays the character device it is (the page is written into it, not renamed over it).
if page_in_place "-o /dev/null" /dev/null; then
  if [ ! -c /dev/null ]; then
    fail "-o /dev/null: /dev/null is no longer a character device: $(stat -c %F /dev/null)"
  else
    ok "-o /dev/null: still a character device"
  fi
fi
# A symlink planted where the old code put its temporary (PATH.partial) is never written through.
echo victim >"$work/victim"
ln -s victim "$work/planted.html.partial"
if page_in_place "-o with a planted .partial link" "$work/planted.html"; then
  if [ "$(cat "$work/victim")" != victim ] || [ "$(readlink "$work/planted.html.partial")" != victim ] ||
    [ "$(head -c 15 "$work/planted.html")" != '<!DOCTYPE html>' ]; then
    fail "-o with a planted .partial link: expected the victim and the link untouched, the page written; saw victim '$(head -c 20 "$work/victim")'"
  else
    ok "-o with a planted .partial link: victim untouched, page written"
  fi
fi
[ -z "$(ls -A "$work" | grep '^\.rlmem-')" ] || fail "a temporary was left behind: $(ls -A "$work")"

[ "$failures" -eq 0 ] || { echo "$failures failures"; exit 1; }
