#!/usr/bin/env bash
# `make demo` (tools/demo.sh) shows what it promises: the leak and its site, the OOM's
# FRAGMENTATION verdict, the replay where expandable segments completes, a plan that fits the
# card, and the page it names.
set -u
rlmem=$1
source_dir=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

shown=$(cd "$work" && "$source_dir/tools/demo.sh" "$rlmem" demo 2>&1) || fail "the demo exited $?: $shown"
expect() { printf '%s\n' "$shown" | grep -q -- "$1" || fail "expected the demo to show '$1', it showed: $shown"; }
expect 'LEAK rl/record.py:41 logprobs_of  +46.9 MiB per step'
expect 'OOM at event 7,971 (+1.01 s): FRAGMENTATION'
expect 'expandable_segments:True *2.55 GiB *2.37 GiB *completes'
expect 'it does not fit'
expect '^Best: '
expect "Open $work/demo/oom-report.html in a browser"
head -c 15 "$work/demo/oom-report.html" | grep -q '<!DOCTYPE html>' || fail "the demo's page is not an HTML page"
echo "ok: the demo shows the leak, the verdict, the replay, the fit and the page"
