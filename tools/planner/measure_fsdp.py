"""Planner truth rows for FSDP2 (fully_shard on every decoder layer and the root), measured as
measure.py measures a training step (its functions are reused). Rank 0 writes the rows.
Usage on a machine with N GPUs: torchrun --nproc_per_node N tools/planner/measure_fsdp.py OUTDIR"""
import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_functions import load  # noqa: E402

m = load(sys.argv[1])
rank = int(os.environ["RANK"])
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
from torch.distributed.fsdp import fully_shard  # noqa: E402

gpus = dist.get_world_size()
rows = []
for kind in ["qwen2.5-0.5b"]:
    for (mb, S, ckpt) in [(4, 512, False), (8, 1024, True)]:
        model, cfg, p = m["make_model"](kind)
        V = p["vocab_size"]
        params = sum(x.numel() for x in model.parameters())
        model.train()
        if ckpt:
            model.gradient_checkpointing_enable()
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
        row = dict(model=kind, params=params, config=p, dtype="bf16", phase="train", micro_batch=mb, seq=S,
                   logprob_tokens=S - S // 2, grad_ckpt=ckpt, optimizer="adamw", gpus=gpus, shard="fsdp")
        row.update(m["measure"](m["train_fn"](model, opt, V, mb, S)))
        row["weights_bytes"] = 2 * params // gpus
        row["truth_peak"] = row["peak_alloc"] - row["base"] + row["weights_bytes"]
        rows.append(row)
        if rank == 0:
            print(row, flush=True)
            json.dump(rows, open(f"{sys.argv[1]}/fsdp_rows.json", "w"), indent=1)
        del model, opt
dist.destroy_process_group()
