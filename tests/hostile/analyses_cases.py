# SPDX-License-Identifier: MIT
"""Valid snapshots that made inspect's analyses blow up (issue 10): a long frame under
--step-marker (std::regex recursed per character), 200k OOMs, 40k live blocks x 40k OOMs, live
sites x steps, one long frame string repeated in a stack, and empty snapshots. Each is built
here as torch writes it (a pickled dict), at the size the issue names."""
import pickle

from run import Case

MIB = 1 << 20
SEGMENT = 2 << 30  # one large segment holds every block of these traces


def frame(name, filename="/home/user/rl/train.py", line=1):
    return {"filename": filename, "line": line, "name": name}


def event(action, addr, size, frames, time_us=0):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": time_us, "frames": frames}


def snapshot(events, blocks=(), device=0):
    segment = {"device": device, "address": 0, "total_size": SEGMENT, "allocated_size": 0, "active_size": 0,
               "requested_size": 0, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
               "is_expandable": False, "frames": [], "blocks": list(blocks)}
    return pickle.dumps({"segments": [segment], "device_traces": [events]}, protocol=4)


def long_frame_under_step_marker(characters):
    # One frame whose name is `characters` long, in every stack: std::regex recursed once per
    # character of it.
    stack = [frame("x" * characters)]
    events = []
    for k in range(200):
        events.append(event("alloc", k * MIB, 512, stack, k + 1))
    events.append(event("segment_alloc", 0, SEGMENT, stack, 0))
    events.insert(0, events.pop())
    return snapshot(events)


def many_ooms(count):
    stack = [frame("step")]
    return snapshot([event("oom", 1 << 30, 4 * MIB, stack, k + 1) for k in range(count)])


def live_blocks_then_ooms(blocks, ooms):
    # Every OOM used to walk every live block twice (free blocks, largest site).
    events = [event("alloc", k * 4096, 4096, [frame("keep", line=k % 1000 + 1)], k + 1) for k in range(blocks)]
    oom_stack = [frame("oom")]
    events += [event("oom", 1 << 30, 64 * MIB, oom_stack, blocks + k + 1) for k in range(ooms)]
    return snapshot(events)


def live_sites_by_steps(sites, steps):
    # `sites` distinct sites allocate once and stay live; then `steps` steps, each a marker
    # allocation, another allocation, and their frees. A dense sites x steps matrix ran out of memory.
    events = [event("alloc", k * 4096, 4096, [frame("keep", line=k + 1)], k + 1) for k in range(sites)]
    marker = [frame("grpo_step")]
    work = [frame("forward")]
    base = sites * 4096
    for step in range(steps):
        t = sites + 4 * step
        events.append(event("alloc", base, 4096, marker, t))
        events.append(event("alloc", base + 4096, 4096, work, t + 1))
        events.append(event("free_requested", base + 4096, 4096, work, t + 2))
        events.append(event("free_completed", base + 4096, 4096, work, t + 2))
        events.append(event("free_requested", base, 4096, marker, t + 3))
        events.append(event("free_completed", base, 4096, marker, t + 3))
    return snapshot(events)


def long_frame_repeated_in_stack(characters, repeats, allocations):
    # The pickle memo writes the frame once and references it `repeats` times.
    long = frame("f" * characters, filename="C:\\" + "d\\" * 16 + "model.py", line=3)
    stack = [long] * repeats
    return snapshot([event("alloc", k * 4096, 4096, stack, k + 1) for k in range(allocations)])


def empty_snapshot():
    return pickle.dumps({"segments": [], "device_traces": []}, protocol=4)


def segments_without_trace():
    block = {"address": 0, "size": MIB, "requested_size": MIB, "state": "active_allocated", "frames": []}
    return snapshot([], blocks=[block])


CASES = [
    Case("analyses-step-marker-20k-char-frame", ["inspect", "{input}", "--step-marker", "(x|y)+z"],
         make_input=lambda: long_frame_under_step_marker(20_000),
         note="a 20,000-character frame under --step-marker (std::regex overflowed the stack)"),
    Case("analyses-step-marker-10k-char-frame", ["inspect", "{input}", "--json", "--step-marker", "x*x*x*y"],
         make_input=lambda: long_frame_under_step_marker(10_000),
         note="a 10,000-character frame under --step-marker (~2 s per stack with std::regex)"),
    Case("analyses-200k-ooms", ["inspect", "{input}", "--json"], make_input=lambda: many_ooms(200_000),
         note="200k oom events (quadratic limit search, a report each)"),
    Case("analyses-40k-live-x-40k-ooms", ["inspect", "{input}"], make_input=lambda: live_blocks_then_ooms(40_000, 40_000),
         note="40k live blocks x 40k OOMs (each OOM walked every block)"),
    Case("analyses-live-sites-x-steps", ["inspect", "{input}", "--json", "--step-marker", "grpo_step"],
         make_input=lambda: live_sites_by_steps(20_000, 20_000),
         note="20k live sites x 20k steps (a dense sites x steps matrix)"),
    Case("analyses-long-frame-repeated-in-stack", ["inspect", "{input}"],
         make_input=lambda: long_frame_repeated_in_stack(100_000, 10_000, 200),
         note="a 100 KB frame string repeated 10,000 times in one stack"),
    Case("analyses-long-frame-repeated-in-stack-json", ["inspect", "{input}", "--json", "--frames", "10000"],
         make_input=lambda: long_frame_repeated_in_stack(100_000, 10_000, 200),
         note="the same, as JSON (every reported stack listed)"),
    Case("analyses-empty-snapshot", ["inspect", "{input}", "--json"], make_input=empty_snapshot,
         note="no segments, no trace"),
    Case("analyses-segments-without-trace", ["inspect", "{input}"], make_input=segments_without_trace,
         note="segments recorded, no trace"),
]
