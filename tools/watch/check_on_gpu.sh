#!/usr/bin/env bash
# rlmem watch against the real driver and a real StepMonitor log, on a GPU machine with torch and
# tmux, from the checkout after `make build`: the numbers in docs/watch.md ("Checked on an H100").
# Writes everything into OUT (default: a new temporary folder) and prints the --once report.
set -u
out=${OUT:-$(mktemp -d)}
rlmem=build/rlmem
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv
python3 tools/watch/leak_loop.py "$out/steps.jsonl" 90 >"$out/loop.txt" 2>&1 &
loop=$!
# Half-way through the loop: 45 step ends written.
for _ in $(seq 200); do [ -f "$out/steps.jsonl" ] && [ "$(wc -l <"$out/steps.jsonl")" -ge 45 ] && break; sleep 0.5; done
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader >"$out/nvidia-smi-processes.csv"
$rlmem watch --once --log "$out/steps.jsonl" >"$out/once.txt"; echo "--once: exit $?"
$rlmem watch --once --json --log "$out/steps.jsonl" >"$out/once.json"; echo "--once --json: exit $?"
# The live view in a 100 x 45 terminal, two screens 6 s apart, then Ctrl-C.
tmux new-session -d -s rlmem_watch -x 100 -y 45 \
  "$rlmem watch --interval 0.5 --log $out/steps.jsonl; echo \$? >$out/live_exit; sleep 20"
sleep 4; tmux capture-pane -p -t rlmem_watch >"$out/live1.txt"
sleep 6; tmux capture-pane -p -t rlmem_watch >"$out/live2.txt"
echo "scrollback lines: $(tmux display -p -t rlmem_watch '#{history_size}')"
tmux send-keys -t rlmem_watch C-c; sleep 1; echo "live view after Ctrl-C: exit $(cat "$out/live_exit")"
tmux kill-session -t rlmem_watch
wait $loop
$rlmem watch --once --log "$out/steps.jsonl" | head -1 >/dev/null; echo "--once | head -1: exit ${PIPESTATUS[0]}"
cat "$out/once.txt" "$out/nvidia-smi-processes.csv"
echo "files in $out"
