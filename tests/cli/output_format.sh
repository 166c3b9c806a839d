#!/usr/bin/env bash
# One convention for every command's output: --format text|json|html, -o/--output FILE, and the
# shorthands --json and --html FILE, which write byte for byte what --format does.
set -u
rlmem=$1
testdata=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
snap="$testdata/snapshots/tiny_oom_cpp_stacks.pickle"
leak="$testdata/snapshots/grpo_leak_logits.pickle.zst"
plan=(plan --model qwen2.5-0.5b --phase generate --batch 1 --prompt-len 1 --new-tokens 1)

# shellcheck source=expect.sh
. "$here/expect.sh"

# `same NAME FILE_A FILE_B`: both exist, are not empty and are equal byte for byte.
same() {
  if [ ! -s "$2" ] || ! cmp -s "$2" "$3"; then
    fail "$1: expected identical non-empty outputs; saw $(wc -c <"$2" 2>/dev/null || echo no) and $(wc -c <"$3" 2>/dev/null || echo no) bytes"
  else
    ok "$1 ($(wc -c <"$2") bytes)"
  fi
}
run() { "$rlmem" "$@" 2>>"$work/stderr"; }

# text is the default; json: --format json, --json and -o FILE write the same document.
run inspect "$snap" >"$work/default"; run inspect "$snap" --format text >"$work/text"
same "inspect --format text is the default" "$work/default" "$work/text"
run inspect "$snap" --json >"$work/json"; run inspect "$snap" --format json >"$work/format_json"
run inspect "$snap" --format json -o "$work/o_json" >"$work/o_stdout"
same "inspect --format json = --json" "$work/json" "$work/format_json"
same "inspect --format json -o FILE = standard output" "$work/json" "$work/o_json"
[ -s "$work/o_stdout" ] && fail "inspect -o FILE: expected nothing on standard output; saw $(wc -c <"$work/o_stdout") bytes"
run inspect "$snap" --quiet -o "$work/o_text"
same "inspect -o FILE writes the text report" "$work/text" "$work/o_text"

# html: inspect and diff write the page `rlmem report` makes; replay and plan --html's page.
run report "$leak" --quiet -o "$work/report.html"; run inspect "$leak" --quiet --format html -o "$work/inspect.html"
same "inspect --format html = rlmem report FILE" "$work/report.html" "$work/inspect.html"
run report "$snap" "$leak" --quiet -o "$work/report_diff.html"; run diff "$snap" "$leak" --format html >"$work/diff.html"
same "diff --format html = rlmem report A B" "$work/report_diff.html" "$work/diff.html"
run replay "$snap" --quiet --html "$work/replay_html.html"; run replay "$snap" --quiet --format html -o "$work/replay_format.html"
same "replay --format html -o FILE = --html FILE" "$work/replay_html.html" "$work/replay_format.html"
run "${plan[@]}" --html - >"$work/plan_html.html"; run "${plan[@]}" --format html >"$work/plan_format.html"
same "plan --format html = --html -" "$work/plan_html.html" "$work/plan_format.html"
run "${plan[@]}" --json >"$work/plan_json"; run "${plan[@]}" --format json -o "$work/plan_o_json"
same "plan --format json -o FILE = --json" "$work/plan_json" "$work/plan_o_json"
# watch's frame carries the time it was taken: compared without it.
run watch --once --log "$testdata/steplog/h100_grpo_clean.jsonl" --json | sed 's/"time":[0-9.]*,//' >"$work/watch_json"
run watch --once --log "$testdata/steplog/h100_grpo_clean.jsonl" --format json | sed 's/"time":[0-9.]*,//' >"$work/watch_format"
same "watch --format json = --json (but the frame's time)" "$work/watch_json" "$work/watch_format"

# Refused in one line, exit 2, nothing written: an unknown format, a format a command does not
# make, and two choices of format.
expect_refused "--format" inspect "$snap" --format yaml
expect_refused "--format" watch --once --log "$testdata/steplog/h100_grpo_clean.jsonl" --format html
expect_refused "excludes" inspect "$snap" --json --format text
expect_refused "excludes" replay "$snap" --html "$work/x.html" --json
expect_refused "excludes" replay "$snap" --html "$work/x.html" -o "$work/y.html"
[ -e "$work/x.html" ] && fail "a refused command wrote $work/x.html"

[ "$failures" -eq 0 ] || { echo "$failures failures"; exit 1; }
