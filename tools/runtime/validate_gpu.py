#!/usr/bin/env python3
"""Validates the rlmem runtime on a GPU, side by side with PyTorch's own allocator.

    python3 tools/runtime/validate_gpu.py OUT_DIR [--only NAME,...]

Each check runs in a fresh process (an allocator is chosen once per process) and writes
OUT_DIR/NAME.json as soon as it finishes, so a run cut short still reports what it did:

- oom:        a request no device can serve, under install(): what the program sees
- loss_bits:  one transformers training step under torch's allocator and under rlmem: the same
              loss bits and parameters?
- pause_10gb: pause(keep="host") and resume of 10 GiB: bit-exact, memory returned (torch's
              mem_get_info and nvidia-smi), bandwidth against plain pinned copies in the same run
- discard:    pause(keep="discard"): zeros after resume
- pool:       the MemPool route: torch's stats stay, the pool's tag pauses and resumes
- stress:     threads on their own streams allocating, writing and checking under rlmem
- monitor:    the step monitor under install(): rlmem's figures and tags in its log
- history:    install(history=N), a training step, dump_snapshot(): rlmem inspect's peaks of the
              dump against the runtime's own counters
- kv_growth:  a KV cache grown token by token three ways (torch.cat as DynamicCache does, a
              worst-case preallocation, rlmem's GrowableBuffer): peak reserved and time per token
- torch_own:  the first GEMM (and a side stream's, and a first NCCL collective) inside a region
              paused afterwards; manual_seed and dropout across a pause
- graph_pause: a CUDA graph captured in a tag replays right after the tag's pause and resume
- nan_mode:   RLMEM_CHECK_PAUSED=1: weights discarded and not loaded again are named, train to NaN
- train_speed: a training step's time under torch's allocator and rlmem, alternated
- frag_cap_alternated: the fragmentation workload's step time under caps of 1.02x-1.10x its
              demand, expandable segments and rlmem alternated process by process, three passes
- sanitized_read: a read of a paused tensor outside the checking mode, under compute-sanitizer:
              the kernel and the address it names
- first_resume: the 10 GiB pause/resume after reserve_host_buffers, copy chunks of 64, 256 and
              128 MiB alternated process by process, with the driver calls of the first resume
- frag:       the fragmentation workload (the fixture's model, varying sequence lengths) under
              native, expandable segments and rlmem: peak reserved, smallest cap that completes,
              step time

Needs torch, transformers and librlmem (RLMEM_LIBRARY or the checkout's build/librlmem.so).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "python"))
GiB = 1 << 30
MiB = 1 << 20

# The fixture's fragmentation workload: a Qwen2-architecture model (hidden 512, 8 layers, 8 heads,
# 2 KV heads, MLP 1408, vocab 32000, tied, bf16), about 4096 tokens a step in rows of 512..2560.
FRAG_LENGTHS = [512, 1024, 2048, 768, 2560, 1536, 1280, 2304, 896, 1792]


def child(mode: str, args: list[str]) -> dict:
    """Runs one check in this process and returns its result."""
    return CHECKS[mode](*args)


def run_child(mode: str, *args: str, env: dict | None = None, timeout: float = 240) -> dict:
    command = [sys.executable, __file__, "--child", mode, *args]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        return {"mode": mode, "args": list(args), "error": f"timed out after {timeout} s"}
    seconds = time.perf_counter() - started
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        return {"mode": mode, "args": list(args), "error": f"exit {done.returncode}", "stderr": done.stderr[-3000:],
                "seconds": seconds}
    result = json.loads(lines[-1][len("RESULT "):])
    result["process_seconds"] = seconds
    return result


# -- checks (each runs in its own process) --------------------------------------------------------

def check_oom() -> dict:
    import torch
    import rlmem.runtime as rt

    rt.install()
    small = torch.ones(1 << 20, device="cuda")
    result = {"small_sum": float(small.sum())}
    try:
        huge = torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
        result["raised"] = None
        result["huge_data_ptr"] = huge.data_ptr()
    except BaseException as error:  # noqa: BLE001 - what type arrives is the question
        result["raised"] = f"{type(error).__module__}.{type(error).__qualname__}"
        result["message"] = str(error)[:300]
        result["is_torch_oom"] = isinstance(error, torch.OutOfMemoryError)
    after = torch.ones(1 << 20, device="cuda") * 2
    result["works_after"] = float(after.sum()) == 2.0 * (1 << 20)
    result["ooms_counted"] = rt.statistics()["totals"]["ooms"]
    return result


def tiny_training_step(use_rlmem: bool) -> dict:
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    if use_rlmem:
        import rlmem.runtime as rt

        rt.install()
    from transformers import AutoModelForCausalLM, Qwen2Config

    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    config = Qwen2Config(hidden_size=512, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2,
                         intermediate_size=1408, vocab_size=32000, tie_word_embeddings=True)
    model = AutoModelForCausalLM.from_config(config).to(device="cuda", dtype=torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    generator = torch.Generator(device="cpu").manual_seed(1)
    losses = []
    for _ in range(3):
        tokens = torch.randint(0, 32000, (4, 512), generator=generator).cuda()
        loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.float().item())
    torch.cuda.synchronize()
    digest = sum(float(p.float().double().sum()) for p in model.parameters())
    return {"losses": [float.hex(value) for value in losses], "parameter_sum": float.hex(digest)}


def check_loss_native() -> dict:
    return tiny_training_step(False)


def check_loss_rlmem() -> dict:
    return tiny_training_step(True)


def nvidia_smi_used_mib() -> int | None:
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                              capture_output=True, text=True, timeout=20)
        return int(done.stdout.strip().splitlines()[0])
    except Exception:  # noqa: BLE001 - a missing tool is reported as None
        return None


def check_pause_10gb(gib: str = "10", keep_buffers: str = "0", chunk_mib: str = "0", between: str = "rollout") -> dict:
    import torch
    import rlmem.runtime as rt

    # keep_buffers: 0 the default, 1 keep_host_buffers, 2 that and the slabs pinned ahead.
    rt.install(keep_host_buffers=keep_buffers in ("1", "2"), copy_chunk_bytes=int(chunk_mib) * MiB or None)
    size = int(gib) * GiB
    result: dict = {"bytes": size}
    if keep_buffers == "2":
        torch.zeros(1, device="cuda")
        start = time.perf_counter()
        rt.reserve_host_buffers(size)
        result["reserve_host_buffers_seconds"] = time.perf_counter() - start
    with rt.region("train"):
        weights = torch.empty(size // 8, dtype=torch.int64, device="cuda")
    weights.copy_(torch.arange(size // 8, device="cuda", dtype=torch.int64) * 2654435761 % 1000003)
    torch.cuda.synchronize()
    checksum = int(weights.sum()) ^ int((weights[::7] * 31).sum())

    # Plain pinned copies of the same bytes, the bandwidth to compare with (pinning not timed):
    # three each way before rlmem's cycles and three after (plain_after), every one kept, since a
    # single 10 GiB copy on these machines varies by 10-20% from one to the next.
    pinned = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    device_bytes = weights.view(torch.uint8)

    def plain_copies() -> dict:
        speeds = {}
        for direction in ("d2h", "h2d"):
            times = []
            for _ in range(3):
                torch.cuda.synchronize()
                start = time.perf_counter()
                if direction == "d2h":
                    pinned.copy_(device_bytes, non_blocking=True)
                else:
                    device_bytes.copy_(pinned, non_blocking=True)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - start)
            speeds[direction] = [size / t / 1e9 for t in times]
        return speeds

    plain = plain_copies()
    for direction, speeds in plain.items():
        result[f"plain_pinned_{direction}_gbps"] = max(speeds)
        result[f"plain_pinned_{direction}_gbps_each"] = speeds
    # The plain copies wrote the same bytes back: the checksum still holds.
    start = time.perf_counter()
    del pinned
    result["plain_pinned_free_seconds"] = time.perf_counter() - start
    start = time.perf_counter()
    again = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    result["plain_pin_10gb_seconds"] = time.perf_counter() - start
    del again

    free_before, total = torch.cuda.mem_get_info()
    smi_before = nvidia_smi_used_mib()
    start = time.perf_counter()
    rt.pause("train", keep="host")
    result["pause_seconds"] = time.perf_counter() - start
    free_paused, _ = torch.cuda.mem_get_info()
    smi_paused = nvidia_smi_used_mib()
    result["returned_bytes_mem_get_info"] = free_paused - free_before
    result["nvidia_smi_used_mib"] = {"before": smi_before, "paused": smi_paused}
    # The memory is usable by another tag meanwhile (between: "rollout", then empty_cache();
    # "rollout_cached": the rollout's pages stay cached; "none": resume at once).
    result["between"] = between
    if between.startswith("rollout"):
        with rt.region("rollout"):
            rollout = torch.ones(int(gib) * GiB // 2 // 4, dtype=torch.float32, device="cuda")
        result["rollout_sum_ok"] = float(rollout.sum()) == float(rollout.numel())
        del rollout
        if between == "rollout":
            rt.empty_cache()
    calls_before = rt.statistics()["totals"]["device_calls"]
    start = time.perf_counter()
    rt.resume("train")
    result["resume_seconds"] = time.perf_counter() - start
    calls_after = rt.statistics()["totals"]["device_calls"]
    result["resume_device_calls"] = {op: {"calls": calls_after[op]["calls"] - calls_before.get(op, {}).get("calls", 0),
                                          "seconds": calls_after[op]["seconds"] - calls_before.get(op, {}).get("seconds", 0.0)}
                                     for op in calls_after}
    torch.cuda.synchronize()
    result["bit_exact"] = (int(weights.sum()) ^ int((weights[::7] * 31).sum())) == checksum
    tags = {tag["name"]: tag for tag in rt.statistics()["tags"]}
    train = tags["train"]
    result["runtime"] = {"last_pause": train["last_pause"], "last_resume": train["last_resume"],
                         "host_backup_after_resume": train["host_backup_bytes"]}
    result["pause_gbps"] = train["last_pause"]["copied_bytes"] / train["last_pause"]["seconds"] / 1e9
    result["resume_gbps"] = train["last_resume"]["copied_bytes"] / train["last_resume"]["seconds"] / 1e9
    result["pause_vs_plain_d2h"] = result["pause_gbps"] / result["plain_pinned_d2h_gbps"]
    result["resume_vs_plain_h2d"] = result["resume_gbps"] / result["plain_pinned_h2d_gbps"]
    result["host_buffer_bytes_after_resume"] = rt.statistics()["totals"]["host_buffer_bytes"]
    # Two more cycles: with keep_buffers the pinned slabs of the first serve them.
    cycles = []
    for _ in range(2):
        rt.pause("train", keep="host")
        rt.resume("train")
        train = {tag["name"]: tag for tag in rt.statistics()["tags"]}["train"]
        cycles.append({"pause_seconds": train["last_pause"]["seconds"], "resume_seconds": train["last_resume"]["seconds"],
                       "pause_gbps": train["last_pause"]["copied_bytes"] / train["last_pause"]["seconds"] / 1e9,
                       "resume_gbps": train["last_resume"]["copied_bytes"] / train["last_resume"]["seconds"] / 1e9})
    result["later_cycles"] = cycles
    result["bit_exact_after_cycles"] = (int(weights.sum()) ^ int((weights[::7] * 31).sum())) == checksum
    pinned = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    result["plain_after_gbps_each"] = plain_copies()
    speeds = sorted(plain["h2d"] + result["plain_after_gbps_each"]["h2d"])
    result["plain_h2d_median_gbps"] = (speeds[2] + speeds[3]) / 2
    result["resume_vs_plain_h2d_median"] = result["resume_gbps"] / result["plain_h2d_median_gbps"]
    return result


def check_discard() -> dict:
    import torch
    import rlmem.runtime as rt

    rt.install()
    with rt.region("kv"):
        cache = torch.full((64 * MiB,), 7, dtype=torch.uint8, device="cuda")
    rt.pause("kv")
    rt.resume("kv")
    return {"all_zero": bool((cache == 0).all())}


def check_pool() -> dict:
    import torch
    import rlmem.runtime as rt

    result = {}
    with rt.pool("weights"):
        weights = torch.randn(256 * MiB // 4, device="cuda")
    expected = weights.clone()
    result["torch_stats_work"] = torch.cuda.memory_stats()["allocated_bytes.all.current"] > 0
    free_before, _ = torch.cuda.mem_get_info()
    rt.pause("weights", keep="host")
    free_paused, _ = torch.cuda.mem_get_info()
    result["returned_bytes"] = free_paused - free_before
    rt.resume("weights")
    result["bit_exact"] = bool(torch.equal(weights, expected))
    try:
        torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError:
        result["native_oom_is_torch_oom"] = True
    return result


def check_stress() -> dict:
    import threading

    import torch
    import rlmem.runtime as rt

    rt.install()
    failures = []

    def worker(index: int) -> None:
        stream = torch.cuda.Stream()
        generator = torch.Generator().manual_seed(index)
        with torch.cuda.stream(stream):
            live = []
            for step in range(300):
                if live and (len(live) > 8 or torch.rand(1, generator=generator).item() < 0.4):
                    tensor, value = live.pop(int(torch.randint(len(live), (1,), generator=generator)))
                    if not bool((tensor == value).all()):
                        failures.append((index, step))
                    continue
                numel = int(torch.randint(1, 8 * MiB, (1,), generator=generator))
                value = (index * 1000 + step) % 251
                live.append((torch.full((numel,), value, dtype=torch.uint8, device="cuda"), value))
            for tensor, value in live:
                if not bool((tensor == value).all()):
                    failures.append((index, -1))
        stream.synchronize()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    totals = rt.statistics()["totals"]
    return {"threads": 6, "failures": failures, "seconds": time.perf_counter() - start,
            "allocations_total": totals["allocations"]["total"], "allocated_now": totals["allocated_bytes"]["current"]}


def check_monitor(log_dir: str) -> dict:
    import torch
    import rlmem
    import rlmem.runtime as rt

    rt.install()
    log = Path(log_dir) / "monitor_steps.jsonl"
    with rlmem.StepMonitor(log) as monitor:
        for step in range(3):
            with rt.region("rollout"):
                kv = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
            del kv
            monitor.step(step)
    line = json.loads(log.read_text().splitlines()[-1])
    return {"allocated": line["allocated"], "reserved": line["reserved"],
            "tags": [tag["name"] for tag in line.get("runtime_tags", [])]}


def check_kv_growth(strategy: str) -> dict:
    """A decode loop of `tokens` steps over a Qwen2.5-1.5B-shaped KV cache (28 layers, 2 KV heads
    of 128, bf16, 16 rows): each step appends one token's K and V per layer, then attends over
    the cache with SDPA. `strategy`: cat (torch.cat per token, as transformers' DynamicCache
    grows), prealloc (a worst-case cache of max_tokens), growable (rlmem GrowableBuffer per layer,
    laid out token-major so that it grows at its end)."""
    import torch
    import torch.nn.functional as F

    layers, rows, heads, q_heads, dim, tokens, max_tokens = 28, 16, 2, 12, 128, 2048, 8192
    dtype = torch.bfloat16
    torch.manual_seed(0)
    query = torch.randn(rows, q_heads, 1, dim, device="cuda", dtype=dtype)
    new = torch.randn(rows, heads, 1, dim, device="cuda", dtype=dtype)
    per_token = rows * heads * dim * 2
    buffers = []
    if strategy == "cat":
        keys = [torch.empty(rows, heads, 0, dim, device="cuda", dtype=dtype) for _ in range(layers)]
        values = [torch.empty(rows, heads, 0, dim, device="cuda", dtype=dtype) for _ in range(layers)]
    elif strategy == "prealloc":
        keys = [torch.empty(rows, heads, max_tokens, dim, device="cuda", dtype=dtype) for _ in range(layers)]
        values = [torch.empty(rows, heads, max_tokens, dim, device="cuda", dtype=dtype) for _ in range(layers)]
    else:
        import rlmem.runtime as rt

        with rt.region("kv"):
            buffers = [(rt.GrowableBuffer(max_tokens * per_token), rt.GrowableBuffer(max_tokens * per_token))
                       for _ in range(layers)]
        views = [None] * layers  # token-major [T, rows, heads, dim] over each layer's buffers
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    output = None
    for step in range(1, tokens + 1):
        for layer in range(layers):
            if strategy == "cat":
                keys[layer] = torch.cat([keys[layer], new], dim=2)
                values[layer] = torch.cat([values[layer], new], dim=2)
                k, v = keys[layer], values[layer]
            elif strategy == "prealloc":
                keys[layer][:, :, step - 1:step] = new
                values[layer][:, :, step - 1:step] = new
                k, v = keys[layer][:, :, :step], values[layer][:, :, :step]
            else:
                key_buffer, value_buffer = buffers[layer]
                if key_buffer.nbytes < step * per_token:
                    # A page more (256 tokens here), viewed again; the data stays where it is.
                    key_buffer.grow(step * per_token)
                    value_buffer.grow(step * per_token)
                    views[layer] = (key_buffer.view((key_buffer.nbytes // per_token, rows, heads, dim), dtype),
                                    value_buffer.view((value_buffer.nbytes // per_token, rows, heads, dim), dtype))
                k_all, v_all = views[layer]
                k_all[step - 1] = new[:, :, 0]
                v_all[step - 1] = new[:, :, 0]
                k, v = k_all[:step].permute(1, 2, 0, 3), v_all[:step].permute(1, 2, 0, 3)
            output = F.scaled_dot_product_attention(query, k, v, enable_gqa=True)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    result = {"strategy": strategy, "tokens": tokens, "cache_bytes_needed": tokens * per_token * 2 * layers,
              "torch_peak_reserved": torch.cuda.max_memory_reserved(), "torch_peak_allocated": torch.cuda.max_memory_allocated(),
              "ms_per_token": seconds / tokens * 1e3, "checksum": float(output.float().sum())}
    if buffers:
        import rlmem.runtime as rt

        mapped = {tag["name"]: tag for tag in rt.statistics()["tags"]}["kv"]["mapped_bytes"]["peak"]
        result["rlmem_mapped_peak"] = mapped
    result["peak_device_bytes"] = result["torch_peak_reserved"] + result.get("rlmem_mapped_peak", 0)
    return result


def qwen_1_5b_config():
    """Qwen2.5-1.5B's architecture (the model whose generate the KV caches are measured in)."""
    from transformers import Qwen2Config

    return Qwen2Config(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
                       intermediate_size=8960, vocab_size=151936, tie_word_embeddings=True,
                       max_position_embeddings=32768, rope_theta=1000000.0)


def check_generate(strategy: str, rows: str = "16", new_tokens: str = "2048", max_tokens: str = "8192") -> dict:
    """A transformers generate of a Qwen2.5-1.5B-architecture model (weights random: no download
    here; bf16, `rows` rows, a 128-token prompt, `new_tokens` new tokens, greedy, eos off) with
    its KV cache as `strategy`: dynamic (transformers' DynamicCache, grown by torch.cat), static
    (StaticCache for the worst case, `max_tokens`), growable (rlmem.kv_cache.GrowableCache,
    `max_tokens` of addresses). Peak device memory beyond the weights, time per token, and a
    digest of the tokens (greedy: equal digests, equal outputs)."""
    import hashlib

    import torch

    begun = time.perf_counter()
    from transformers import AutoModelForCausalLM

    rows, prompt, new_tokens, max_tokens = int(rows), 128, int(new_tokens), int(max_tokens)
    torch.manual_seed(0)
    config = qwen_1_5b_config()
    with torch.device("cuda"):  # random weights made on the GPU: seconds, not a minute on the CPU
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()
    print(f"model built in {time.perf_counter() - begun:.1f} s", file=sys.stderr, flush=True)
    input_ids = torch.randint(0, config.vocab_size, (rows, prompt), generator=torch.Generator().manual_seed(1)).cuda()
    # disable_compile: transformers compiles the forward for a static cache by default, which
    # would time compilation, not the cache.
    kwargs = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, eos_token_id=None,
                  pad_token_id=0, disable_compile=True)
    cache = None
    if strategy == "static":
        from transformers import StaticCache

        kwargs["past_key_values"] = StaticCache(config=config, max_cache_len=max_tokens)
    elif strategy == "growable":
        from rlmem.kv_cache import GrowableCache

        cache = GrowableCache(max_tokens=max_tokens, tag="kv")
        kwargs["past_key_values"] = cache
    with torch.no_grad():
        model.generate(input_ids[:, :8], max_new_tokens=4, do_sample=False, pad_token_id=0)  # warm-up kernels
    torch.cuda.synchronize()
    weights = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    with torch.no_grad():
        output = model.generate(input_ids, **kwargs)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    print(f"generated in {seconds:.1f} s", file=sys.stderr, flush=True)
    per_layer_token = rows * config.num_key_value_heads * (config.hidden_size // config.num_attention_heads) * 2 * 2
    result = {"strategy": strategy, "new_tokens": int(output.shape[1] - prompt),
              "kv_needed_bytes": per_layer_token * config.num_hidden_layers * (prompt + new_tokens - 1),
              "weights_bytes": weights, "torch_peak_reserved": torch.cuda.max_memory_reserved(),
              "torch_peak_allocated": torch.cuda.max_memory_allocated(),
              "ms_per_token": seconds / new_tokens * 1e3,
              "tokens_digest": hashlib.sha256(output.cpu().numpy().tobytes()).hexdigest()[:16]}
    rlmem_peak = 0
    if cache is not None:
        import rlmem.runtime as rt

        rlmem_peak = {tag["name"]: tag for tag in rt.statistics()["tags"]}["kv"]["mapped_bytes"]["peak"]
        cache.release()
        after = {tag["name"]: tag for tag in rt.statistics()["tags"]}["kv"]["mapped_bytes"]["current"]
        result["rlmem_mapped_after_release"] = after
    result["rlmem_mapped_peak"] = rlmem_peak
    result["peak_beyond_weights"] = result["torch_peak_reserved"] + rlmem_peak - weights
    return result


def check_generate_agreement(rows: str = "32", new_tokens: str = "64") -> dict:
    """The same greedy generate with DynamicCache and with GrowableCache in one process: where the
    tokens first differ, and how far apart the logits are until then (the attention reads K and V
    through a token-major view instead of contiguous tensors, so kernels may round differently)."""
    import torch
    from transformers import AutoModelForCausalLM, DynamicCache

    from rlmem.kv_cache import GrowableCache

    torch.manual_seed(0)
    config = qwen_1_5b_config()
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()
    input_ids = torch.randint(0, config.vocab_size, (int(rows), 128), generator=torch.Generator().manual_seed(1)).cuda()
    runs = {}
    for name, cache in (("dynamic", DynamicCache()), ("growable", GrowableCache(max_tokens=4096))):
        with torch.no_grad():
            out = model.generate(input_ids, past_key_values=cache, max_new_tokens=int(new_tokens), min_new_tokens=int(new_tokens),
                                 do_sample=False, eos_token_id=None, pad_token_id=0, disable_compile=True,
                                 return_dict_in_generate=True, output_logits=True)
        runs[name] = (out.sequences[:, 128:].cpu(), torch.stack(out.logits).float().cpu())
    (tokens_a, logits_a), (tokens_b, logits_b) = runs["dynamic"], runs["growable"]
    differing = (tokens_a != tokens_b).any(dim=0).nonzero()
    first = int(differing[0]) if len(differing) else int(new_tokens)
    upto = max(first, 1)
    return {"rows": int(rows), "new_tokens": int(new_tokens), "first_differing_step": first,
            "identical_tokens": first == int(new_tokens),
            "max_abs_logit_diff_before": float((logits_a[:upto] - logits_b[:upto]).abs().max()),
            "max_abs_logit_first_step": float((logits_a[0] - logits_b[0]).abs().max()),
            "logit_scale": float(logits_a[0].abs().max())}


def check_growable_lifetime() -> dict:
    """A GrowableBuffer dropped while a view lives keeps its memory until the view goes."""
    import gc

    import torch
    import rlmem.runtime as rt

    def mapped() -> int:
        tags = {tag["name"]: tag for tag in rt.statistics()["tags"]}
        return tags["life"]["mapped_bytes"]["current"] if "life" in tags else 0

    with rt.region("life"):
        buffer = rt.GrowableBuffer(64 * MiB)
    buffer.grow(8 * MiB)
    view = buffer.view((8 * MiB // 4,), torch.float32)
    view.fill_(3.0)
    del buffer
    gc.collect()
    kept = mapped()
    intact = float(view.sum()) == 3.0 * (8 * MiB // 4)
    del view
    gc.collect()
    torch.cuda.synchronize()
    return {"mapped_while_view_lives": kept, "view_intact": intact, "mapped_after_view_dropped": mapped()}


def check_history(out_dir: str) -> dict:
    import rlmem
    import rlmem.runtime as rt

    rt.install(history=1_000_000)
    step = tiny_training_step(False)  # rlmem is installed already: the step runs on it
    path = Path(out_dir) / "runtime_history.pickle"  # left out of what comes back: large
    rt.dump_snapshot(path)
    own = rt.memory_stats()
    summary = rlmem.inspect(str(path))["summary"]
    return {"events": summary["events"], "snapshot_bytes": path.stat().st_size, "losses": step["losses"],
            "inspect_peak_allocated": summary["peak_allocated_bytes"], "runtime_peak_allocated": own["allocated_bytes.all.peak"],
            "inspect_final_reserved": summary["final_reserved_bytes"], "runtime_reserved": own["reserved_bytes.all.current"],
            "inspect_peak_reserved": summary["peak_reserved_bytes"], "runtime_peak_reserved": own["reserved_bytes.all.peak"]}


def timed_training_step(model, optimizer, tokens) -> float:
    """Seconds of one forward, backward and optimizer step on `tokens`, the device fenced on both
    sides."""
    import torch

    torch.cuda.synchronize()
    started = time.perf_counter()
    loss = model(input_ids=tokens, labels=tokens).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return time.perf_counter() - started


def frag_workload():
    """The fragmentation workload's model (seeded, on the GPU, bf16) and its AdamW: made after the
    allocator is chosen, since it is the first CUDA allocation."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    torch.manual_seed(0)
    config = Qwen2Config(hidden_size=512, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2,
                         intermediate_size=1408, vocab_size=32000, tie_word_embeddings=True)
    model = AutoModelForCausalLM.from_config(config).to(device="cuda", dtype=torch.bfloat16)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4)


def check_frag(allocator: str, capacity: str = "0", epochs: str = "1") -> dict:
    """The fragmentation workload under `allocator` (native, expandable, rlmem), capped at
    `capacity` bytes (0: none), its ten lengths `epochs` times over."""
    if allocator == "expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import torch

    cap = int(capacity)
    if allocator.startswith("rlmem"):
        import rlmem.runtime as rt

        rt.install(capacity=cap or None, release_free_pages=allocator == "rlmem_release")
    elif cap:
        torch.cuda.set_per_process_memory_fraction(cap / torch.cuda.get_device_properties(0).total_memory)
    model, optimizer = frag_workload()

    def pressure() -> dict:
        # Releases of the cache (num_alloc_retries) and the driver calls behind the memory: rlmem's
        # own counters; torch's device allocations and frees where its version counts them.
        if allocator.startswith("rlmem"):
            calls = rt.statistics()["totals"]["device_calls"]
            return {"num_alloc_retries": rt.memory_stats()["num_alloc_retries"],
                    "device_calls": {op: calls[op]["calls"] for op in calls}}
        stats = torch.cuda.memory_stats()
        return {"num_alloc_retries": stats["num_alloc_retries"],
                "device_calls": {key: stats[key] for key in ("num_device_alloc", "num_device_free") if key in stats}}

    step_times = []
    completed = True
    after_first_pass = None
    try:
        for index, length in enumerate(FRAG_LENGTHS * int(epochs)):
            if index == len(FRAG_LENGTHS):
                after_first_pass = pressure()
            rows = max(1, 4096 // length)
            tokens = torch.randint(0, 32000, (rows, length), device="cuda")
            step_times.append(timed_training_step(model, optimizer, tokens))
    except Exception as error:  # noqa: BLE001 - an OOM under a cap is the answer, whatever its type
        completed = False
        failure = f"{type(error).__name__}: {str(error)[:160]}"
    at_end = pressure()
    if after_first_pass is not None:
        # What the passes after the first cost: the steps a ratio is taken over.
        later = {"num_alloc_retries": at_end["num_alloc_retries"] - after_first_pass["num_alloc_retries"],
                 "device_calls": {op: count - after_first_pass["device_calls"].get(op, 0)
                                  for op, count in at_end["device_calls"].items()}}
    if allocator.startswith("rlmem"):
        stats = rt.memory_stats()
    else:
        stats = torch.cuda.memory_stats()
    result = {"allocator": allocator, "capacity": cap, "completed": completed,
              "peak_allocated": stats["allocated_bytes.all.peak"], "peak_reserved": stats["reserved_bytes.all.peak"],
              "num_alloc_retries": stats["num_alloc_retries"], "num_ooms": stats["num_ooms"],
              "median_step_seconds": sorted(step_times)[len(step_times) // 2] if step_times else None,
              "steps_done": len(step_times), "step_seconds": step_times}
    if allocator.startswith("rlmem"):
        result["device_calls"] = rt.statistics()["totals"]["device_calls"]
    result["pressure"] = at_end
    if after_first_pass is not None:
        result["pressure_after_first_pass"] = later
    if not completed:
        result["failure"] = failure
    return result


# -- issue 26: torch's own memory, graphs, the checking mode, speed ---------------------------------

def tags_allocated() -> dict:
    import rlmem.runtime as rt

    return {tag["name"]: tag["allocated_bytes"]["current"] for tag in rt.statistics()["tags"]}


def check_torch_own(case: str) -> dict:
    """The first GEMM of the process inside a region that is then paused (discard or host), a
    side stream's first GEMM there, a first NCCL collective there: the next GEMMs and collectives
    outside must run. `seed`: torch.manual_seed and dropout give the same masks across a pause."""
    import torch
    import rlmem.runtime as rt

    rt.install()
    x = torch.randn(256, 256, device="cuda")
    result: dict = {"case": case}
    if case == "seed":
        def masks() -> list:
            torch.manual_seed(7)
            first = torch.nn.functional.dropout(torch.ones(4096, device="cuda"), 0.5)
            if paused:
                rt.pause("kv", keep="discard")
                rt.resume("kv")
            second = torch.nn.functional.dropout(torch.ones(4096, device="cuda"), 0.5)
            return [first.cpu(), second.cpu()]
        with rt.region("kv"):
            torch.nn.functional.dropout(torch.ones(16, device="cuda"), 0.5)  # the RNG's first use, in the region
        paused = False
        reference = masks()
        paused = True
        across = masks()
        result["same_masks"] = all(torch.equal(a, b) for a, b in zip(reference, across))
        result["tags"] = tags_allocated()
        return result
    if case == "training_unwinds":
        return training_unwinds()
    side = torch.cuda.Stream()
    with rt.region("kv"):
        if case == "side_stream":
            with torch.cuda.stream(side):
                y = x @ x
                z = torch.nn.functional.linear(x.bfloat16(), x.bfloat16(), torch.zeros(256, device="cuda", dtype=torch.bfloat16))
            side.synchronize()
        elif case == "collective":
            import torch.distributed as dist

            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29541")
            dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
            y = torch.ones(1 << 20, device="cuda")
            dist.all_reduce(y)
            z = x @ x
        else:
            y = x @ x
            z = torch.nn.functional.linear(x.bfloat16(), x.bfloat16(), torch.zeros(256, device="cuda", dtype=torch.bfloat16))
        torch.cuda.synchronize()
    result["tags_in_region"] = tags_allocated()
    reference = (x @ x).double().sum().item()
    rt.pause("kv", keep="host" if case == "gemm_host" else "discard")
    with torch.cuda.stream(side if case == "side_stream" else torch.cuda.current_stream()):
        after = (x @ x).double().sum().item()
        lt = torch.nn.functional.linear(x.bfloat16(), x.bfloat16(), torch.zeros(256, device="cuda", dtype=torch.bfloat16))
    if case == "collective":
        import torch.distributed as dist

        w = torch.full((1 << 20,), 2.0, device="cuda")
        dist.all_reduce(w)
        result["collective_after_pause"] = float(w[0])
        dist.destroy_process_group()
    torch.cuda.synchronize()
    rt.resume("kv")
    result["gemm_after_pause_equal"] = after == reference
    result["lt_finite"] = bool(torch.isfinite(lt).all())
    result["tags_after"] = tags_allocated()
    return result


def training_unwinds() -> dict:
    """Stack reads of the check for torch's library workspaces, per training step in a region:
    region() prepared the main thread's stream, and autograd's backward thread stops looking once
    it found as many workspaces as the preparation counted (torch 2.11: one per handle and stream).
    Hidden 1024 makes 4 MiB activations, a cuBLASLt workspace's size, on every step."""
    import torch
    import rlmem.runtime as rt

    def unwinds() -> int:
        return int(rt.statistics()["totals"]["library_check_unwinds"])

    with rt.region("train"):
        model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(4)]).cuda()
        optimizer = torch.optim.AdamW(model.parameters())
        per_step = []
        for _ in range(6):
            before = unwinds()
            x = torch.randn(1024, 1024, device="cuda")
            model(x).square().mean().backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            per_step.append(unwinds() - before)
    tags = tags_allocated()
    rt.pause("train", keep="host")
    probe = torch.randn(512, 512, device="cuda")
    after = float((probe @ probe).double().sum().item())
    rt.resume("train")
    return {"case": "training_unwinds", "unwinds_per_step": per_step, "tags": tags,
            "gemm_after_pause_finite": after == after, "prepared": rt.prepare_libraries()}


def check_graph_pause(keep: str) -> dict:
    """A CUDA graph captured in a tag replays after the tag is paused and resumed (and after
    empty_cache), at the same addresses, with the same results."""
    import torch
    import rlmem.runtime as rt

    rt.install()
    torch.manual_seed(0)
    with rt.region("graph"):
        weight = torch.randn(1024, 1024, device="cuda")
        static_in = torch.randn(64, 1024, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                torch.relu(static_in @ weight) @ weight
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            hidden = torch.relu(static_in @ weight)  # an intermediate the capture frees
            static_out = (hidden @ weight).sum(dim=1)
        del hidden
    inputs = [torch.randn(64, 1024, device="cuda") for _ in range(3)]
    reference = []
    for each in inputs:
        reference.append((torch.relu(each @ weight) @ weight).sum(dim=1).clone())
    weight_copy = weight.clone()
    before = rt.statistics()
    rt.empty_cache()
    rt.pause("graph", keep=keep)
    free_paused = torch.cuda.mem_get_info()[0]
    rt.resume("graph")
    if keep == "discard":
        weight.copy_(weight_copy)  # a discard keeps addresses, not contents: the weights load again
    rt.empty_cache()
    same = []
    for each, expected in zip(inputs, reference):
        static_in.copy_(each)
        graph.replay()
        torch.cuda.synchronize()
        same.append(bool(torch.allclose(static_out, expected, rtol=1e-3, atol=1e-2)))
    graph_tag = next(tag for tag in before["tags"] if tag["name"] == "graph")
    return {"keep": keep, "replays_right": same, "graph_held_bytes": graph_tag["graph_held_bytes"],
            "free_while_paused": free_paused}


def check_nan_mode() -> dict:
    """RLMEM_CHECK_PAUSED=1: weights discarded and not loaded again are named and train to NaN,
    not silently; a forward while the weights are paused sees NaN, not a fault."""
    os.environ["RLMEM_CHECK_PAUSED"] = "1"
    import warnings

    import torch
    import rlmem.runtime as rt

    rt.install()
    from transformers import AutoModelForCausalLM, Qwen2Config

    config = Qwen2Config(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         intermediate_size=512, vocab_size=1000)
    tokens = torch.randint(0, 1000, (2, 64), device="cuda")
    with rt.region("weights"):
        model = AutoModelForCausalLM.from_config(config).to(device="cuda", dtype=torch.bfloat16)
    result = {"loss_before": model(input_ids=tokens, labels=tokens).loss.item()}
    rt.pause("weights", keep="host")
    with torch.no_grad():
        result["loss_while_paused"] = model(input_ids=tokens, labels=tokens).loss.item()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rt.resume("weights")
    result["warned_after_host_resume"] = [str(w.message)[:120] for w in caught]
    result["loss_after_host_resume"] = model(input_ids=tokens, labels=tokens).loss.item()
    rt.pause("weights", keep="discard")
    rt.resume("weights")  # and the weights are not loaded again
    result["loss_after_discard"] = model(input_ids=tokens, labels=tokens).loss.item()
    named = rt.blocks_still_filled("weights", dict(model.named_parameters()))
    result["parameters"] = len(list(model.named_parameters()))
    result["named_never_loaded"] = len(named)
    result["first_named"] = named[:3]
    return result


def check_train_speed(allocator: str, steps: str = "12") -> dict:
    """Step time of a training step (Qwen2 shape, hidden 1024, 12 layers, AdamW, bf16, rows of
    varying length) under torch's allocator or rlmem's install(): median of the steps after two."""
    import torch

    if allocator == "rlmem":
        import rlmem.runtime as rt

        rt.install()
    from transformers import AutoModelForCausalLM, Qwen2Config

    torch.manual_seed(0)
    config = Qwen2Config(hidden_size=1024, num_hidden_layers=12, num_attention_heads=16, num_key_value_heads=4,
                         intermediate_size=2816, vocab_size=32000)
    model = AutoModelForCausalLM.from_config(config).to(device="cuda", dtype=torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    times = []
    for step in range(int(steps)):
        length = FRAG_LENGTHS[step % len(FRAG_LENGTHS)]
        tokens = torch.randint(0, 32000, (8, length), device="cuda")
        times.append(timed_training_step(model, optimizer, tokens))
    kept = sorted(times[2:])
    result = {"allocator": allocator, "median_step": kept[len(kept) // 2], "times": times}
    if allocator == "rlmem":
        result["device_calls"] = rt.statistics()["totals"]["device_calls"]
    return result



# -- the driver -----------------------------------------------------------------------------------

def write(out: Path, name: str, result) -> None:
    (out / f"{name}.json").write_text(json.dumps(result, indent=1))
    print(f"{name}: {json.dumps(result)[:600]}", flush=True)


def frag_cap_alternated(out: Path, demand: int) -> None:
    """Step time under caps near the demand, expandable segments and rlmem alternated process by
    process, the workload three times over: the steps after the first pass are compared, summed."""
    rounds = {1.02: 3, 1.05: 1, 1.10: 1}
    rows = [run_child("frag", allocator, str(int(demand * factor)), "3") | {"factor": factor}
            for factor, count in rounds.items() for _ in range(count) for allocator in ("expandable", "rlmem")]
    summary: dict = {"demand_bytes": demand, "rows": rows, "ratios": {}}
    for factor in rounds:
        sums = {allocator: [sum(r["step_seconds"][len(FRAG_LENGTHS):]) for r in rows
                            if r.get("factor") == factor and r.get("allocator") == allocator and r.get("completed")]
                for allocator in ("expandable", "rlmem")}
        if sums["expandable"] and sums["rlmem"] and len(sums["rlmem"]) == len(sums["expandable"]):
            summary["ratios"][str(factor)] = {"rlmem_over_expandable": sum(sums["rlmem"]) / sum(sums["expandable"]),
                                              "per_round": [m / e for m, e in zip(sums["rlmem"], sums["expandable"])],
                                              "seconds": sums}
        # Releases and driver calls over the same steps (the passes after the first), per round.
        summary.setdefault("pressure_after_first_pass", {})[str(factor)] = {
            allocator: [r.get("pressure_after_first_pass") for r in rows if r.get("factor") == factor and r.get("allocator") == allocator]
            for allocator in ("expandable", "rlmem")}
    write(out, "frag_cap_alternated", summary)


def check_paused_read() -> dict:
    """A kernel reads a tensor whose tag is paused, outside the checking mode: run under
    compute-sanitizer (sanitized_read), the fault is reported with its kernel and address."""
    import torch
    import rlmem.runtime as rt

    rt.install()
    with rt.region("weights"):
        weights = torch.ones(1 << 20, device="cuda")
    print(f"WEIGHTS {weights.data_ptr()} {weights.numel() * weights.element_size()}", flush=True)
    rt.pause("weights", keep="host")
    try:
        total = float(weights.sum())
        return {"read_while_paused": total}
    except Exception as error:  # noqa: BLE001 - the fault's type is what is shown
        return {"raised": f"{type(error).__name__}: {str(error)[:200]}"}


def sanitized_read() -> dict:
    """check_paused_read under compute-sanitizer memcheck: which kernel read which tensor."""
    import re
    import shutil

    tool = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    command = [tool, "--tool", "memcheck", "--show-backtrace", "no", "--print-limit", "4",
               sys.executable, __file__, "--child", "paused_read"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=400)
    except (OSError, subprocess.TimeoutExpired) as error:
        return {"error": str(error)}
    text = done.stdout + done.stderr
    weights = re.search(r"WEIGHTS (\d+) (\d+)", text)
    reads = re.findall(r"Invalid __global__ read of size (\d+) bytes\s*\n[=\s]*at (.+?)\n.*?(?:Address|Access to) (0x[0-9a-f]+)", text, re.S)
    result: dict = {"exit": done.returncode, "invalid_reads_reported": len(reads), "report_head": text[-4000:]}
    if weights and reads:
        start, size = int(weights.group(1)), int(weights.group(2))
        result["reads"] = [{"size": int(bytes_), "kernel": where.strip()[:200], "address": address,
                            "inside_paused_tensor": start <= int(address, 16) < start + size}
                           for bytes_, where, address in reads]
    return result


CHECKS = {"kv_growth": check_kv_growth, "oom": check_oom, "loss_native": check_loss_native, "loss_rlmem": check_loss_rlmem,
          "pause_10gb": check_pause_10gb, "discard": check_discard, "pool": check_pool, "stress": check_stress,
          "monitor": check_monitor, "history": check_history, "frag": check_frag, "generate": check_generate,
          "growable_lifetime": check_growable_lifetime, "generate_agreement": check_generate_agreement,
          "torch_own": check_torch_own, "graph_pause": check_graph_pause, "nan_mode": check_nan_mode,
          "train_speed": check_train_speed, "paused_read": check_paused_read}


def frag_sweep(out: Path, demand: int | None) -> None:
    if demand is None:
        # One at a time, so that the step times are not shared with another process.
        uncapped = {allocator: run_child("frag", allocator) for allocator in ("native", "expandable", "rlmem", "rlmem_release")}
        write(out, "frag_uncapped", uncapped)
        demand = uncapped["rlmem"].get("peak_allocated")
    if not demand:
        return
    # Every policy under the same caps, from the program's demand upward (8 processes at once:
    # the caps, not the times, are measured here).
    factors = {"native": [1.08, 1.12, 1.16, 1.2, 1.24, 1.28, 1.32],
               "expandable": [1.0, 1.01, 1.015, 1.02, 1.03, 1.05, 1.08, 1.12, 1.16],
               "rlmem": [1.0, 1.004, 1.006, 1.008, 1.01, 1.02, 1.03, 1.05, 1.08, 1.12, 1.16]}
    jobs = [(allocator, str(int(demand * factor))) for allocator, each in factors.items() for factor in each]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda job: run_child("frag", *job), jobs))
    summary = {"demand_bytes": demand, "rows": results}
    for allocator in ("native", "expandable", "rlmem"):
        done = sorted(int(r["capacity"]) for r in results if r.get("allocator") == allocator and r.get("completed"))
        summary[f"{allocator}_smallest_completed_cap"] = done[0] if done else None
        summary[f"{allocator}_smallest_completed_vs_demand"] = done[0] / demand if done else None
    write(out, "frag_caps", summary)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?")
    parser.add_argument("--only", default="")
    parser.add_argument("--child", nargs="+")
    parser.add_argument("--demand", type=int, help="the workload's demand (bytes) from an earlier uncapped run: "
                        "the capped sweep only")
    options = parser.parse_args()
    if options.child:
        result = child(options.child[0], options.child[1:])
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    only = set(filter(None, options.only.split(",")))
    wanted = lambda name: not only or name in only  # noqa: E731
    if wanted("oom"):
        write(out, "oom", run_child("oom"))
    if wanted("loss_bits"):
        native, mine = run_child("loss_native"), run_child("loss_rlmem")
        write(out, "loss_bits", {"native": native, "rlmem": mine,
                                 "identical": native.get("losses") == mine.get("losses")
                                 and native.get("parameter_sum") == mine.get("parameter_sum")})
    for name, args in (("discard", ()), ("pool", ()), ("stress", ()), ("monitor", (str(out),)), ("history", (str(out),))):
        if wanted(name):
            write(out, name, run_child(name, *args))
    if wanted("pause_10gb"):
        write(out, "pause_10gb", run_child("pause_10gb", "10", "0", timeout=300))
        write(out, "pause_10gb_keep", run_child("pause_10gb", "10", "1", timeout=300))
        write(out, "pause_10gb_reserved", run_child("pause_10gb", "10", "2", timeout=300))
    if wanted("first_resume"):
        # Copy chunks of 64 MiB (the default, "0"), 256 and 128 MiB, alternated process by process.
        chunks = ("0", "256", "0", "256", "0", "256", "128", "128")
        write(out, "first_resume", [run_child("pause_10gb", "10", "2", chunk, timeout=300) | {"chunk_mib": int(chunk) or 64}
                                    for chunk in chunks])
    if wanted("first_resume_between"):
        # What the first resume waits on: the rollout's memory given back just before, or not.
        write(out, "first_resume_between", [run_child("pause_10gb", "10", "2", "0", between, timeout=300) for between in
                                            ("rollout", "none", "rollout", "none", "rollout", "none", "rollout")])
    if wanted("kv_growth"):
        write(out, "kv_growth", {strategy: run_child("kv_growth", strategy) for strategy in ("cat", "prealloc", "growable")})
    if wanted("generate"):
        write(out, "generate", {strategy: run_child("generate", strategy, "32", "1024", "4096", timeout=220)
                                for strategy in ("dynamic", "static", "growable")})
    if wanted("generate_agreement"):
        write(out, "generate_agreement", run_child("generate_agreement", timeout=200))
    if wanted("growable_lifetime"):
        write(out, "growable_lifetime", run_child("growable_lifetime"))
    if wanted("torch_own"):
        write(out, "torch_own", {case: run_child("torch_own", case)
                                 for case in ("gemm_discard", "gemm_host", "side_stream", "collective", "seed", "training_unwinds")})
    if wanted("graph_pause"):
        write(out, "graph_pause", {keep: run_child("graph_pause", keep) for keep in ("host", "discard")})
    if wanted("nan_mode"):
        write(out, "nan_mode", run_child("nan_mode"))
    if wanted("train_speed"):
        # Alternated, each in its own process: the two allocators side by side on a noisy machine.
        write(out, "train_speed", [run_child("train_speed", allocator) for allocator in ("native", "rlmem") * 2])
    if wanted("frag_cap_alternated"):
        frag_cap_alternated(out, options.demand or 2614785024)
    if wanted("sanitized_read"):
        write(out, "sanitized_read", sanitized_read())
    if wanted("frag"):
        frag_sweep(out, options.demand)
    return 0


if __name__ == "__main__":
    sys.exit(main())
