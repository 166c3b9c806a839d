// SPDX-License-Identifier: MIT
// TRL's GRPOConfig onto plan's knobs. Names and defaults from huggingface/trl at f2cd57710ae3
// (2026-07-24): trl/trainer/grpo_config.py, base_config.py, model_config.py, grpo_trainer.py,
// and transformers' TrainingArguments for per_device_train_batch_size (8) and
// gradient_accumulation_steps (1).

#include "trainer_mappings.hpp"

#include <fmt/format.h>

#include <array>
#include <string_view>

namespace rlmem::detail {

namespace {

using json = nlohmann::json;

// The generation batch, in prompts: TRL generates per_device_train_batch_size x processes x
// steps_per_generation completions at once (GRPOConfig.__post_init__), num_generations per prompt.
bool map_batches(settings_reader& read, const trainer_config_context& context, bool mapping_format_is_yaml, std::uint64_t& micro_batch,
                 std::uint64_t& steps_per_generation, std::uint64_t& accumulation) {
  const std::uint64_t gpus = context.gpus != 0 ? context.gpus : 1;
  const setting per_device = read.get("per_device_train_batch_size", 8);
  const setting accumulation_steps = read.get("gradient_accumulation_steps", 1);
  const setting generations = read.get("num_generations", 8);
  const setting generation_batch = read.get("generation_batch_size");
  const setting steps = read.get("steps_per_generation");
  const auto rows = read.count(per_device, read.limits().max_rows);
  const auto accumulated = read.count(accumulation_steps, read.limits().max_rows);
  const auto group = read.count(generations, read.limits().max_rows, 2);  // GRPO needs two completions per prompt
  if (read.failed()) return false;
  micro_batch = *rows;
  accumulation = *accumulated;
  read.map(per_device, "--micro-batch", std::to_string(micro_batch));
  read.map(generations, "--group", std::to_string(*group));
  const setting* source = &accumulation_steps;
  steps_per_generation = accumulation;
  std::uint64_t processes = gpus;
  if (generation_batch.set() && steps.set()) {
    // A recipe may not set both (TRL refuses it), but GRPOConfig.__post_init__ fills both in, so
    // the JSON TrainingArguments writes has both: they give the run's number of processes.
    if (mapping_format_is_yaml) return read.fail("generation_batch_size and steps_per_generation are both set; TRL refuses that (give one)");
    const auto total = read.count(generation_batch, read.limits().max_rows * read.limits().max_gpus);
    const auto counted = read.count(steps, read.limits().max_rows);
    if (!total || !counted) return false;
    if (*total % (micro_batch * *counted) != 0 || *total / (micro_batch * *counted) > read.limits().max_gpus) {
      return read.fail(fmt::format("generation_batch_size {} is not per_device_train_batch_size {} x processes x steps_per_generation {}",
                                   *total, micro_batch, *counted));
    }
    steps_per_generation = *counted;
    processes = context.gpus != 0 ? context.gpus : *total / (micro_batch * steps_per_generation);
    setting world;
    world.key = "generation_batch_size / (per_device_train_batch_size x steps_per_generation)";
    world.value = fmt::format("{} / ({} x {})", *total, micro_batch, steps_per_generation);
    world.in_file = true;
    read.map(world, "--gpus", std::to_string(*total / (micro_batch * steps_per_generation)), "the processes of the run that wrote the file");
    source = &steps;
  } else if (generation_batch.set()) {
    const auto total = read.count(generation_batch, read.limits().max_rows * read.limits().max_gpus);
    if (!total) return false;
    if (*total % (micro_batch * gpus) != 0) {
      return read.fail(fmt::format("generation_batch_size {} is not divisible by per_device_train_batch_size {} x {} GPU(s)", *total,
                                   micro_batch, gpus));
    }
    steps_per_generation = *total / (micro_batch * gpus);
    source = &generation_batch;
  } else if (steps.set()) {
    const auto counted = read.count(steps, read.limits().max_rows);
    if (!counted) return false;
    steps_per_generation = *counted;
    source = &steps;
  }
  const std::uint64_t completions = micro_batch * processes * steps_per_generation;
  if (completions % *group != 0) {
    return read.fail(fmt::format("the generation batch of {} completions (per_device_train_batch_size {} x {} GPU(s) x {} steps) "
                                 "is not divisible by num_generations {}",
                                 completions, micro_batch, processes, steps_per_generation, *group));
  }
  const bool processes_unknown = context.gpus == 0 && processes == gpus && !(generation_batch.set() && steps.set());
  read.map(*source, "--prompts", std::to_string(completions / *group),
           fmt::format("{} rows x {} GPU(s) x {} steps per generation / {} generations{}", micro_batch, processes, steps_per_generation,
                       *group, processes_unknown ? "; the GPUs are accelerate's processes, not the config's: give --gpus N" : ""));
  if (source != &accumulation_steps && accumulation_steps.in_file) {
    read.ignore(accumulation_steps, "optimizer steps per update: the gradients are resident either way, so the peak does not move");
  }
  return true;
}

// Weights' dtype: model_init_kwargs (the trainer's) before ModelConfig's dtype (`trl grpo`'s
// script passes it into model_init_kwargs); float32 unless set, in both. bf16 (default: not fp16)
// or fp16 is the autocast around the passes.
bool map_precision(settings_reader& read) {
  setting dtype;
  for (const char* key : {"model_init_kwargs.dtype", "model_init_kwargs.torch_dtype", "dtype", "torch_dtype"}) {
    dtype = read.get(key);
    if (dtype.set()) break;
  }
  if (!dtype.set()) dtype = read.get("model_init_kwargs.dtype", "float32");
  const setting bf16 = read.get("bf16");
  const setting fp16 = read.get("fp16", false);
  const auto name = read.text(dtype);
  const auto half = read.flag(fp16);
  const auto autocast = bf16.set() ? read.flag(bf16) : std::optional<bool>(!half.value_or(false));
  if (read.failed()) return false;
  if (*name == "float32") {
    read.map(dtype, "--precision", "fp32-master", "fp32 weights, gradients and AdamW state; the passes under autocast");
    if (!*autocast && !*half) {
      read.ignore(bf16, "fp32 passes without autocast are not modelled: planned with bf16 activations (fp32-master)");
    }
  } else if (*name == "bfloat16" || *name == "auto" || *name == "float16") {
    read.map(dtype, "--precision", "bf16",
             *name == "auto" ? "auto loads the checkpoint's dtype: bf16 for the models plan knows"
             : *name == "float16" ? "fp16 has bf16's element size"
                                  : "");
  } else {
    return read.fail(fmt::format("{} must be auto, bfloat16, float16 or float32, not {}", dtype.key, name->substr(0, 40)));
  }
  return true;
}

// `trl grpo`'s ModelConfig: use_peft, lora_r (16), lora_target_modules (peft's default for the
// architecture: q_proj and v_proj for Llama, Qwen, Mistral and Gemma), bitsandbytes loading.
bool map_peft(settings_reader& read) {
  const setting use_peft = read.get("use_peft", false);
  const auto peft = read.flag(use_peft);
  if (!peft) return false;
  const setting rank = read.get("lora_r", 16);
  if (!*peft) {
    if (rank.in_file) read.ignore(rank, "use_peft is false: full fine-tuning");
    return true;
  }
  const auto lora_rank = read.count(rank, 1u << 16);
  if (!lora_rank) return false;
  read.map(rank, "--lora-r", std::to_string(*lora_rank));
  const setting modules = read.get("lora_target_modules");
  if (!modules.set()) {
    read.map(read.get("lora_target_modules", nullptr), "--lora-targets", "q_proj,v_proj",
             "none given: peft's default for Llama, Qwen, Mistral and Gemma");
  } else {
    std::string unknown;
    const std::string targets = lora_targets_value(modules.value, unknown);
    if (!targets.empty()) read.map(modules, "--lora-targets", targets);
    else read.ignore(modules, fmt::format("'{}' is not one of q_proj k_proj v_proj o_proj gate_proj up_proj down_proj: planned with all seven",
                                          unknown.substr(0, 40)));
  }
  for (const char* key : {"load_in_4bit", "load_in_8bit"}) {
    const setting quantized = read.get(key, false);
    if (quantized.value.is_boolean() && quantized.value.get<bool>()) {
      read.ignore(quantized, "a bitsandbytes-quantized base is not modelled: planned with a bf16 base (an over-estimate)");
    }
  }
  return true;
}

bool map_optimizer(settings_reader& read) {
  const setting optim = read.get("optim");
  if (!optim.set()) return true;  // TrainingArguments' default is an AdamW: plan's default
  const auto name = read.text(optim);
  if (!name) return false;
  static constexpr std::array<std::string_view, 6> adamw = {"adamw_torch", "adamw_torch_fused", "adamw_hf", "adamw_apex_fused",
                                                           "adamw_torch_xla", "adamw_torch_npu_fused"};
  if (std::find(adamw.begin(), adamw.end(), *name) != adamw.end()) read.map(optim, "--optimizer", "adamw");
  else if (*name == "sgd") read.map(optim, "--optimizer", "sgd");
  else read.ignore(optim, "optimizer state other than AdamW's or SGD's (8-bit, paged, Adafactor, ...) is not modelled: planned as AdamW");
  return true;
}

// DeepSpeed (a dict in the JSON TrainingArguments writes) and FSDP (its option words).
bool map_sharding(settings_reader& read) {
  const setting deepspeed = read.get("deepspeed");
  if (deepspeed.set() && deepspeed.value.is_object()) {
    const setting stage = read.get("deepspeed.zero_optimization.stage");
    if (stage.set()) {
      const auto level = read.count(stage, 3, 0);
      if (!level) return false;
      static constexpr std::array<const char*, 4> shards = {"none", "zero1", "zero2", "fsdp"};
      read.map(stage, "--shard", shards[*level]);
    }
    const setting parameters = read.get("deepspeed.zero_optimization.offload_param.device");
    const setting optimizer = read.get("deepspeed.zero_optimization.offload_optimizer.device");
    if (parameters.value == "cpu") read.map(parameters, "--offload", "all");
    else if (optimizer.value == "cpu") read.map(optimizer, "--offload", "optimizer");
  } else if (deepspeed.set()) {
    read.ignore(deepspeed, "a DeepSpeed config file is not read: give --shard zero1|zero2|zero3 and --offload");
  }
  const setting fsdp = read.get("fsdp");
  if (fsdp.set()) {
    // TrainingArguments keeps the option words as a list (to_json_string) or one string.
    std::string words = fsdp.value.is_string() ? fsdp.value.get<std::string>() : std::string();
    if (fsdp.value.is_array()) {
      for (const json& word : fsdp.value) words += " " + value_text(word);
    }
    if (words.find("full_shard") != std::string::npos || words.find("hybrid_shard") != std::string::npos) read.map(fsdp, "--shard", "fsdp");
    else if (words.find("shard_grad_op") != std::string::npos) read.map(fsdp, "--shard", "zero2");
    if (words.find("offload") != std::string::npos) read.map(fsdp, "--offload", "all");
  }
  const setting gather = read.get("ds3_gather_for_generation");
  if (gather.value == false) {
    read.ignore(gather, "generating from ZeRO-3 shards without gathering them is not modelled: planned with the weights gathered");
  }
  return true;
}

// use_vllm: in colocate mode (f2cd577's default) GRPOTrainer starts vLLM on each training GPU
// (trl/generation/vllm_generation.py: LLM(gpu_memory_utilization=vllm_gpu_memory_utilization,
// max_model_len=vllm_max_model_length, max_num_seqs=per_device_train_batch_size x
// vllm_tensor_parallel_size x steps_per_generation, max_num_batched_tokens=4096,
// enable_sleep_mode=vllm_enable_sleep_mode), then llm.sleep(level=2) between generations with
// sleep mode. In server mode the engine is on other GPUs.
bool map_vllm(settings_reader& read, std::uint64_t micro_batch, std::uint64_t steps_per_generation) {
  const setting use_vllm = read.get("use_vllm");
  const setting mode = read.get("vllm_mode", "colocate");
  const auto mode_name = read.text(mode);
  if (!mode_name) return false;
  if (*mode_name == "server") {
    read.ignore(use_vllm, "vLLM generates on the server's GPUs (vllm_mode server); the plan counts transformers' generate on the "
                          "training GPU instead (an over-estimate here)");
    for (const char* key : {"vllm_gpu_memory_utilization", "vllm_max_model_length", "vllm_enable_sleep_mode", "vllm_tensor_parallel_size"}) {
      if (const setting engine = read.get(key); engine.in_file) read.ignore(engine, "configures a colocated engine; vllm_mode is server");
    }
    return true;
  }
  if (*mode_name != "colocate") return read.fail(fmt::format("vllm_mode must be server or colocate, not {}", mode_name->substr(0, 40)));
  const setting utilization = read.get("vllm_gpu_memory_utilization", 0.3);
  const setting sleep = read.get("vllm_enable_sleep_mode", false);
  const setting parallel = read.get("vllm_tensor_parallel_size", 1);
  const auto fraction = read.number(utilization);
  const auto sleeps = read.flag(sleep);
  const auto tensor_parallel = read.count(parallel, read.limits().max_gpus);
  if (read.failed()) return false;
  if (!(*fraction > 0 && *fraction <= 1)) return read.fail(fmt::format("vllm_gpu_memory_utilization = {} must be in (0, 1]", *fraction));
  read.map(use_vllm, "--rollout", "vllm", "vllm_mode colocate: vLLM on each training GPU");
  read.map(utilization, "--gpu-memory-utilization", value_text(utilization.value));
  if (const setting length = read.get("vllm_max_model_length"); length.set()) {
    const auto tokens = read.count(length, read.limits().max_length);
    if (!tokens) return false;
    read.map(length, "--max-model-len", std::to_string(*tokens));
  }
  setting sequences;
  sequences.key = "per_device_train_batch_size x vllm_tensor_parallel_size x steps_per_generation";
  sequences.value = fmt::format("{} x {} x {}", micro_batch, *tensor_parallel, steps_per_generation);
  sequences.in_file = true;
  read.map(sequences, "--max-num-seqs", std::to_string(micro_batch * *tensor_parallel * steps_per_generation), "GRPOTrainer's max_num_seqs");
  setting batched;
  batched.key = "use_vllm";
  batched.value = "true";
  batched.in_file = true;
  read.map(batched, "--max-num-batched-tokens", "4096", "TRL starts vLLM with max_num_batched_tokens=4096");
  read.map(sleep, "--sleep-level", *sleeps ? "2" : "0",
           *sleeps ? "TRL puts the engine to sleep at level 2 (weights and KV dropped) between generations" : "the engine stays awake");
  if (*tensor_parallel > 1) {
    read.ignore(parallel, "an engine split over GPUs is not modelled: planned as one engine per GPU (its reservation per GPU is the "
                          "same; its weights and KV tokens per GPU differ)");
  }
  return true;
}

// The settings plan does not model, named with the reason.
void ignore_unmodelled(settings_reader& read) {
  if (const setting steps = read.get("torch_empty_cache_steps"); steps.set()) {
    read.ignore(steps, "empty_cache every N steps lowers what is reserved, not the allocated peak plan reports");
  }
  if (const setting cache = read.get("cache_implementation"); cache.set()) {
    read.ignore(cache, "transformers' other KV caches are not modelled: planned with DynamicCache");
  }
  for (const char* key : {"use_transformers_continuous_batching", "use_transformers_paged"}) {
    if (const setting paged = read.get(key); paged.value == true) {
      read.ignore(paged, "continuous batching's paged cache is not modelled: planned with DynamicCache");
    }
  }
  if (const setting head = read.get("cast_lm_head_to_fp32"); head.value == true) {
    read.ignore(head, "an fp32 lm_head is not modelled: planned with the head in the weights' dtype");
  }
}

}  // namespace

std::string lora_targets_value(const json& modules, std::string& unknown) {
  static constexpr std::array<std::string_view, 7> linears = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  if (modules == "all-linear") return "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj";
  if (!modules.is_array() || modules.empty()) {
    unknown = value_text(modules);
    return {};
  }
  std::string joined;
  for (const json& module : modules) {
    const std::string name = value_text(module);
    if (!module.is_string() || std::find(linears.begin(), linears.end(), name) == linears.end()) {
      unknown = name;
      return {};
    }
    joined += (joined.empty() ? "" : ",") + name;
  }
  return joined;
}

bool map_trl_config(settings_reader& read, const trainer_config_context& context, trainer_config_mapping& mapping) {
  mapping.defaults_from = "huggingface/trl f2cd577 (GRPOConfig, ModelConfig) and transformers' TrainingArguments";
  if (const setting model = read.get("model_name_or_path"); model.set()) {
    const auto name = read.text(model);
    if (!name) return false;
    read.map(model, "--model", *name);
  }
  std::uint64_t micro_batch = 0, steps_per_generation = 0, accumulation = 0;
  if (!map_batches(read, context, mapping.format == trainer_config_format::trl_yaml, micro_batch, steps_per_generation, accumulation)) {
    return false;
  }
  // max_prompt_length left GRPOConfig in 89070d2 (2026-01-17, TRL 0.28); older recipes have it.
  if (const setting prompt = read.get("max_prompt_length"); prompt.set()) {
    const auto length = read.count(prompt, read.limits().max_length);
    if (!length) return false;
    read.map(prompt, "--prompt-len", std::to_string(*length));
  }
  const setting completion = read.get("max_completion_length", 512);
  const auto new_tokens = read.count(completion, read.limits().max_length);
  const setting checkpointing = read.get("gradient_checkpointing", true);
  const auto grad_ckpt = read.flag(checkpointing);
  const setting beta = read.get("beta", 0.0);
  const auto kl = read.number(beta);
  const setting iterations = read.get("num_iterations", 1);
  const auto epochs = read.count(iterations, 1024);
  const setting vllm = read.get("use_vllm", false);
  const auto use_vllm = read.flag(vllm);
  const setting correction = read.get("vllm_importance_sampling_correction", true);
  const auto corrects = read.flag(correction);
  const setting liger = read.get("use_liger_kernel", false);
  const auto fused = read.flag(liger);
  if (read.failed()) return false;
  if (*kl < 0) return read.fail(fmt::format("beta = {} must not be negative", *kl));
  read.map(completion, "--new-tokens", std::to_string(*new_tokens));
  read.map(checkpointing, "--grad-ckpt", *grad_ckpt ? "on" : "off");
  read.map(beta, "--ref-model", *kl > 0 ? "on" : "off", *kl > 0 ? "a KL term: a reference pass" : "beta 0: no reference model is loaded");
  read.map(iterations, "--epochs", std::to_string(*epochs));
  // GRPOTrainer._generate_and_score_completions: old log-probs when generation and optimizer
  // steps are misaligned, or to correct vLLM's sampling.
  const bool misaligned = accumulation % (steps_per_generation * *epochs) != 0;
  setting old_logprobs;
  old_logprobs.key = "gradient_accumulation_steps % (steps_per_generation x num_iterations)";
  old_logprobs.value = fmt::format("{} % ({} x {})", accumulation, steps_per_generation, *epochs);
  old_logprobs.in_file = true;
  if (*use_vllm && *corrects) {
    read.map(correction, "--old-logprobs", "on", "with use_vllm, TRL scores the samples again to correct vLLM's sampling");
  } else {
    read.map(old_logprobs, "--old-logprobs", misaligned ? "on" : "off",
             misaligned ? "generation and optimizer steps misaligned: TRL scores the samples before the update" : "aligned: no old log-probs pass");
  }
  if (*fused) read.map(liger, "--logprob-impl", "fused", "Liger's fused linear GRPO loss: no full logits");
  if (!map_precision(read) || !map_peft(read) || !map_optimizer(read) || !map_sharding(read)) return false;
  if (*use_vllm && !map_vllm(read, micro_batch, steps_per_generation)) return false;
  ignore_unmodelled(read);
  return !read.failed();
}

}  // namespace rlmem::detail
