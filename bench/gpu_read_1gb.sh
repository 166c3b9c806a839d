#!/usr/bin/env bash
# The 1 GB snapshot on the GPU machine's CPU (torch is there): rlmem binaries side by side with
# pickle.load and torch's `_memory_viz stats`, then the binaries on one core.
# usage: REPEATS=5 bench/gpu_read_1gb.sh SNAPSHOT.xz BEFORE AFTER [MORE...]
#        (static binaries: -DRLMEM_STATIC=ON; each is named by its file name; REPEATS: 3)
set -euo pipefail
compressed=$1; shift
binaries=("$@")
repeats=${REPEATS:-3}
out=${OUT:-.}
xz -dc "$compressed" > /tmp/big.pickle
python3 -c 'import torch; print("torch", torch.__version__)'; nproc
"${binaries[0]}" inspect --json /tmp/big.pickle > /tmp/first.json
for binary in "${binaries[@]:1}"; do
  "$binary" inspect --json /tmp/big.pickle | cmp /tmp/first.json - && echo "inspect --json of $binary identical to ${binaries[0]}"
done
runs=()
one_core=()
for binary in "${binaries[@]}"; do
  runs+=(--run "$(basename "$binary")=$binary inspect --json {file}")
  one_core+=(--run "$(basename "$binary"), one core=taskset -c 2 $binary inspect --json {file}")
done
python3 bench/side_by_side.py /tmp/big.pickle --repeats "$repeats" "${runs[@]}" \
  --run "pickle.load=python3 -c 'import pickle,sys; pickle.load(open(sys.argv[1],\"rb\"))' {file}" \
  --run "memory_viz stats=python3 -m torch.cuda._memory_viz stats {file}" | tee "$out/side_by_side.txt"
python3 bench/side_by_side.py /tmp/big.pickle --repeats 3 "${one_core[@]}" | tee "$out/one_core.txt"
