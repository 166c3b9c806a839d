#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""An independent reference for the corpus of snapshots from the wild: reads a
torch.cuda.memory._dump_snapshot() pickle with nothing but the standard library and prints, per
device, the figures the corpus test holds rlmem to.

  tools/corpus/reference.py snapshot.pickle[.zst]     # JSON on stdout

It shares no code with rlmem and follows torch's documented semantics (torch/cuda/_memory_viz.py,
torch/utils/viz/MemoryViz.js, CUDACachingAllocator.cpp), not rlmem's C++:

- peak reserved (exact): reserved at the dump is the sum of the segments' total_size; undoing
  every segment_alloc/segment_map (minus) and segment_free/segment_unmap (plus) from last to first
  gives reserved when the trace starts; walking forward again gives every value it took.
- peak allocated (a range): torch's allocated_bytes counts whole blocks from `alloc` to
  `free_requested`. The trace records requested bytes, so a block's size is known only within
  bounds: at least the request rounded to 512 (kMinBlockSize); at most that with the recorded
  roundup_power2_divisions, plus the remainder the allocator may leave unsplit (a large-pool block
  is not split when at most 1 MiB (kSmallSize) would remain; a block of max_split_size or more
  keeps up to max_non_split_rounding, 20 MiB by default). Blocks still live at the dump have their
  exact size in `segments`. Blocks live when the trace starts are found by undoing the trace
  against the dump. A block whose free_completed has no free_requested in the trace was freed by
  the user at an unknown time (before the trace, or the request was cut from the ring buffer or
  skipped): the low bound counts it as freed before the trace, the high bound as allocated until
  its free_completed.

The unpickler refuses every global: snapshots are plain data (dicts, lists, strings, numbers), so
a file that needs a class is not a snapshot.
"""
import io
import json
import os
import pickle
import subprocess
import sys

MIN_BLOCK = 512                 # kMinBlockSize
SMALL_SIZE = 1 << 20            # kSmallSize: requests up to this go to the small pool
LARGE_BUFFER = 20 << 20         # kLargeBuffer: default max_non_split_rounding
ROUNDUP_INTERVALS = 16          # kRoundUpPowerOfTwoIntervals


class PlainDataOnly(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refused global {module}.{name}: a snapshot holds plain data only")


def read_bytes(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] == b"\x28\xb5\x2f\xfd":   # zstd frame: the standard library has no zstd before 3.14
        data = subprocess.run(["zstd", "-dc", path], check=True, capture_output=True).stdout
    elif data[:2] == b"\x1f\x8b":
        import gzip
        data = gzip.decompress(data)
    return data


def load(data):
    return PlainDataOnly(io.BytesIO(data)).load()


def round512(size):
    return MIN_BLOCK if size < MIN_BLOCK else (size + MIN_BLOCK - 1) // MIN_BLOCK * MIN_BLOCK


def power2_divisions(settings):
    """The recorded roundup_power2_divisions as one divisor per 1 MiB..64 GiB interval."""
    table = [0] * ROUNDUP_INTERVALS
    recorded = (settings or {}).get("roundup_power2_divisions") or {}
    if isinstance(recorded, dict):
        for key, value in recorded.items():
            try:
                mib = int(key)
            except (TypeError, ValueError):
                continue
            index = max(0, mib.bit_length() - 1)   # the key is the interval's lower end in MiB
            if index < ROUNDUP_INTERVALS and isinstance(value, int):
                table[index] = value
    return table


def rounded_high(size, divisions):
    """The largest rounding the allocator can have applied to a request of `size` bytes."""
    if size < MIN_BLOCK:
        return MIN_BLOCK
    index = min(max(size.bit_length() - 1 - 20, 0), ROUNDUP_INTERVALS - 1)
    div = divisions[index]
    if div > 1 and size > MIN_BLOCK * div and size & (size - 1):
        floor2 = 1 << (size.bit_length() - 1)
        step = floor2 // div
        if step == 0:
            return floor2 << 1
        low = size & ~(step - 1)
        return size if low == size else low + step
    return round512(size)


def whole_block_high(size, divisions, max_split):
    """Rounded request plus what the allocator may have left unsplit in the same block."""
    rounded = rounded_high(size, divisions)
    if rounded <= SMALL_SIZE:
        return rounded            # small-pool blocks are split whenever 512 bytes or more remain
    if max_split is not None and rounded >= max_split:
        return rounded + LARGE_BUFFER
    return rounded + SMALL_SIZE


def segments_and_traces(snapshot):
    if isinstance(snapshot, list):  # the early layout: a bare list of segments, no trace
        return snapshot, [], {}
    if not isinstance(snapshot, dict) or "segments" not in snapshot:
        raise ValueError("not a memory snapshot: neither a list of segments nor a dict with 'segments'")
    return snapshot["segments"], snapshot.get("device_traces") or [], snapshot.get("allocator_settings") or {}


def frames_of(snapshot_segments, traces):
    for segment in snapshot_segments:
        yield from segment.get("frames") or []
        for block in segment.get("blocks") or []:
            yield from block.get("frames") or []
            for history in block.get("history") or []:
                yield from history.get("frames") or []
    for trace in traces:
        for event in trace:
            yield from event.get("frames") or []


def device_figures(device, segments, events, divisions, max_split):
    reserved_at_dump = sum(s["total_size"] for s in segments)
    allocated_at_dump = 0
    live = {}   # addr -> [state, low size, high size, request seen]: the dump state, walked back
    for segment in segments:
        address = segment["address"]
        for block in segment.get("blocks") or []:
            state = block.get("state")
            if state in ("active_allocated", "active_pending_free"):
                exact = block["size"]
                allocated = state == "active_allocated"
                allocated_at_dump += exact if allocated else 0
                live[address] = ["allocated" if allocated else "pending", exact, exact, allocated]
            address += block["size"]

    reserved = reserved_at_dump
    unmatched = 0
    for event in reversed(events):
        action, addr, size = event.get("action"), event.get("addr"), event.get("size", 0)
        if action in ("segment_alloc", "segment_map"):
            reserved -= size
        elif action in ("segment_free", "segment_unmap"):
            reserved += size
        elif action == "alloc":
            if live.pop(addr, None) is None:
                unmatched += 1
        elif action == "free_requested":
            block = live.get(addr)
            if block is None or block[0] != "pending":
                unmatched += 1
            if block is None:
                block = [None, round512(size), whole_block_high(size, divisions, max_split), True]
                live[addr] = block
            block[0], block[3] = "allocated", True
        elif action == "free_completed":
            if addr in live:
                unmatched += 1
            live[addr] = ["pending", round512(size), whole_block_high(size, divisions, max_split), False]
    reserved_at_start = reserved

    # Forward. low/high: allocated bytes under each bound; a pending block with no request seen
    # counts in high only, until its free_completed.
    low = sum(b[1] for b in live.values() if b[0] == "allocated")
    high = sum(b[2] for b in live.values() if b[0] == "allocated" or not b[3])
    peak_low, peak_high = low, high
    reserved, peak_reserved = reserved_at_start, reserved_at_start
    for event in events:
        action, addr, size = event.get("action"), event.get("addr"), event.get("size", 0)
        if action in ("segment_alloc", "segment_map"):
            reserved += size
            peak_reserved = max(peak_reserved, reserved)
        elif action in ("segment_free", "segment_unmap"):
            reserved -= size
        elif action == "alloc":
            block = ["allocated", round512(size), whole_block_high(size, divisions, max_split), True]
            live[addr] = block
            low += block[1]
            high += block[2]
            peak_low, peak_high = max(peak_low, low), max(peak_high, high)
        elif action == "free_requested":
            block = live.get(addr)
            if block is not None and block[0] == "allocated":
                low -= block[1]
                high -= block[2]
                block[0] = "pending"
        elif action == "free_completed":
            block = live.pop(addr, None)
            if block is not None and block[0] == "pending" and not block[3]:
                high -= block[2]
            elif block is not None and block[0] == "allocated":   # no request before it: freed now
                low -= block[1]
                high -= block[2]
    return {
        "device": device,
        "events": len(events),
        "peak_reserved": peak_reserved,
        "peak_allocated_low": peak_low,
        "peak_allocated_high": peak_high,
        "reserved_at_start": reserved_at_start,
        "reserved_at_dump": reserved_at_dump,
        "allocated_at_dump": allocated_at_dump,
        "events_not_matching_the_dump": unmatched,
    }


def describe(data):
    snapshot = load(data)
    segments, traces, settings = segments_and_traces(snapshot)
    divisions = power2_divisions(settings)
    max_split = settings.get("max_split_size") if isinstance(settings, dict) else None
    if not isinstance(max_split, int) or max_split <= 0 or max_split >= 1 << 62:
        max_split = None   # SIZE_MAX (or absent): no block is oversize
    devices = {s.get("device", 0) for s in segments} | {d for d, trace in enumerate(traces) if trace}
    figures = []
    for device in sorted(devices):
        figures.append(device_figures(device, [s for s in segments if s.get("device", 0) == device],
                                      traces[device] if device < len(traces) else [], divisions, max_split))
    windows = any("\\" in (frame.get("filename") or "") for frame in frames_of(segments, traces))
    first = next((e for trace in traces for e in trace), {})
    return {
        "layout": "segment list" if isinstance(snapshot, list) else "dict",
        "os": "Windows" if windows else "POSIX",
        "device_count": len(devices),
        "has_time_us": "time_us" in first if first else None,
        "blocks_carry_history": any("history" in b for s in segments for b in s.get("blocks") or []),
        "event_keys": sorted(first.keys()) if first else [],
        "snapshot_keys": sorted(snapshot.keys()) if isinstance(snapshot, dict) else [],
        "devices": figures,
    }


def main():
    if len(sys.argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        figures = describe(read_bytes(sys.argv[1]))
    except (OSError, ValueError, pickle.UnpicklingError, EOFError, KeyError, TypeError, subprocess.CalledProcessError) as failure:
        print(f"reference.py: {sys.argv[1]}: {failure}", file=sys.stderr)
        return 2
    figures["bytes"] = os.path.getsize(sys.argv[1])
    json.dump(figures, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
