#!/usr/bin/env bash
# Side by side, in one run: `rlmem inspect FILE` against PyTorch's own
# `python -m torch.cuda._memory_viz stats FILE`, best of N runs each, alternating.
# Needs torch (the GPU machine has it). Usage: bench/compare_torch.sh RLMEM FILE... [-n N]
set -eu
rlmem=$1; shift
repeats=${REPEATS:-3}
python=${PYTHON:-python3}
now() { date +%s.%N; }
best_of() {  # best_of N command...: the smallest wall time in seconds
  local n=$1; shift
  local best=""
  for _ in $(seq "$n"); do
    local start end
    start=$(now)
    "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; return 1; }
    end=$(now)
    best=$(awk -v a="$best" -v s="$start" -v e="$end" 'BEGIN { t = e - s; if (a == "" || t < a) print t; else print a }')
  done
  echo "$best"
}
"$python" -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
printf '%-34s %10s %14s %14s %8s\n' file MB "torch stats s" "rlmem s" speedup
for file in "$@"; do
  mb=$(awk -v b="$(stat -c %s "$file")" 'BEGIN { printf "%.1f", b / 1e6 }')
  torch_s=$(best_of "$repeats" "$python" -m torch.cuda._memory_viz stats "$file")
  rlmem_s=$(best_of "$repeats" "$rlmem" inspect --quiet "$file")
  awk -v f="$(basename "$file")" -v mb="$mb" -v t="$torch_s" -v r="$rlmem_s" \
    'BEGIN { printf "%-34s %10s %14.3f %14.3f %7.1fx\n", f, mb, t, r, t / r }'
done
