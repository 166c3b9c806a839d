# SPDX-License-Identifier: MIT
"""The output side of the robustness issue: option values and option files that once hung or
were misread, terminal controls in every string, and replay's comparison of reserved ranges with
30,000 segments (once quadratic: a hang)."""
import os
import pickle

from run import Case

MIB = 1 << 20
SEGMENTS = 30_000


def many_segments():
    """30,000 one-block segments, each alive before recording, and a trace that frees and
    allocates in each: replay rebuilds all of them, then --compare and --min-capacity replay
    the trace about 60 times."""
    base = 0x7F0000000000
    segments = []
    events = []
    for k in range(SEGMENTS):
        address = base + k * 2 * MIB
        segments.append({"device": 0, "address": address, "total_size": 2 * MIB, "allocated_size": MIB, "active_size": MIB,
                         "requested_size": MIB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
                         "is_expandable": False, "frames": [],
                         "blocks": [{"address": address, "size": MIB, "requested_size": MIB, "state": "active_allocated",
                                     "frames": []},
                                    {"address": address + MIB, "size": MIB, "requested_size": 0, "state": "inactive",
                                     "frames": []}]})
        events.append({"action": "alloc", "addr": address, "size": MIB, "stream": 0, "time_us": k, "frames": []})
    return pickle.dumps({"segments": segments, "device_traces": [events], "allocator_settings": {}}, protocol=4)


def fifo(name):
    def setup(folder):
        os.mkfifo(folder / name)
    return setup


def control_strings():
    evil = "\x1b]0;t\x07\x1b[2J\r  LEAK forged\x08\x00\x7f\u009b\udcff"
    frames = [{"filename": f"f{evil}.py", "line": 1, "name": f"n{evil}"}]
    block = {"address": 1 << 40, "size": 2 * MIB, "requested_size": MIB, "state": "active_allocated", "frames": frames}
    segment = {"device": 0, "address": 1 << 40, "total_size": 2 * MIB, "allocated_size": 2 * MIB, "active_size": 2 * MIB,
               "requested_size": MIB, "stream": 0, "segment_type": f"small{evil}", "segment_pool_id": (0, 0),
               "is_expandable": False, "frames": frames, "blocks": [block]}
    events = [{"action": "alloc", "addr": 1 << 40, "size": 2 * MIB, "stream": 0, "time_us": 1, "frames": frames,
               "user_metadata": evil, "compile_context": evil}]
    return pickle.dumps({"segments": [segment], "device_traces": [events],
                         "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": evil}}, protocol=4)


PLAN = ["plan", "--phase", "generate", "--batch", "1", "--prompt-len", "1", "--new-tokens", "1"]

CASES = [
    Case("replay-compare-30k-segments", ["replay", "{input}", "--compare", "--min-capacity", "--quiet"],
         make_input=many_segments, exits=(0,), note="30,000 segments: reserved ranges against segments, then ~60 replays"),
    Case("categories-fifo-without-writer", ["inspect", "{input}", "--categories", "{dir}/rules"], make_input=control_strings,
         setup=fifo("rules"), exits=(2,), note="--categories a FIFO nobody writes: refused, not waited on"),
    Case("categories-dev-zero", ["inspect", "{input}", "--categories", "/dev/zero"], make_input=control_strings, exits=(2,),
         note="--categories /dev/zero: refused, not read without end"),
    Case("model-fifo-without-writer", PLAN + ["--model", "{dir}/config.json"], setup=fifo("config.json"), exits=(2,),
         note="--model a FIFO nobody writes"),
    Case("model-dev-zero", PLAN + ["--model", "/dev/zero"], exits=(2,), note="--model /dev/zero"),
    Case("model-config-17mib", PLAN + ["--model", "{input}"], make_input=lambda: b" " * (17 * MIB), suffix=".json", exits=(2,),
         note="a config.json over 16 MiB: refused by size"),
    Case("control-strings-text", ["inspect", "{input}", "--frames", "8"], make_input=control_strings, exits=(0,),
         note="terminal controls in every string field, text report"),
    Case("buffer-invalid-utf8-json", PLAN + ["--model", "qwen2.5-0.5b", "--buffer", "\udcff=8:fp32", "--json"], exits=(0,),
         note="plan --buffer $'\\xff=8:fp32' --json: JSON with U+FFFD, not an internal error"),
    Case("top-zero", ["inspect", "{input}", "--top", "0"], make_input=control_strings, exits=(2,), note="--top 0 refused"),
    Case("capacity-fraction", ["replay", "{input}", "--capacity", "1e-300"], make_input=control_strings, exits=(2,),
         note="--capacity 1e-300 refused, not 'no limit'"),
    Case("alloc-conf-wraps", ["replay", "{input}", "--alloc-conf", "max_split_size_mb:17592186044416"],
         make_input=control_strings, exits=(2,), note="max_split_size_mb of 2^44 refused, not wrapped to 0"),
]
