// SPDX-License-Identifier: MIT
// A verl config onto plan's knobs. Names and defaults from volcengine/verl at b178a3cd56f5
// (2026-01-29): verl/trainer/config/_generated_ppo_trainer.yaml (ppo_trainer.yaml flattened) and
// verl/trainer/ppo/ray_trainer.py (the old log-probs pass, skipped only in bypass mode).

#include "trainer_mappings.hpp"

#include <fmt/format.h>

namespace rlmem::detail {

namespace {

constexpr const char* actor = "actor_rollout_ref.actor.";
constexpr const char* rollout = "actor_rollout_ref.rollout.";
constexpr const char* model = "actor_rollout_ref.model.";

std::string key(const char* prefix, const char* name) { return std::string(prefix) + name; }

// verl's engines (vLLM, SGLang) and what configures them, as verl passes them at b178a3c:
// vllm_rollout/vllm_async_server.py (LLM args gpu_memory_utilization, max_num_seqs,
// max_num_batched_tokens, max_model_len, enforce_eager; the hybrid engine's sleep is
// collective_rpc("sleep", level=2) when free_cache_engine) and sglang_rollout/async_sglang_server.py
// (mem_fraction_static = gpu_memory_utilization, disable_cuda_graph = enforce_eager,
// max_running_requests = max_num_seqs; asleep it releases both the KV cache and the weights).
// vllm_rollout.py picks vLLM's sleep level.
bool map_rollout(settings_reader& read) {
  const setting name = read.get(key(rollout, "name"), "???");
  if (name.value == "hf") {
    read.map(name, "--kv-cache", "grow", "transformers' generate");
    return true;
  }
  if (name.value != "vllm" && name.value != "sglang") {
    read.ignore(name, name.value == "???" ? "verl requires it (vllm or sglang); the rollout planned is transformers' generate"
                                          : "only vLLM and SGLang rollouts are modelled: the rollout planned is transformers' generate");
    return true;
  }
  const bool vllm = name.value == "vllm";
  const setting utilization = read.get(key(rollout, "gpu_memory_utilization"), 0.5);
  const setting sequences = read.get(key(rollout, "max_num_seqs"), 256);
  const setting batched = read.get(key(rollout, "max_num_batched_tokens"), 8192);
  const setting length = read.get(key(rollout, "max_model_len"));
  const setting free_cache = read.get(key(rollout, "free_cache_engine"), true);
  const setting eager = read.get(key(rollout, "enforce_eager"), false);
  const setting parallel = read.get(key(rollout, "tensor_model_parallel_size"), 2);
  for (const setting* value : {&utilization, &sequences, &batched, &length, &free_cache, &eager, &parallel}) {
    if (value->interpolated) return read.fail(fmt::format("{} is an OmegaConf interpolation ({}); give its value", value->key, value_text(value->value)));
  }
  const auto fraction = read.number(utilization);
  const auto sleeps = read.flag(free_cache);
  const auto no_graphs = read.flag(eager);
  const auto tensor_parallel = read.count(parallel, read.limits().max_gpus);
  if (read.failed()) return false;
  if (!(*fraction > 0 && *fraction <= 1)) return read.fail(fmt::format("{} = {} must be in (0, 1]", utilization.key, *fraction));
  read.map(name, "--rollout", vllm ? "vllm" : "sglang", "verl's hybrid engine: on the actor's GPUs");
  if (vllm) {
    read.map(utilization, "--gpu-memory-utilization", value_text(utilization.value));
    const auto seqs = read.count(sequences, read.limits().max_rows);
    const auto tokens = read.count(batched, read.limits().max_rows * read.limits().max_length);
    if (!seqs || !tokens) return false;
    read.map(sequences, "--max-num-seqs", std::to_string(*seqs));
    read.map(batched, "--max-num-batched-tokens", std::to_string(*tokens));
    if (length.set()) {
      const auto model_len = read.count(length, read.limits().max_length);
      if (!model_len) return false;
      read.map(length, "--max-model-len", std::to_string(*model_len));
    }
  } else {
    read.map(utilization, "--mem-fraction-static", value_text(utilization.value), "verl passes it as SGLang's mem_fraction_static");
    if (sequences.in_file) read.ignore(sequences, "SGLang's max_running_requests does not size its pool: the fraction does");
    if (batched.in_file) read.ignore(batched, "verl does not pass it to SGLang");
    if (length.set()) read.ignore(length, "SGLang's context length does not size its pool: the fraction does");
  }
  // vllm_rollout.py: the hybrid engine sleeps at level 2 (vLLM >= 0.8.5), at level 1 (weights
  // backed up in host memory) with layered_summon.
  const setting layered = read.get(key(rollout, "layered_summon"), false);
  const auto layers_summoned = read.flag(layered);
  if (!layers_summoned) return false;
  if (*sleeps && vllm && *layers_summoned) {
    read.map(layered, "--sleep-level", "1", "free_cache_engine with layered_summon: verl sleeps vLLM at level 1, weights kept in host memory");
  } else {
    read.map(free_cache, "--sleep-level", *sleeps ? "2" : "0",
             *sleeps ? "the hybrid engine drops its weights and KV between rollouts (level 2)" : "the engine stays awake");
  }
  // With enforce_eager there are no CUDA graphs: the plan's graph pool (0 unless given) is exact.
  if (!*no_graphs) read.ignore(eager, "the engine captures CUDA graphs, whose pool is not estimated: give --engine-graph-memory from its log");
  if (*tensor_parallel > 1) {
    read.ignore(parallel, "an engine split over GPUs is not modelled: planned as one engine per GPU (its reservation per GPU is the "
                          "same; its weights and KV tokens per GPU differ)");
  }
  return true;
}

// FSDP (fsdp, fsdp2) shards the actor over every GPU; on one GPU it divides nothing unless it
// streams the weights from the CPU (param_offload).
bool map_strategy(settings_reader& read, std::uint64_t gpus) {
  const setting strategy = read.get(key(actor, "strategy"), "fsdp");
  const setting params = read.get(key(actor, "fsdp_config.param_offload"), false);
  const setting optimizer = read.get(key(actor, "fsdp_config.optimizer_offload"), false);
  const setting dtype = read.get(key(actor, "fsdp_config.model_dtype"), "fp32");
  const auto name = read.text(strategy);
  const auto offload_params = read.flag(params);
  const auto offload_optimizer = read.flag(optimizer);
  const auto weights = read.text(dtype);
  if (read.failed()) return false;
  if (*name == "fsdp" || *name == "fsdp2") {
    if (gpus > 1 || *offload_params) read.map(strategy, "--shard", "fsdp", "FULL_SHARD over every GPU");
    else read.map(strategy, "--shard", "none", "one GPU: FSDP divides nothing");
  } else {
    read.ignore(strategy, "only FSDP is modelled (megatron's tensor and pipeline parallelism are not): planned as one data-parallel shard");
  }
  if (*offload_params) {
    read.map(params, "--offload", "all", *offload_optimizer ? "" : "plan offloads the optimizer state with the weights");
  } else if (*offload_optimizer) {
    read.map(optimizer, "--offload", "optimizer");
  }
  if (*weights == "fp32" || *weights == "float32") read.map(dtype, "--precision", "fp32-master", "fp32 master weights, bf16 compute");
  else if (*weights == "bf16" || *weights == "bfloat16") read.map(dtype, "--precision", "bf16");
  else return read.fail(fmt::format("{} must be fp32 or bf16, not {}", dtype.key, weights->substr(0, 40)));
  return true;
}

// The micro-batch: rows per GPU, or with use_dynamic_bsz the rows of full length that fill
// ppo_max_token_len_per_gpu tokens (the longest samples set the peak).
bool map_micro_batch(settings_reader& read, std::uint64_t prompt_len, std::uint64_t new_tokens, std::uint64_t gpus) {
  const setting dynamic = read.get(key(actor, "use_dynamic_bsz"), false);
  const auto packs_tokens = read.flag(dynamic);
  if (!packs_tokens) return false;
  const setting per_gpu = read.get(key(actor, "ppo_micro_batch_size_per_gpu"));
  if (*packs_tokens) {
    const setting tokens = read.get(key(actor, "ppo_max_token_len_per_gpu"), 16384);
    const auto budget = read.count(tokens, read.limits().max_rows * read.limits().max_length);
    if (!budget) return false;
    const std::uint64_t rows = std::max<std::uint64_t>(1, *budget / (prompt_len + new_tokens));
    read.map(tokens, "--micro-batch", std::to_string(rows),
             fmt::format("use_dynamic_bsz: {} tokens / ({} + {}) per full-length row", *budget, prompt_len, new_tokens));
    if (per_gpu.in_file) read.ignore(per_gpu, "use_dynamic_bsz packs micro-batches by tokens instead");
    return true;
  }
  if (per_gpu.set()) {
    const auto rows = read.count(per_gpu, read.limits().max_rows);
    if (!rows) return false;
    read.map(per_gpu, "--micro-batch", std::to_string(*rows));
    return true;
  }
  // The deprecated global form, divided over the GPUs as verl divides it.
  if (const setting global = read.get(key(actor, "ppo_micro_batch_size")); global.set()) {
    const auto rows = read.count(global, read.limits().max_rows * read.limits().max_gpus);
    if (!rows) return false;
    read.map(global, "--micro-batch", std::to_string(std::max<std::uint64_t>(1, *rows / gpus)), fmt::format("{} over {} GPU(s)", *rows, gpus));
  }
  return true;
}

bool map_model(settings_reader& read) {
  if (const setting path = read.get(key(model, "path")); path.set()) {
    const auto name = read.text(path);
    if (!name) return false;
    read.map(path, "--model", *name);
  }
  const setting checkpointing = read.get(key(model, "enable_gradient_checkpointing"), true);
  const setting rank = read.get(key(model, "lora_rank"), 0);
  const setting fused = read.get(key(model, "use_fused_kernels"), false);
  const auto grad_ckpt = read.flag(checkpointing);
  const auto lora_rank = read.count(rank, 1u << 16, 0);
  const auto fused_kernels = read.flag(fused);
  if (read.failed()) return false;
  read.map(checkpointing, "--grad-ckpt", *grad_ckpt ? "on" : "off");
  if (*lora_rank > 0) {
    read.map(rank, "--lora-r", std::to_string(*lora_rank));
    const setting modules = read.get(key(model, "target_modules"), "all-linear");
    std::string unknown;
    const std::string targets = lora_targets_value(modules.value, unknown);
    if (!targets.empty()) read.map(modules, "--lora-targets", targets);
    else read.ignore(modules, fmt::format("'{}' is not one of q_proj k_proj v_proj o_proj gate_proj up_proj down_proj: planned with all seven",
                                          unknown.substr(0, 40)));
  }
  read.map(fused, "--logprob-impl", *fused_kernels ? "fused" : "chunked",
           *fused_kernels ? "the head and the log-probs fused, no full logits" : "bf16 logits, flash-attn's cross-entropy");
  if (const setting padding = read.get(key(model, "use_remove_padding"), true); padding.value == true) {
    read.ignore(padding, "rows packed without padding: plan takes every row at full length, the longest the data allows");
  }
  if (const setting activations = read.get(key(model, "enable_activation_offload")); activations.value == true) {
    read.ignore(activations, "activation offload is not modelled: planned with the activations on the GPU");
  }
  return true;
}

}  // namespace

bool map_verl_config(settings_reader& read, const trainer_config_context& context, trainer_config_mapping& mapping) {
  mapping.defaults_from = "volcengine/verl b178a3c (verl/trainer/config/ppo_trainer.yaml)";
  const setting per_node = read.get("trainer.n_gpus_per_node", 8);
  const setting nodes = read.get("trainer.nnodes", 1);
  const setting prompts = read.get("data.train_batch_size", 1024);
  const setting samples = read.get(key(rollout, "n"), 1);
  const setting prompt_len = read.get("data.max_prompt_length", 512);
  const setting response_len = read.get("data.max_response_length", 512);
  const setting epochs = read.get(key(actor, "ppo_epochs"), 1);
  for (const setting* value : {&per_node, &nodes, &prompts, &samples, &prompt_len, &response_len, &epochs}) {
    if (value->interpolated) return read.fail(fmt::format("{} is an OmegaConf interpolation ({}); give its value", value->key, value_text(value->value)));
  }
  const auto gpus_per_node = read.count(per_node, read.limits().max_gpus);
  const auto node_count = read.count(nodes, read.limits().max_gpus);
  const auto prompt_count = read.count(prompts, read.limits().max_rows);
  const auto group = read.count(samples, read.limits().max_rows);
  const auto prompt_tokens = read.count(prompt_len, read.limits().max_length);
  const auto new_tokens = read.count(response_len, read.limits().max_length);
  const auto passes = read.count(epochs, 1024);
  if (read.failed()) return false;
  const std::uint64_t file_gpus = *gpus_per_node * *node_count;
  if (file_gpus > read.limits().max_gpus) {
    return read.fail(fmt::format("trainer.n_gpus_per_node x trainer.nnodes = {} GPUs is beyond {}", file_gpus, read.limits().max_gpus),
                     plan_errc::limit_exceeded);
  }
  const std::uint64_t gpus = context.gpus != 0 ? context.gpus : file_gpus;
  setting gpu_count = per_node;
  gpu_count.key = "trainer.n_gpus_per_node x trainer.nnodes";
  gpu_count.value = fmt::format("{} x {}", *gpus_per_node, *node_count);
  gpu_count.in_file = per_node.in_file || nodes.in_file;
  read.map(gpu_count, "--gpus", std::to_string(file_gpus));
  read.map(prompts, "--prompts", std::to_string(*prompt_count));
  read.map(samples, "--group", std::to_string(*group));
  read.map(prompt_len, "--prompt-len", std::to_string(*prompt_tokens));
  read.map(response_len, "--new-tokens", std::to_string(*new_tokens));
  read.map(epochs, "--epochs", std::to_string(*passes));
  if (!map_micro_batch(read, *prompt_tokens, *new_tokens, gpus) || !map_strategy(read, gpus) || !map_model(read)) return false;
  // ray_trainer.py: the actor scores the rollout again (old_log_prob) unless bypass_mode takes vLLM's.
  const setting bypass = read.get("algorithm.rollout_correction.bypass_mode", false);
  const auto bypassed = read.flag(bypass);
  const setting kl_loss = read.get(key(actor, "use_kl_loss"), false);
  const setting kl_reward = read.get("algorithm.use_kl_in_reward", false);
  const auto loss_kl = read.flag(kl_loss);
  const auto reward_kl = read.flag(kl_reward);
  const setting optimizer = read.get(key(actor, "optim.optimizer"), "AdamW");
  const auto optimizer_name = read.text(optimizer);
  if (read.failed()) return false;
  read.map(bypass, "--old-logprobs", *bypassed ? "off" : "on", *bypassed ? "bypass mode: vLLM's log-probs" : "the actor's compute_log_prob");
  // With LoRA, verl's reference is the actor with the adapter off (ref_in_actor): --ref-model's default.
  const setting& kl_source = *reward_kl && !*loss_kl ? kl_reward : kl_loss;
  read.map(kl_source, "--ref-model", *loss_kl || *reward_kl ? "on" : "off",
           *loss_kl || *reward_kl ? "a KL term: a reference pass" : "no KL term: no reference model");
  if (*optimizer_name == "AdamW" || *optimizer_name == "adamw") read.map(optimizer, "--optimizer", "adamw");
  else read.ignore(optimizer, "optimizer state other than AdamW's is not modelled: planned as AdamW");
  if (const setting mini = read.get(key(actor, "ppo_mini_batch_size")); mini.in_file) {
    read.ignore(mini, "optimizer steps per epoch: the gradients are resident either way, so the peak does not move");
  }
  if (const setting scoring = read.get(key(rollout, "log_prob_micro_batch_size_per_gpu")); scoring.set()) {
    read.ignore(scoring, "the old log-probs and reference passes are planned at --micro-batch rows");
  }
  if (const setting reference = read.get("actor_rollout_ref.ref.fsdp_config.param_offload"); reference.value == true) {
    read.ignore(reference, "the reference's own offload is not modelled: planned with the reference on the GPU");
  }
  if (const setting parallel = read.get(key(actor, "ulysses_sequence_parallel_size")); parallel.set() && parallel.value != 1) {
    read.ignore(parallel, "Ulysses sequence parallelism is not modelled: planned with whole sequences per GPU");
  }
  // A GAE advantage (verl's default) trains a critic beside the actor.
  const setting estimator = read.get("algorithm.adv_estimator", "gae");
  const setting critic = read.get("critic.enable");
  if (critic.value == true || (estimator.value == "gae" && critic.value != false)) {
    read.ignore(estimator, "the PPO critic (its weights, gradients and optimizer state) is not modelled: the plan is the actor's");
  }
  if (!map_rollout(read)) return false;
  return !read.failed();
}

}  // namespace rlmem::detail
