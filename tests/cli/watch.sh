#!/usr/bin/env bash
# `rlmem watch` as a user meets it: one line and exit 2 without a driver or on bad options, the
# report with a fake NVML (loaded through RLMEM_NVML_LIBRARY, the real dlopen path) and with a
# StepMonitor log, JSON lines that parse, and a closed pipe that ends it cleanly.
set -u
rlmem=$1
fake=$2
testdata=$3
log=$testdata/steplog/grpo_qwen0.5b_h100_leak.jsonl
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

expect_bad() {
  local name=$1; shift
  "$@" >"$work/out" 2>"$work/err" </dev/null
  local code=$? lines
  lines=$(wc -l <"$work/err")
  if [ "$code" -ne 2 ] || [ "$lines" -ne 1 ] || [ -s "$work/out" ]; then
    fail "$name: expected exit 2, one stderr line, empty stdout; saw exit $code, $lines stderr lines, $(wc -c <"$work/out") stdout bytes"
    cat "$work/err"
  else
    echo "ok   $name: $(cat "$work/err")"
  fi
}

nodriver=/nonexistent/libnvidia-ml.so.1
expect_bad "no driver" env RLMEM_NVML_LIBRARY=$nodriver "$rlmem" watch --once
expect_bad "no driver, live" env RLMEM_NVML_LIBRARY=$nodriver "$rlmem" watch --interval 0.2
grep -q "NVML is unavailable" "$work/err" || fail "the no-driver line does not say NVML is unavailable"
expect_bad "driver not loaded" env RLMEM_NVML_LIBRARY="$fake" RLMEM_FAKE_NVML_INIT_FAIL=1 "$rlmem" watch --once
grep -q "Driver Not Loaded" "$work/err" || fail "the init failure does not carry NVML's message"
expect_bad "a library that is not NVML" env RLMEM_NVML_LIBRARY=libm.so.6 "$rlmem" watch --once
for interval in 0 -1 abc nan 1e9; do
  expect_bad "--interval $interval" env RLMEM_NVML_LIBRARY="$fake" "$rlmem" watch --interval "$interval"
done
expect_bad "--width too narrow" env RLMEM_NVML_LIBRARY="$fake" "$rlmem" watch --once --width 20
expect_bad "--log that is a folder" env RLMEM_NVML_LIBRARY="$fake" "$rlmem" watch --once --log "$work"
expect_bad "--log missing with --once" env RLMEM_NVML_LIBRARY="$fake" "$rlmem" watch --once --log "$work/none.jsonl"
expect_bad "--log in a folder that does not exist" env RLMEM_NVML_LIBRARY="$fake" "$rlmem" watch --log "$work/no/such/steps.jsonl"
if [ "$(id -u)" -ne 0 ]; then  # root reads any file
  cp "$log" "$work/secret.jsonl"; chmod 000 "$work/secret.jsonl"
  expect_bad "--log that cannot be read" env RLMEM_NVML_LIBRARY="$fake" "$rlmem" watch --once --log "$work/secret.jsonl"
fi

# One report from the fake's two H100s: its own process is readable, pid 4194305 is not.
out=$(RLMEM_NVML_LIBRARY="$fake" "$rlmem" watch --once 2>"$work/err")
code=$?
[ $code -eq 0 ] || fail "--once with the fake exited $code: $(cat "$work/err")"
echo "$out" | grep -Eq '^  0  NVIDIA H100 80GB HBM3 +40.0 GiB / 79.6 GiB +39.6 GiB +91%$' || { fail "GPU 0 row"; echo "$out"; }
echo "$out" | grep -Eq '^       pid +[0-9]+ +39.0 GiB  .*rlmem watch --once$' || { fail "own process with its command line"; echo "$out"; }
echo "$out" | grep -q "pid 4194305   512.0 MiB  (command line not visible: pid not in this PID namespace" || fail "invisible pid"
echo "$out" | grep -q "fine: the fullest GPU, 0, has 40.0 GiB of 79.6 GiB in use (50%), 39.6 GiB free" || fail "GPU advice"
# At most 100 columns, counting code points (the sparkline's blocks are 3 bytes, 1 column).
fits() { python3 -c 'import sys; sys.exit(any(len(l) > 100 for l in sys.stdin.read().splitlines()))'; }
echo "$out" | fits || fail "--once output wider than 100 columns"

# With the sample log: the torch figures, the alerts and advice computed from them.
out=$(RLMEM_NVML_LIBRARY="$fake" "$rlmem" watch --once --log "$log" 2>"$work/err") || fail "--once --log: $(cat "$work/err")"
for want in "  step           120 (rank 0 of 1, device 0)" "  allocated      8.72 GiB at the step end" \
            "  reserved       34.2 GiB; 25.4 GiB unallocated (74%), 344.8 MiB inactive_split" \
            "  step peak      29.2 GiB allocated, 34.2 GiB reserved" "  alloc retries  0, 0 in the last 20 steps" \
            "  OOMs           0, 0 in the last 20 steps" "Alerts from the log: 2 in this run" \
            "! leak: step-end allocated grows"; do
  echo "$out" | grep -qF -- "$want" || { fail "--once --log lacks: $want"; echo "$out"; }
done

echo "$out" | fits || fail "--once --log output wider than 100 columns"

# Without a driver the log is shown alone, and that is no error.
out=$(RLMEM_NVML_LIBRARY=$nodriver "$rlmem" watch --once --log "$log" 2>"$work/err")
code=$?
[ $code -eq 0 ] && [ ! -s "$work/err" ] || fail "--log without a driver exited $code: $(cat "$work/err")"
echo "$out" | grep -q "^NVML unavailable (/nonexistent/libnvidia-ml.so.1" || fail "--log without a driver does not say NVML is unavailable"
echo "$out" | grep -q "  allocated      8.72 GiB" || fail "--log without a driver lacks the log's figures"

# A log StepMonitor wrote on an H100: the leak it kept (48 MiB a step from step 30) under batch
# sizes that cycle, found by watch's own run of the monitor's rule, with its forecast.
out=$(RLMEM_NVML_LIBRARY=$nodriver "$rlmem" watch --once --log "$testdata/steplog/h100_leak_loop.jsonl" 2>"$work/err") ||
  fail "--once on the recorded log: $(cat "$work/err")"
for want in "  step           90 (rank 0 of 1, device 0)" "Alerts from the log: 3 in this run"; do
  echo "$out" | grep -qF -- "$want" || { fail "--once on the recorded log lacks: $want"; echo "$out"; }
done
# Advice wraps at the width: compare with the lines joined.
joined=$(echo "$out" | tr -s '\n ' '  ')
for want in "! leak: step-end allocated grows 48.0 MiB/step since step 32" "at this rate the step peak passes"; do
  echo "$joined" | grep -qF -- "$want" || { fail "--once on the recorded log lacks: $want"; echo "$out"; }
done

# JSON lines: each parses and carries the documented top-level keys.
RLMEM_NVML_LIBRARY="$fake" timeout 30 "$rlmem" watch --json --interval 0.1 --log "$log" 2>"$work/err" | head -3 >"$work/lines"
python3 - "$work/lines" <<'PY' || fail "--json lines"
import json, sys
lines = open(sys.argv[1], encoding="ascii").read().splitlines()
assert len(lines) == 3, f"{len(lines)} lines"
used = []
for line in lines:
    doc = json.loads(line)
    assert list(doc) == ["schema", "time", "nvml", "gpus", "log", "advice"], list(doc)
    assert doc["schema"] == "rlmem.watch/1" and doc["nvml"]["available"] is True
    assert [g["name"] for g in doc["gpus"]] == ["NVIDIA H100 80GB HBM3"] * 2
    assert doc["log"]["latest"]["step"] == 120 and doc["log"]["alerts_total"] == 2
    assert any(a["kind"] == "leak" and a["level"] == "warning" for a in doc["advice"])
    used.append(doc["gpus"][0]["used_bytes"])
assert used == [40 << 30, 44 << 30, 48 << 30], used  # a fresh sample at every refresh
PY

# A closed pipe ends the command: no loop, no crash, no message.
RLMEM_NVML_LIBRARY="$fake" timeout 30 "$rlmem" watch --once 2>"$work/err" | head -1 >/dev/null
code=${PIPESTATUS[0]}
[ "$code" -eq 0 ] && [ ! -s "$work/err" ] || fail "--once | head -1: exit $code, stderr: $(cat "$work/err")"
RLMEM_NVML_LIBRARY="$fake" timeout 30 "$rlmem" watch --interval 0.1 2>"$work/err" | head -1 >/dev/null
code=${PIPESTATUS[0]}
[ "$code" -eq 0 ] && [ ! -s "$work/err" ] || fail "watch | head -1 (live): exit $code (124: it kept running), stderr: $(cat "$work/err")"

"$rlmem" watch --help | grep -q -- "--log run/steps.jsonl" || fail "watch --help has no example"
if [ "$failures" -ne 0 ]; then echo "$failures failed"; exit 1; fi
echo "rlmem watch CLI ok"
