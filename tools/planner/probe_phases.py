"""Records what the planner's phases allocate, to derive (never fit) its terms from the code path.
Usage on a GPU machine: python3 tools/planner/probe_phases.py OUTDIR
Runs the phases of tools/planner/measure.py on qwen2.5-0.5b and llama3.2-1b and writes:
  OUTDIR/probe.json: versions, the SDPA backend, per-step peaks of generate (prefill vs decode),
                     per-sub-phase peaks of a GRPO step (generate, reference log-probs, policy
                     forward, backward, optimizer step);
  OUTDIR/*.pickle.gz: memory snapshots (stacks) of a training step, a checkpointed one, a LoRA one
                     and the end of a long generate, for `rlmem inspect`."""
import gc
import gzip
import json
import os
import pickle
import sys

import torch


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_functions import load  # noqa: E402

_measure = load()
make_model, logprobs_of = _measure["make_model"], _measure["logprobs_of"]

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
probe = {"torch": torch.__version__}
try:
    import transformers
    probe["transformers"] = transformers.__version__
except ImportError:
    pass


def save():
    json.dump(probe, open(f"{OUT}/probe.json", "w"), indent=1)


def dump_snapshot(name):
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    with gzip.open(f"{OUT}/{name}.pickle.gz", "wb", compresslevel=6) as f:
        pickle.dump(snapshot, f)


def fresh():
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return torch.cuda.memory_allocated()


class StepPeaks:
    """A logits processor that notes the peak allocated between two sampling steps, and can start
    recording the allocator's history a few steps before the end of a long generation."""

    def __init__(self, record_from_len=None):
        self.rows = []
        self.record_from_len = record_from_len

    def __call__(self, input_ids, scores):
        self.rows.append([input_ids.shape[1], torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated()])
        torch.cuda.reset_peak_memory_stats()
        if self.record_from_len is not None and input_ids.shape[1] == self.record_from_len:
            torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
        return scores


def probe_generate(model, vocab, b, P, N, record_name=None):
    from transformers import LogitsProcessorList
    base = fresh()
    peaks = StepPeaks(record_from_len=P + N - 3 if record_name else None)
    with torch.no_grad():
        model.generate(torch.randint(0, vocab, (b, P), device="cuda"), max_new_tokens=N, min_new_tokens=N,
                       do_sample=True, pad_token_id=0, eos_token_id=None, logits_processor=LogitsProcessorList([peaks]))
    torch.cuda.synchronize()
    tail_peak = torch.cuda.max_memory_allocated()
    if record_name:
        dump_snapshot(record_name)
    rows = peaks.rows
    return {"b": b, "P": P, "N": N, "base": base, "prefill_peak": rows[0][1],
            "decode_peak": max(r[1] for r in rows[1:] + [[0, tail_peak, 0]]),
            "steps": rows[:4] + rows[-4:], "after_last_sample_peak": tail_peak}


def probe_train(model, opt, vocab, mb, S, name):
    base = fresh()
    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
    for _ in range(2):
        seq = torch.randint(0, vocab, (mb, S), device="cuda")
        lp = logprobs_of(model, seq, S // 2)
        (-lp.mean()).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    dump_snapshot(name)
    return {"mb": mb, "S": S, "base": base, "peak_alloc": peak}


def probe_grpo(model, ref, opt, vocab, B, G, P, N, mb):
    sub = []

    def mark(name):
        torch.cuda.synchronize()
        sub.append([name, torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated()])
        torch.cuda.reset_peak_memory_stats()

    fresh()
    for it in range(2):
        with torch.no_grad():
            seq = model.generate(torch.randint(0, vocab, (B * G, P), device="cuda"), max_new_tokens=N,
                                 min_new_tokens=N, do_sample=True, pad_token_id=0, eos_token_id=None)
        mark(f"{it}:generate")
        adv = torch.randn(B * G, 1, device="cuda")
        for i in range(0, B * G, mb):
            s = seq[i:i + mb]
            with torch.no_grad():
                ref_lp = logprobs_of(ref, s, P)
            mark(f"{it}:ref_logprobs")
            lp = logprobs_of(model, s, P)
            mark(f"{it}:policy_forward")
            kl = torch.exp(ref_lp - lp) - (ref_lp - lp) - 1
            loss = (-(torch.exp(lp - lp.detach()) * adv[i:i + mb]) + 0.04 * kl).mean() * mb / (B * G)
            loss.backward()
            mark(f"{it}:backward")
            del lp, ref_lp, kl, loss
        opt.step()
        mark(f"{it}:optimizer_step")
        opt.zero_grad(set_to_none=True)
        mark(f"{it}:zero_grad")
    return {"B": B, "G": G, "P": P, "N": N, "mb": mb, "sub_phases": sub}


model, cfg, p = make_model("qwen2.5-0.5b")
V = p["vocab_size"]
probe["sdpa_backends"] = {"flash": torch.backends.cuda.flash_sdp_enabled(),
                          "cudnn": torch.backends.cuda.cudnn_sdp_enabled(),
                          "mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled()}
probe["generate"] = [probe_generate(model, V, 8, 256, 64), probe_generate(model, V, 64, 512, 1024, "gen_tail_qwen_b64")]
save()
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
probe["train"] = [probe_train(model, opt, V, 4, 512, "train_qwen_mb4_s512")]
model.gradient_checkpointing_enable()
probe["train"].append(probe_train(model, opt, V, 8, 1024, "train_ckpt_qwen_mb8_s1024"))
model.gradient_checkpointing_disable()
save()
del opt
ref, _, _ = make_model("qwen2.5-0.5b")
ref.requires_grad_(False)
opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
probe["grpo"] = [probe_grpo(model, ref, opt, V, 4, 8, 256, 256, 8)]
save()
del model, ref, opt
gc.collect()
torch.cuda.empty_cache()

model, cfg, p = make_model("llama3.2-1b")
from peft import LoraConfig, get_peft_model  # noqa: E402
pm = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=[
    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
opt = torch.optim.AdamW([x for x in pm.parameters() if x.requires_grad], lr=1e-6)
probe["lora"] = [probe_train(pm, opt, p["vocab_size"], 8, 1024, "train_lora8_llama_mb8_s1024")]
save()
