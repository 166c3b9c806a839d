"""torch.distributed, when the job uses it: rank, world size, and the gather of step figures."""

from __future__ import annotations

import sys
from typing import Optional


def _distributed():
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


def rank_and_world() -> tuple[int, int]:
    """(rank, world size) of the default process group; (0, 1) outside a distributed job."""
    dist = _distributed()
    if dist is None:
        return 0, 1
    return int(dist.get_rank()), int(dist.get_world_size())


def all_gather_int64(values: list[int]) -> Optional[list[list[int]]]:
    """Every rank's ``values`` (same length on every rank), gathered over the job's default process
    group as one int64 tensor per rank: no pickling, a few hundred bytes. On NCCL the tensor sits on
    the current CUDA device (reading the result waits for the gather, and so for the work queued
    before it on the current stream); on gloo (or a cpu:gloo,cuda:nccl group) on the CPU."""
    dist = _distributed()
    if dist is None:
        return None
    import torch  # noqa: PLC0415 (loaded already: _distributed found it)

    backend = str(dist.get_backend()).lower()
    if "gloo" in backend or "nccl" not in backend:
        device = torch.device("cpu")
    else:
        device = torch.device("cuda", torch.cuda.current_device())
    mine = torch.tensor(values, dtype=torch.int64, device=device)
    gathered = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, mine)
    return torch.stack(gathered).cpu().tolist()


def hostname() -> str:
    import socket

    try:
        return socket.gethostname()
    except OSError:
        return ""
