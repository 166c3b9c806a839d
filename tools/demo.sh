#!/usr/bin/env bash
# `make demo`: the four questions rlmem answers, each on a bundled recording, in a few seconds.
# Usage: tools/demo.sh RLMEM_BINARY OUTPUT_FOLDER
set -euo pipefail
rlmem=$(realpath "$1")
mkdir -p "$2"
out=$(realpath "$2")
# The bundled files by the names the README gives them, from the checkout's root.
cd "$(dirname "$0")/.."
snapshots=testdata/snapshots

# A heading (bold on a terminal), then the command as a user would type it.
bold=""
plain=""
if [ -t 1 ]; then
  bold=$'\033[1m'
  plain=$'\033[0m'
fi
show() {
  printf '\n%s%s%s\n$ rlmem %s\n' "$bold" "$1" "$plain" "${*:2}"
}
# The lines of a report from the one matching $1 up to the next blank line.
section() {
  awk -v start="$1" '$0 ~ start { on = 1 } on && /^$/ { exit } on { print }'
}

show "1/4  What leaks? A GRPO loop that keeps its log-probs alive every step" \
     inspect "$snapshots/grpo_leak_logits.pickle.zst"
"$rlmem" inspect "$snapshots/grpo_leak_logits.pickle.zst" --quiet | section '^Leaks:'

show "2/4  Why did it OOM? 338 MiB reserved and unallocated, and a 468 MiB request refused" \
     inspect "$snapshots/frag_default_oom.pickle.zst"
"$rlmem" inspect "$snapshots/frag_default_oom.pickle.zst" --quiet | section '^OOM at event'
show "     ...and the replay that proves which setting would have served it" \
     replay "$snapshots/frag_default_oom.pickle.zst" --compare
"$rlmem" replay "$snapshots/frag_default_oom.pickle.zst" --compare --quiet | section '^  settings'

plan_args=(--model qwen2.5-1.5b --phase grpo-step --prompts 8 --group 8 --prompt-len 512 --new-tokens 1024
           --micro-batch 16 --ref-model --fit a100-40g)
show "3/4  Will it fit? Qwen2.5-1.5B GRPO on a 40 GB A100, before launching anything" plan "${plan_args[*]}"
plan=$("$rlmem" plan "${plan_args[@]}")
for heading in '^Fit on' '^Combinations that fit' '^Best:'; do
  printf '%s\n' "$plan" | section "$heading"
  echo
done

show "4/4  The same OOM as a page to share: verdict, timeline, what held the peak" \
     report "$snapshots/frag_default_oom.pickle.zst" -o "$out/oom-report.html"
"$rlmem" report "$snapshots/frag_default_oom.pickle.zst" -o "$out/oom-report.html"
printf '\nOpen %s in a browser.\nYour own run: "Recording a snapshot" in README.md, then the same commands on its file.\n' \
  "$(realpath "$out/oom-report.html")"
