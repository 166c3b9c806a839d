"""Records GRPO-like snapshots on a GPU to check rlmem's diagnoses on runs it was not built on.
Usage (where torch and transformers are installed): python3 tools/record_validation_snapshots.py OUTDIR NAME
NAME: kv_leak (every step's generate() KV cache kept in a list) or clean_varlen (no leak).
Both vary the generation length per step. Writes OUTDIR/NAME.pickle.gz and OUTDIR/NAME.json with
torch's own counters: allocated at each step end, peak allocated and reserved while recording."""
import gzip
import json
import random
import sys

import torch
from transformers import AutoModelForCausalLM, Qwen2Config


def make_model():
    config = Qwen2Config(hidden_size=512, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2,
                         intermediate_size=1408, vocab_size=32000, tie_word_embeddings=True, max_position_embeddings=4096)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    model.generation_config.pad_token_id = 0
    return model


def logprobs_of(model, seq, n_prompt):
    logits = model(seq).logits[:, n_prompt - 1:-1].float()
    return torch.log_softmax(logits, dim=-1).gather(-1, seq[:, n_prompt:].unsqueeze(-1)).squeeze(-1)


def main(out_dir, name, steps=5):
    keep_caches = name == "kv_leak"
    policy, reference = make_model(), make_model()
    reference.requires_grad_(False)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-6)
    kept, ends = [], []
    rng = random.Random(1)
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
    for _ in range(steps):
        new_tokens = rng.choice([24, 48, 72, 96])
        prompt = torch.randint(1, 32000, (8, 64), device="cuda")
        with torch.no_grad():
            out = policy.generate(prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=True,
                                  return_dict_in_generate=True)
        seq = out.sequences
        if keep_caches:
            kept.append(out.past_key_values)
        del out
        rewards = torch.randn(2, 4, device="cuda")
        advantages = ((rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-4)).flatten()
        with torch.no_grad():
            ref_lp = logprobs_of(reference, seq, 64)
        lp = logprobs_of(policy, seq, 64)
        kl = torch.exp(ref_lp - lp) - (ref_lp - lp) - 1
        loss = -(torch.exp(lp - lp.detach()) * advantages[:, None]).mean() + 0.04 * kl.mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        del lp, kl, loss, ref_lp, seq, rewards, advantages, prompt
        ends.append(torch.cuda.memory_allocated())
    torch.cuda.memory._dump_snapshot(f"/tmp/{name}.pickle")
    torch.cuda.memory._record_memory_history(enabled=None)
    with open(f"/tmp/{name}.pickle", "rb") as raw, gzip.open(f"{out_dir}/{name}.pickle.gz", "wb", compresslevel=6) as packed:
        packed.write(raw.read())
    facts = {"name": name, "steps": steps, "allocated_at_step_ends": ends,
             "peak_allocated": torch.cuda.max_memory_allocated(), "peak_reserved": torch.cuda.max_memory_reserved(),
             "kept_caches": len(kept), "torch": torch.__version__}
    json.dump(facts, open(f"{out_dir}/{name}.json", "w"), indent=1)
    print(json.dumps(facts))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
