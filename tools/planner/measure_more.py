"""More planner truth rows, measured exactly as measure.py measures (its functions are reused,
not copied): a Qwen3 model (head_dim 128 != hidden/heads, q/k norms) and LoRA on it, plus what
the CUDA context takes outside the caching allocator.
Usage on a GPU machine: python3 tools/planner/measure_more.py OUTDIR"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_functions import load  # noqa: E402

m = load(sys.argv[1])
os.makedirs(m["OUT"], exist_ok=True)

# The CUDA context and loaded kernels: device memory in use that the caching allocator does not hold.
torch.cuda.init()
x = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
(x @ x).sum().item()
free, total = torch.cuda.mem_get_info()
context = {"total": total, "free": free, "reserved": torch.cuda.memory_reserved(),
           "outside_allocator": total - free - torch.cuda.memory_reserved(), "device": torch.cuda.get_device_name()}
json.dump(context, open(f"{m['OUT']}/context.json", "w"), indent=1)
del x

from transformers import AutoModelForCausalLM, Qwen3Config  # noqa: E402

p = dict(hidden_size=1024, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
         intermediate_size=3072, vocab_size=151936, tie_word_embeddings=True)
torch.manual_seed(0)
with torch.device("cuda"):
    model = AutoModelForCausalLM.from_config(Qwen3Config(max_position_embeddings=4096, **p), dtype=torch.bfloat16,
                                             attn_implementation="sdpa")
model.generation_config.pad_token_id = 0
V = p["vocab_size"]
common = dict(model="qwen3-0.6b", params=sum(x.numel() for x in model.parameters()), config=p, dtype="bf16")
for (b, P, N) in [(8, 256, 256), (32, 256, 512)]:
    m["run"](dict(common, phase="generate", batch=b, prompt=P, new=N), m["gen_fn"](model, V, b, P, N))
for (mb, S, ckpt, ok) in [(4, 512, False, "adamw"), (8, 1024, True, "adamw"), (4, 1024, False, "sgd")]:
    model.train()
    model.gradient_checkpointing_enable() if ckpt else model.gradient_checkpointing_disable()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6) if ok == "adamw" else torch.optim.SGD(model.parameters(), lr=1e-6)
    m["run"](dict(common, phase="train", micro_batch=mb, seq=S, logprob_tokens=S - S // 2, grad_ckpt=ckpt, optimizer=ok),
             m["train_fn"](model, opt, V, mb, S))
    del opt
model.gradient_checkpointing_disable()
from peft import LoraConfig, get_peft_model  # noqa: E402
pm = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules=[
    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
opt = torch.optim.AdamW([x for x in pm.parameters() if x.requires_grad], lr=1e-6)
m["run"](dict(common, phase="train_lora", lora_r=16, micro_batch=8, seq=1024, logprob_tokens=512, grad_ckpt=False,
              optimizer="adamw", trainable=sum(x.numel() for x in pm.parameters() if x.requires_grad)),
         m["train_fn"](pm, opt, V, 8, 1024))
