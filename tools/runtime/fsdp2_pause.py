#!/usr/bin/env python3
"""Colocated-RL pause and resume under FSDP2 on several GPUs (issue 15): a trainer's memory is
paused between steps while a rollout-like phase uses the GPU, then resumed, with NCCL
collectives before and after.

    NCCL_NVLS_ENABLE=0 torchrun --nproc_per_node=2 tools/runtime/fsdp2_pause.py OUT --pause
    NCCL_NVLS_ENABLE=0 torchrun --nproc_per_node=2 tools/runtime/fsdp2_pause.py OUT --no-pause
    python3 tools/runtime/fsdp2_pause.py OUT --compare

Each rank runs rlmem as the process's allocator (rlmem.runtime.install()). A Qwen2-architecture
model (transformers, bf16, random weights from one seed) is sharded with FSDP2 (fully_shard per
decoder layer and at the root) and trained with AdamW. Memory is tagged: "weights" holds the
parameters and the optimizer state, "scratch" what a step allocates (activations, gradients,
FSDP's buffers), "rollout" the rollout. With --pause, after every step: an all-reduce and an
all-gather on tensors kept in "weights"; pause("weights", keep="host") and pause("scratch",
keep="discard"); the rollout phase allocates most of the memory given back, computes on it and
all-reduces it; empty_cache(); resume both; the same collectives again on the same tensors,
whose addresses now hold new physical memory. --no-pause runs the same steps without the pauses
and the rollout. --compare checks that losses and the final parameters are bit-identical between
the two runs and prints the memory returned and the pause/resume times per GB.
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "python"))
GiB = 1 << 30


def nvml_used_bytes(uuid: str) -> int | None:
    """The GPU's used memory as NVML counts it (nvidia-smi's figure), or None without NVML."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None

    class memory(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]

    handle, info = ctypes.c_void_p(), memory()
    if (nvml.nvmlInit_v2() != 0 or nvml.nvmlDeviceGetHandleByUUID(uuid.encode(), ctypes.byref(handle)) != 0
            or nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(info)) != 0):
        return None
    return int(info.used)


def train(out: Path, pause: bool, steps: int) -> None:
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # the GPU machines require multicast off
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import rlmem.runtime as rt

    rt.install(keep_host_buffers=True)  # before anything touches CUDA
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from transformers import AutoModelForCausalLM, Qwen2Config

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank, world = dist.get_rank(), dist.get_world_size()
    uuid = "GPU-" + str(torch.cuda.get_device_properties(local_rank).uuid)
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    config = Qwen2Config(hidden_size=1024, num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4,
                         intermediate_size=2816, vocab_size=32000, tie_word_embeddings=False)
    with rt.region("weights"):
        model = AutoModelForCausalLM.from_config(config).to(device="cuda", dtype=torch.bfloat16)
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        # Kept across pauses: the collectives after a resume run on these same addresses.
        reduced = torch.full((1 << 20,), float(rank + 1), device="cuda")
        gathered = [torch.empty(1 << 16, device="cuda") for _ in range(world)]
    generator = torch.Generator(device="cpu").manual_seed(1 + rank)

    def collectives() -> dict:
        dist.all_reduce(reduced)
        dist.all_gather(gathered, torch.full((1 << 16,), float(rank), device="cuda"))
        torch.cuda.synchronize()
        reduce_ok = bool(torch.all(reduced == world * (world + 1) / 2).item())
        reduced.fill_(float(rank + 1))  # the same input every time
        return {"all_reduce_ok": reduce_ok,
                "all_gather_ok": all(bool(torch.all(g == i).item()) for i, g in enumerate(gathered))}

    log: dict = {"rank": rank, "world": world, "pause": pause, "losses": [], "collectives": [], "pauses": []}
    for step in range(steps):
        tokens = torch.randint(0, config.vocab_size, (4, 512), generator=generator).cuda()
        with rt.region("scratch"):
            loss = model(input_ids=tokens, labels=tokens).loss
            loss.backward()
        with rt.region("weights"):  # the optimizer's state is made at its first step
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        log["losses"].append(float.hex(loss.detach().float().item()))
        del loss
        log["collectives"].append({"step": step, "before_pause": collectives()})
        if not pause:
            continue
        torch.cuda.synchronize()
        free_before, total = torch.cuda.mem_get_info()
        nvml_before = nvml_used_bytes(uuid)
        # torch.cuda.memory_stats() raises under install(); rt.memory_stats() gives its keys.
        reserved_before = rt.memory_stats()["reserved_bytes.all.current"]
        rt.pause("weights", keep="host")
        rt.pause("scratch", keep="discard")
        free_paused, _ = torch.cuda.mem_get_info()
        nvml_paused = nvml_used_bytes(uuid)
        reserved_paused = rt.memory_stats()["reserved_bytes.all.current"]
        # The rollout: most of what came back, used, all-reduced, then given back.
        with rt.region("rollout"):
            rollout = torch.ones(max(1, (free_paused - free_before) * 9 // 10) // 4, device="cuda")
            dist.all_reduce(rollout)
            rollout_ok = bool(rollout[0].item() == world)
            del rollout
        rt.empty_cache()
        torch.cuda.synchronize()
        rt.resume("weights")
        rt.resume("scratch")
        stats = {tag["name"]: tag for tag in rt.statistics()["tags"]}
        weights = stats["weights"]
        log["pauses"].append({
            "step": step, "device_free_before": free_before, "device_free_paused": free_paused,
            "returned_bytes": free_paused - free_before, "rollout_ok": rollout_ok,
            "nvml_used_before": nvml_before, "nvml_used_paused": nvml_paused,
            "reserved_before": reserved_before, "reserved_paused": reserved_paused,
            "weights_copied_bytes": weights["last_pause"]["copied_bytes"],
            "pause_seconds": weights["last_pause"]["seconds"], "resume_seconds": weights["last_resume"]["seconds"],
        })
        log["collectives"][-1]["after_resume"] = collectives()
    # The final parameters, whole (an all-gather of every shard), as a digest.
    digest = hashlib.sha256()
    for name, parameter in sorted(model.named_parameters()):
        digest.update(name.encode())
        digest.update(parameter.detach().full_tensor().float().cpu().numpy().tobytes())
    log["parameters_sha256"] = digest.hexdigest()
    dist.barrier()
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{'pause' if pause else 'no_pause'}_rank{rank}.json").write_text(json.dumps(log, indent=1))
    dist.destroy_process_group()


def compare(out: Path) -> int:
    ranks = sorted(out.glob("pause_rank*.json"))
    if not ranks:
        print(f"no pause_rank*.json in {out}: run the two torchrun commands first", file=sys.stderr)
        return 2
    ok = True
    for path in ranks:
        paused = json.loads(path.read_text())
        plain = json.loads((out / path.name.replace("pause_", "no_pause_")).read_text())
        same = paused["losses"] == plain["losses"] and paused["parameters_sha256"] == plain["parameters_sha256"]
        collectives = all(all(entry[key].values()) for entry in paused["collectives"]
                          for key in ("before_pause", "after_resume") if key in entry)
        rollouts = all(entry["rollout_ok"] for entry in paused["pauses"])
        copied = sum(entry["weights_copied_bytes"] for entry in paused["pauses"])
        pause_s = sum(entry["pause_seconds"] for entry in paused["pauses"])
        resume_s = sum(entry["resume_seconds"] for entry in paused["pauses"])
        nvml = [e["nvml_used_before"] - e["nvml_used_paused"] for e in paused["pauses"]
                if e.get("nvml_used_before") is not None and e.get("nvml_used_paused") is not None]
        unreserved = [e["reserved_before"] - e["reserved_paused"] for e in paused["pauses"] if "reserved_before" in e]
        print(f"rank {paused['rank']}: NVML used memory fell by {min(nvml) / GiB:.2f} GiB (least of {len(nvml)})"
              if nvml else f"rank {paused['rank']}: no NVML figures")
        if unreserved:
            print(f"rank {paused['rank']}: reserved_bytes.all.current fell by {min(unreserved) / GiB:.2f} GiB "
                  f"(least of {len(unreserved)})")
        print(f"rank {paused['rank']}: losses and parameters identical to the run without pauses: {same}; "
              f"collectives right: {collectives}; rollouts right: {rollouts}; "
              f"returned while paused: {min(e['returned_bytes'] for e in paused['pauses']) / GiB:.2f} GiB (least of "
              f"{len(paused['pauses'])}); pause {pause_s / max(copied / GiB, 1e-9):.3f} s/GiB, "
              f"resume {resume_s / max(copied / GiB, 1e-9):.3f} s/GiB of kept weights and optimizer state")
        ok = ok and same and collectives and rollouts
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--pause", action="store_true")
    mode.add_argument("--no-pause", action="store_true")
    mode.add_argument("--compare", action="store_true")
    parser.add_argument("--steps", type=int, default=4)
    options = parser.parse_args()
    if options.compare:
        return compare(options.out)
    train(options.out, options.pause, options.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
