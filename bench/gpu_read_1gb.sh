#!/usr/bin/env bash
# The 1 GB snapshot on the GPU machine's CPU (torch is there): two rlmem binaries side by side
# with pickle.load and torch's `_memory_viz stats`, then the two binaries on one core.
# usage: bench/gpu_read_1gb.sh SNAPSHOT.xz BEFORE AFTER   (static binaries: -DRLMEM_STATIC=ON)
set -euo pipefail
compressed=$1; before=$2; after=$3
out=${OUT:-.}
xz -dc "$compressed" > /tmp/big.pickle
python3 -c 'import torch; print("torch", torch.__version__)'; nproc
"$before" inspect --json /tmp/big.pickle > /tmp/before.json
"$after" inspect --json /tmp/big.pickle > /tmp/after.json
cmp /tmp/before.json /tmp/after.json && echo "inspect --json identical before and after"
python3 bench/side_by_side.py /tmp/big.pickle --repeats 3 \
  --run "rlmem before=$before inspect --json {file}" \
  --run "rlmem now=$after inspect --json {file}" \
  --run "pickle.load=python3 -c 'import pickle,sys; pickle.load(open(sys.argv[1],\"rb\"))' {file}" \
  --run "memory_viz stats=python3 -m torch.cuda._memory_viz stats {file}" | tee "$out/side_by_side.txt"
python3 bench/side_by_side.py /tmp/big.pickle --repeats 3 \
  --run "rlmem before, one core=taskset -c 2 $before inspect --json {file}" \
  --run "rlmem now, one core=taskset -c 2 $after inspect --json {file}" | tee "$out/one_core.txt"
