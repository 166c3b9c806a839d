// SPDX-License-Identifier: MIT
// Knob validation, resident-buffer specs, names of enums and cards.

#include <rlmem/plan/plan.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>

namespace rlmem {

namespace {

// Bounds on single knobs and on the tokens a pass handles; plan_memory still flags any estimate
// beyond a double's exact range (plan_result::out_of_range).
constexpr std::uint64_t max_rows = 1u << 20;
constexpr std::uint64_t max_length = 1u << 24;
constexpr std::uint64_t max_gpus = 1u << 16;
constexpr std::uint64_t max_tokens_per_pass = 1ull << 32;
constexpr std::size_t max_buffers = 64;

bool tokens_within(std::uint64_t rows, std::uint64_t length, const char* what, std::string& message) {
  if (rows * length > max_tokens_per_pass) {
    message = fmt::format("{} handles {} x {} tokens, beyond any GPU", what, rows, length);
    return false;
  }
  return true;
}

bool positive(std::uint64_t value, const char* flag, std::uint64_t limit, std::string& message) {
  if (value == 0) {
    message = fmt::format("{} must be at least 1", flag);
    return false;
  }
  if (value > limit) {
    message = fmt::format("{} {} is beyond {}", flag, value, limit);
    return false;
  }
  return true;
}

constexpr std::array<std::string_view, 7> linear_names = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

// Knobs that mean nothing in the configuration given: refused with the reason rather than ignored.
bool refuse_knobs_that_do_not_apply(const plan_knobs& knobs, std::string& message) {
  if (knobs.lora_rank == 0 && !knobs.lora_targets.empty()) {
    message = "--lora-targets names the modules LoRA adapts; it needs --lora-r";
  } else if (knobs.kv_cache != kv_cache_kind::prealloc && (knobs.kv_rows != 0 || knobs.kv_len != 0)) {
    message = fmt::format("{} sizes a preallocated KV cache; it needs --kv-cache prealloc", knobs.kv_rows != 0 ? "--kv-rows" : "--kv-len");
  } else if (knobs.phase == plan_phase::train && knobs.kv_cache == kv_cache_kind::prealloc) {
    message = "--kv-cache is the generation's cache; --phase train generates nothing";
  } else if (knobs.phase == plan_phase::train && knobs.batch != 0) {
    message = "--batch is the rows generated together; --phase train generates nothing (its rows are --micro-batch)";
  } else if (knobs.reference != reference_kind::none && knobs.phase != plan_phase::grpo_step) {
    message = "--ref-model belongs to --phase grpo-step";
  } else if (knobs.old_logprobs && knobs.phase != plan_phase::grpo_step) {
    message = "--old-logprobs belongs to --phase grpo-step";
  } else if (knobs.reference == reference_kind::adapter_disabled && knobs.lora_rank == 0) {
    message = "--ref-model adapter-disabled scores with the policy's LoRA adapter switched off; it needs --lora-r "
              "(without LoRA the reference is a copy: --ref-model copy)";
  } else if (knobs.gpus == 1 && knobs.shard != shard_kind::none && !(knobs.shard == shard_kind::fsdp && knobs.offload_weights)) {
    message = fmt::format("--shard {} divides state over --gpus; on 1 GPU it divides nothing (give --gpus N{})", to_string(knobs.shard),
                          knobs.shard == shard_kind::fsdp ? ", or --offload all to stream the weights from the CPU" : "");
  } else {
    return true;
  }
  return false;
}

// Knobs that describe a transformer's passes, refused for a policy known only by its parameter count.
bool refuse_for_opaque_policy(const plan_knobs& knobs, std::string& message) {
  if (knobs.lora_rank > 0) message = "--lora-r adapts a transformer's linears; a policy given only as --params has none (give --model)";
  else if (knobs.kv_cache == kv_cache_kind::prealloc) message = "--kv-cache belongs to a transformer's generation; give --model";
  else if (knobs.grad_ckpt) message = "--grad-ckpt recomputes a transformer's layers; a policy given only as --params has none (give --model)";
  else if (knobs.reference != reference_kind::none || knobs.old_logprobs) message = "--ref-model and --old-logprobs score with a transformer; give --model";
  else if (knobs.shard == shard_kind::fsdp) message = "--shard fsdp unshards a transformer's layers; a policy given only as --params has none";
  else return true;
  return false;
}

}  // namespace

std::uint64_t buffer_rows(const plan_knobs& knobs) {
  switch (knobs.phase) {
    case plan_phase::generate: return knobs.batch;
    case plan_phase::train: return knobs.micro_batch * knobs.grad_accum;
    case plan_phase::grpo_step: return knobs.gpus == 0 ? 0 : knobs.prompts * knobs.group / knobs.gpus;
  }
  return 0;
}

std::uint64_t buffer_bytes(const resident_buffer& buffer, const plan_knobs& knobs) {
  // Saturates rather than wraps: validate_knobs refuses a buffer beyond any GPU.
  constexpr std::uint64_t beyond = 1ull << 62;
  std::uint64_t total = buffer.fixed_bytes;
  auto scale = [&](std::uint64_t factor, std::uint32_t times) {
    for (std::uint32_t i = 0; i < times; ++i) total = factor != 0 && total > beyond / factor ? beyond : total * factor;
  };
  scale(buffer_rows(knobs), buffer.rows_dims);
  scale(knobs.epochs, buffer.epochs_dims);
  return total;
}

std::uint64_t generation_rows(const plan_knobs& knobs) {
  if (knobs.phase != plan_phase::grpo_step) return knobs.batch;
  const std::uint64_t rows = buffer_rows(knobs);
  return knobs.batch == 0 ? rows : std::min(knobs.batch, rows);
}

std::uint64_t kv_cache_rows(const plan_knobs& knobs) {
  switch (knobs.kv_rows_follow) {
    case kv_rows_kind::group: return knobs.group;
    case kv_rows_kind::generation_batch: return generation_rows(knobs);
    case kv_rows_kind::fixed: break;
  }
  return knobs.kv_rows != 0 ? knobs.kv_rows : generation_rows(knobs);
}

bool validate_knobs(const model_architecture& model, const plan_knobs& knobs, std::string& message) {
  if (!positive(knobs.gpus, "--gpus", max_gpus, message)) return false;
  if (!positive(knobs.epochs, "--epochs", max_rows, message)) return false;
  if (!refuse_knobs_that_do_not_apply(knobs, message)) return false;
  if (model.opaque_params > 0 && !refuse_for_opaque_policy(knobs, message)) return false;
  if (knobs.epochs > 1 && knobs.phase != plan_phase::grpo_step) {
    message = "--epochs repeats grpo-step's update over its rollout; train's passes are --grad-accum";
    return false;
  }
  if (knobs.precision == precision_kind::nanochat && model.model_type != "nanochat") {
    message = "--precision nanochat is nanochat's (fp32 matrices, bf16 embedding, its layer under autocast); give a nanochat "
              "config, or bf16 / fp32-master";
    return false;
  }
  if ((model.model_type == "gpt2" || model.model_type == "gpt_neox") && (knobs.lora_rank > 0 || knobs.precision != precision_kind::bf16)) {
    message = fmt::format("{} with {} is not modelled (its layers were measured in bf16, every weight trained)",
                          model.model_type, knobs.lora_rank > 0 ? "--lora-r" : "--precision " + std::string(to_string(knobs.precision)));
    return false;
  }
  if (knobs.precision == precision_kind::nanochat && knobs.lora_rank > 0) {
    message = "--lora-r with nanochat's model is not modelled (nanochat trains every weight)";
    return false;
  }
  if (knobs.kv_rows_follow == kv_rows_kind::group && knobs.phase != plan_phase::grpo_step) {
    message = "--kv-rows group sizes the cache for a prompt's samples; only --phase grpo-step samples a group";
    return false;
  }
  if (model.mlp != mlp_kind::gated &&
      std::find(knobs.lora_targets.begin(), knobs.lora_targets.end(), "gate_proj") != knobs.lora_targets.end()) {
    message = "--lora-targets gate_proj: this model's MLP has no gate (up_proj and down_proj only)";
    return false;
  }
  if (knobs.offload_weights && knobs.shard != shard_kind::fsdp) {
    message = "--offload all streams weights layer by layer, which needs --shard fsdp (FSDP2 CPUOffloadPolicy)";
    return false;
  }
  if (knobs.batch > max_rows) {
    message = fmt::format("--batch {} is beyond {}", knobs.batch, max_rows);
    return false;
  }
  if (knobs.buffers.size() > max_buffers) {
    message = fmt::format("{} --buffer options; at most {}", knobs.buffers.size(), max_buffers);
    return false;
  }
  for (std::size_t i = 0; i < knobs.buffers.size(); ++i) {
    if (buffer_bytes(knobs.buffers[i], knobs) > (1ull << 50)) {
      message = fmt::format("--buffer '{}' is {} with these rows and epochs, larger than any GPU", knobs.buffers[i].name, knobs.buffers[i].shape);
      return false;
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (knobs.buffers[i].name == knobs.buffers[j].name) {
        message = fmt::format("--buffer '{}' is given twice", knobs.buffers[i].name);
        return false;
      }
    }
  }
  if (knobs.lora_rank > 0) {
    const std::uint64_t smallest_width = std::min(model.hidden_size, model.num_kv_heads * model.head_dim);
    if (knobs.lora_rank > smallest_width) {
      message = fmt::format("--lora-r {} is larger than the narrowest adapted matrix ({})", knobs.lora_rank, smallest_width);
      return false;
    }
    for (const std::string& target : knobs.lora_targets) {
      if (std::find(linear_names.begin(), linear_names.end(), target) == linear_names.end()) {
        message = fmt::format("--lora-targets: unknown module '{}' (known: q_proj k_proj v_proj o_proj gate_proj up_proj down_proj)", target);
        return false;
      }
    }
  }
  if (chunked_logprobs(knobs) &&
      !positive(knobs.logprob_chunk, "--logprob-chunk", max_length, message)) {
    return false;
  }
  switch (knobs.phase) {
    case plan_phase::generate:
      if (!positive(knobs.batch, "--batch", max_rows, message) || !positive(knobs.prompt_len, "--prompt-len", max_length, message) ||
          !positive(knobs.new_tokens, "--new-tokens", max_length, message) ||
          !tokens_within(knobs.batch, knobs.prompt_len + knobs.new_tokens, "the generation", message)) {
        return false;
      }
      break;
    case plan_phase::train:
      if (!positive(knobs.micro_batch, "--micro-batch", max_rows, message) || !positive(knobs.seq_len, "--seq-len", max_length, message) ||
          !positive(knobs.logprob_tokens, "--logprob-tokens", max_length, message) ||
          !positive(knobs.grad_accum, "--grad-accum", max_rows, message)) {
        return false;
      }
      if (!tokens_within(knobs.micro_batch, knobs.seq_len, "a micro-batch", message)) return false;
      // nanochat's forward takes its targets beside the inputs (shifted by the caller), so every
      // position can be scored; transformers' log-probs come from the logits of the one before.
      if (scores_every_position(knobs) ? knobs.logprob_tokens > knobs.seq_len : knobs.logprob_tokens >= knobs.seq_len) {
        message = scores_every_position(knobs)
                      ? fmt::format("--logprob-tokens {} is more than --seq-len {}", knobs.logprob_tokens, knobs.seq_len)
                      : fmt::format("--logprob-tokens {} must be less than --seq-len {} (the first token has no log-prob)",
                                    knobs.logprob_tokens, knobs.seq_len);
        return false;
      }
      break;
    case plan_phase::grpo_step: {
      if (!positive(knobs.prompts, "--prompts", max_rows, message) || !positive(knobs.group, "--group", max_rows, message) ||
          !positive(knobs.prompt_len, "--prompt-len", max_length, message) ||
          !positive(knobs.new_tokens, "--new-tokens", max_length, message) ||
          !positive(knobs.micro_batch, "--micro-batch", max_rows, message)) {
        return false;
      }
      if (knobs.prompts % knobs.gpus != 0) {
        message = fmt::format("--prompts {} is not divisible by --gpus {}: every GPU takes whole prompts", knobs.prompts, knobs.gpus);
        return false;
      }
      if (!tokens_within(knobs.prompts * knobs.group, knobs.prompt_len + knobs.new_tokens, "the rollout", message)) return false;
      const std::uint64_t rows = knobs.prompts * knobs.group / knobs.gpus;
      if (knobs.group % knobs.micro_batch != 0 && (knobs.micro_batch % knobs.group != 0 || rows % knobs.micro_batch != 0)) {
        message = fmt::format("--group {} is not divisible by --micro-batch {}, nor does {} hold whole groups of the {} rows per GPU",
                              knobs.group, knobs.micro_batch, knobs.micro_batch, rows);
        return false;
      }
      if (knobs.micro_batch > rows) {
        message = fmt::format("--micro-batch {} is larger than the {} rows each GPU trains on", knobs.micro_batch, rows);
        return false;
      }
      break;
    }
  }
  if (knobs.kv_cache == kv_cache_kind::prealloc && knobs.phase != plan_phase::train) {
    const std::uint64_t rows = generation_rows(knobs);
    if (kv_cache_rows(knobs) < std::min(rows, max_rows)) {
      message = fmt::format("--kv-rows {} holds {} rows, fewer than the {} generated together (--gen-batch)",
                            knobs.kv_rows_follow == kv_rows_kind::group ? "group" : fmt::format("{}", knobs.kv_rows), kv_cache_rows(knobs), rows);
      return false;
    }
    if (knobs.kv_rows > max_rows || knobs.kv_len > max_length || !tokens_within(knobs.kv_rows, knobs.kv_len, "--kv-rows x --kv-len", message)) {
      if (message.empty()) message = "--kv-rows or --kv-len is beyond any GPU";
      return false;
    }
    if (knobs.kv_len != 0 && knobs.kv_len < knobs.prompt_len + knobs.new_tokens) {
      message = fmt::format("--kv-len {} is shorter than prompt + new tokens ({})", knobs.kv_len, knobs.prompt_len + knobs.new_tokens);
      return false;
    }
  }
  return true;
}

bool parse_buffer_spec(std::string_view spec, resident_buffer& buffer, std::string& message) {
  const std::string shown(spec.substr(0, 80));
  const auto equals = spec.find('=');
  if (equals == std::string_view::npos || equals == 0) {
    message = fmt::format("--buffer '{}': expected NAME=DIMS:DTYPE, e.g. traj=rows*50*263*1*196:fp32", shown);
    return false;
  }
  resident_buffer parsed;
  parsed.name = std::string(spec.substr(0, equals));
  std::string_view rest = spec.substr(equals + 1);
  if (const auto at = rest.find('@'); at != std::string_view::npos) {
    std::string_view phases = rest.substr(at + 1);
    rest = rest.substr(0, at);
    if (phases.empty()) {
      message = fmt::format("--buffer '{}': no phase after '@' (rollout, old-logprobs, reference, update, optimizer)", shown);
      return false;
    }
    parsed.phases = 0;
    while (!phases.empty()) {
      const auto comma = phases.find(',');
      const std::string_view phase = phases.substr(0, comma);
      if (phase == "rollout" || phase == "generate") parsed.phases |= phase_rollout;
      else if (phase == "reference") parsed.phases |= phase_reference;
      else if (phase == "old-logprobs") parsed.phases |= phase_old_logprobs;
      else if (phase == "update" || phase == "train") parsed.phases |= phase_update;
      else if (phase == "optimizer") parsed.phases |= phase_optimizer;
      else {
        message = fmt::format("--buffer '{}': unknown phase '{}' (rollout, old-logprobs, reference, update, optimizer)", shown, phase);
        return false;
      }
      phases = comma == std::string_view::npos ? std::string_view() : phases.substr(comma + 1);
    }
  }
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos) {
    message = fmt::format("--buffer '{}': missing :DTYPE (fp32, bf16, fp16, int64, int32, int8, bool)", shown);
    return false;
  }
  const std::string_view dtype = rest.substr(colon + 1);
  std::uint64_t element = 0;
  if (dtype == "fp32" || dtype == "float32" || dtype == "int32") element = 4;
  else if (dtype == "bf16" || dtype == "fp16" || dtype == "bfloat16" || dtype == "float16") element = 2;
  else if (dtype == "int64" || dtype == "fp64" || dtype == "float64") element = 8;
  else if (dtype == "int8" || dtype == "uint8" || dtype == "bool" || dtype == "fp8") element = 1;
  else {
    message = fmt::format("--buffer '{}': unknown dtype '{}' (fp32, bf16, fp16, int64, int32, int8, bool)", shown, dtype);
    return false;
  }
  std::string_view dims = rest.substr(0, colon);
  std::uint64_t total = element;
  constexpr std::uint64_t largest_buffer = 1ull << 50;  // 1 PiB
  int count = 0;
  while (true) {
    const auto separator = dims.find_first_of("x*");
    const std::string_view dim = dims.substr(0, separator);
    if (++count > 16) {
      message = fmt::format("--buffer '{}' has more than 16 dims", shown);
      return false;
    }
    if (dim == "rows") {
      ++parsed.rows_dims;
    } else if (dim == "epochs") {
      ++parsed.epochs_dims;
    } else {
      std::uint64_t value = 0;
      const auto [end, ec] = std::from_chars(dim.data(), dim.data() + dim.size(), value);
      if (ec != std::errc() || end != dim.data() + dim.size() || value == 0) {
        message = fmt::format("--buffer '{}': '{}' is not a positive dimension, rows or epochs", shown, dim.substr(0, 40));
        return false;
      }
      if (value > largest_buffer / total) {
        message = fmt::format("--buffer '{}' is larger than any GPU", shown);
        return false;
      }
      total *= value;
    }
    if (separator == std::string_view::npos) break;
    dims = dims.substr(separator + 1);
  }
  parsed.fixed_bytes = total;
  parsed.shape = std::string(rest);
  buffer = std::move(parsed);
  return true;
}

namespace {

struct card {
  std::string_view name;
  std::uint64_t mebibytes;  ///< total memory as nvidia-smi (rocm-smi for AMD) reports it
};

constexpr std::array<card, 15> cards = {{
    {"h100-80g", 81559},    {"h200-141g", 143771},  {"b200-180g", 183359}, {"h20-96g", 97871},
    {"a100-40g", 40960},    {"a100-80g", 81920},    {"v100-32g", 32510},   {"l40s-48g", 46068},
    {"a6000-48g", 49140},   {"a10g-24g", 23028},    {"l4-24g", 23034},     {"rtx5090-32g", 32607},
    {"rtx4090-24g", 24564}, {"rtx3090-24g", 24576}, {"mi300x-192g", 196592},
}};

}  // namespace

std::uint64_t gpu_memory_bytes(std::string_view name) {
  for (const card& entry : cards) {
    if (entry.name == name) return entry.mebibytes << 20;
  }
  return 0;
}

std::vector<std::string> gpu_names() {
  std::vector<std::string> names;
  for (const card& entry : cards) names.emplace_back(entry.name);
  return names;
}

bool scores_every_position(const plan_knobs& knobs) noexcept {
  return knobs.logprob == logprob_impl::softcap || knobs.logprob == logprob_impl::softcap_fp32;
}

bool chunked_logprobs(const plan_knobs& knobs) noexcept {
  return knobs.logprob == logprob_impl::chunked || knobs.logprob == logprob_impl::fused;
}

}  // namespace rlmem
