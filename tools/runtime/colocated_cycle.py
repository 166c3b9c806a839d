#!/usr/bin/env python3
"""The colocated GRPO cycle of issue 26 on one GPU, timed three ways side by side, phase by phase.

    python3 tools/runtime/colocated_cycle.py OUT [--modes rlmem,offload,torch] [--rounds 2]
        [--steps 6] [--tiny] [--batch 16 --prompt 256 --gen 256 --micro 4 --layers 28 ...]
        [--fused] [--expandable] [--rollout-keep host|discard] [--reuse] [--dry-run]

A Qwen2.5-1.5B-shaped policy (transformers Qwen2, tied embeddings, bf16, random weights, SDPA)
trained with AdamW (tag "train": weights, gradients, optimizer state, the update's activations),
an inference copy of its weights (tag "rollout"), the generation's KV cache and activations (tag
"kv"). Each step: resume kv; generate (greedy, the model's own DynamicCache, B prompts of P
tokens, G new tokens); pause kv (discard) and rollout (keep host); resume train; update (M
micro-batches of the generated rows, forward + backward, AdamW step); resume rollout and copy the
weights into it; pause train (keep host). Modes:

- rlmem:   rlmem.runtime.install(keep_host_buffers=True), reserve_host_buffers(train + rollout
           bytes) at start, the pauses and resumes by the runtime.
- offload: torch's allocator (--expandable: expandable segments) and a hand-written offload of
           the same tensors: pinned host buffers made once; pause = async copies to them, a
           synchronize, the storages freed, empty_cache(); resume = storages back, copies in.
- torch:   nothing released; the reference for step time (and for what is left free without it).

Each mode runs in its own process (an allocator is chosen once per process), round-robin for
--rounds rounds; each writes OUT/<mode>_<round>.json after every step (log: OUT/<mode>_<round>.log).
Then a table: per-phase medians of the steps after the first, and rlmem/offload, rlmem/torch.
Also: the device's free memory during generate (mem_get_info), bytes moved per tag, the first
step, and for rlmem the change of every numeric field of statistics()["totals"] over each phase.
A checksum of a few training tensors taken before pause("train") must equal the one after resume.

Smoke test (seconds): python3 tools/runtime/colocated_cycle.py /tmp/cc --tiny --rounds 1
The table alone, with made-up timings, no GPU: add --dry-run. --reuse keeps the finished
results already in OUT (same sizes and steps) and runs only the rest: a run cut short goes on.
Needs torch, transformers and librlmem (RLMEM_LIBRARY, PYTHONPATH=python).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import textwrap
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "python"))
MiB = 1 << 20
MODES = ("rlmem", "offload", "torch")
PHASES = ("resume kv", "generate", "pause kv", "pause rollout", "resume train", "update",
          "resume rollout + copy", "pause train")
SIZES = {"batch": 16, "prompt": 256, "gen": 256, "micro": 4, "layers": 28, "hidden": 1536, "heads": 12,
         "kv_heads": 2, "intermediate": 8960, "vocab": 151936}
TINY = {"layers": 2, "hidden": 256, "heads": 4, "kv_heads": 2, "intermediate": 512, "vocab": 1000, "batch": 4,
        "prompt": 32, "gen": 16}


# -- memory strategies (one per mode) -------------------------------------------------------------

class Resident:
    """torch mode: torch's allocator and nothing released. `keep`: what a pause keeps, per tag."""

    def __init__(self, keep: dict):
        self.keep, self.paused, self.moved = keep, set(), {}

    def region(self, tag: str):
        return contextlib.nullcontext()

    def prepare(self, groups: dict) -> int:
        return 0  # host bytes pinned for the pauses

    def pause(self, tag: str) -> None:
        """Nothing released."""

    def resume(self, tag: str) -> None:
        """Nothing to bring back."""

    def totals(self) -> dict:
        return {}  # rlmem's statistics()["totals"], flattened

    def transfers(self) -> dict:
        return self.moved  # {tag: {"pause"|"resume": {"copied_bytes", "seconds"}}}


class Rlmem(Resident):
    def __init__(self, keep: dict):
        super().__init__(keep)
        import rlmem.runtime as rt

        rt.install(keep_host_buffers=True)  # before anything touches CUDA
        self.rt = rt

    def region(self, tag: str):
        return self.rt.region(tag)

    def prepare(self, groups: dict) -> int:
        """Train and rollout are paused together (from pause rollout to resume train): both their
        bytes, and a 64 MiB slab more each (a tag's backup starts a slab; whole pages are copied)."""
        kept = [tensors for tag, tensors in groups.items() if self.keep[tag] == "host"]
        nbytes = sum(t.nbytes for tensors in kept for t in tensors) + 64 * MiB * len(kept)
        self.rt.reserve_host_buffers(nbytes)
        return nbytes

    def pause(self, tag: str) -> None:
        self.rt.pause(tag, keep=self.keep[tag])
        self.paused.add(tag)

    def resume(self, tag: str) -> None:
        if tag in self.paused:  # kv is first paused after the first generate
            self.rt.resume(tag)
            self.paused.discard(tag)

    def totals(self) -> dict:
        return numeric_leaves(self.rt.statistics()["totals"])

    def transfers(self) -> dict:
        return {tag["name"]: {"pause": tag["last_pause"], "resume": tag["last_resume"]}
                for tag in self.rt.statistics()["tags"] if tag["name"] in self.keep}


class Offload(Resident):
    """A hand-written offload of the same tensors under torch's allocator."""

    def prepare(self, groups: dict) -> int:
        self.groups, pinned = {}, 0
        for tag, tensors in groups.items():
            for t in tensors:
                assert t.is_contiguous() and t.nbytes == t.untyped_storage().nbytes(), "a tensor is not its storage"
            views, nbytes = pinned_views(tensors) if self.keep[tag] == "host" else (None, 0)
            self.groups[tag], pinned = (tensors, views), pinned + nbytes
        return pinned

    def pause(self, tag: str) -> None:
        import torch

        start = time.perf_counter()
        tensors, views = self.groups.get(tag, ([], None))
        if views is not None:
            with torch.no_grad():
                for t, view in zip(tensors, views):
                    view.copy_(t, non_blocking=True)
            torch.cuda.synchronize()
        for t in tensors:
            t.untyped_storage().resize_(0)
        torch.cuda.empty_cache()  # kv: its tensors died with the generation; this returns them
        self.paused.add(tag)
        self.record(tag, "pause", start)

    def resume(self, tag: str) -> None:
        import torch

        if tag not in self.paused:
            return
        start = time.perf_counter()
        tensors, views = self.groups.get(tag, ([], None))
        with torch.no_grad():  # parameters are leaves that require grad
            for i, t in enumerate(tensors):
                t.untyped_storage().resize_(t.nbytes)
                if views is not None:
                    t.copy_(views[i], non_blocking=True)
        torch.cuda.synchronize()
        self.paused.discard(tag)
        self.record(tag, "resume", start)

    def record(self, tag: str, what: str, start: float) -> None:
        if tag in self.groups:
            tensors, views = self.groups[tag]
            copied = sum(t.nbytes for t in tensors) if views is not None else 0
            self.moved.setdefault(tag, {})[what] = {"copied_bytes": copied, "seconds": time.perf_counter() - start}


def pinned_views(tensors: list, bucket: int = 256 * MiB) -> tuple[list, int]:
    """Pinned host tensors shaped as `tensors`, packed into buffers of up to `bucket` bytes (torch
    rounds each pinned allocation up to a power of two: one flat buffer could waste nearly half)."""
    import torch

    buckets, used = [[]], 0
    for t in tensors:
        if buckets[-1] and used + t.nbytes > bucket:
            buckets.append([])
            used = 0
        buckets[-1].append((t, used))
        used += -(-t.nbytes // 64) * 64
    views, pinned = [], 0
    for members in filter(None, buckets):
        size = members[-1][1] + members[-1][0].nbytes
        host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        pinned += size
        views += [host[at:at + t.nbytes].view(t.dtype).view(t.shape) for t, at in members]
    return views, pinned


# -- the cycle (the child process) ----------------------------------------------------------------

def numeric_leaves(document: dict, prefix: str = "") -> dict:
    """{"a": {"b": 1}, "c": 2.5} -> {"a.b": 1, "c": 2.5}: whatever numeric fields exist."""
    leaves = {}
    for key, value in document.items():
        if isinstance(value, dict):
            leaves.update(numeric_leaves(value, f"{prefix}{key}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            leaves[f"{prefix}{key}"] = value
    return leaves


class Timer:
    """Phase timers (synchronize, perf_counter) and, under rlmem, the change of its totals."""

    def __init__(self, torch, mem: Resident):
        self.torch, self.mem, self.seconds, self.totals = torch, mem, {}, {}

    @contextlib.contextmanager
    def phase(self, name: str):
        self.torch.cuda.synchronize()
        before = self.mem.totals()
        start = time.perf_counter()
        yield
        self.torch.cuda.synchronize()
        self.seconds[name] = time.perf_counter() - start
        after = self.mem.totals()
        if after:
            self.totals[name] = {key: value - before.get(key, 0) for key, value in after.items()}


def warm_up(torch) -> None:
    """Each thread's cuBLAS workspaces, made outside every tag: torch keeps them for the process's
    life, and one made inside "kv" (the first matmul is the generation's) would be unmapped by
    kv's pause while the update still uses it."""
    layer = torch.nn.Linear(64, 64, device="cuda", dtype=torch.bfloat16)
    y = layer(torch.randn(8, 16, 64, device="cuda", dtype=torch.bfloat16))
    z = torch.nn.functional.scaled_dot_product_attention(y[:, None], y[:, None], y[:, None], is_causal=True)
    (z.float().sum() + (y @ y.mT).float().sum()).backward()  # the autograd thread's too
    torch.cuda.synchronize()


def generate(torch, model, sequences, prompt: int, mem: Resident, generator) -> dict:
    """Greedy decoding after each row's prompt into `sequences` (outside "kv": what is in kv is
    discarded after); the device's free bytes at the start and at the end (the cache largest)."""
    sequences[:, :prompt] = torch.randint(model.config.vocab_size, (sequences.shape[0], prompt), device="cuda",
                                          generator=generator)
    free_start = torch.cuda.mem_get_info()[0]
    with torch.no_grad(), mem.region("kv"):
        past, tokens = None, sequences[:, :prompt]
        for at in range(prompt, sequences.shape[1]):
            out = model(input_ids=tokens, past_key_values=past, use_cache=True, logits_to_keep=1)
            past = out.past_key_values
            sequences[:, at] = out.logits[:, -1].argmax(-1)
            tokens = sequences[:, at:at + 1]
        free_end = torch.cuda.mem_get_info()[0]
    return {"generate_start": free_start, "generate_end": free_end}


def update(torch, model, optimizer, sequences, micro: int) -> float:
    rows = sequences.shape[0] // micro
    losses = []
    for i in range(micro):
        batch = sequences[i * rows:(i + 1) * rows]
        loss = model(input_ids=batch, labels=batch, use_cache=False).loss / micro
        loss.backward()
        losses.append(loss.detach())
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(torch.stack(losses).sum())


def copy_weights(torch, rollout, policy) -> None:
    with torch.no_grad():  # buffers too: a discarded rollout has lost its rotary inv_freq
        for dst, src in zip([*rollout.parameters(), *rollout.buffers()], [*policy.parameters(), *policy.buffers()]):
            dst.copy_(src)


def checksum(torch, tensors: list) -> list:
    return [float.hex(float(torch.sum(t, dtype=torch.float64))) for t in tensors]


def unique_cuda(tensors) -> list:
    """One tensor per CUDA storage (tied weights share one)."""
    return list({t.untyped_storage().data_ptr(): t for t in tensors if t.is_cuda}.values())


def run_cycle(mode: str, path: Path, sizes: dict, options, result: dict) -> None:
    import torch

    keep = {"train": "host", "rollout": options.rollout_keep, "kv": "discard"}
    mem = {"rlmem": Rlmem, "offload": Offload, "torch": Resident}[mode](keep)
    import transformers
    from transformers import AutoModelForCausalLM, Qwen2Config

    result.update(device=torch.cuda.get_device_name(), torch=torch.__version__, transformers=transformers.__version__)
    begun = time.perf_counter()
    torch.manual_seed(0)
    warm_up(torch)
    config = Qwen2Config(hidden_size=sizes["hidden"], num_hidden_layers=sizes["layers"],
                         num_attention_heads=sizes["heads"], num_key_value_heads=sizes["kv_heads"],
                         intermediate_size=sizes["intermediate"], vocab_size=sizes["vocab"], tie_word_embeddings=True)

    def build(tag: str):
        with mem.region(tag), torch.device("cuda"):
            return AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")

    policy, rollout = build("train").train(), build("rollout").eval().requires_grad_(False)
    with mem.region("rollout"):
        copy_weights(torch, rollout, policy)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=options.lr, **({"fused": True} if options.fused else {}))
    params = list(policy.parameters())
    with mem.region("train"):  # AdamW's state, made now (an lr-0 step leaves the weights as they are)
        for p in params:
            p.grad = torch.zeros_like(p)
        optimizer.param_groups[0]["lr"] = 0.0
        optimizer.step()
        optimizer.param_groups[0]["lr"] = options.lr
        optimizer.zero_grad(set_to_none=True)
    sequences = torch.zeros(sizes["batch"], sizes["prompt"] + sizes["gen"], dtype=torch.long, device="cuda")
    generator = torch.Generator(device="cuda").manual_seed(1)
    states = [t for state in optimizer.state.values() for t in state.values() if torch.is_tensor(t)]
    groups = {"train": unique_cuda([*params, *policy.buffers(), *states]),
              "rollout": unique_cuda([*rollout.parameters(), *rollout.buffers()])}
    torch.cuda.synchronize()
    setup = result["setup"]
    setup.update(build_seconds=time.perf_counter() - begun,
                 **{f"{tag}_bytes": sum(t.nbytes for t in tensors) for tag, tensors in groups.items()})
    start = time.perf_counter()
    setup["host_buffer_bytes"] = mem.prepare(groups)
    setup["host_buffers_seconds"] = time.perf_counter() - start
    watched = [params[0], params[len(params) // 2], params[-1], optimizer.state[params[len(params) // 2]]["exp_avg_sq"]]
    with mem.region("train"):
        expected = checksum(torch, watched)
    start = time.perf_counter()
    mem.pause("train")
    setup["first_pause_train_seconds"] = time.perf_counter() - start
    print(f"{mode}: setup {json.dumps(setup)}", file=sys.stderr, flush=True)

    for index in range(options.steps):
        timer, begun = Timer(torch, mem), time.perf_counter()
        with timer.phase("resume kv"):
            mem.resume("kv")
        with timer.phase("generate"):
            free = generate(torch, rollout, sequences, sizes["prompt"], mem, generator)
        with timer.phase("pause kv"):
            mem.pause("kv")
        with timer.phase("pause rollout"):
            mem.pause("rollout")
        with timer.phase("resume train"):
            mem.resume("train")
        with mem.region("train"):
            equal = checksum(torch, watched) == expected
        with timer.phase("update"), mem.region("train"):
            loss = update(torch, policy, optimizer, sequences, sizes["micro"])
        with timer.phase("resume rollout + copy"):
            mem.resume("rollout")
            with mem.region("rollout"):
                copy_weights(torch, rollout, policy)
        with mem.region("train"):
            expected = checksum(torch, watched)
        with timer.phase("pause train"):
            mem.pause("train")
        seconds = {**timer.seconds, "step": sum(timer.seconds.values()), "wall": time.perf_counter() - begun}
        result["steps"].append({"seconds": seconds, "free_bytes": free, "checksum_equal": equal, "loss": loss,
                                "transfers": json.loads(json.dumps(mem.transfers())),
                                "totals_delta": timer.totals})
        write_result(path, result)
        print(f"{mode} step {index + 1}: {seconds['step']:.3f} s (generate {seconds['generate']:.3f}, update "
              f"{seconds['update']:.3f}); free during generate {free['generate_start'] / 1e9:.2f} -> "
              f"{free['generate_end'] / 1e9:.2f} GB; checksum equal: {equal}; loss {loss:.4f}",
              file=sys.stderr, flush=True)
    result["totals_end"] = mem.totals()


def summarize(steps: list) -> dict:
    """The first step's seconds, and the median, min and max of the others', per phase."""
    later = {}
    for name in steps[0]["seconds"] if len(steps) > 1 else []:
        values = [step["seconds"][name] for step in steps[1:]]
        later[name] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
    return {"first": steps[0]["seconds"] if steps else None, "later": later,
            "checksums_equal": all(step["checksum_equal"] for step in steps)}


def write_result(path: Path, result: dict) -> None:
    result["summary"] = summarize(result["steps"])
    path.write_text(json.dumps(result, indent=1))


def new_result(mode: str, sizes: dict, options) -> dict:
    return {"mode": mode, "sizes": sizes, "steps_asked": options.steps, "fused": options.fused, "lr": options.lr,
            "rollout_keep": options.rollout_keep, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
            "setup": {}, "steps": []}


def fake_result(mode: str, sizes: dict, options, seed: int) -> dict:
    """--dry-run: a child's result with made-up timings (no torch), to check the files and table."""
    rng, result = random.Random(seed), new_result(mode, sizes, options)
    moving = {"rlmem": 1.0, "offload": 1.7, "torch": 0.0}[mode]
    base = {"resume kv": 0.0004, "generate": 6.5, "pause kv": 0.004, "pause rollout": 0.07, "resume train": 0.19,
            "update": 0.9, "resume rollout + copy": 0.08, "pause train": 0.2}
    moves = {"train": 9.26e9, "rollout": 3.09e9} if mode != "torch" else {}
    result.update(device="dry run", torch="-", transformers="-")
    result["setup"] = {"build_seconds": 21.0, "train_bytes": 9.26e9, "rollout_bytes": 3.09e9,
                       "host_buffer_bytes": 12.35e9 if moves else 0, "host_buffers_seconds": 6.2 * moving}
    for index in range(options.steps):
        seconds = {name: cost * (moving if "pause" in name or "resume" in name else 1) * rng.uniform(0.95, 1.1)
                   * (2.5 if index == 0 else 1) for name, cost in base.items()}
        seconds.update(step=sum(seconds.values()), wall=sum(seconds.values()) + 0.02)
        moved = {tag: {what: {"copied_bytes": nbytes, "seconds": nbytes / rng.uniform(40e9, 55e9)}
                       for what in ("pause", "resume")} for tag, nbytes in moves.items()}
        totals = {name: {"maps": rng.randint(0, 200), "unmaps": rng.randint(0, 200), "fences": 1, "map_seconds": 0.01,
                         "allocated_bytes.current": 0} for name in PHASES} if mode == "rlmem" else {}
        free = {"generate_start": 72e9 if moves else 55e9}
        free["generate_end"] = free["generate_start"] - 1.2e9
        result["steps"].append({"seconds": seconds, "free_bytes": free, "checksum_equal": True, "loss": 12.0,
                                "transfers": moved, "totals_delta": totals})
    return result


def child_main(mode: str, path: Path, sizes: dict, options) -> int:
    result = new_result(mode, sizes, options)
    try:
        run_cycle(mode, path, sizes, options, result)
    except Exception:  # noqa: BLE001 - recorded with the steps done so far, and the exit says it
        result["error"] = traceback.format_exc()[-3000:]
        write_result(path, result)
        raise
    write_result(path, result)
    return 0


# -- the driver -----------------------------------------------------------------------------------

def run_child(mode: str, path: Path, child_args: list, options) -> dict:
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)  # torch's allocator as it comes, unless --expandable
    if mode == "offload" and options.expandable:
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    log = path.with_suffix(".log")
    path.unlink(missing_ok=True)
    failure = None
    with log.open("w") as sink:
        try:
            done = subprocess.run([sys.executable, __file__, "--child", mode, str(path), *child_args], stdout=sink,
                                  stderr=subprocess.STDOUT, env=env, timeout=options.timeout)
            failure = f"exit {done.returncode}" if done.returncode else None
        except subprocess.TimeoutExpired:
            failure = f"timed out after {options.timeout} s"
    result = json.loads(path.read_text()) if path.exists() else {"mode": mode, "setup": {}, "steps": []}
    if failure or "summary" not in result:
        result["error"] = result.get("error") or failure or "no result written"
        result["log_tail"] = log.read_text()[-3000:]
        write_result(path, result)
    return result


def fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    return f"{value:.1f}" if abs(value) >= 100 else f"{value:.3f}" if abs(value) >= 0.1 else f"{value:.4f}"


def median_of(results: list, take) -> float | None:
    """The median of take(step) over the steps after the first of every round (None: no value)."""
    values = []
    for result in results:
        for step in result["steps"][1:]:
            with contextlib.suppress(KeyError, TypeError, ZeroDivisionError):
                values.append(take(step))
    return statistics.median(values) if values else None


def print_table(results: dict, sizes: dict, options) -> None:
    modes = list(results)
    if not any(r["steps"] for each in results.values() for r in each):
        print("no step finished in any mode: see the .log files")
        return
    ratios = [(a, b) for a, b in (("rlmem", "offload"), ("rlmem", "torch")) if a in modes and b in modes]
    rows = [(name, lambda step, n=name: step["seconds"][n]) for name in (*PHASES, "step", "wall")]
    rows += [(f"free GB, generate {at}", lambda step, at=at: step["free_bytes"][f"generate_{at}"] / 1e9)
             for at in ("start", "end")]
    for tag in ("train", "rollout"):
        rows.append((f"{tag}: GB paused", lambda step, t=tag: step["transfers"][t]["pause"]["copied_bytes"] / 1e9))
        for what in ("pause", "resume"):
            rows.append((f"{tag}: {what} GB/s", lambda step, t=tag, w=what: step["transfers"][t][w]["copied_bytes"]
                         / step["transfers"][t][w]["seconds"] / 1e9))
    table = [(label, [median_of(results[mode], take) for mode in modes]) for label, take in rows]
    firsts = [[r["steps"][0]["seconds"]["step"] for r in results[mode] if r["steps"]] for mode in modes]
    table.append(("first step", [statistics.median(each) if each else None for each in firsts]))
    setup = [[r["setup"].get("host_buffers_seconds") for r in results[mode] if "host_buffers_seconds" in r["setup"]]
             for mode in modes]
    table.append(("setup: pin host buffers s", [statistics.median(each) if each else None for each in setup]))
    device = next((r.get("device") for each in results.values() for r in each if r.get("device")), "?")
    print(f"\ncolocated GRPO cycle on {device}; Qwen2 {sizes['layers']} layers, hidden {sizes['hidden']}, "
          f"vocab {sizes['vocab']}")
    print(f"batch {sizes['batch']}, prompt {sizes['prompt']}, gen {sizes['gen']}, micro {sizes['micro']}; seconds "
          f"unless named, medians of steps 2..{options.steps} of {options.rounds} round(s)")
    print("step: the phases' sum; wall: the step with its checks; first step: median over rounds")
    print(f"{'':26}" + "".join(f"{mode:>10}" for mode in modes) + "".join(f"{a + '/' + b:>15}" for a, b in ratios))
    for label, values in table:
        by_mode = dict(zip(modes, values))
        cells = [by_mode[a] / by_mode[b] if by_mode[a] is not None and by_mode[b] and abs(by_mode[b]) >= 1e-3 else None
                 for a, b in ratios]
        print(f"{label[:26]:26}" + "".join(f"{fmt(v):>10}" for v in values) + "".join(f"{fmt(v):>15}" for v in cells))
    for mode in modes:
        equal = [step["checksum_equal"] for r in results[mode] for step in r["steps"]]
        print(f"{mode}: checksum after resume('train') equal to before pause: {fmt(all(equal)) if equal else '-'} "
              f"({len(equal)} steps)")
    if results.get("rlmem"):
        print("rlmem statistics()['totals'] change over each phase (medians, fields that changed):")
        for name in PHASES:
            keys = sorted({key for r in results["rlmem"] for step in r["steps"][1:]
                           for key in step["totals_delta"].get(name, {})})
            changes = {key: median_of(results["rlmem"], lambda step, k=key: step["totals_delta"][name][k])
                       for key in keys}
            text = "  ".join(f"{key}={value:,.4g}" for key, value in changes.items() if value)
            print(textwrap.fill(f"  {name}: {text or 'none'}", width=100, subsequent_indent="      "))
    for mode in modes:
        for number, r in enumerate(results[mode], 1):
            if r.get("error"):
                print(f"FAILED {mode} (round {number}): {r['error'].strip().splitlines()[-1][:70]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path)
    parser.add_argument("--child", nargs=2, metavar=("MODE", "OUTFILE"))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--tiny", action="store_true", help="2 layers, hidden 256, 4 heads, MLP 512, vocab 1000, batch 4, "
                        "prompt 32, gen 16: seconds")
    for key in SIZES:
        parser.add_argument(f"--{key.replace('_', '-')}", type=int,
                            help=f"default {SIZES[key]} (--tiny: {TINY.get(key, SIZES[key])})")
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--fused", action="store_true", help="AdamW(fused=True) instead of foreach")
    parser.add_argument("--rollout-keep", choices=("host", "discard"), default="host")
    parser.add_argument("--expandable", action="store_true", help="offload mode: expandable_segments:True")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per child")
    parser.add_argument("--dry-run", action="store_true", help="made-up child results: the files and table only")
    parser.add_argument("--reuse", action="store_true", help="keep OUT's finished results of these sizes and steps "
                        "(an earlier run cut short); run only the rest")
    options = parser.parse_args()
    preset = {**SIZES, **(TINY if options.tiny else {})}
    sizes = {key: preset[key] if getattr(options, key) is None else getattr(options, key) for key in SIZES}
    if sizes["batch"] % sizes["micro"]:
        parser.error("--batch must be a multiple of --micro")
    if options.child:
        return child_main(options.child[0], Path(options.child[1]), sizes, options)
    modes = options.modes.split(",")
    if not options.out or not set(modes) <= set(MODES) or options.steps < 2:
        parser.error(f"needs OUT, --modes among {','.join(MODES)} and --steps >= 2")
    options.out.mkdir(parents=True, exist_ok=True)
    child_args = [arg for key, value in sizes.items() for arg in (f"--{key.replace('_', '-')}", str(value))]
    child_args += ["--steps", str(options.steps), "--lr", str(options.lr), "--rollout-keep", options.rollout_keep]
    child_args += ["--fused"] if options.fused else []
    results = {mode: [] for mode in modes}
    for number in range(1, options.rounds + 1):
        shift = (number - 1) % len(modes)  # each round starts with another mode
        for mode in modes[shift:] + modes[:shift]:
            path = options.out / f"{mode}_{number}.json"
            earlier = json.loads(path.read_text()) if options.reuse and path.exists() else {}
            if earlier.get("sizes") == sizes and len(earlier["steps"]) == options.steps and not earlier.get("error"):
                result = earlier
            elif options.dry_run:
                write_result(path, fake_result(mode, sizes, options, seed=number * 10 + MODES.index(mode)))
                result = json.loads(path.read_text())
            else:
                result = run_child(mode, path, child_args, options)
            results[mode].append(result)
            later = result.get("summary", {}).get("later", {}).get("step", {}).get("median")
            print(f"{mode} round {number}: {len(result['steps'])} steps, median step {fmt(later)} s"
                  + (f"; FAILED: {result['error'].strip().splitlines()[-1][:60]}" if result.get("error") else "")
                  + f" -> {path}", flush=True)
    print_table(results, sizes, options)
    return 1 if any(r.get("error") for each in results.values() for r in each) else 0


if __name__ == "__main__":
    sys.exit(main())
