"""Prints a window of a memory snapshot's trace (stdlib only: zstd via the `zstd` CLI, gzip, or plain).
Usage: python3 tools/trace_window.py FILE [--device N] [--segments] [--around INDEX [--radius R]] [--frames K]
       python3 tools/trace_window.py FILE --keep-last N OUT.pickle
  --keep-last N   writes the snapshot with only the last N entries of each device trace: what
                  torch's ring buffer keeps with max_entries=N (the dump's segments unchanged)
  --segments      list only segment_* and oom events (with their trace index)
  --around INDEX  events INDEX-R .. INDEX+R (R default 8)
  --frames K      print the K innermost Python frames of each event (default 0)
Event indices are positions in device_traces[device], as `rlmem replay` numbers them."""
import gzip
import pickle
import subprocess
import sys


def load(path):
    if path.endswith(".zst"):
        data = subprocess.run(["zstd", "-dc", path], check=True, capture_output=True).stdout
    elif path.endswith(".gz"):
        data = gzip.open(path).read()
    else:
        data = open(path, "rb").read()
    return pickle.loads(data)


def mib(n):
    return f"{n / 2**20:.1f}MiB"


def main(argv):
    path, device, segments, around, radius, frames = argv[0], None, False, None, 8, 0
    if len(argv) == 4 and argv[1] == "--keep-last":
        snap = load(path)
        keep = int(argv[2])
        snap["device_traces"] = [trace[-keep:] if keep > 0 else [] for trace in snap["device_traces"]]
        with open(argv[3], "wb") as f:
            pickle.dump(snap, f, protocol=4)
        return
    i = 1
    while i < len(argv):
        if argv[i] == "--device": device = int(argv[i + 1]); i += 2
        elif argv[i] == "--segments": segments = True; i += 1
        elif argv[i] == "--around": around = int(argv[i + 1]); i += 2
        elif argv[i] == "--radius": radius = int(argv[i + 1]); i += 2
        elif argv[i] == "--frames": frames = int(argv[i + 1]); i += 2
        else: raise SystemExit(__doc__)
    snap = load(path)
    traces = snap["device_traces"]
    if device is None:
        device = max(range(len(traces)), key=lambda d: len(traces[d]))
    trace = traces[device]
    streams = {}
    for index, e in enumerate(trace):
        if around is not None and abs(index - around) > radius: continue
        if segments and not (e["action"].startswith("segment") or e["action"] == "oom"): continue
        s = streams.setdefault(e.get("stream", 0), len(streams))
        extra = f" device_free={e.get('device_free')}" if e["action"] == "oom" else ""
        print(f"{index:6d} {e['action']:15s} addr={e.get('addr', 0):#x} size={e['size']} ({mib(e['size'])}) stream#{s}{extra}")
        for fr in (e.get("frames") or [])[:frames]:
            print(f"         {fr.get('filename', '')}:{fr.get('line', '')} {fr.get('name', '')}")


if __name__ == "__main__":
    main(sys.argv[1:])
