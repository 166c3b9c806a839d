"""Planner truth rows for the derived paths, measured as measure.py measures (its functions are
reused): a mixture-of-experts model (Qwen3-MoE layout, small), Gemma-1 (GeLU, 256k vocabulary),
fp32 master weights with bf16 autocast (TRL's default load), and snapshots of the MoE and fp32
training steps for `rlmem inspect`.
Usage on a GPU machine: python3 tools/planner/measure_variants.py OUTDIR"""
import gzip
import os
import pickle
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_functions import load  # noqa: E402

m = load(sys.argv[1])
OUT = m["OUT"]
os.makedirs(OUT, exist_ok=True)
from transformers import AutoModelForCausalLM, GemmaConfig, Qwen3MoeConfig  # noqa: E402


def build(config_class, name, p, dtype=torch.bfloat16):
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config_class(max_position_embeddings=4096, **p), dtype=dtype,
                                                 attn_implementation="sdpa")
    model.generation_config.pad_token_id = 0
    return model, dict(model=name, params=sum(x.numel() for x in model.parameters()), config=p,
                       dtype="bf16" if dtype == torch.bfloat16 else "fp32")


def snapshot_of(name, fn):
    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
    fn()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    with gzip.open(f"{OUT}/{name}.pickle.gz", "wb", compresslevel=6) as f:
        pickle.dump(snap, f)


def train_rows(model, common, V, cases, autocast=False):
    for (mb, S, ckpt, ok) in cases:
        model.train()
        model.gradient_checkpointing_enable() if ckpt else model.gradient_checkpointing_disable()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-6) if ok == "adamw" else torch.optim.SGD(model.parameters(), lr=1e-6)
        fn = m["train_fn"](model, opt, V, mb, S)
        if autocast:
            inner = fn

            def fn():
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    inner()
        m["run"](dict(common, phase="train", micro_batch=mb, seq=S, logprob_tokens=S - S // 2, grad_ckpt=ckpt, optimizer=ok,
                      precision="fp32-master" if autocast else "bf16"), fn)
        del opt
    model.gradient_checkpointing_disable()


# Mixture of experts: Qwen3-MoE layout at a size that runs quickly.
moe_p = dict(hidden_size=1024, num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4, head_dim=64,
             intermediate_size=3072, moe_intermediate_size=512, num_experts=32, num_experts_per_tok=4, vocab_size=151936,
             tie_word_embeddings=False, decoder_sparse_step=1, mlp_only_layers=[])
model, common = build(Qwen3MoeConfig, "qwen3-moe-tiny", moe_p)
V = moe_p["vocab_size"]
for (b, P, N) in [(8, 256, 128), (32, 256, 256)]:
    m["run"](dict(common, phase="generate", batch=b, prompt=P, new=N), m["gen_fn"](model, V, b, P, N))
train_rows(model, common, V, [(4, 512, False, "adamw"), (8, 1024, True, "adamw")])
opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
model.train()
snapshot_of("train_moe_mb4_s512", m["train_fn"](model, opt, V, 4, 512))
del model, opt

# Gemma-1 at its 2B shape: GeLU-tanh MLP, head_dim 256 with one KV head, a 256k vocabulary.
gemma_p = dict(hidden_size=2048, num_hidden_layers=18, num_attention_heads=8, num_key_value_heads=1, head_dim=256,
               intermediate_size=16384, vocab_size=256000)
model, common = build(GemmaConfig, "gemma-2b", gemma_p)
V = gemma_p["vocab_size"]
m["run"](dict(common, phase="generate", batch=8, prompt=256, new=256), m["gen_fn"](model, V, 8, 256, 256))
train_rows(model, common, V, [(4, 512, False, "adamw")])
del model

# fp32 master weights, bf16 autocast around forward and backward.
qwen_p = dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, intermediate_size=4864,
              vocab_size=151936, tie_word_embeddings=True)
from transformers import Qwen2Config  # noqa: E402
model, common = build(Qwen2Config, "qwen2.5-0.5b", qwen_p, dtype=torch.float32)
V = qwen_p["vocab_size"]
train_rows(model, common, V, [(4, 512, False, "adamw"), (8, 1024, True, "adamw")], autocast=True)
opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
model.train()
inner = m["train_fn"](model, opt, V, 4, 512)


def autocast_step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        inner()


snapshot_of("train_fp32master_mb4_s512", autocast_step)
