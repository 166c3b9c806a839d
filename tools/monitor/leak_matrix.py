"""A matrix of step-end memory series of GRPO-like loops, clean and leaking, with the truth of what
each injected leak (or cache, or buffer) holds at every step end: test data for leak rules.

    python3 tools/monitor/leak_matrix.py --out $OUT/m --budget-s 470
    python3 tools/monitor/leak_matrix.py --check testdata/monitor/matrix            # no torch needed
    python3 tools/monitor/leak_matrix.py --check testdata/monitor/matrix --table    # the README's table
    /usr/bin/python3 tools/monitor/leak_matrix.py --out /tmp/m --device cpu --fake-model --only tiny  # smoke

One process runs many short loops back to back; between two runs everything is freed, then
gc.collect() and torch.cuda.empty_cache(). Each run builds a policy and a frozen reference from a
config (random weights, bf16 on CUDA), AdamW, and runs --steps-range steps of: sample G responses
for each of P prompts with a response length drawn each step (a plain KV-cache sampling loop over
the policy; model.generate() if that loop fails), reference and policy log-probs, the clipped-ratio
loss with a KL term, backward, optimizer step. At each step end it reads torch.cuda.memory_stats()
and mem_get_info() (no synchronize before), then resets the peak stats, so step_peak_* is the peak
of that step alone. It then synchronizes for the step time (not part of the figures).

Sizes: 'tiny' (grpo_common.MODELS) and 'mid', a Qwen2-shaped model of 8 layers, hidden 896,
vocab 151936 (Qwen2.5-0.5B cut to 8 of its 24 layers), added here only.

Shapes (leaking ones from a start step drawn per run, 6..20):
  list_append        last-token fp32 logits of every sequence appended to a list each step
  cat_accumulate     history = torch.cat([history, last-token bf16 logits]): one live tensor that grows
  every_k            eval metrics tensors (incl. fp32 probs of the last token) kept every k-th step
  slow               a tensor of 0.03%..0.05% of the step-end allocated kept each step
  length_varying     top-K logits (values fp32 + indices int64) of every response token, kept each step
  kept_graph         entropy of the last positions' logits kept WITH its autograd graph (softmax and
                     log_softmax outputs saved by the graph are what leaks; the scalar is 4 bytes)
not leaking:
  clean, clean_fixed (one length), warmup_cache (per-length attention-bias cache, fills then stops),
  high_water_buffer (buffer re-grown at each record length of a wide distribution),
  last_batch_alive (the step's logits and sequences referenced until the next step replaces them)

Truth, per step: held_bytes = the bytes of the distinct storages the shape holds at the step end,
plus the storages its kept autograd graphs still save (found by walking grad_fn and reading the
_saved_* tensors not yet freed; model parameters excluded); held_graph_bytes = that graph part;
held_count = the number of distinct storages. The allocator adds its rounding (512 B) and may give
a larger, unsplit block, so allocated grows by a little more than held_bytes.

Writes one compact JSON per run, <size>-<shape>-s<seed>.json (schema rlmem.step_series/1), into
--out, and run_log.json there (what ran, what was skipped for the budget, errors; not a run file).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import random
import sys
import time
import weakref
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import grpo_common as common  # noqa: E402

SCHEMA = "rlmem.step_series/1"
MID = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=8, num_attention_heads=14,
           num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768,
           rope_theta=1_000_000.0, rms_norm_eps=1e-6, tie_word_embeddings=True)
SIZES = {"tiny": "tiny", "mid": "qwen2-mid8"}
LEAKING = ["list_append", "cat_accumulate", "every_k", "slow", "length_varying", "kept_graph"]
NOT_LEAKING = ["clean", "clean_fixed", "warmup_cache", "high_water_buffer", "last_batch_alive"]
SHAPES = LEAKING + NOT_LEAKING
LENGTH_POOL = [16, 24, 32, 40, 48, 64]
PRIOR_STEP_S = {"tiny": 0.12, "mid": 0.25}  # seconds a step, before the first run of a size measures it
PRIOR_SETUP_S = {"tiny": 1.5, "mid": 4.0}


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--out", type=Path, default=None, help="output directory of the run files")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="stop starting runs whose estimated time would pass this many seconds from the start")
    parser.add_argument("--only", default=None,
                        help="comma-separated filters: a size, a shape or sSEED (e.g. tiny,kept_graph), or exact run names "
                             "(tiny-clean-s2,mid-slow-s1)")
    parser.add_argument("--steps-scale", type=float, default=1.0, help="multiply every run's step count (smoke tests)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--fake-model", action="store_true",
                        help="a small pure-torch stand-in for the transformers model (CPU smoke test)")
    parser.add_argument("--check", type=Path, default=None,
                        help="read the run files of this folder: parse, print each run, check leaks grow")
    parser.add_argument("--table", action="store_true", help="with --check: print the README's markdown table")
    return parser.parse_args(argv)


# ---------------------------------------------------------------------------------------------
# the matrix

def run_specs():
    """Every run, in priority order: one seed of each shape and size, then the second seeds, then
    extra ones (tiny is cheap). Parameters come from a RNG seeded by the run's name."""
    order = []
    for seed in (1, 2):
        for shape in SHAPES:
            for size in ("tiny", "mid"):
                order.append((size, shape, seed))
        if seed == 1:
            order.append(("tiny", "every_k", 3))
    order.append(("mid", "every_k", 3))
    for shape in ("list_append", "slow", "length_varying", "kept_graph", "clean", "warmup_cache",
                  "high_water_buffer", "cat_accumulate", "clean_fixed", "last_batch_alive"):
        order.append(("tiny", shape, 3))
    order.append(("mid", "slow", 3))
    order.append(("mid", "clean", 3))
    return [make_spec(*entry) for entry in order]


def make_spec(size, shape, seed):
    rng = random.Random(f"{size}-{shape}-{seed}")
    steps = rng.randint(30, 60) if size == "tiny" else rng.randint(30, 48)
    spec = {"size": size, "shape": shape, "seed": seed, "steps": steps,
            "prompts": rng.choice([2, 3, 4]) if size == "tiny" else rng.choice([2, 3]),
            "group": 4, "prompt_len": rng.choice([16, 24, 32]),
            "start": rng.randint(6, 20) if shape in LEAKING else (None if shape in ("clean", "clean_fixed") else 1)}
    if shape == "clean_fixed":
        spec["lengths"] = {"kind": "choice", "values": [rng.choice([24, 32, 48])]}
    elif shape == "high_water_buffer":
        # a wide distribution: new records come rarely (about log(steps) of them)
        spec["lengths"] = {"kind": "lognormal", "median": rng.choice([20, 24, 28]), "sigma": 0.55, "min": 8, "max": 128}
    elif shape == "warmup_cache":
        count = 4 if seed == 1 else 7  # more lengths: the cache takes longer to fill
        spec["lengths"] = {"kind": "choice", "values": sorted(rng.sample(LENGTH_POOL + [56, 12], count))}
    else:
        spec["lengths"] = {"kind": "choice", "values": sorted(rng.sample(LENGTH_POOL, rng.randint(3, 5)))}
    if shape == "every_k":
        spec["every"] = 3 if seed == 3 else 4
    if shape == "slow":
        spec["fraction"] = round(rng.uniform(0.0003, 0.0005), 6)
    if shape == "length_varying":
        spec["top_k"] = 64 if size == "tiny" else 256
    if shape == "kept_graph":
        spec["positions"] = 2
    return spec


def draw_length(rng, lengths):
    if lengths["kind"] == "choice":
        return rng.choice(lengths["values"])
    value = int(round(rng.lognormvariate(math.log(lengths["median"]), lengths["sigma"])))
    return max(lengths["min"], min(lengths["max"], value))


# ---------------------------------------------------------------------------------------------
# truth: the storages a shape holds, and what their autograd graphs still save

def storage_of(tensor):
    try:
        storage = tensor.untyped_storage()
    except AttributeError:  # torch 1.13
        storage = tensor.storage()
    return storage.data_ptr(), storage.nbytes()


def graph_saved(tensor, exclude):
    """{data_ptr: nbytes} of the tensors that the autograd graph behind `tensor` still saves
    (a node's _saved_* that backward has not freed), parameters (`exclude`) left out."""
    import torch

    found = {}
    root = tensor.grad_fn
    if root is None:
        return found
    seen = {}
    stack = [root]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        for name in dir(node):
            if not name.startswith("_saved_"):
                continue
            try:
                value = getattr(node, name)
            except Exception:  # freed by backward
                continue
            values = value if isinstance(value, (tuple, list)) else (value,)
            for item in values:
                if isinstance(item, torch.Tensor) and item.device.type != "meta":
                    pointer, nbytes = storage_of(item)
                    if pointer and pointer not in exclude:
                        found[pointer] = nbytes
        for next_node, _ in getattr(node, "next_functions", ()):
            stack.append(next_node)
    return found


class Truth:
    """Counts the held storages each step end; caches the graph walk of each held tensor. The
    cache refers to the tensors weakly: it must not keep alive what the shape lets go."""

    def __init__(self, exclude):
        self.exclude = exclude
        self.cache = {}

    def measure(self, tensors):
        storages, graph = {}, {}
        cache = {}
        for tensor in tensors:
            pointer, nbytes = storage_of(tensor)
            storages[pointer] = nbytes
            if tensor.grad_fn is not None:
                entry = self.cache.get(id(tensor))
                if entry is None or entry[0]() is not tensor:
                    entry = (weakref.ref(tensor), graph_saved(tensor, self.exclude))
                cache[id(tensor)] = entry
                graph.update(entry[1])
        self.cache = cache
        for pointer in storages:
            graph.pop(pointer, None)
        tensor_bytes = sum(storages.values())
        graph_bytes = sum(graph.values())
        return {"held_bytes": tensor_bytes + graph_bytes, "held_graph_bytes": graph_bytes,
                "held_count": len(storages) + len(graph)}


# ---------------------------------------------------------------------------------------------
# shapes: during(ctx) runs before backward, after(ctx) after the optimizer step; held() lists the
# tensors held at the step end

class Shape:
    leaking = False
    holder = None
    graph = False

    def __init__(self, spec, torch):
        self.spec, self.torch = spec, torch
        self.start = spec["start"]

    def active(self, step):
        return self.start is not None and step >= self.start

    def during(self, ctx):
        pass

    def after(self, ctx):
        pass

    def held(self):
        return []


class ListAppend(Shape):
    leaking = True
    holder = "kept (list): last-token fp32 logits [S, V] of every sequence, appended each step"

    def __init__(self, spec, torch):
        super().__init__(spec, torch)
        self.kept = []

    def after(self, ctx):
        if self.active(ctx["step"]):
            self.kept.append(ctx["logits"][:, -1].detach().clone())

    def held(self):
        return self.kept


class CatAccumulate(Shape):
    leaking = True
    holder = "history (one tensor): history = torch.cat([history, last-token logits [S, V] in bf16]) each step"

    def __init__(self, spec, torch):
        super().__init__(spec, torch)
        self.history = None

    def after(self, ctx):
        if self.active(ctx["step"]):
            row = ctx["logits"][:, -1].detach().to(self.torch.bfloat16)
            self.history = row.clone() if self.history is None else self.torch.cat([self.history, row])

    def held(self):
        return [] if self.history is None else [self.history]


class EveryK(Shape):
    leaking = True

    def __init__(self, spec, torch):
        super().__init__(spec, torch)
        self.every = spec["every"]
        self.holder = (f"eval_history (list of dicts), every {self.every}th step: per-token logp, kl, ratio [S, L] fp32 "
                       "and the last token's probs [S, V] fp32")
        self.kept = []

    def after(self, ctx):
        step = ctx["step"]
        if self.active(step) and (step - self.start) % self.every == 0:
            torch = self.torch
            self.kept.append({"logp": ctx["new"].detach(), "kl": ctx["kl"].detach(), "ratio": ctx["ratio"].detach(),
                              "probs_last": torch.softmax(ctx["logits"][:, -1].detach(), dim=-1)})

    def held(self):
        return [tensor for entry in self.kept for tensor in entry.values()]


class Slow(Shape):
    leaking = True

    def __init__(self, spec, torch):
        super().__init__(spec, torch)
        self.fraction = spec["fraction"]
        self.holder = f"kept (list): a uint8 tensor of {self.fraction * 100:.3f}% of the step-end allocated before the start, each step"
        self.nbytes = None
        self.kept = []

    def after(self, ctx):
        if self.active(ctx["step"]):
            if self.nbytes is None:
                base = ctx["previous_allocated"] or 64 * 2**20
                self.nbytes = max(1, int(base * self.fraction))
            self.kept.append(self.torch.ones(self.nbytes, dtype=self.torch.uint8, device=ctx["device"]))

    def held(self):
        return self.kept


class LengthVarying(Shape):
    leaking = True

    def __init__(self, spec, torch):
        super().__init__(spec, torch)
        self.k = spec["top_k"]
        self.holder = (f"token_log (list): top-{self.k} logits of every response token, values fp32 and indices int64 "
                       f"[S, L, {self.k}] each step (L = this step's length)")
        self.kept = []

    def after(self, ctx):
        if self.active(ctx["step"]):
            values, indices = self.torch.topk(ctx["logits"].detach(), self.k, dim=-1)
            self.kept.append((values, indices))

    def held(self):
        return [tensor for pair in self.kept for tensor in pair]


class KeptGraph(Shape):
    leaking = True
    graph = True

    def __init__(self, spec, torch):
        super().__init__(spec, torch)
        self.positions = spec["positions"]
        self.holder = (f"entropies (list): entropy = -(p * logp).sum(-1).mean() of the last {self.positions} positions' "
                       "fp32 logits, appended without detach: the scalar (4 bytes) keeps its graph, whose softmax and "
                       "log_softmax outputs [S, positions, V] fp32 stay saved (counted in held_graph_bytes)")
        self.kept = []

    def during(self, ctx):
        if self.active(ctx["step"]):
            torch = self.torch
            part = ctx["logits"][:, -self.positions:]
            p = torch.softmax(part, dim=-1)
            logp = torch.log_softmax(part, dim=-1)
            self.kept.append(-(p * logp).sum(-1).mean())

    def held(self):
        return self.kept


class Clean(Shape):
    pass


class WarmupCache(Shape):
    holder = ("bias_cache (dict by total length T): an additive attention bias [S, heads, T, T] fp32, built the first "
              "time a length is seen")

    def __init__(self, spec, torch):
        super().__init__(spec, torch)
        self.cache = {}

    def after(self, ctx):
        if self.active(ctx["step"]):
            total = ctx["sequences"].shape[1]
            if total not in self.cache:
                torch = self.torch
                mask = torch.full((total, total), float("-inf"), device=ctx["device"]).triu(1)
                self.cache[total] = mask.expand(ctx["sequences"].shape[0], ctx["heads"], total, total).contiguous()

    def held(self):
        return list(self.cache.values())


class HighWaterBuffer(Shape):
    holder = ("scratch (one tensor): a bf16 buffer [S, L_max, 4 * hidden], re-allocated whenever a response is longer "
              "than any before")

    def __init__(self, spec, torch):
        super().__init__(spec, torch)
        self.buffer = None
        self.longest = 0

    def after(self, ctx):
        if self.active(ctx["step"]):
            length = ctx["length"]
            if length > self.longest:
                self.longest = length
                self.buffer = None
                self.buffer = self.torch.empty(ctx["sequences"].shape[0], length, 4 * ctx["hidden"],
                                               dtype=self.torch.bfloat16, device=ctx["device"])
            self.buffer[:, :length].zero_()

    def held(self):
        return [] if self.buffer is None else [self.buffer]


class LastBatchAlive(Shape):
    graph = True
    holder = ("self.last (tuple): the step's fp32 logits [S, L, V] (with their grad_fn) and sequences, referenced until "
              "the next step replaces them")

    def __init__(self, spec, torch):
        super().__init__(spec, torch)
        self.last = None

    def after(self, ctx):
        if self.active(ctx["step"]):
            self.last = (ctx["logits"], ctx["sequences"])

    def held(self):
        return [] if self.last is None else list(self.last)


SHAPE_CLASSES = {"list_append": ListAppend, "cat_accumulate": CatAccumulate, "every_k": EveryK, "slow": Slow,
                 "length_varying": LengthVarying, "kept_graph": KeptGraph, "clean": Clean, "clean_fixed": Clean,
                 "warmup_cache": WarmupCache, "high_water_buffer": HighWaterBuffer, "last_batch_alive": LastBatchAlive}


# ---------------------------------------------------------------------------------------------
# the loop

def fake_model(size, device, seed=0):
    """A pure-torch stand-in with the transformers interface this script uses (CPU smoke tests)."""
    import types

    import torch

    vocab, hidden = (4000, 64) if size == "tiny" else (8000, 96)

    class FakeLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.config = types.SimpleNamespace(vocab_size=vocab, hidden_size=hidden, num_attention_heads=4)
            self.embed = torch.nn.Embedding(vocab, hidden)
            self.mix = torch.nn.Linear(hidden, hidden)

        def forward(self, input_ids, past_key_values=None, use_cache=False, **_):
            states = self.embed(input_ids).cumsum(1)
            if past_key_values is not None:
                states = states + past_key_values
            cache = states[:, -1:].detach() if use_cache else None
            logits = torch.nn.functional.linear(torch.tanh(self.mix(states)), self.embed.weight)
            return types.SimpleNamespace(logits=logits, past_key_values=cache)

    torch.manual_seed(seed)
    return FakeLM().to(device)


class Trainer:
    def __init__(self, spec, device, fake):
        import torch

        self.torch, self.device = torch, device
        if fake:
            self.policy, self.reference = fake_model(spec["size"], device), fake_model(spec["size"], device)
        else:
            self.policy = common.make_model(SIZES[spec["size"]], device, seed=0)
            self.reference = common.make_model(SIZES[spec["size"]], device, seed=0)
        self.reference.requires_grad_(False)
        self.optimizer = torch.optim.AdamW(self.policy.parameters(), lr=1e-6)
        self.vocab = self.policy.config.vocab_size
        self.hidden = self.policy.config.hidden_size
        self.heads = self.policy.config.num_attention_heads
        self.spec = spec
        self.sampler = "kv-loop"

    def parameter_pointers(self):
        pointers = set()
        for model in (self.policy, self.reference):
            for tensor in list(model.parameters()) + list(model.buffers()):
                pointers.add(storage_of(tensor)[0])
        return pointers

    def sample(self, prompt, length, generator):
        torch = self.torch
        if self.sampler == "kv-loop":
            try:
                return self._kv_loop(prompt, length, generator)
            except Exception as error:  # an interface this loop does not know: use generate from now on
                print(f"leak_matrix: KV sampling loop failed ({type(error).__name__}: {error}); using generate()",
                      flush=True)
                self.sampler = "generate"
        return self.policy.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=True,
                                    max_new_tokens=length, min_new_tokens=length, pad_token_id=0).detach()

    def _kv_loop(self, prompt, length, generator):
        torch = self.torch
        out = self.policy(input_ids=prompt, use_cache=True)
        past, last = out.past_key_values, out.logits[:, -1]
        del out
        pieces = [prompt]
        for index in range(length):
            token = torch.multinomial(torch.softmax(last.float(), dim=-1), 1, generator=generator)
            pieces.append(token)
            if index + 1 == length:
                break
            out = self.policy(input_ids=token, past_key_values=past, use_cache=True)
            past, last = out.past_key_values, out.logits[:, -1]
            del out
        del past, last
        return torch.cat(pieces, dim=1)

    def logits_of(self, model, sequences, prompt_len):
        return model(input_ids=sequences, use_cache=False).logits[:, prompt_len - 1:-1].float()

    def step(self, number, length, rng, shape, previous_allocated):
        torch = self.torch
        spec = self.spec
        generator = torch.Generator(device=self.device).manual_seed(rng.randrange(2**31))
        prompt = torch.randint(1, self.vocab, (spec["prompts"], spec["prompt_len"]), device=self.device,
                               generator=generator).repeat_interleave(spec["group"], dim=0)
        with torch.no_grad():
            sequences = self.sample(prompt, length, generator)
        del prompt
        rewards = torch.randn(spec["prompts"], spec["group"], device=self.device, generator=generator)
        advantages = ((rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-4)).flatten()
        targets = sequences[:, spec["prompt_len"]:].unsqueeze(-1)
        with torch.no_grad():
            old = torch.log_softmax(self.logits_of(self.policy, sequences, spec["prompt_len"]), -1).gather(-1, targets).squeeze(-1)
            ref = torch.log_softmax(self.logits_of(self.reference, sequences, spec["prompt_len"]), -1).gather(-1, targets).squeeze(-1)
        logits = self.logits_of(self.policy, sequences, spec["prompt_len"])
        new = torch.log_softmax(logits, dim=-1).gather(-1, targets).squeeze(-1)
        ratio = torch.exp(new - old)
        clipped = torch.clamp(ratio, 0.8, 1.2)
        kl = torch.exp(ref - new) - (ref - new) - 1
        loss = -(torch.min(ratio * advantages[:, None], clipped * advantages[:, None])).mean() + 0.04 * kl.mean()
        ctx = {"step": number, "length": length, "logits": logits, "sequences": sequences, "new": new, "kl": kl,
               "ratio": ratio, "device": self.device, "hidden": self.hidden, "heads": self.heads,
               "previous_allocated": previous_allocated}
        shape.during(ctx)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        shape.after(ctx)
        ctx.clear()


def read_stats(torch, device):
    if device.type != "cuda":
        return {"allocated": 0, "allocations": 0, "reserved": 0, "step_peak_allocated": 0, "step_peak_reserved": 0,
                "inactive_split": 0, "num_alloc_retries": 0, "num_ooms": 0, "device_free": 0}
    stats = torch.cuda.memory_stats(device)
    free, _ = torch.cuda.mem_get_info(device)
    get = lambda key: int(stats.get(key, 0))  # noqa: E731
    return {"allocated": get("allocated_bytes.all.current"), "allocations": get("allocation.all.current"),
            "reserved": get("reserved_bytes.all.current"), "step_peak_allocated": get("allocated_bytes.all.peak"),
            "step_peak_reserved": get("reserved_bytes.all.peak"),
            "inactive_split": get("inactive_split_bytes.all.current"),
            "num_alloc_retries": get("num_alloc_retries"), "num_ooms": get("num_ooms"), "device_free": int(free)}


def cleanup(torch, device):
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def run_one(spec, device, fake, environment, steps_scale=1.0):
    import torch

    cleanup(torch, device)
    if device.type == "cuda":
        torch.cuda.reset_accumulated_memory_stats(device)
    baseline = int(torch.cuda.memory_allocated(device)) if device.type == "cuda" else 0
    started = time.perf_counter()
    trainer = Trainer(spec, device, fake)
    shape = SHAPE_CLASSES[spec["shape"]](spec, torch)
    truth = Truth(trainer.parameter_pointers())
    steps = max(4, int(round(spec["steps"] * steps_scale)))
    start = spec["start"]
    if start is not None and start > steps - 3:
        start = shape.start = max(2, steps // 3)
    rng = random.Random(f"lengths-{spec['size']}-{spec['shape']}-{spec['seed']}")
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    setup_seconds = time.perf_counter() - started
    records = []
    previous_allocated = None
    for number in range(1, steps + 1):
        length = draw_length(rng, spec["lengths"])
        began = time.perf_counter()
        trainer.step(number, length, rng, shape, previous_allocated)
        entry = {"step": number}
        entry.update(read_stats(torch, device))  # the step end: no synchronize before
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            torch.cuda.synchronize(device)  # the step time only
        entry["step_seconds"] = round(time.perf_counter() - began, 4)
        entry["response_len"] = length
        held = truth.measure(shape.held())
        entry["held_bytes"] = held["held_bytes"]
        entry["held_count"] = held["held_count"]
        if shape.graph:
            entry["held_graph_bytes"] = held["held_graph_bytes"]
        previous_allocated = entry["allocated"]
        records.append(entry)
    sampler, holder = trainer.sampler, shape.holder
    truth.cache.clear()
    del trainer, shape, truth
    cleanup(torch, device)
    after = int(torch.cuda.memory_allocated(device)) if device.type == "cuda" else 0

    held = [entry["held_bytes"] for entry in records]
    leaking = spec["shape"] in LEAKING
    first = next((entry["step"] for entry in records if entry["held_bytes"] > 0), None)
    grew = [entry["step"] for index, entry in enumerate(records) if entry["held_bytes"] > (held[index - 1] if index else 0)]
    if leaking:
        mean = held[-1] / (steps - first + 1) if first is not None else 0.0
        stop = None
    else:
        mean = 0.0
        stop = grew[-1] if grew and spec["shape"] in ("warmup_cache", "high_water_buffer") else None
    truth_doc = {"start_step": first, "stop_step": stop, "every": spec.get("every", 1) if leaking else None,
                 "mean_bytes_per_step": round(mean, 1), "holder": holder,
                 "final_held_bytes": held[-1], "max_held_bytes": max(held), "growth_steps": grew,
                 "held_bytes_counts": "distinct storages held at the step end, plus the tensors their autograd graphs "
                                      "still save (held_graph_bytes); allocator rounding not included"}
    if spec["shape"] == "kept_graph":
        truth_doc["graph_bytes_per_step"] = round(records[-1].get("held_graph_bytes", 0) / (steps - first + 1), 1)
        truth_doc["kept_tensor_bytes_per_step"] = round((held[-1] - records[-1].get("held_graph_bytes", 0))
                                                        / (steps - first + 1), 1)
    config = {key: spec[key] for key in spec if key not in ("size", "shape", "seed")}
    config["steps"] = steps
    config["model"] = SIZES[spec["size"]] if not fake else "fake-" + spec["size"]
    config["model_config"] = MID if spec["size"] == "mid" else common.MODELS["tiny"]
    config["sampler"] = sampler
    document = {"schema": SCHEMA, "size": spec["size"], "shape": spec["shape"], "seed": spec["seed"],
                "leaking": leaking, "truth": truth_doc,
                "device_name": environment.get("device"), "torch": environment.get("torch"),
                "transformers": environment.get("transformers"), "device_total": environment.get("device_total_bytes"),
                "config": config, "baseline_allocated": baseline, "after_cleanup_allocated": after,
                "setup_seconds": round(setup_seconds, 3), "steps": records}
    return document


def estimate(spec, step_seconds, setup_seconds, steps_scale):
    lengths = spec["lengths"]
    mean_length = (sum(lengths["values"]) / len(lengths["values"])) if lengths["kind"] == "choice" else lengths["median"] * 1.15
    per_step = step_seconds[spec["size"]] * (0.35 + 0.65 * mean_length / 36.0)
    return setup_seconds[spec["size"]] + per_step * max(4, spec["steps"] * steps_scale)


def selected(spec, only):
    if not only:
        return True
    wanted = [word for word in only.split(",") if word]
    names = [w for w in wanted if w.count("-") >= 2]
    if names:  # exact run names, e.g. tiny-clean-s2
        return f"{spec['size']}-{spec['shape']}-s{spec['seed']}" in names
    sizes = [w for w in wanted if w in SIZES]
    shapes = [w for w in wanted if w in SHAPE_CLASSES]
    seeds = [int(w[1:]) for w in wanted if w.startswith("s") and w[1:].isdigit()]
    return ((not sizes or spec["size"] in sizes) and (not shapes or spec["shape"] in shapes)
            and (not seeds or spec["seed"] in seeds))


def warm_up(device, fake):
    """A few unrecorded steps first: cuBLAS workspaces and the like are made before any series."""
    import torch

    spec = dict(make_spec("tiny", "clean", 99), steps=3)
    trainer = Trainer(spec, device, fake)
    rng = random.Random(0)
    for number in range(1, 4):
        trainer.step(number, 16, rng, Clean(spec, torch), None)
    del trainer
    cleanup(torch, device)


def main_run(args):
    import torch

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("leak_matrix.py: no CUDA device here", file=sys.stderr)
        return 2
    common.MODELS.setdefault("qwen2-mid8", MID)
    environment = common.environment() if device.type == "cuda" else {"torch": torch.__version__}
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    print(f"leak_matrix: {environment}", flush=True)
    warm_up(device, args.fake_model)
    print(f"leak_matrix: warm-up {time.perf_counter() - began:.1f} s", flush=True)
    step_seconds, setup_seconds = dict(PRIOR_STEP_S), dict(PRIOR_SETUP_S)
    log = {"environment": environment, "arguments": {k: str(v) for k, v in vars(args).items()}, "runs": [],
           "skipped": [], "errors": []}
    for spec in run_specs():
        if not selected(spec, args.only):
            continue
        name = f"{spec['size']}-{spec['shape']}-s{spec['seed']}"
        guess = estimate(spec, step_seconds, setup_seconds, args.steps_scale)
        elapsed = time.perf_counter() - began
        if args.budget_s is not None and elapsed + guess > args.budget_s:
            log["skipped"].append({"run": name, "estimate_s": round(guess, 1), "elapsed_s": round(elapsed, 1)})
            print(f"leak_matrix: skip {name} (estimate {guess:.0f} s, {elapsed:.0f} s elapsed)", flush=True)
            continue
        started = time.perf_counter()
        try:
            document = run_one(spec, device, args.fake_model, environment, args.steps_scale)
        except Exception as error:  # one failed run must not cost the others
            import traceback

            traceback.print_exc()
            log["errors"].append({"run": name, "error": f"{type(error).__name__}: {error}"})
            cleanup(torch, device)
            continue
        seconds = time.perf_counter() - started
        path = args.out / f"{name}.json"
        path.write_text(json.dumps(document, separators=(",", ":")) + "\n", encoding="utf-8")
        timings = sorted(entry["step_seconds"] for entry in document["steps"][1:])
        median = timings[len(timings) // 2]
        lengths = [entry["response_len"] for entry in document["steps"]]
        mean_length = sum(lengths) / len(lengths)
        # per-step time normalized to a mean length of 36, for the estimates
        step_seconds[spec["size"]] = median / (0.35 + 0.65 * mean_length / 36.0)
        setup_seconds[spec["size"]] = document["setup_seconds"] + 0.5
        series = [entry["allocated"] for entry in document["steps"]]
        truth = document["truth"]
        log["runs"].append({"run": name, "seconds": round(seconds, 2), "step_median_s": median,
                            "steps": len(series), "start": truth["start_step"], "stop": truth["stop_step"],
                            "true_bytes_per_step": truth["mean_bytes_per_step"], "first_allocated": series[0],
                            "last_allocated": series[-1], "sampler": document["config"]["sampler"]})
        print(f"leak_matrix: {name}: {len(series)} steps in {seconds:.1f} s (median step {median:.3f} s), "
              f"start {truth['start_step']}, true {truth['mean_bytes_per_step'] / 2**10:.1f} KiB/step, "
              f"allocated {series[0] / 2**20:.1f} -> {series[-1] / 2**20:.1f} MiB, "
              f"{time.perf_counter() - began:.0f} s elapsed", flush=True)
    log["total_seconds"] = round(time.perf_counter() - began, 1)
    (args.out / "run_log.json").write_text(json.dumps(log, indent=1) + "\n", encoding="utf-8")
    print(f"leak_matrix: {len(log['runs'])} runs, {len(log['skipped'])} skipped, {len(log['errors'])} errors, "
          f"{log['total_seconds']} s", flush=True)
    return 0 if not log["errors"] else 1


# ---------------------------------------------------------------------------------------------
# --check: no torch

def check(folder: Path, table: bool) -> int:
    failures = 0
    rows = []
    for path in sorted(folder.glob("*-s*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        assert document["schema"] == SCHEMA, path
        steps = document["steps"]
        assert [entry["step"] for entry in steps] == list(range(1, len(steps) + 1)), path
        truth = document["truth"]
        allocated = [entry["allocated"] for entry in steps]
        held = [entry["held_bytes"] for entry in steps]
        start = truth["start_step"]
        timings = sorted(entry["step_seconds"] for entry in steps[1:])
        median = timings[len(timings) // 2]
        note = ""
        if document["leaking"]:
            before = allocated[start - 2] if start and start > 1 else allocated[0]
            observed = (allocated[-1] - before) / (len(steps) - start + 1)
            ratio = observed / truth["mean_bytes_per_step"] if truth["mean_bytes_per_step"] else float("nan")
            ok = allocated[-1] > before and 0.9 < ratio < 1.6
            note = f"observed {observed / 2**10:.1f} KiB/step = {ratio:.3f}x truth"
        else:
            spread = max(allocated[1:]) - min(allocated[1:])
            heldspread = max(held[1:]) - min(held[1:])
            ok = True
            note = f"allocated spread (steps 2..) {spread / 2**20:.2f} MiB, held spread {heldspread / 2**20:.2f} MiB"
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {path.name}: {len(steps)} steps, start {start}, stop {truth['stop_step']}, "
              f"every {truth['every']}, true {truth['mean_bytes_per_step'] / 2**10:.1f} KiB/step, allocated "
              f"{allocated[0] / 2**20:.1f} -> {allocated[-1] / 2**20:.1f} MiB, step {median:.3f} s; {note}")
        lengths = document["config"]["lengths"]
        drawn = (",".join(str(v) for v in lengths["values"]) if lengths["kind"] == "choice"
                 else f"lognormal median {lengths['median']}, {lengths['min']}..{lengths['max']}")
        if document["leaking"]:
            per_step = f"{truth['mean_bytes_per_step'] / 2**10:,.1f}"
        elif truth["stop_step"]:
            per_step = f"0 (holds up to {truth['max_held_bytes'] / 2**10:,.0f} KiB, grows until step {truth['stop_step']})"
        elif truth["max_held_bytes"]:
            per_step = f"0 (holds {min(held) / 2**10:,.0f}..{max(held) / 2**10:,.0f} KiB)"
        else:
            per_step = "0"
        config = document["config"]
        rows.append(f"| {document['size']} | {document['shape']} | {document['seed']} | {len(steps)} | "
                    f"{start if start is not None else '-'} | {truth['every'] or '-'} | {per_step} | "
                    f"{config['prompts']}x{config['group']} | {config['prompt_len']} | {drawn} | "
                    f"{allocated[0] / 2**20:,.1f} -> {allocated[-1] / 2**20:,.1f} | {median:.3f} |")
    if table:
        print()
        print("| size | shape | seed | steps | start | every | true KiB/step | sequences | prompt | response lengths "
              "| allocated MiB, step 1 -> last | median step s |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        print("\n".join(rows))
    print(f"{len(rows)} runs, {failures} failed")
    return 1 if failures else 0


def main(argv=None) -> int:
    args = parse_arguments(argv)
    if args.check is not None:
        return check(args.check, args.table)
    if args.out is None:
        print("leak_matrix.py: --out or --check is needed", file=sys.stderr)
        return 2
    return main_run(args)


if __name__ == "__main__":
    sys.exit(main())
