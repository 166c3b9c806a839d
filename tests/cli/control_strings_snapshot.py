#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes a snapshot (pickle protocol 4, plain dicts and lists) whose every string field holds
terminal control sequences: OSC title, clipboard and hyperlink sequences, clear screen, a CR and
backspaces that would forge a "LEAK" line, NUL, DEL, C1 controls, a newline, and a lone surrogate
(bytes that are not UTF-8). A leak of four steps and an OOM make every part of the report print.
tests/browser/hostile_snapshot.py writes the same snapshot with markup instead (snapshot(), write()).

  control_strings_snapshot.py OUT.pickle
"""
import pickle
import sys

HOSTILE = ("\x1b]0;pwned title\x07\x1b]52;c;ZXZpbA==\x07\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\"
           "\x1b[2J\x1b[H\r  LEAK forged.py:1 +9.99 GiB per step\x08\x08\x00\x7f\u009b31m\u0085\n  LEAK second\udcff")
MIB = 1 << 20


def control_frames(tag):
    return [{"filename": f"{tag}{HOSTILE}.py", "line": 7, "name": f"{tag}{HOSTILE}"},
            {"filename": "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", "line": 1, "name": "_call_impl"}]


def snapshot(text, frames):
    """A snapshot of four optimizer steps, each leaving one more block alive from the same site (a
    leak), then an OOM: `frames(tag)` gives the stacks of the leak ("leak"), the OOM ("oom") and the
    segment ("segment"); `text` goes into every other string field."""
    events = []
    time_us = 1_000_000
    address = 0x7F0000000000
    for step in range(5):
        events.append({"action": "alloc", "addr": address + step * 2 * MIB, "size": 2 * MIB, "stream": 0, "time_us": time_us,
                       "frames": frames("leak"), "user_metadata": text, "compile_context": text})
        time_us += 1000
        events.append({"action": "alloc", "addr": address + 64 * MIB, "size": MIB, "stream": 0, "time_us": time_us,
                       "frames": [{"filename": f"opt{text}.py", "line": 3, "name": "step"},
                                  {"filename": "/venv/lib/python3.11/site-packages/torch/optim/adamw.py", "line": 1,
                                   "name": "adamw"}]})
        time_us += 1000
        events.append({"action": "free_requested", "addr": address + 64 * MIB, "size": MIB, "stream": 0, "time_us": time_us,
                       "frames": []})
        events.append({"action": "free_completed", "addr": address + 64 * MIB, "size": MIB, "stream": 0, "time_us": time_us,
                       "frames": []})
        time_us += 1000
    events.append({"action": "oom", "addr": 4 * MIB, "size": 1 << 40, "stream": 0, "time_us": time_us, "frames": frames("oom")})
    blocks = [{"address": address + step * 2 * MIB, "size": 2 * MIB, "requested_size": 2 * MIB, "state": "active_allocated",
               "frames": frames("leak")} for step in range(5)]
    blocks.append({"address": address + 10 * MIB, "size": 118 * MIB, "requested_size": 0, "state": "inactive", "frames": []})
    segment = {"device": 0, "address": address, "total_size": 128 * MIB, "allocated_size": 10 * MIB, "active_size": 10 * MIB,
               "requested_size": 10 * MIB, "stream": 0, "segment_type": f"large{text}", "segment_pool_id": (0, 0),
               "is_expandable": False, "frames": frames("segment"), "blocks": blocks}
    return {"segments": [segment], "device_traces": [events],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": f"max_split_size_mb:128{text}",
                                   "max_split_size": 128 * MIB, "expandable_segments": False}}


def write(path, snap):
    with open(path, "wb") as out:
        out.write(pickle.dumps(snap, protocol=4))


if __name__ == "__main__":
    write(sys.argv[1], snapshot(HOSTILE, control_frames))
