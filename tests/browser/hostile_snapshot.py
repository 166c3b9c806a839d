#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes a snapshot (pickle protocol 4, plain dicts and lists) whose frame names and file names
are markup: a script that closes the data block, an image whose error handler alerts, a comment
opener and the JavaScript line separators. A leak of four steps and an OOM put them in every view.

  hostile_snapshot.py OUT.pickle
"""
import pickle
import sys

CLOSER = "</script><script>alert(1)</script>"
IMAGE = "<img src=x onerror=alert(1)>"
OTHERS = "<!-- \u2028 \u2029 <style>body{display:none}</style>"
MIB = 1 << 20


def frames(tag):
    return [{"filename": f"/rl/{IMAGE}.py", "line": 7, "name": f"{tag}{CLOSER}"},
            {"filename": f"/rl/train{OTHERS}.py", "line": 3, "name": f"train_step{IMAGE}"}]


def main():
    events = []
    time_us = 1_000_000
    address = 0x7F0000000000
    for step in range(5):
        events.append({"action": "alloc", "addr": address + step * 2 * MIB, "size": 2 * MIB, "stream": 0, "time_us": time_us,
                       "frames": frames("leak")})
        time_us += 1000
        events.append({"action": "alloc", "addr": address + 64 * MIB, "size": MIB, "stream": 0, "time_us": time_us,
                       "frames": [{"filename": "/rl/opt.py", "line": 3, "name": "step"},
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
               "requested_size": 10 * MIB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
               "is_expandable": False, "frames": frames("segment"), "blocks": blocks}
    snapshot = {"segments": [segment], "device_traces": [events],
                "allocator_settings": {"max_split_size": 128 * MIB, "expandable_segments": False}}
    with open(sys.argv[1], "wb") as out:
        out.write(pickle.dumps(snapshot, protocol=4))


if __name__ == "__main__":
    main()
