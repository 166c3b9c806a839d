"""Planner truth rows for GRPO steps of a LoRA policy, its reference log-probs taken either with
the adapter disabled on the policy's own base weights (peft's disable_adapter(), as TRL and verl
do: no second copy) or from a frozen bf16 copy of the base (`rlmem plan --ref-model copy`).
Measured exactly as measure.py measures (its functions are reused, not copied): the rollout,
then per micro-batch the reference's no-grad forward, the policy's forward and backward, one
AdamW step, twice; rows as measure.py writes them, with "lora_r" and "reference".
Usage on a GPU machine: python3 tools/planner/measure_lora_reference.py OUTDIR [presets...]"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_functions import load  # noqa: E402

m = load(sys.argv[1])
os.makedirs(m["OUT"], exist_ok=True)
from peft import LoraConfig, get_peft_model  # noqa: E402

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def grpo_lora_fn(policy, reference, opt, vocab, B, G, P, N, mb):
    """measure.py's grpo_fn with the reference pass as the trainer runs it: `reference` None
    scores with the policy's adapter disabled."""
    def reference_logprobs(s):
        if reference is not None:
            return m["logprobs_of"](reference, s, P)
        with policy.disable_adapter():
            return m["logprobs_of"](policy, s, P)

    def f():
        for _ in range(2):
            with torch.no_grad():
                seq = policy.generate(torch.randint(0, vocab, (B * G, P), device="cuda"), max_new_tokens=N,
                                      min_new_tokens=N, do_sample=True, pad_token_id=0, eos_token_id=None)
            adv = torch.randn(B * G, 1, device="cuda")
            for i in range(0, B * G, mb):
                s = seq[i:i + mb]
                with torch.no_grad():
                    ref_lp = reference_logprobs(s)
                lp = m["logprobs_of"](policy, s, P)
                kl = torch.exp(ref_lp - lp) - (ref_lp - lp) - 1
                loss = (-(torch.exp(lp - lp.detach()) * adv[i:i + mb]) + 0.04 * kl).mean() * mb / (B * G)
                loss.backward()
                del lp, ref_lp, kl, loss
            opt.step()
            opt.zero_grad(set_to_none=True)
    return f


for kind in sys.argv[2:] or ["qwen2.5-0.5b", "qwen2.5-1.5b"]:
    model, cfg, p = m["make_model"](kind)
    V = p["vocab_size"]
    common = dict(model=kind, params=sum(x.numel() for x in model.parameters()), config=p, dtype="bf16")
    for r in (16, 64):
        policy = get_peft_model(model, LoraConfig(r=r, lora_alpha=2 * r, target_modules=TARGETS))
        policy.generation_config.pad_token_id = 0
        opt = torch.optim.AdamW([x for x in policy.parameters() if x.requires_grad], lr=1e-6)
        trainable = sum(x.numel() for x in policy.parameters() if x.requires_grad)
        for reference_kind in ("adapter-disabled", "copy"):
            reference = None
            if reference_kind == "copy":
                reference, _, _ = m["make_model"](kind)
                reference.requires_grad_(False)
            for (B, G, P, N, mb) in [(4, 8, 256, 256, 8), (8, 8, 512, 512, 16)]:
                m["run"](dict(common, phase="grpo_step", prompts=B, group=G, prompt=P, new=N, micro_batch=mb, ref_model=True,
                              reference=reference_kind, lora_r=r, optimizer="adamw", trainable=trainable),
                         grpo_lora_fn(policy, reference, opt, V, B, G, P, N, mb))
            del reference
        del opt
        model = policy.unload()
    del model
    torch.cuda.empty_cache()
