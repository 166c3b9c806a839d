#!/usr/bin/env python3
"""Peaks of nanochat's own training and RL steps, measured with nanochat's code as published.

Issue 30, item 1: `rlmem plan` had modelled nanochat's layout with Hugging Face's log-prob path
(log-probs of the response positions only). nanochat's GPT.forward computes the logits of every
position, casts them to fp32, softcaps them (15 * tanh(logits / 15)) and takes the loss there.
This script imports nanochat's package from a checkout (`--nanochat DIR`, the folder holding
`nanochat/gpt.py`; it is not part of rlmem's tree) and measures, per row, one step after a
warm-up step (so the optimizer's state exists):

- train: base_train's step as chat_sft and chat_rl run it: forward with targets under bf16
  autocast (the checkout's own choice: commits before 1076f97 wrap the step in autocast), the
  first `seq - loss_tokens` targets set to -1 (ignored), backward, the optimizers' step,
  zero_grad(set_to_none=True);
- rl: chat_rl's step: Engine.generate_batch of `num_samples` rows (batch-1 prefill copied to the
  rows, the cache sized by prompt + max_tokens), then the policy-gradient pass with
  loss_reduction='none' over the generated rows and the optimizers' step. Generation is forced to
  run its full length (no row ends early) so that the row's length is known.

Writes <out>/measured_nanochat.json (rows: the knobs, base and peak allocated bytes per phase)
and, with --snapshots, one memory snapshot per row (pickle) of the measured step.
"""

import argparse
import json
import os
import sys
import time
import types
from contextlib import nullcontext

import torch

ROWS = [
    # label, depth, vocab, micro_batch, seq, loss_tokens, optimizer
    ("d12 muon 8x1024 loss 512", 12, 65536, 8, 1024, 512, "muon"),
    ("d12 adamw 8x1024 loss 512", 12, 65536, 8, 1024, 512, "adamw"),
    ("d12 muon 4x2048 loss 1024", 12, 65536, 4, 2048, 1024, "muon"),
    ("d12 muon 8x1024 loss 1024 vocab 32768", 12, 32768, 8, 1024, 1024, "muon"),
    ("d8 adamw 16x512 loss 256 vocab 32768", 8, 32768, 16, 512, 256, "adamw"),
    ("d20 muon 4x1024 loss 512", 20, 65536, 4, 1024, 512, "muon"),
    ("d16 adamw 2x2048 loss 2048", 16, 65536, 2, 2048, 2048, "adamw"),
]
RL_ROWS = [
    # label, depth, vocab, num_samples (= device_batch_size), prompt, max_tokens
    ("d12 rl 8 samples 128+256", 12, 65536, 8, 128, 256),
    ("d12 rl 16 samples 200+300", 12, 65536, 16, 200, 300),
    ("d20 rl 8 samples 100+400", 20, 65536, 8, 100, 400),
]


def config_for(gpt, depth, vocab, sequence_len=2048):
    # base_train: model_dim = depth * 64, heads of 128 (ceil), no GQA.
    model_dim = depth * 64
    heads = max(1, (model_dim + 127) // 128)
    return gpt.GPTConfig(sequence_len=sequence_len, vocab_size=vocab, n_layer=depth, n_head=heads,
                         n_kv_head=heads, n_embd=model_dim)


def build(gpt, config):
    with torch.device("meta"):
        model = gpt.GPT(config)
    model.to_empty(device="cuda")
    model.init_weights()
    return model


def optimizers_for(model, kind):
    if kind == "muon":
        made = model.setup_optimizers() if hasattr(model, "setup_optimizers") else model.setup_optimizer()
        return made if isinstance(made, list) else [made]
    return [torch.optim.AdamW(model.parameters(), lr=1e-6)]


def autocast_for(gpt_source):
    # Commits before 1076f97 ("delete autocast") ran the model under bf16 autocast.
    return "COMPUTE_DTYPE" not in gpt_source


def measure_train(gpt, uses_autocast, label, depth, vocab, micro_batch, seq, loss_tokens, kind, snapshot):
    torch.cuda.empty_cache()
    model = build(gpt, config_for(gpt, depth, vocab))
    optimizers = optimizers_for(model, kind)
    ids = torch.randint(0, vocab, (micro_batch, seq + 1), device="cuda")
    inputs, targets = ids[:, :-1], ids[:, 1:].clone()
    targets[:, : seq - loss_tokens] = -1
    context = (lambda: torch.amp.autocast(device_type="cuda", dtype=torch.bfloat16)) if uses_autocast else nullcontext

    def step():
        with context():
            loss = model(inputs, targets)
        loss.backward()
        for opt in optimizers:
            opt.step()
        model.zero_grad(set_to_none=True)

    step()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    if snapshot:
        torch.cuda.memory._record_memory_history(max_entries=200000)
    started = time.time()
    step()
    torch.cuda.synchronize()
    row = dict(label=label, kind="train", depth=depth, vocab=vocab, micro_batch=micro_batch, seq=seq,
               loss_tokens=loss_tokens, optimizer=kind, autocast=uses_autocast,
               params=sum(p.numel() for p in model.parameters()), base=base,
               peak_alloc=torch.cuda.max_memory_allocated(), peak_reserved=torch.cuda.max_memory_reserved(),
               secs=round(time.time() - started, 3))
    if snapshot:
        torch.cuda.memory._dump_snapshot(snapshot)
        torch.cuda.memory._record_memory_history(enabled=None)
    del model, optimizers, ids, inputs, targets
    return row


class FakeTokenizer:
    """What Engine needs of a tokenizer: special tokens that are never sampled (ids past the vocab
    the sampler draws from would be out of range, so they are the last ids) and a bos id."""

    def __init__(self, vocab):
        self.vocab = vocab

    def encode_special(self, name):
        return {"<|python_start|>": -2, "<|python_end|>": -3, "<|output_start|>": -4, "<|output_end|>": -5,
                "<|assistant_end|>": -6}[name]

    def get_bos_token_id(self):
        return -7

    def encode(self, text):
        return [1]

    def decode(self, tokens):
        return ""


def measure_rl(gpt, engine_module, uses_autocast, label, depth, vocab, samples, prompt, max_tokens, snapshot):
    torch.cuda.empty_cache()
    model = build(gpt, config_for(gpt, depth, vocab))
    optimizers = optimizers_for(model, "muon")
    engine = engine_module.Engine(model, FakeTokenizer(vocab))
    prompt_tokens = torch.randint(0, vocab, (prompt,)).tolist()
    context = (lambda: torch.amp.autocast(device_type="cuda", dtype=torch.bfloat16)) if uses_autocast else nullcontext
    phases = {}

    def step(record):
        torch.cuda.reset_peak_memory_stats()
        model.eval()
        with context():
            sequences, masks = engine.generate_batch(prompt_tokens, num_samples=samples, max_tokens=max_tokens,
                                                     temperature=1.0, top_k=50, seed=1)
        torch.cuda.synchronize()
        if record:
            phases["generate"] = torch.cuda.max_memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        ids = torch.tensor(sequences, dtype=torch.long, device="cuda")
        mask_ids = torch.tensor(masks, dtype=torch.long, device="cuda")
        inputs, targets = ids[:, :-1], ids[:, 1:].clone()
        targets[mask_ids[:, 1:] == 0] = -1
        advantages = torch.randn(samples, device="cuda")
        model.train()
        with context():
            logp = -model(inputs, targets, loss_reduction="none").view_as(inputs)
        loss = -(logp * advantages.unsqueeze(-1)).sum() / (targets >= 0).sum().clamp(min=1)
        loss.backward()
        del logp, loss
        if record:
            phases["train"] = torch.cuda.max_memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        for opt in optimizers:
            opt.step()
        model.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if record:
            phases["optimizer"] = torch.cuda.max_memory_allocated()
        return len(sequences[0])

    step(False)
    base = torch.cuda.memory_allocated()
    if snapshot:
        torch.cuda.memory._record_memory_history(max_entries=400000)
    length = step(True)
    if snapshot:
        torch.cuda.memory._dump_snapshot(snapshot)
        torch.cuda.memory._record_memory_history(enabled=None)
    row = dict(label=label, kind="rl", depth=depth, vocab=vocab, num_samples=samples, prompt=prompt,
               max_tokens=max_tokens, sequence_length=length, optimizer="muon", autocast=uses_autocast,
               params=sum(p.numel() for p in model.parameters()), base=base, phase_peaks=phases,
               peak_alloc=max(phases.values()))
    del model, optimizers, engine
    return row


def load_nanochat(folder):
    sys.path.insert(0, folder)
    # engine.py imports checkpoint_manager for its __main__ only (loading a trained model).
    sys.modules["nanochat.checkpoint_manager"] = types.SimpleNamespace(load_model=None)
    import nanochat.gpt as gpt
    import nanochat.engine as engine
    source = open(os.path.join(folder, "nanochat", "gpt.py")).read()
    return gpt, engine, source


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nanochat", required=True, help="folder holding nanochat/gpt.py (a checkout)")
    parser.add_argument("--commit", required=True, help="the checkout's commit, written into the rows")
    parser.add_argument("--out", required=True)
    parser.add_argument("--snapshots", default="", help="rows (indices, comma-separated) whose measured step is "
                        "written as a memory snapshot, or 'all'")
    parser.add_argument("--only", default="", help="measure only rows whose label contains this")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    gpt, engine, source = load_nanochat(args.nanochat)
    uses_autocast = autocast_for(source)
    rows = []
    path = os.path.join(args.out, "measured_nanochat.json")
    for index, row in enumerate(ROWS + RL_ROWS):
        if args.only and args.only not in row[0]:
            continue
        wanted = args.snapshots == "all" or str(index) in args.snapshots.split(",")
        snapshot = os.path.join(args.out, f"nanochat_{args.commit}_{index}.pickle") if wanted else None
        try:
            if row in ROWS:
                measured = measure_train(gpt, uses_autocast, *row, snapshot)
            else:
                measured = measure_rl(gpt, engine, uses_autocast, *row, snapshot)
        except torch.cuda.OutOfMemoryError as error:
            measured = dict(label=row[0], error=str(error)[:200])
        measured["commit"] = args.commit
        measured["device"] = torch.cuda.get_device_name()
        measured["torch"] = torch.__version__
        rows.append(measured)
        print(json.dumps(measured), flush=True)
        with open(path, "w") as out:
            json.dump(dict(rows=rows), out, indent=1)


if __name__ == "__main__":
    main()
