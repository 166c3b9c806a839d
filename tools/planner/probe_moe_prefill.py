"""Snapshot of a mixture-of-experts prefill (Qwen3-MoE layout, transformers' own experts code),
to derive the planner's MoE terms. Usage on a GPU machine: python3 tools/planner/probe_moe_prefill.py OUTDIR"""
import gzip
import json
import os
import pickle
import sys

import torch
from transformers import AutoModelForCausalLM, Qwen3MoeConfig

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
p = dict(hidden_size=1024, num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4, head_dim=64,
         intermediate_size=3072, moe_intermediate_size=512, num_experts=32, num_experts_per_tok=4, vocab_size=151936,
         tie_word_embeddings=False, max_position_embeddings=4096)
torch.manual_seed(0)
with torch.device("cuda"):
    model = AutoModelForCausalLM.from_config(Qwen3MoeConfig(**p), dtype=torch.bfloat16, attn_implementation="sdpa")
model.generation_config.pad_token_id = 0
info = {"experts_implementation": str(getattr(model.config, "_experts_implementation", None))}
prompt = torch.randint(0, p["vocab_size"], (32, 256), device="cuda")
torch.cuda.synchronize()
torch.cuda.reset_peak_memory_stats()
base = torch.cuda.memory_allocated()
torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
with torch.no_grad():
    model.generate(prompt, max_new_tokens=2, min_new_tokens=2, do_sample=True, pad_token_id=0, eos_token_id=None)
snap = torch.cuda.memory._snapshot()
torch.cuda.memory._record_memory_history(enabled=None)
info.update(base=base, peak=torch.cuda.max_memory_allocated())
with gzip.open(f"{OUT}/moe_prefill.pickle.gz", "wb") as f:
    pickle.dump(snap, f)
import inspect  # noqa: E402
from transformers.models.qwen3_moe import modeling_qwen3_moe  # noqa: E402
info["moe_block_source"] = inspect.getsource(modeling_qwen3_moe.Qwen3MoeSparseMoeBlock)
experts = getattr(modeling_qwen3_moe, "Qwen3MoeExperts", None)
if experts is not None:
    info["experts_source"] = inspect.getsource(experts)
json.dump(info, open(f"{OUT}/moe_prefill.json", "w"), indent=1)
