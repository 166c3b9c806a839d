"""Times what `python -m torch.cuda._memory_viz stats FILE` does, inside one Python process,
so torch's import is not counted: pickle.load of the snapshot, then segsum() over it.
Usage (where torch is installed): python3 bench/torch_stats_inprocess.py FILE..."""
import pickle
import sys
import time

from torch.cuda import _memory_viz

for path in sys.argv[1:]:
    best = None
    for _ in range(3):
        start = time.perf_counter()
        with open(path, "rb") as f:
            data = pickle.load(f)
        _memory_viz.segsum(data)
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    print(f"{path.rsplit('/', 1)[-1]:34s} load+segsum {best:.3f} s")
