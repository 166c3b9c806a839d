#!/usr/bin/env python3
"""Issue 26, item 1 on two GPUs: each rank's first NCCL collective (and first GEMM) runs inside
region("kv") under rlmem.runtime.install(); then "kv" is paused (discard, or host) and the next
all-reduce and GEMM, outside the region, must still run right: nothing NCCL or cuBLAS keeps for
itself may have been put in "kv".

    python3 tools/runtime/first_collective_two_gpus.py OUT.json

Needs two CUDA devices, torch with NCCL, and RLMEM_LIBRARY naming librlmem.so. One process per
rank (torch.multiprocessing), one run per keep mode; OUT.json holds every rank's figures.
"""
from __future__ import annotations

import json
import os
import sys

WORLD = 2


def rank_main(rank: int, keep: str, port: str, results) -> None:
    import torch
    import torch.distributed as dist
    import rlmem.runtime as rt

    rt.install()  # before set_device, which makes torch's allocator in torch 2.11
    torch.cuda.set_device(rank)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("nccl", rank=rank, world_size=WORLD, device_id=torch.device(f"cuda:{rank}"))
    x = torch.randn(256, 256, device="cuda", generator=torch.Generator("cuda").manual_seed(rank))

    def tags() -> dict:
        return {tag["name"]: tag["allocated_bytes"]["current"] for tag in rt.statistics(rank)["tags"]}

    with rt.region("kv"):
        first = torch.full((1 << 20,), float(rank + 1), device="cuda")
        dist.all_reduce(first)  # the process's first collective: NCCL sets up its communicator here
        gemm = x @ x
        torch.cuda.synchronize()
    in_region = tags()
    first_value = float(first[0])
    reference = float((x @ x).double().sum())
    rt.pause("kv", keep=keep)
    after = torch.full((1 << 20,), 2.0, device="cuda")
    dist.all_reduce(after)
    gemm_after = float((x @ x).double().sum())
    torch.cuda.synchronize()
    rt.resume("kv")
    # host: restored bit-exact; discard: zeros.
    results[rank] = {"keep": keep, "first_all_reduce": first_value, "tags_in_region": in_region,
                     "all_reduce_after_pause": float(after[0]), "gemm_after_pause_equal": gemm_after == reference,
                     "first_after_resume": float(first[0]), "tags_after": tags()}
    dist.destroy_process_group()


def main() -> int:
    import torch
    import torch.multiprocessing as mp

    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    if torch.cuda.device_count() < WORLD:
        print(f"needs {WORLD} CUDA devices; this machine has {torch.cuda.device_count()}", file=sys.stderr)
        return 2
    runs = {}
    for index, keep in enumerate(("discard", "host")):
        with mp.Manager() as manager:
            results = manager.dict()
            mp.spawn(rank_main, args=(keep, str(29600 + index), results), nprocs=WORLD, join=True)
            runs[keep] = {str(rank): results[rank] for rank in sorted(results.keys())}
    with open(sys.argv[1], "w") as out:
        json.dump(runs, out, indent=1)
    print(json.dumps(runs))
    right = all(r["all_reduce_after_pause"] == 2.0 * WORLD and r["gemm_after_pause_equal"] and r["first_all_reduce"] == 3.0
                and r["first_after_resume"] == (3.0 if keep == "host" else 0.0) for keep, run in runs.items() for r in run.values())
    return 0 if right else 1


if __name__ == "__main__":
    sys.exit(main())
