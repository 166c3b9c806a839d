"""Records small CUDA memory snapshots of the patterns that `rlmem replay` must reproduce (issue 11,
item 3: "Replay faithful to what real runs do"). Standard library and torch only.

Usage, on a machine with one CUDA GPU:
    python3 tools/record_replay_fidelity.py OUTDIR [PATTERN ...]
Every pattern runs in its own Python process (PYTORCH_CUDA_ALLOC_CONF must be set before CUDA
starts), records with `torch.cuda.memory._record_memory_history(enabled="all", context="all",
stacks="python", max_entries=...)` and writes OUTDIR/<name>.pickle (torch.cuda.memory._dump_snapshot)
and OUTDIR/<name>.json: the facts torch itself reported (torch and CUDA versions, device, the
memory cap in bytes, max_memory_allocated/reserved, the allocator's counters, the number of
segment events of each kind, the OOMs caught). `--pack FILE` also writes every output into one
tar.xz (the GPU host returns few files). Seeds are fixed and every hand-off between streams is
ordered with events; GPU time spent by `torch.cuda._sleep` keeps the events that deferred frees
wait on pending across the next allocations, so that the same frees are deferred on every run
(addresses and timestamps differ between runs, the allocator's decisions should not).

Patterns (what each exercises in the caching allocator):
  prefetch_record_stream        a data prefetcher (apex/timm style): each batch is copied and
                                normalised on a side stream, handed to the default stream with
                                wait_stream + record_stream; frees of those tensors are deferred
                                (free_requested now, free_completed when process_events finds the
                                event done at a later malloc). Stream-ordered pools: the side
                                stream's freed blocks serve only the side stream.
                                torch.cuda.empty_cache() after step 1 (synchronize_and_free_events,
                                then release of whole free segments); batch sizes vary per step.
  prefetch_record_stream_expandable  the same with expandable_segments:True (unmaps in empty_cache,
                                one reservation per stream).
  comm_stream                   NCCL-like communication without NCCL (FSDP-like, one GPU, world of
                                4 simulated): an all-gather stream allocates each layer's full
                                parameter (forward: freed with record_stream on the default
                                stream; backward: FSDP2 style, freed without record_stream after
                                the comm stream waited on the compute event) and a reduce-scatter
                                stream allocates gradient buckets and their reduced output, used
                                on the default stream with record_stream. Three streams, cross-
                                stream event waits, deferred frees; no empty_cache.
  train_empty_cache             a small transformer (nn.TransformerEncoder, AdamW), sequence
                                length varying per step, torch.cuda.empty_cache() after every
                                step. The model exists before recording starts (blocks without an
                                alloc event in the trace).
  train_empty_cache_expandable  the same with expandable_segments:True: empty_cache unmaps pages.
                                With train_empty_cache it is the pair that measures the what-if
                                default -> expandable_segments:True.
  capacity_uncapped             the capacity workload (the same transformer, no empty_cache,
                                growing and shrinking sequence lengths, a last batch too long to
                                fit) without a cap: its peaks set the cap of the runs below.
  capacity_default              the same under set_per_process_memory_fraction (the exact cap in
                                bytes is in the JSON): cudaMalloc would pass the cap, so malloc
                                frees cached segments itself (release_cached_blocks, a retry) and
                                the too-long batch OOMs (an `oom` event); the loop catches the
                                OutOfMemoryError, skips the batch and trains one more step.
  capacity_expandable           the same cap with expandable_segments:True (unmaps inside malloc).
  capacity_max_split            the same cap with max_split_size_mb:64 (release_available_cached_
                                blocks frees oversize segments first).
  capacity_gc                   the same cap with garbage_collection_threshold:0.6 (the GC frees
                                aged segments before cudaMalloc).
  expandable_max_split          expandable_segments:True with max_split_size_mb:128 together, the
                                reproducer of pytorch PR 193400 (issue 123548) with torch.empty
                                only: each cycle allocates A = 91 MiB and B = 45.5 MiB, then a
                                2 MiB block that stays alive, then frees A and B. Torch up to 2.11
                                applies the oversize rules of get_free_block to blocks of
                                expandable segments too: the merged 136.5 MiB free block is
                                oversize for the next 91 MiB request, which maps new pages, so
                                reserved memory grows every cycle while allocated grows by 2 MiB.
  expandable_fence              the same cycles under expandable_segments:True alone: the free
                                block is reused and reserved stays flat (the contrast).
  truncated_expandable          the training loop under expandable_segments:True with
                                max_entries=2000: the ring buffer wraps, the trace starts mid-run.
  truncated_default             the same with the default allocator.
"""
import json
import math
import os
import pickle
import subprocess
import sys
import tarfile
import time

SLEEP_CYCLES = 20_000_000  # about 10 ms of one SM at ~2 GHz: keeps recorded events pending
SEGMENT_ACTIONS = ("segment_alloc", "segment_free", "segment_map", "segment_unmap")

# name -> (function name, PYTORCH_CUDA_ALLOC_CONF, max_entries, capped)
PATTERNS = {
    "prefetch_record_stream": ("prefetch", "", 400000, False),
    "prefetch_record_stream_expandable": ("prefetch", "expandable_segments:True", 400000, False),
    "comm_stream": ("comm", "", 400000, False),
    "train_empty_cache": ("train_empty_cache", "", 400000, False),
    "train_empty_cache_expandable": ("train_empty_cache", "expandable_segments:True", 400000, False),
    "capacity_uncapped": ("capacity", "", 400000, False),
    "capacity_default": ("capacity", "", 400000, True),
    "capacity_expandable": ("capacity", "expandable_segments:True", 400000, True),
    "capacity_max_split": ("capacity", "max_split_size_mb:64", 400000, True),
    "capacity_gc": ("capacity", "garbage_collection_threshold:0.6", 400000, True),
    "expandable_max_split": ("fence_cycles", "expandable_segments:True,max_split_size_mb:128", 400000, False),
    "expandable_fence": ("fence_cycles", "expandable_segments:True", 400000, False),
    "truncated_expandable": ("truncated", "expandable_segments:True", 2000, False),
    "truncated_default": ("truncated", "", 2000, False),
}


# ----------------------------------------------------------------------------------------------
# The child process: one pattern, one recording.

class Recording:
    def __init__(self, torch, name, out_dir, max_entries):
        self.torch, self.name, self.out_dir, self.max_entries = torch, name, out_dir, max_entries
        self.notes = {}

    def start(self):
        torch = self.torch
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        self.reserved_at_start = torch.cuda.memory_reserved()
        self.allocated_at_start = torch.cuda.memory_allocated()
        torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                                 max_entries=self.max_entries)

    def finish(self, cap_bytes=0, fraction=None):
        torch = self.torch
        torch.cuda.synchronize()
        path = os.path.join(self.out_dir, self.name + ".pickle")
        torch.cuda.memory._dump_snapshot(path)
        torch.cuda.memory._record_memory_history(enabled=None)
        stats = torch.cuda.memory_stats()
        with open(path, "rb") as f:
            snap = pickle.load(f)
        trace = snap["device_traces"][torch.cuda.current_device()]
        counts = {}
        for entry in trace:
            counts[entry["action"]] = counts.get(entry["action"], 0) + 1
        props = torch.cuda.get_device_properties(0)
        free, total = torch.cuda.mem_get_info()
        facts = {
            "name": self.name,
            "pattern": PATTERNS[self.name][0],
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "device": props.name,
            "device_total_memory": props.total_memory,
            "mem_get_info_total": total,
            "PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
            "allocator_settings": {k: v for k, v in snap.get("allocator_settings", {}).items()
                                   if isinstance(v, (int, float, str, bool))},
            "cap_bytes": cap_bytes,
            "memory_fraction": fraction,
            "max_entries": self.max_entries,
            "trace_entries": len(trace),
            "trace_wrapped": len(trace) >= self.max_entries,
            "reserved_at_record_start": self.reserved_at_start,
            "allocated_at_record_start": self.allocated_at_start,
            "max_memory_allocated": torch.cuda.max_memory_allocated(),
            "max_memory_reserved": torch.cuda.max_memory_reserved(),
            "memory_allocated_at_dump": torch.cuda.memory_allocated(),
            "memory_reserved_at_dump": torch.cuda.memory_reserved(),
            "num_alloc_retries": stats.get("num_alloc_retries", 0),
            "num_ooms": stats.get("num_ooms", 0),
            "num_sync_all_streams": stats.get("num_sync_all_streams", 0),
            "num_device_alloc": stats.get("num_device_alloc", 0),
            "num_device_free": stats.get("num_device_free", 0),
            "segments_at_dump": len(snap["segments"]),
            "trace_actions": dict(sorted(counts.items())),
            "segment_events": sum(counts.get(a, 0) for a in SEGMENT_ACTIONS),
        }
        facts.update(self.notes)
        with open(os.path.join(self.out_dir, self.name + ".json"), "w") as f:
            json.dump(facts, f, indent=1)
        print(json.dumps({k: facts[k] for k in ("name", "max_memory_allocated", "max_memory_reserved",
                                                 "num_alloc_retries", "num_ooms", "segment_events",
                                                 "trace_entries", "cap_bytes")}), flush=True)


def set_cap(torch, cap_bytes):
    """set_per_process_memory_fraction with a fraction f such that f * totalGlobalMem truncates to
    exactly cap_bytes (torch >= 2.10 caps at f * totalGlobalMem; older ones at f * cudaMemGetInfo's
    total, the same number on this machine: both are in the JSON)."""
    total = torch.cuda.get_device_properties(0).total_memory
    f = cap_bytes / total
    while int(f * total) < cap_bytes:
        f = math.nextafter(f, 1.0)
    while int(f * total) > cap_bytes:
        f = math.nextafter(f, 0.0)
    torch.cuda.set_per_process_memory_fraction(f, 0)
    return f


def prefetch(torch, rec):
    """Side-stream prefetch with record_stream; empty_cache after step 1."""
    import torch.nn as nn
    import torch.nn.functional as F
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, stride=2, padding=1),
                          nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(64 * 16, 100)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    sizes = [24, 64, 40, 96, 32, 80, 48]
    host = [torch.rand(b, 3, 96, 96).pin_memory() for b in sizes]
    labels = [torch.randint(0, 100, (b,)).pin_memory() for b in sizes]
    side = torch.cuda.Stream()
    main = torch.cuda.current_stream()
    rec.notes.update(streams={"default": main.cuda_stream, "side": side.cuda_stream}, batch_sizes=sizes,
                     empty_cache_after_step=1)
    rec.start()

    def load(i):
        with torch.cuda.stream(side):
            raw = host[i].cuda(non_blocking=True)      # allocated on the side stream
            x = (raw - 0.5) / 0.25                      # the normalised copy, also on the side stream
            y = labels[i].cuda(non_blocking=True)
            del raw                                     # used on the side stream only: freed at once
        return x, y

    nxt = load(0)
    for step in range(len(sizes)):
        main.wait_stream(side)
        x, y = nxt
        x.record_stream(main)                           # the default stream uses side-stream memory
        y.record_stream(main)
        if step + 1 < len(sizes):
            nxt = load(step + 1)                        # prefetch the next batch while this one runs
        torch.cuda._sleep(SLEEP_CYCLES)                 # the default stream is busy ...
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, y, loss                                  # ... so these frees wait on its events
        if step == 1:
            torch.cuda.empty_cache()
    rec.finish()


def comm(torch, rec):
    """FSDP-like all-gather and reduce-scatter streams, simulated on one GPU."""
    torch.manual_seed(0)
    world, hidden, layers = 4, 2048, 6
    shards = [torch.randn(hidden * hidden // world, device="cuda") * 0.01 for _ in range(layers)]
    grad_shards = [torch.zeros_like(s) for s in shards]
    main = torch.cuda.current_stream()
    gather = torch.cuda.Stream()
    reduce = torch.cuda.Stream()
    batches = [256, 512, 384, 640, 320]
    rec.notes.update(streams={"default": main.cuda_stream, "all_gather": gather.cuda_stream,
                              "reduce_scatter": reduce.cuda_stream}, batch_sizes=batches, world=world,
                     hidden=hidden, layers=layers)
    rec.start()

    def all_gather(i):
        gather.wait_stream(main)                        # the shard is up to date
        with torch.cuda.stream(gather):
            full = torch.empty(world * shards[i].numel(), device="cuda")   # allocated on the comm stream
            for r in range(world):
                full[r * shards[i].numel():(r + 1) * shards[i].numel()].copy_(shards[i])
            torch.cuda._sleep(SLEEP_CYCLES // 4)        # the collective takes a while
        done = gather.record_event()
        main.wait_event(done)
        return full.view(hidden, hidden)

    for step, batch in enumerate(batches):
        x = torch.randn(batch, hidden, device="cuda")
        inputs = []
        for i in range(layers):                          # forward: FSDP1 style, record_stream
            w = all_gather(i)
            w.record_stream(main)
            inputs.append(x)
            x = torch.relu(x @ w)
            del w                                        # deferred: the default stream still reads it
        grad = x / x.numel()
        del x
        previous = None
        for i in reversed(range(layers)):                # backward: FSDP2 style, events only
            if previous is not None:
                gather.wait_event(previous[1])           # the comm stream waits for the compute ...
                del previous                             # ... so the free needs no record_stream
            w = all_gather(i)
            out = inputs[i] @ w
            grad = grad * (out > 0)
            grad_w = inputs[i].t() @ grad
            grad = grad @ w.t()
            previous = (w, main.record_event())
            del w, out
            reduce.wait_stream(main)
            with torch.cuda.stream(reduce):              # reduce-scatter bucket on the comm stream
                bucket = torch.empty(grad_w.numel(), device="cuda")
                bucket.copy_(grad_w.flatten())
                torch.cuda._sleep(SLEEP_CYCLES // 4)
                reduced = bucket.view(world, -1).sum(0)
                del bucket                               # comm-stream only: freed at once
            grad_w.record_stream(reduce)
            del grad_w
            main.wait_stream(reduce)
            reduced.record_stream(main)
            grad_shards[i].add_(reduced)
            del reduced
        del previous, grad, inputs
        for s, g in zip(shards, grad_shards):            # optimizer step on the default stream
            s.sub_(0.01 * g)
            g.zero_()
    rec.finish()


def make_transformer(torch):
    import torch.nn as nn
    torch.manual_seed(0)

    class LM(nn.Module):
        def __init__(self, vocab=8000, d=512, layers=4):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            layer = nn.TransformerEncoderLayer(d, 8, 2048, dropout=0.0, batch_first=True)
            self.body = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = nn.Linear(d, vocab)

        def forward(self, tokens):
            return self.head(self.body(self.emb(tokens)))

    model = LM().cuda()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4)


def train_step(torch, model, opt, seq, batch=8, vocab=8000):
    import torch.nn.functional as F
    tokens = torch.randint(0, vocab, (batch, seq), device="cuda")
    logits = model(tokens)
    loss = F.cross_entropy(logits.view(-1, vocab), tokens.view(-1))
    del logits
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    del loss, tokens


def train_empty_cache(torch, rec):
    """A training loop with torch.cuda.empty_cache() between steps."""
    model, opt = make_transformer(torch)
    lengths = [128, 512, 256, 768, 384, 640]
    rec.notes.update(seq_lengths=lengths, batch=8, empty_cache_after_every_step=True)
    rec.start()
    for seq in lengths:
        train_step(torch, model, opt, seq)
        torch.cuda.empty_cache()
    rec.finish()


CAPACITY_LENGTHS = [256, 1024, 384, 1280, 512, 1536, 640, 1152]
TOO_LONG = 16384  # the batch that cannot fit: caught as OutOfMemoryError and skipped


def capacity(torch, rec, capped):
    """The same transformer at the device's capacity (a cap from the uncapped run's peaks)."""
    model, opt = make_transformer(torch)
    cap, fraction = 0, None
    if capped:
        cap = int(os.environ["RLMEM_CAP_BYTES"])
        fraction = set_cap(torch, cap)
    rec.notes.update(seq_lengths=CAPACITY_LENGTHS, too_long_seq=TOO_LONG, batch=8)
    rec.start()
    ooms = []
    for step, seq in enumerate(CAPACITY_LENGTHS + [TOO_LONG, 768]):
        try:
            train_step(torch, model, opt, seq)
        except torch.cuda.OutOfMemoryError as e:
            ooms.append({"step": step, "seq": seq, "message": str(e).splitlines()[0][:300]})
        opt.zero_grad(set_to_none=True)
        if step == len(CAPACITY_LENGTHS) - 1:   # the peaks before the too-long batch set the cap
            rec.notes.update(max_allocated_before_too_long=torch.cuda.max_memory_allocated(),
                             max_reserved_before_too_long=torch.cuda.max_memory_reserved())
    rec.notes.update(ooms_caught=ooms)
    rec.finish(cap, fraction)


def truncated(torch, rec):
    """A training loop whose trace wraps the ring buffer (max_entries small)."""
    model, opt = make_transformer(torch)
    lengths = [256, 768, 512, 1024, 384, 896]
    rec.notes.update(seq_lengths=lengths, batch=8)
    rec.start()
    for seq in lengths:
        train_step(torch, model, opt, seq)
    rec.finish()


def fence_cycles(torch, rec, cycles=24):
    """PR 193400's reproducer: A and B freed around a 2 MiB block that stays alive."""
    mib = 1 << 20
    sizes = {"a": 91 * mib, "b": 45 * mib + mib // 2, "fence": 2 * mib}
    rec.notes.update(cycles=cycles, request_bytes=sizes)
    kept = [torch.empty(sizes["fence"], dtype=torch.uint8, device="cuda")]  # the warm-up fence
    rec.start()
    reserved = []
    for _ in range(cycles):
        a = torch.empty(sizes["a"], dtype=torch.uint8, device="cuda")
        b = torch.empty(sizes["b"], dtype=torch.uint8, device="cuda")
        kept.append(torch.empty(sizes["fence"], dtype=torch.uint8, device="cuda"))
        del a, b
        reserved.append(torch.cuda.memory_reserved())
    rec.notes.update(reserved_after_each_cycle=reserved)
    rec.finish()


def child(name, out_dir):
    import torch
    function, _, max_entries, capped = PATTERNS[name]
    torch.cuda.init()
    rec = Recording(torch, name, out_dir, max_entries)
    started = time.time()
    if function == "capacity":
        capacity(torch, rec, capped)
    else:
        globals()[function](torch, rec)
    print(f"{name}: {time.time() - started:.1f} s", flush=True)


# ----------------------------------------------------------------------------------------------
# The parent: one process per pattern, the cap from the uncapped run, one archive.

def run_child(name, out_dir, extra_env=None):
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    conf = PATTERNS[name][1]
    if conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    env.update(extra_env or {})
    env["PYTHONUNBUFFERED"] = "1"
    print(f"== {name} (PYTORCH_CUDA_ALLOC_CONF={conf!r})", flush=True)
    try:
        rc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, out_dir], env=env,
                            timeout=150).returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    if rc != 0:
        print(f"!! {name} exited with {rc}", flush=True)
    return rc


def main(argv):
    pack = None
    if "--pack" in argv:
        i = argv.index("--pack")
        pack = argv[i + 1]
        del argv[i:i + 2]
    if argv and argv[0] == "--child":
        child(argv[1], argv[2])
        return 0
    if not argv:
        print(__doc__)
        return 2
    out_dir, names = argv[0], argv[1:] or list(PATTERNS)
    os.makedirs(out_dir, exist_ok=True)
    failed = []
    for name in names:
        extra = {}
        if PATTERNS[name][3] and not os.path.exists(os.path.join(out_dir, "capacity_uncapped.json")):
            print(f"!! {name} skipped: needs capacity_uncapped first", flush=True)
            failed.append(name)
            continue
        if PATTERNS[name][3]:
            # The cap: halfway between the uncapped run's peak allocated and peak reserved before
            # the too-long batch, rounded down to 2 MiB; reserved memory must be freed inside
            # malloc to stay below it.
            with open(os.path.join(out_dir, "capacity_uncapped.json")) as f:
                base = json.load(f)
            low, high = base["max_allocated_before_too_long"], base["max_reserved_before_too_long"]
            cap = max(low + (high - low) // 2, low + (64 << 20)) // (2 << 20) * (2 << 20)
            extra["RLMEM_CAP_BYTES"] = str(cap)
        if run_child(name, out_dir, extra) != 0:
            failed.append(name)
    if pack:
        with tarfile.open(pack, "w:xz", preset=6) as tar:
            for entry in sorted(os.listdir(out_dir)):
                tar.add(os.path.join(out_dir, entry), arcname=entry)
        print(f"packed {pack}: {os.path.getsize(pack)} bytes", flush=True)
    print("failed:", failed, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
