#!/usr/bin/env python3
"""What CUDA's virtual-memory calls cost per 2 MiB page on this GPU, to choose how the runtime maps
memory on resume: create, map and set access page by page; set access once over many pages;
handles of 64 MiB; unmap and release; and the same page by page while copies run on another
stream. Prints one JSON object. Needs a GPU and torch (for the background copies)."""
import ctypes
import json
import time

import torch

cuda = ctypes.CDLL("libcuda.so.1")
MiB = 1 << 20


class Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class Flags(ctypes.Structure):
    _fields_ = [("compression", ctypes.c_ubyte), ("rdma", ctypes.c_ubyte), ("usage", ctypes.c_ushort),
                ("reserved", ctypes.c_ubyte * 4)]


class Properties(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("handle_types", ctypes.c_int), ("location", Location),
                ("win32", ctypes.c_void_p), ("flags", Flags)]


class Access(ctypes.Structure):
    _fields_ = [("location", Location), ("flags", ctypes.c_int)]


def check(code: int, what: str) -> None:
    if code != 0:
        raise RuntimeError(f"{what}: CUresult {code}")


PROPERTIES = Properties(type=1, handle_types=0, location=Location(type=1, id=0))  # pinned, device 0
ACCESS = Access(location=Location(type=1, id=0), flags=3)  # read and write


def create(size: int) -> int:
    handle = ctypes.c_ulonglong()
    check(cuda.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(PROPERTIES), ctypes.c_ulonglong(0)), "cuMemCreate")
    return handle.value


def timed(step) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def one_round(total: int, handle_bytes: int, access_bytes: int) -> dict:
    """Reserve `total`, create handles of `handle_bytes`, map them, set access in ranges of
    `access_bytes`, then unmap and release: seconds per phase, and per 2 MiB page."""
    base = ctypes.c_ulonglong()
    check(cuda.cuMemAddressReserve(ctypes.byref(base), ctypes.c_size_t(total), ctypes.c_size_t(0), ctypes.c_ulonglong(0), ctypes.c_ulonglong(0)), "reserve")
    count = total // handle_bytes
    handles: list[int] = []
    phases = {}
    phases["create"] = timed(lambda: handles.extend(create(handle_bytes) for _ in range(count)))
    phases["map"] = timed(lambda: [check(cuda.cuMemMap(ctypes.c_ulonglong(base.value + i * handle_bytes), ctypes.c_size_t(handle_bytes), ctypes.c_size_t(0), ctypes.c_ulonglong(h), ctypes.c_ulonglong(0)), "map") for i, h in enumerate(handles)])
    phases["set_access"] = timed(lambda: [check(cuda.cuMemSetAccess(ctypes.c_ulonglong(base.value + at), ctypes.c_size_t(access_bytes), ctypes.byref(ACCESS), ctypes.c_size_t(1)), "access") for at in range(0, total, access_bytes)])
    phases["unmap"] = timed(lambda: [check(cuda.cuMemUnmap(ctypes.c_ulonglong(base.value + i * handle_bytes), ctypes.c_size_t(handle_bytes)), "unmap") for i in range(count)])
    phases["release"] = timed(lambda: [check(cuda.cuMemRelease(ctypes.c_ulonglong(h)), "release") for h in handles])
    check(cuda.cuMemAddressFree(ctypes.c_ulonglong(base.value), ctypes.c_size_t(total)), "free")
    pages = total // (2 * MiB)
    return {name: round(seconds / pages * 1e6, 2) for name, seconds in phases.items()}


def main() -> None:
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # the primary context, current on this thread
    total = 1 << 30
    result = {"unit": "microseconds per 2 MiB page, 1 GiB per round, best of 3"}
    shapes = {"page handles, access per page": (2 * MiB, 2 * MiB),
              "page handles, access per 64 MiB": (2 * MiB, 64 * MiB),
              "page handles, access once": (2 * MiB, total),
              "64 MiB handles, access per handle": (64 * MiB, 64 * MiB)}
    for name, (handle_bytes, access_bytes) in shapes.items():
        rounds = [one_round(total, handle_bytes, access_bytes) for _ in range(3)]
        result[name] = {phase: min(r[phase] for r in rounds) for phase in rounds[0]}
    # The same page by page while the copy engines are busy (what a pipelined resume does).
    source = torch.empty(4 << 30, dtype=torch.uint8, pin_memory=True)
    target = torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        target.copy_(source, non_blocking=True)
    result["page handles, access per page, during a copy"] = one_round(total, 2 * MiB, 2 * MiB)
    copying = timed(stream.synchronize)
    result["copy still running after the round (s)"] = round(copying, 4)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
