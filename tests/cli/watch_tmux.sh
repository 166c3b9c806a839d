#!/usr/bin/env bash
# The live view in a real terminal: `rlmem watch --log` in a detached tmux pane redraws in place
# (no scrollback, one heading), shows each new step as the log grows, grows its sparklines, shows
# a hostile log line as text, and exits 0 on Ctrl-C with the cursor shown again.
# Exit 77 (ctest: skipped) without tmux. Polls with deadlines: no fixed sleeps to tune.
set -u
rlmem=$1
fake=$2
testdata=$3
command -v tmux >/dev/null || { echo "skipped: tmux is not installed"; exit 77; }
work=$(mktemp -d)
tmux_() { tmux -S "$work/tmux.socket" "$@"; }  # a server of its own, its socket removed with $work
trap 'tmux_ kill-server 2>/dev/null; rm -rf "$work"' EXIT
sample=$testdata/steplog/grpo_qwen0.5b_h100_leak.jsonl
log=$work/steps.jsonl
head -3 "$sample" >"$log"

# The pane runs watch, records its exit code, and stays until the cursor state has been read
# (the test writes $work/read; at most 30 s).
cat >"$work/run.sh" <<RUN
RLMEM_NVML_LIBRARY='$fake' '$rlmem' watch --interval 0.2 --log '$log' 2>'$work/stderr'
echo \$? >'$work/exit.tmp' && mv '$work/exit.tmp' '$work/exit'
deadline=\$((SECONDS + 30))
until [ -f '$work/read' ] || [ \$SECONDS -ge \$deadline ]; do sleep 0.1; done
RUN
tmux_ -f /dev/null new-session -d -s watch -x 100 -y 40 "bash '$work/run.sh'" || { echo "FAIL tmux cannot start a session"; exit 1; }

screen() { tmux_ capture-pane -p -t watch; }
# Waits up to 30 s for the pane to show a fixed string.
wait_for() {
  local deadline=$((SECONDS + 30))
  until screen | grep -qF -- "$1"; do
    if [ $SECONDS -ge $deadline ]; then echo "FAIL the screen never showed: $1"; screen; exit 1; fi
    sleep 0.1
  done
}
# The number of sparkline blocks in the first line that matches a pattern.
blocks() { screen | grep -m1 -E -- "$1" | python3 -c 'import sys; print(sum(c in "▁▂▃▄▅▆▇█" for c in sys.stdin.read()))'; }
in_place() {  # one heading, nothing scrolled off: the frame was redrawn, not appended
  local headings history
  headings=$(tmux_ capture-pane -p -S - -t watch | grep -c "^rlmem watch ")
  history=$(tmux_ display-message -p -t watch '#{history_size}')
  [ "$headings" -eq 1 ] && [ "$history" -eq 0 ] || { echo "FAIL not redrawn in place: $headings headings, $history lines of scrollback ($1)"; screen; exit 1; }
}

wait_for "  step           3 (rank 0 of 1, device 0)"
wait_for "  0  NVIDIA H100 80GB HBM3"
early=$(blocks '^  0  NVIDIA')
in_place "after the first frames"

sed -n 4,12p "$sample" >>"$log"
wait_for "  step           12 (rank 0 of 1, device 0)"
wait_for "GiB over 12 steps"
# The GPU history grows with each refresh: wait (at most 30 s) for more blocks than before.
deadline=$((SECONDS + 30))
late=$(blocks '^  0  NVIDIA')
until [ "$late" -gt "$early" ] || [ $SECONDS -ge $deadline ]; do sleep 0.1; late=$(blocks '^  0  NVIDIA'); done
[ "$late" -gt "$early" ] || { echo "FAIL the GPU sparkline did not grow within 30 s: expected more than $early blocks, saw $late"; screen; exit 1; }
[ "$(blocks '^  allocated ')" -ge 2 ] || { echo "FAIL no sparkline of allocated"; screen; exit 1; }
in_place "after the log grew"

# A hostile line: its escapes must show as text, not clear the screen or retitle the pane.
python3 - "$sample" >>"$log" <<'PY'
import json, sys
last = json.loads(open(sys.argv[1]).readlines()[11])
last["step"] = 13
last["alerts"] = [{"kind": "fragmentation", "rank": 0, "message": "\u001b[2J\u001b]2;pwned\u0007\u001b[31mhostile"}]
print(json.dumps(last))
PY
printf 'not json at all\n' >>"$log"
wait_for '\x1b[2J\x1b]2;pwned\x07\x1b[31mhostile'
wait_for "  skipped        1 line, the last at byte"
[ "$(tmux_ display-message -p -t watch '#{pane_title}')" != "pwned" ] || { echo "FAIL the log retitled the pane"; exit 1; }
in_place "after a hostile line"

# A half-written line waits for its newline.
line14=$(python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).readlines()[12]); r["step"]=14; print(json.dumps(r))' "$sample")
printf '%s' "${line14:0:60}" >>"$log"
wait_for "bytes of a line await their newline"
printf '%s\n' "${line14:60}" >>"$log"
wait_for "  step           14 (rank 0 of 1, device 0)"

tmux_ send-keys -t watch C-c
deadline=$((SECONDS + 30))
until [ -f "$work/exit" ]; do
  [ $SECONDS -lt $deadline ] || { echo "FAIL watch did not exit on Ctrl-C"; screen; exit 1; }
  sleep 0.1
done
[ "$(cat "$work/exit")" = 0 ] || { echo "FAIL Ctrl-C exit code $(cat "$work/exit"), stderr: $(cat "$work/stderr")"; exit 1; }
[ ! -s "$work/stderr" ] || { echo "FAIL stderr: $(cat "$work/stderr")"; exit 1; }
cursor=$(tmux_ display-message -p -t watch '#{cursor_flag}')
touch "$work/read"
[ "$cursor" = 1 ] || { echo "FAIL the cursor was left hidden: expected cursor_flag 1, saw '$cursor'"; exit 1; }
echo "rlmem watch redraws in place in tmux, follows the log, and exits 0 on Ctrl-C"
