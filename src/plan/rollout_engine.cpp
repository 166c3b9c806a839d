// SPDX-License-Identifier: MIT
// The memory a vLLM or SGLang rollout engine reserves on the trainer's GPU, from each engine's
// sizing code as published (the files and commits are named at each formula; docs/plan.md).

#include "memory_terms.hpp"
#include "plan_refusal.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace rlmem {

namespace {

constexpr double gib = 1024.0 * 1024.0 * 1024.0;

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

double in_gib(double bytes) { return std::round(bytes / gib * 100) / 100; }

std::uint64_t rollout_rows(const plan_knobs& knobs) {
  return knobs.phase == plan_phase::generate ? knobs.batch : knobs.prompts * knobs.group / knobs.gpus;
}

// The forward of `tokens` tokens without gradients at its largest layer (the MLP's
// intermediates), as the planner's no-grad pass derives it: an estimate, not the engine's
// kernels (fused and paged attention keep less; the number is not measured on either engine).
double forward_activation(const model_architecture& model, const plan_knobs& knobs, std::uint64_t tokens) {
  return plan_detail::no_grad_layer_per_token(model, knobs) * static_cast<double>(tokens);
}

// vLLM V1's profile run (vllm/v1/worker/gpu_model_runner.py: profile_run): a dummy forward of
// max_num_batched_tokens tokens, then the sampler over min(max_num_seqs, max_num_batched_tokens)
// rows: their logits in bf16, the fp32 copy the sampler works on and its softmax (estimated).
double vllm_profile_peak(const model_architecture& model, const plan_knobs& knobs) {
  const rollout_engine_knobs& engine = knobs.engine;
  const double forward = forward_activation(model, knobs, engine.max_num_batched_tokens);
  const auto sampler_rows = static_cast<double>(std::min(engine.max_num_seqs, engine.max_num_batched_tokens));
  const double hidden_states = 2.0 * static_cast<double>(model.hidden_size * engine.max_num_batched_tokens);
  const double sampler = hidden_states + sampler_rows * static_cast<double>(model.vocab_size) * (2 + 4 + 4);
  return std::max(forward, sampler);
}

// vLLM V1 at 35d5cda (vllm/v1/worker/gpu_worker.py: init_device, determine_available_memory;
// vllm/v1/core/kv_cache_utils.py at 001cabc: _check_enough_kv_cache_memory).
void vllm_budget(const model_architecture& model, const plan_knobs& knobs, engine_budget& budget) {
  const rollout_engine_knobs& engine = knobs.engine;
  // requested_memory = init_snapshot.total_memory * gpu_memory_utilization; the worker raises
  // if the memory free at init is less.
  budget.requested_bytes = static_cast<std::uint64_t>(static_cast<double>(budget.device_bytes) * engine.gpu_memory_utilization);
  budget.activation_bytes = static_cast<std::uint64_t>(std::llround(vllm_profile_peak(model, knobs)));
  budget.max_model_len = engine.max_model_len != 0 ? engine.max_model_len : budget.sequence_tokens;
  if (budget.free_at_init_bytes < budget.requested_bytes) {
    budget.refusal = fmt::format(
        "vLLM refuses to start: free memory on device ({}/{} GiB) on startup is less than desired GPU memory utilization ({}, "
        "{} GiB){}; lower --gpu-memory-utilization or what the trainer holds at init",
        in_gib(static_cast<double>(budget.free_at_init_bytes)), in_gib(static_cast<double>(budget.device_bytes)),
        engine.gpu_memory_utilization, in_gib(static_cast<double>(budget.requested_bytes)),
        budget.trainer_at_init_bytes > 0 ? fmt::format(" (the trainer holds {:.2f} GiB then)", static_cast<double>(budget.trainer_at_init_bytes) / gib) : "");
    return;
  }
  // available_kv_cache_memory = requested_memory - non_kv_cache_memory (weights + the profile
  // run's torch peak increase + non-torch increase; NCCL is none at one GPU per engine). CUDA
  // graphs are captured after the KV cache is allocated, outside this budget: not estimated here.
  budget.kv_bytes = static_cast<std::int64_t>(budget.requested_bytes) - static_cast<std::int64_t>(budget.weights_bytes) -
                    static_cast<std::int64_t>(budget.activation_bytes);
  if (budget.kv_bytes <= 0) {
    budget.refusal = fmt::format(
        "vLLM refuses to start: no available memory for the cache blocks (its budget {:.2f} GiB is below the weights {:.2f} GiB + "
        "the profile run's peak {:.2f} GiB, estimated); increase --gpu-memory-utilization",
        static_cast<double>(budget.requested_bytes) / gib, static_cast<double>(budget.weights_bytes) / gib,
        static_cast<double>(budget.activation_bytes) / gib);
    return;
  }
  const vllm_kv_cache cache = vllm_kv_cache_of(model, budget.kv_bytes, engine.block_size, budget.max_model_len);
  budget.block_bytes = cache.page_bytes * model.num_layers;
  budget.blocks = cache.blocks;
  budget.kv_tokens = cache.tokens;
  budget.max_concurrency = cache.max_concurrency;
  // One request of max_model_len needs cdiv(max_model_len, block_size) blocks of every layer.
  const std::uint64_t needed = ceil_div(budget.max_model_len, engine.block_size) * budget.block_bytes;
  if (needed > static_cast<std::uint64_t>(budget.kv_bytes)) {
    budget.refusal = fmt::format(
        "vLLM refuses to start: to serve at least one request with the model's max seq len ({}), ({:.2f} GiB KV cache is "
        "needed, which is larger than the available KV cache memory ({:.2f} GiB). Based on the available memory, the estimated "
        "maximum model length is {}; increase --gpu-memory-utilization or decrease --max-model-len",
        budget.max_model_len, static_cast<double>(needed) / gib, static_cast<double>(budget.kv_bytes) / gib,
        std::min(cache.tokens, budget.max_model_len));
    return;
  }
  const std::uint64_t blocks_per_sequence = ceil_div(budget.sequence_tokens, engine.block_size);
  budget.concurrent_sequences = std::min(budget.blocks / blocks_per_sequence, engine.max_num_seqs);
  budget.reserved_bytes = budget.weights_bytes + static_cast<std::uint64_t>(budget.kv_bytes) + budget.activation_bytes;
  const std::uint64_t left_free = budget.free_at_init_bytes - budget.requested_bytes;
  if (budget.graph_bytes > left_free) {
    budget.warning = fmt::format(
        "vLLM captures its CUDA graphs ({:.2f} GiB as given) outside its budget, and the card has {:.2f} GiB beyond it: expect "
        "an OOM while capturing; lower --gpu-memory-utilization",
        static_cast<double>(budget.graph_bytes) / gib, static_cast<double>(left_free) / gib);
  }
}

// SGLang at 6fde4f6 (python/sglang/srt/model_executor/pool_configurator.py:
// profile_available_bytes, DefaultPoolConfigurator._compute_cell_size; MemoryPoolConfig's check).
// total_gpu_memory is the memory free after the distributed init, before the weights; the pool
// is what is free after the weights less total_gpu_memory x (1 - mem_fraction_static).
void sglang_budget(const model_architecture& model, const plan_knobs& knobs, engine_budget& budget) {
  const rollout_engine_knobs& engine = knobs.engine;
  const auto free_at_init = static_cast<double>(budget.free_at_init_bytes);
  budget.requested_bytes = static_cast<std::uint64_t>(free_at_init * engine.mem_fraction_static);
  budget.activation_bytes = static_cast<std::uint64_t>(std::llround(forward_activation(model, knobs, engine.chunked_prefill_size)));
  const double free_after_weights = free_at_init - static_cast<double>(budget.weights_bytes);
  budget.kv_bytes = static_cast<std::int64_t>(free_after_weights - free_at_init * (1 - engine.mem_fraction_static));
  // max_total_num_tokens = available_bytes // cell_size, page size 1.
  budget.kv_tokens = budget.kv_bytes > 0 ? static_cast<std::uint64_t>(budget.kv_bytes) / budget.bytes_per_token : 0;
  if (budget.kv_tokens == 0) {
    budget.refusal = fmt::format(
        "SGLang refuses to start: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
        "mem_fraction_static={} (of {:.2f} GiB free at init{}, the weights take {:.2f} GiB)",
        engine.mem_fraction_static, free_at_init / gib,
        budget.trainer_at_init_bytes > 0 ? fmt::format(" with the trainer's {:.2f} GiB resident", static_cast<double>(budget.trainer_at_init_bytes) / gib) : "",
        static_cast<double>(budget.weights_bytes) / gib);
    return;
  }
  budget.concurrent_sequences = budget.kv_tokens / budget.sequence_tokens;
  budget.reserved_bytes = budget.weights_bytes + static_cast<std::uint64_t>(budget.kv_bytes) + budget.activation_bytes;
  const double rest = free_at_init * (1 - engine.mem_fraction_static);
  if (static_cast<double>(budget.activation_bytes + budget.graph_bytes) > rest) {
    budget.warning = fmt::format(
        "SGLang leaves {:.2f} GiB outside --mem-fraction-static for activations and CUDA graphs; a prefill chunk of {} tokens "
        "needs about {:.2f} GiB (estimated){}: expect an OOM at the first long prefill; lower --mem-fraction-static or "
        "--chunked-prefill-size",
        rest / gib, engine.chunked_prefill_size, static_cast<double>(budget.activation_bytes) / gib,
        budget.graph_bytes > 0 ? fmt::format(" and the graphs {:.2f} GiB", static_cast<double>(budget.graph_bytes) / gib) : "");
  }
}

}  // namespace

vllm_kv_cache vllm_kv_cache_of(const model_architecture& model, std::int64_t available_bytes, std::uint64_t block_size,
                               std::uint64_t max_model_len) {
  vllm_kv_cache cache;
  // FullAttentionSpec.page_size_bytes: 2 (k and v) x block_size x num_kv_heads x head_size x dtype bytes.
  cache.page_bytes = 2 * block_size * model.num_kv_heads * model.head_dim * 2;
  // get_num_blocks: int(available_memory // page_size // num_layers), at least 0.
  cache.blocks = available_bytes > 0 ? static_cast<std::uint64_t>(available_bytes) / cache.page_bytes / model.num_layers : 0;
  cache.tokens = cache.blocks * block_size;
  // get_max_concurrency_for_kv_cache_config: num_blocks / cdiv(max_model_len, block_size).
  cache.max_concurrency = static_cast<double>(cache.blocks) / static_cast<double>(ceil_div(max_model_len, block_size));
  return cache;
}

result<void, plan_errc> validate_engine_knobs(const plan_knobs& knobs) {
  using detail::refuse;
  const rollout_engine_knobs& engine = knobs.engine;
  if (engine.rollout == rollout_kind::hf) return {};
  if (knobs.phase == plan_phase::train) {
    return refuse(plan_errc::knob_conflict, "--rollout applies to --phase generate and grpo-step: train generates nothing");
  }
  if (engine.device_bytes == 0) {
    return refuse(plan_errc::missing_knob, fmt::format("--rollout {} sizes its pool from the card's memory: give --card CARD (or --fit CARD)",
                                                       to_string(engine.rollout)));
  }
  if (knobs.kv_cache != kv_cache_kind::grow || knobs.kv_rows != 0 || knobs.kv_rows_follow != kv_rows_kind::fixed || knobs.kv_len != 0) {
    return refuse(plan_errc::knob_conflict, "--kv-cache, --kv-rows and --kv-len shape transformers' or nanochat's cache; an engine's KV is its pool");
  }
  if (engine.rollout == rollout_kind::vllm) {
    if (!(engine.gpu_memory_utilization > 0 && engine.gpu_memory_utilization <= 1)) {
      return refuse(plan_errc::invalid_knob, "--gpu-memory-utilization must be in (0, 1]: vLLM's share of the card's total memory");
    }
    // vLLM's CacheConfig.block_size choices on CUDA.
    if (engine.block_size != 1 && engine.block_size != 8 && engine.block_size != 16 && engine.block_size != 32 &&
        engine.block_size != 64 && engine.block_size != 128) {
      return refuse(plan_errc::invalid_knob, fmt::format("--block-size {}: vLLM takes 1, 8, 16, 32, 64 or 128", engine.block_size));
    }
    if (engine.max_num_seqs == 0 || engine.max_num_batched_tokens == 0) {
      return refuse(plan_errc::invalid_knob, "--max-num-seqs and --max-num-batched-tokens must be at least 1");
    }
    if (engine.max_model_len != 0 && engine.max_model_len < knobs.prompt_len + knobs.new_tokens) {
      return refuse(plan_errc::knob_conflict,
                    fmt::format("--max-model-len {} is shorter than a row of the run ({} prompt + {} new tokens): vLLM rejects such requests",
                                engine.max_model_len, knobs.prompt_len, knobs.new_tokens));
    }
  } else {
    if (engine.mem_fraction_static == 0) {
      return refuse(plan_errc::missing_knob,
                    "--rollout sglang needs --mem-fraction-static (SGLang derives its default from the card and its CUDA graph "
                    "batch sizes; give the value your launch logs)");
    }
    if (!(engine.mem_fraction_static > 0 && engine.mem_fraction_static < 1)) {
      return refuse(plan_errc::invalid_knob, "--mem-fraction-static must be in (0, 1): SGLang's share of the memory free at init");
    }
    if (engine.chunked_prefill_size == 0) return refuse(plan_errc::invalid_knob, "--chunked-prefill-size must be at least 1");
  }
  if (engine.sleep_level > 2) {
    return refuse(plan_errc::invalid_knob, "--sleep-level must be 0 (awake), 1 (weights to host, KV dropped) or 2 (both dropped)");
  }
  return {};
}

engine_budget plan_rollout_engine(const model_architecture& model, const plan_knobs& knobs, std::uint64_t trainer_at_init) {
  engine_budget budget;
  budget.rollout = knobs.engine.rollout;
  if (budget.rollout == rollout_kind::hf) return budget;
  budget.device_bytes = knobs.engine.device_bytes;
  budget.trainer_at_init_bytes = trainer_at_init;
  const std::uint64_t taken = plan_detail::cuda_context + trainer_at_init;
  budget.free_at_init_bytes = budget.device_bytes > taken ? budget.device_bytes - taken : 0;
  // The engine loads its own copy of the policy in bf16.
  budget.weights_bytes = count_parameters(model).total * 2;
  budget.graph_bytes = knobs.engine.graph_bytes;
  budget.bytes_per_token = static_cast<std::uint64_t>(plan_detail::kv_per_token(model));
  budget.sequence_tokens = knobs.prompt_len + knobs.new_tokens;
  budget.rollout_rows = rollout_rows(knobs);
  if (budget.rollout == rollout_kind::vllm) {
    vllm_budget(model, knobs, budget);
  } else {
    sglang_budget(model, knobs, budget);
  }
  if (!budget.refusal.empty()) return budget;
  // Asleep, vLLM's CuMemAllocator (and SGLang's torch_memory_saver) unmap the weights (level 1:
  // backed up to pinned host memory) and the KV pool; the graph pool, NCCL and the context stay.
  switch (knobs.engine.sleep_level) {
    case 0: budget.asleep_bytes = budget.weights_bytes + static_cast<std::uint64_t>(budget.kv_bytes); break;
    case 1: budget.host_bytes = budget.weights_bytes; break;
    default: break;
  }
  budget.asleep_bytes += budget.graph_bytes;
  return budget;
}

}  // namespace rlmem
