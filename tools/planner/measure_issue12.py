"""Planner truth rows for issue 12's remaining paths, measured as measure.py measures (its
functions are reused, not copied):

- a nanochat-style model (nanochat's gpt.py layout: untied embedding and head, no biases, norms
  without weights, QK norm, a ReLU^2 MLP of 4 x n_embd, fp32 weights with a bf16 embedding under
  bf16 autocast) trained with Muon (momentum per 2-D matrix, fused AdamW for embedding and head,
  as nanochat's setup_optimizers does) or with AdamW alone; generating with a preallocated KV
  cache (nanochat's KVCache layout, rows x prompt+new positions allocated before the prompt);
  and a GRPO step generating in batches of rows with that cache;
- GRPO steps of a Hugging Face model generating its rollout in batches of rows (the generation
  batch), and a PPO-style step with a resident buffer scaled by rows x epochs that lives in every
  phase, the update repeated for each epoch.

Each row records the step's peak (truth_peak) and, for GRPO steps, each phase's peak
(phase_peaks; the peak statistic is reset at each phase boundary, so their max is the step's).
nanochat's model is scored through the planner's log-prob path (model(seq) -> bf16 logits ->
response rows in fp32 -> log_softmax, as measure.py's logprobs_of): its logit softcap and its
batch-1 prefill are not part of these rows.
- with `ungated` as third argument, only Hugging Face models whose MLP has no gate: GPT-2 (GELU
  tanh, LayerNorm with biases, learned positions, Conv1D) and GPT-NeoX (GELU, parallel residual,
  partial rotary), generating and training, with snapshots of their training steps.
Usage on a GPU machine: python3 measure_issue12.py OUTDIR [seconds] [ungated]"""
import gc
import gzip
import json
import os
import pickle
import signal
import sys
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
for path in (here, os.path.join(here, "..", "tools", "planner"), "tools/planner"):
    sys.path.insert(0, path)
from measure_functions import load  # noqa: E402

OUT = sys.argv[1]
BUDGET = float(sys.argv[2]) if len(sys.argv) > 2 else 400.0
ROW_SECONDS = 90
START = time.time()
m = load(OUT)
os.makedirs(OUT, exist_ok=True)
rows = []


def log(*a):
    print(time.strftime("%H:%M:%S"), f"+{time.time() - START:.0f}s", *a, flush=True)


def save():
    json.dump(rows, open(f"{OUT}/rows.json", "w"), indent=1)


class RowTimeout(Exception):
    pass


def on_alarm(signum, frame):
    raise RowTimeout()


signal.signal(signal.SIGALRM, on_alarm)


class PhasePeaks:
    """Peak allocated bytes per phase: the statistic is read and reset at each boundary."""

    def __init__(self):
        self.peaks = {}

    def close(self, name):
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        self.peaks[name] = max(self.peaks.get(name, 0), peak)
        torch.cuda.reset_peak_memory_stats()


def resident_bytes(modules=(), optimizers=()):
    """What a step legitimately finds resident: the models' parameters and buffers, and the state
    of an optimizer an earlier row already stepped."""
    total = sum(t.numel() * t.element_size() for mod in modules for t in [*mod.parameters(), *mod.buffers()])
    for opt in optimizers:
        for state in opt.state.values():
            total += sum(v.numel() * v.element_size() for v in state.values() if torch.is_tensor(v) and v.is_cuda)
    return total


def run(row, fn, snapshot=None, resident=None):
    """measure.py's measure(), with a time limit per row and the phase peaks when fn records them.
    The truth is the fixture's (measure_fsdp.py's): the peak less what earlier rows left in memory
    beyond `resident` (their cuBLAS workspaces, once per process and thread)."""
    if time.time() - START > BUDGET:
        log("skipped (time budget)", row.get("label"))
        return
    phases = PhasePeaks()
    signal.alarm(ROW_SECONDS)
    try:
        if snapshot:
            torch.cuda.memory._record_memory_history(max_entries=400_000, stacks="python")
        row.update(m["measure"](lambda: fn(phases)))
        if phases.peaks:
            row["phase_peaks"] = phases.peaks
            row["peak_alloc"] = max(row["peak_alloc"], max(phases.peaks.values()))
        left = row["base"] - resident if resident is not None else 0
        row["weights_bytes"] = resident
        row["truth_peak"] = row["peak_alloc"] - left
        if phases.peaks:
            row["truth_phase_peaks"] = {k: v - left for k, v in phases.peaks.items()}
        if snapshot:
            snap = torch.cuda.memory._snapshot()
            with gzip.open(f"{OUT}/{snapshot}.pickle.gz", "wb", compresslevel=6) as f:
                pickle.dump(snap, f)
    except torch.OutOfMemoryError:
        row["oom"] = True
    except RowTimeout:
        row["timeout"] = True
    except Exception:  # one broken row must not cost the others
        row["error"] = traceback.format_exc()[-1500:]
    finally:
        signal.alarm(0)
        if snapshot:
            torch.cuda.memory._record_memory_history(enabled=None)
    rows.append(row)
    log({k: v for k, v in row.items() if k != "config"})
    save()


# ---------------------------------------------------------------- nanochat's model (gpt.py)

def rms(x):
    return F.rms_norm(x, (x.size(-1),))


def rotary(x, cos, sin):
    d = x.shape[3] // 2
    x1, x2 = x[..., :d], x[..., d:]
    return torch.cat([x1 * cos + x2 * sin, x1 * (-sin) + x2 * cos], 3).to(x.dtype)


class KVCache:
    """nanochat's engine cache: one tensor [layers, 2, rows, kv_heads, positions, head_dim],
    allocated at the first insert, filled in place."""

    def __init__(self, rows, kv_heads, positions, head_dim, layers):
        self.shape = (layers, 2, rows, kv_heads, positions, head_dim)
        self.cache = None
        self.pos = 0

    def insert(self, layer, k, v):
        if self.cache is None:
            self.cache = torch.empty(self.shape, dtype=k.dtype, device=k.device)
        t0, t1 = self.pos, self.pos + k.size(2)
        self.cache[layer, 0, :, :, t0:t1] = k
        self.cache[layer, 1, :, :, t0:t1] = v
        if layer == self.shape[0] - 1:
            self.pos = t1
        return self.cache[layer, 0, :, :, :t1], self.cache[layer, 1, :, :, :t1]


class Attention(nn.Module):
    def __init__(self, c, i):
        super().__init__()
        self.i, self.h, self.kv, self.d = i, c["n_head"], c["n_kv_head"], c["n_embd"] // c["n_head"]
        self.c_q = nn.Linear(c["n_embd"], self.h * self.d, bias=False)
        self.c_k = nn.Linear(c["n_embd"], self.kv * self.d, bias=False)
        self.c_v = nn.Linear(c["n_embd"], self.kv * self.d, bias=False)
        self.c_proj = nn.Linear(c["n_embd"], c["n_embd"], bias=False)

    def forward(self, x, cos, sin, cache):
        B, T, C = x.size()
        q = self.c_q(x).view(B, T, self.h, self.d)
        k = self.c_k(x).view(B, T, self.kv, self.d)
        v = self.c_v(x).view(B, T, self.kv, self.d)
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        q, k = rms(q), rms(k)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if cache is not None:
            k, v = cache.insert(self.i, k, v)
        gqa = self.h != self.kv
        y = F.scaled_dot_product_attention(q, k, v, is_causal=q.size(2) == k.size(2), enable_gqa=gqa)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, -1))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"], bias=False)
        self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"], bias=False)

    def forward(self, x):
        return self.c_proj(F.relu(self.c_fc(x)).square())


class Block(nn.Module):
    def __init__(self, c, i):
        super().__init__()
        self.attn, self.mlp = Attention(c, i), MLP(c)

    def forward(self, x, cos, sin, cache):
        x = x + self.attn(rms(x), cos, sin, cache)
        return x + self.mlp(rms(x))


class Output:
    def __init__(self, logits):
        self.logits = logits


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(c["vocab_size"], c["n_embd"]),
                                              h=nn.ModuleList([Block(c, i) for i in range(c["n_layer"])])))
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False)
        d = c["n_embd"] // c["n_head"]
        t = torch.arange(c["sequence_len"] * 10, dtype=torch.float32)
        freqs = torch.outer(t, 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d)))
        self.register_buffer("cos", freqs.cos().bfloat16()[None, :, None, :], persistent=False)
        self.register_buffer("sin", freqs.sin().bfloat16()[None, :, None, :], persistent=False)

    def forward(self, idx, cache=None, last_only=False):
        T0 = 0 if cache is None else cache.pos
        T = idx.size(1)
        cos, sin = self.cos[:, T0:T0 + T], self.sin[:, T0:T0 + T]
        x = rms(self.transformer.wte(idx))
        for block in self.transformer.h:
            x = block(x, cos, sin, cache)
        x = rms(x)
        if last_only:
            x = x[:, -1:]
        return Output(self.lm_head(x))


def nanochat(c):
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = GPT(c)
    model.transformer.wte.to(dtype=torch.bfloat16)  # as nanochat's init_weights does on CUDA
    return model


def zeropower_via_newtonschulz5(G, steps):
    a, b, c = (3.4445, -4.7750, 2.0315)
    X = G.bfloat16()
    if G.size(-2) > G.size(-1):
        X = X.mT
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for _ in range(steps):
        A = X @ X.mT
        B = b * A + c * A @ A
        X = a * X + B @ X
    if G.size(-2) > G.size(-1):
        X = X.mT
    return X


class Muon(torch.optim.Optimizer):
    """nanochat's muon.Muon (without torch.compile): momentum per 2-D matrix, Newton-Schulz."""

    def __init__(self, params, lr=0.02, momentum=0.95, nesterov=True, ns_steps=5):
        params = [*params]
        groups = [dict(params=[p for p in params if p.numel() == size]) for size in {p.numel() for p in params}]
        super().__init__(groups, dict(lr=lr, momentum=momentum, nesterov=nesterov, ns_steps=ns_steps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(g)
                buf = state["momentum_buffer"]
                buf.lerp_(g, 1 - group["momentum"])
                g = g.lerp_(buf, group["momentum"]) if group["nesterov"] else buf
                g = zeropower_via_newtonschulz5(g, steps=group["ns_steps"])
                p.add_(g, alpha=-group["lr"] * max(1, p.size(-2) / p.size(-1)) ** 0.5)


class Optimizers:
    """nanochat's setup_optimizers: fused AdamW for the embedding and the head, Muon for the
    blocks' matrices; or AdamW (foreach, torch's default) for everything."""

    def __init__(self, model, kind):
        if kind == "muon":
            self.all = [torch.optim.AdamW([dict(params=[model.lm_head.weight]), dict(params=[model.transformer.wte.weight])],
                                          lr=1e-4, betas=(0.8, 0.95), eps=1e-10, weight_decay=0.0, fused=True),
                        Muon(model.transformer.h.parameters(), lr=0.02, momentum=0.95)]
        else:
            self.all = [torch.optim.AdamW(model.parameters(), lr=1e-6)]

    def step(self):
        for opt in self.all:
            opt.step()
        for opt in self.all:
            opt.zero_grad(set_to_none=True)


def nanochat_train_fn(model, opt, V, mb, S, steps=2):
    """measure.py's train_fn as nanochat runs it: forward and loss under bf16 autocast, backward after."""
    def f(phases):
        for _ in range(steps):
            seq = torch.randint(0, V, (mb, S), device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                lp = m["logprobs_of"](model, seq, S // 2)
                loss = -lp.mean()
            loss.backward()
            del lp, loss
            opt.step()
    return f


def sample(logits):
    """HF's default sampling (top-k 50, softmax, multinomial) on the last position's logits."""
    scores = logits[:, -1, :].float()
    scores = scores.masked_fill(scores < torch.topk(scores, 50)[0][..., -1, None], -float("inf"))
    return torch.multinomial(torch.softmax(scores, dim=-1), 1)


@torch.no_grad()
def prealloc_generate(model, prompt, new_tokens):
    """nanochat's engine loop: a cache of rows x (prompt + new) positions, prefill, then one token at a time."""
    c = model.c
    cache = KVCache(prompt.size(0), c["n_kv_head"], prompt.size(1) + new_tokens, c["n_embd"] // c["n_head"], c["n_layer"])
    out = [prompt]
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(prompt, cache, last_only=True).logits
        for i in range(new_tokens):
            token = sample(logits)
            out.append(token)
            if i + 1 < new_tokens:
                logits = model(token, cache).logits
    del cache
    return torch.cat(out, 1)


def nanochat_generate_fn(model, V, b, P, N):
    def f(phases):
        prealloc_generate(model, torch.randint(0, V, (b, P), device="cuda"), N)
    return f


def grpo_step_fn(policy, reference, opt, V, B, G, P, N, mb, gen_batch, generate, autocast=False, epochs=1,
                 old_logprobs=False, buffer_bytes=0, steps=2):
    """measure.py's grpo_fn, with the rollout generated `gen_batch` rows at a time, PPO's epochs
    (the update and its optimizer step repeated), an optional old-policy pass, and a resident buffer
    allocated before the step that lives through every phase."""
    def scored(model, s):
        if autocast:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return m["logprobs_of"](model, s, P)
        return m["logprobs_of"](model, s, P)

    def f(phases):
        buffer = torch.empty(buffer_bytes // 4, dtype=torch.float32, device="cuda") if buffer_bytes else None
        rows = B * G
        for _ in range(steps):
            with torch.no_grad():
                prompts = torch.randint(0, V, (rows, P), device="cuda")
                seq = torch.cat([generate(prompts[i:i + gen_batch]) for i in range(0, rows, gen_batch)], 0)
            phases.close("rollout")
            adv = torch.randn(rows, 1, device="cuda")
            old = None
            if old_logprobs:
                with torch.no_grad():
                    old = torch.cat([scored(policy, seq[i:i + mb]) for i in range(0, rows, mb)], 0)
                phases.close("old-logprobs")
            for _ in range(epochs):
                for i in range(0, rows, mb):
                    s = seq[i:i + mb]
                    ref_lp = None
                    if reference is not None:
                        with torch.no_grad():
                            ref_lp = scored(reference, s)
                        phases.close("reference")
                    lp = scored(policy, s)
                    base = old[i:i + mb] if old is not None else lp.detach()
                    loss = -(torch.exp(lp - base) * adv[i:i + mb])
                    if ref_lp is not None:
                        loss = loss + 0.04 * (torch.exp(ref_lp - lp) - (ref_lp - lp) - 1)
                    (loss.mean() * mb / rows).backward()
                    del lp, ref_lp, loss
                    phases.close("update")
                opt.step()
                phases.close("optimizer")
        del buffer
    return f


def hf_generate(model, N):
    def g(prompts):
        return model.generate(prompts, max_new_tokens=N, min_new_tokens=N, do_sample=True, pad_token_id=0, eos_token_id=None)
    return g


class AdamW:
    def __init__(self, params):
        self.opt = torch.optim.AdamW(params, lr=1e-6)

    def step(self):
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


log("torch", torch.__version__, torch.cuda.get_device_name())


def ungated_rows():
    from transformers import AutoModelForCausalLM, GPT2Config, GPTNeoXConfig
    # Each thread's cuBLAS workspace before the first row, so that every row's truth leaves them out.
    warm = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    (warm @ warm).sum().backward()
    del warm
    configs = [("gpt2-small", GPT2Config, dict(n_embd=768, n_layer=12, n_head=12, vocab_size=50257, n_positions=1024)),
               ("pythia-160m", GPTNeoXConfig, dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                                   intermediate_size=3072, vocab_size=50304, rotary_pct=0.25,
                                                   use_parallel_residual=True, max_position_embeddings=2048))]
    for name, config_class, p in configs:
        torch.manual_seed(0)
        with torch.device("cuda"):
            model = AutoModelForCausalLM.from_config(config_class(**p), dtype=torch.bfloat16, attn_implementation="sdpa")
        model.generation_config.pad_token_id = 0
        V = p["vocab_size"]
        common = dict(model=name, params=sum(x.numel() for x in model.parameters()), config=p, dtype="bf16")
        run(dict(common, label=f"{name} generate", phase="generate", batch=8, prompt=256, new=64),
            lambda phases: m["gen_fn"](model, V, 8, 256, 64)(), resident=resident_bytes([model]))
        model.train()
        for mb, S, snap in [(8, 512, f"{name}_train"), (4, 1024, None)]:
            opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
            run(dict(common, label=f"{name} train {mb}x{S}", phase="train", micro_batch=mb, seq=S, logprob_tokens=S - S // 2,
                     grad_ckpt=False, optimizer="adamw"), lambda phases: m["train_fn"](model, opt, V, mb, S)(), snapshot=snap,
                resident=resident_bytes([model]))
            del opt
            gc.collect()
        del model
        gc.collect()
        torch.cuda.empty_cache()


if len(sys.argv) > 3 and sys.argv[3] == "ungated":
    ungated_rows()
    log("done")
    sys.exit(0)

# ---------------------------------------------------------------- nanochat-style rows
NANO = dict(sequence_len=2048, vocab_size=65536, n_layer=12, n_head=6, n_kv_head=6, n_embd=768)
model = nanochat(NANO)
V = NANO["vocab_size"]
common = dict(model="nanochat-d12", params=sum(p.numel() for p in model.parameters()), config=NANO,
              dtype="fp32+bf16-embedding", precision="nanochat")
for kind, mb, S, snap in [("muon", 8, 1024, "nanochat_train_muon"), ("adamw", 8, 1024, None), ("muon", 16, 512, None)]:
    model.train()
    opt = Optimizers(model, kind)
    run(dict(common, label=f"train {kind} {mb}x{S}", phase="train", micro_batch=mb, seq=S, logprob_tokens=S - S // 2,
             grad_ckpt=False, optimizer=kind), nanochat_train_fn(model, opt, V, mb, S), snapshot=snap,
        resident=resident_bytes([model]))
    del opt
    gc.collect()
model.eval()
run(dict(common, label="generate prealloc 16", phase="generate", batch=16, prompt=256, new=64, kv_cache="prealloc"),
    nanochat_generate_fn(model, V, 16, 256, 64), snapshot="nanochat_generate_prealloc", resident=resident_bytes([model]))
model.train()
opt = Optimizers(model, "muon")
run(dict(common, label="grpo nanochat gen-batch 8", phase="grpo_step", prompts=2, group=16, prompt=128, new=48,
         micro_batch=8, gen_batch=8, kv_cache="prealloc", ref_model=False, reference="none", optimizer="muon"),
    grpo_step_fn(model, None, opt, V, 2, 16, 128, 48, 8, 8, lambda p: prealloc_generate(model, p, 48), autocast=True),
    snapshot="nanochat_grpo", resident=resident_bytes([model]))
del model, opt
gc.collect()
torch.cuda.empty_cache()

# ---------------------------------------------------------------- Hugging Face rows: generation batch, buffers x epochs
model, cfg, p = m["make_model"]("qwen2.5-0.5b")
ref, _, _ = m["make_model"]("qwen2.5-0.5b")
ref.requires_grad_(False)
V = p["vocab_size"]
common = dict(model="qwen2.5-0.5b", params=sum(x.numel() for x in model.parameters()), config=p, dtype="bf16")
opt = AdamW(model.parameters())
for gen_batch in (64, 16):
    run(dict(common, label=f"grpo gen-batch {gen_batch}", phase="grpo_step", prompts=1, group=64, prompt=1024, new=32,
             micro_batch=1, gen_batch=gen_batch, ref_model=True, reference="copy", optimizer="adamw"),
        grpo_step_fn(model, ref, opt, V, 1, 64, 1024, 32, 1, gen_batch, hf_generate(model, 32)),
        resident=resident_bytes([model, ref], [opt.opt]))
traj = 16 * 2 * 50 * 263 * 1 * 196 * 4  # rows x epochs x 50 x 263 x 1 x 196, fp32
run(dict(common, label="ppo buffer x epochs", phase="grpo_step", prompts=2, group=8, prompt=256, new=64, micro_batch=8,
         ref_model=True, reference="copy", optimizer="adamw", epochs=2, old_logprobs=True,
         buffer="traj=rows*epochs*50*263*1*196:fp32", buffer_bytes=traj),
    grpo_step_fn(model, ref, opt, V, 2, 8, 256, 64, 8, 16, hf_generate(model, 64), epochs=2, old_logprobs=True,
                 buffer_bytes=traj), resident=resident_bytes([model, ref], [opt.opt]))
log("done")
