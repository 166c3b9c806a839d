"""Shared parts of the GPU scripts in tools/monitor/: a Qwen2.5-0.5B-shaped policy made from a
config (random weights: no download), one GRPO-like step, timing helpers, and the recorder of raw
memory_stats() series that the Python tests replay (tests/python/fakes.py reads the format).

Nothing here runs at import: torch and transformers are imported inside the functions, so
`python3 tools/monitor/grpo_loop.py --help` works anywhere.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERIES_SCHEMA = "rlmem.stats_series/1"
SERIES_KEYS = ("allocated_bytes.all.current", "reserved_bytes.all.current", "active_bytes.all.current",
               "inactive_split_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.peak",
               "allocation.all.current", "num_alloc_retries", "num_ooms")


def import_rlmem():
    """rlmem from PYTHONPATH, else from this checkout's python/."""
    try:
        import rlmem
    except ImportError:
        sys.path.insert(0, str(ROOT / "python"))
        import rlmem
    return rlmem


# Qwen2.5-0.5B's shape (config.json of Qwen/Qwen2.5-0.5B), and a tiny one for quick checks.
MODELS = {
    "qwen2.5-0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768,
                         rope_theta=1_000_000.0, rms_norm_eps=1e-6, tie_word_embeddings=True),
    "tiny": dict(hidden_size=256, intermediate_size=704, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=32000, max_position_embeddings=4096, tie_word_embeddings=True),
}


def make_model(name: str, device, seed: int = 0):
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    config = Qwen2Config(**MODELS[name])
    torch.manual_seed(seed)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    with torch.device(device):
        try:
            model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
        except TypeError:  # transformers before 4.56 calls it torch_dtype
            model = AutoModelForCausalLM.from_config(config, torch_dtype=dtype, attn_implementation="sdpa")
    model.generation_config.pad_token_id = 0
    return model


def logprobs_of(model, sequences, n_prompt: int, kept: list | None = None):
    """Per-token log-probs of the response (fp32), as GRPO trainers compute them. With `kept`
    (the injected leak) the last token's fp32 logits are appended to it "for logging"."""
    import torch

    logits = model(sequences).logits[:, n_prompt - 1:-1].float()
    if kept is not None:
        kept.append(logits[:, -1].detach().clone())  # the leak: one row of logits per sequence, every step
    return torch.log_softmax(logits, dim=-1).gather(-1, sequences[:, n_prompt:].unsqueeze(-1)).squeeze(-1)


class GRPO:
    """A policy, a frozen reference, AdamW, and one GRPO step: sample G responses per prompt of a
    length drawn each step, reference and policy log-probs, the clipped-ratio loss with a KL term,
    backward, optimizer step. Lengths come from a seeded RNG, so two runs see the same steps."""

    def __init__(self, model: str, device, prompts: int, group: int, prompt_len: int, new_tokens: list[int],
                 seed: int = 1, reference: bool = True):
        import torch

        self.torch = torch
        self.device = device
        self.policy = make_model(model, device, seed=0)
        self.reference = make_model(model, device, seed=0) if reference else None
        if self.reference is not None:
            self.reference.requires_grad_(False)
        self.optimizer = torch.optim.AdamW(self.policy.parameters(), lr=1e-6)
        self.prompts, self.group, self.prompt_len = prompts, group, prompt_len
        self.new_tokens = new_tokens
        self.vocab = self.policy.config.vocab_size
        self.rng = random.Random(seed)
        self.kept: list = []

    def step(self, leak: bool = False) -> dict:
        torch = self.torch
        new_tokens = self.rng.choice(self.new_tokens)
        generator = torch.Generator(device=self.device).manual_seed(self.rng.randrange(2**31))
        prompt = torch.randint(1, self.vocab, (self.prompts, self.prompt_len), device=self.device, generator=generator)
        prompt = prompt.repeat_interleave(self.group, dim=0)
        with torch.no_grad():
            # min_new_tokens = max_new_tokens: every sample has exactly the drawn length
            sequences = self.policy.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=True,
                                             max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                             return_dict_in_generate=True).sequences
        rewards = torch.randn(self.prompts, self.group, device=self.device, generator=generator)
        advantages = ((rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-4)).flatten()
        with torch.no_grad():
            old = logprobs_of(self.policy, sequences, self.prompt_len)
            ref = logprobs_of(self.reference, sequences, self.prompt_len) if self.reference is not None else old
        new = logprobs_of(self.policy, sequences, self.prompt_len, self.kept if leak else None)
        ratio = torch.exp(new - old)
        clipped = torch.clamp(ratio, 0.8, 1.2)
        kl = torch.exp(ref - new) - (ref - new) - 1
        loss = -(torch.min(ratio * advantages[:, None], clipped * advantages[:, None])).mean() + 0.04 * kl.mean()
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return {"new_tokens": new_tokens, "sequences": int(sequences.shape[0]), "loss": float(loss.detach())}


def synchronize(device) -> None:
    """Timing only (the harness's, never the monitor's): wait for the device."""
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def summary_of(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    return {"n": len(values), "median": statistics.median(ordered), "mean": statistics.fmean(ordered),
            "min": ordered[0], "max": ordered[-1]}


def time_calls(function, count: int) -> dict:
    """Seconds per call of `function` over `count` calls (median and mean of single-call timings)."""
    timings = []
    for _ in range(count):
        started = time.perf_counter()
        function()
        timings.append(time.perf_counter() - started)
    return summary_of(timings)


class StatsSeries:
    """Records torch.cuda.memory_stats() (the keys StepMonitor reads) and mem_get_info() at each
    step end into the series format the tests replay (tests/python/fakes.py). Read it just
    before StepMonitor.step() so both see the same figures."""

    def __init__(self, description: str, peak_is_per_step: bool, leak_at: int | None,
                 expected_alerts: list[str] | None):
        import torch

        self.torch = torch
        self.data = {"schema": SERIES_SCHEMA, "description": description, "torch": torch.__version__,
                     "device_name": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
                     "leak_at": leak_at,
                     "peak_is_per_step": peak_is_per_step, "expected_alerts": expected_alerts, "steps": []}
        self._last = None

    def record(self, step: int) -> None:
        stats = self.torch.cuda.memory_stats()
        free, total = self.torch.cuda.mem_get_info()
        now = time.perf_counter()
        entry = {"step": step}
        entry.update({key: int(stats.get(key, 0)) for key in SERIES_KEYS})
        entry["mem_get_info"] = [int(free), int(total)]
        entry["step_seconds"] = None if self._last is None else round(now - self._last, 4)
        self._last = now
        self.data["steps"].append(entry)

    def write(self, path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(self.data, indent=1) + "\n", encoding="utf-8")


def environment() -> dict:
    import torch

    info = {"torch": torch.__version__, "python": sys.version.split()[0],
            "PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")}
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:
        pass
    if torch.cuda.is_available():
        info["device"] = torch.cuda.get_device_name()
        info["device_total_bytes"] = torch.cuda.mem_get_info()[1]
    return info
