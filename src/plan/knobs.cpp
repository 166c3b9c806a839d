// SPDX-License-Identifier: MIT
// Knob validation, resident-buffer specs, names of enums and cards.

#include <rlmem/plan/plan.hpp>

#include "plan_refusal.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>

namespace rlmem {

namespace {

using detail::first_refusal;
using detail::refuse;
using check = result<void, plan_errc>;

check tokens_within(std::uint64_t rows, std::uint64_t length, const char* what, const knob_limits& limits) {
  if (rows * length > limits.max_tokens_per_pass) {
    return refuse(plan_errc::limit_exceeded, fmt::format("{} handles {} x {} tokens, beyond any GPU", what, rows, length));
  }
  return {};
}

check positive(std::uint64_t value, const char* flag, std::uint64_t limit) {
  if (value == 0) return refuse(plan_errc::invalid_knob, fmt::format("{} must be at least 1", flag));
  if (value > limit) return refuse(plan_errc::limit_exceeded, fmt::format("{} {} is beyond {}", flag, value, limit));
  return {};
}

constexpr std::array<std::string_view, 7> linear_names = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

// Knobs that mean nothing in the configuration given: refused with the reason rather than ignored.
check refuse_knobs_that_do_not_apply(const plan_knobs& knobs) {
  std::string message;
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
    return {};
  }
  return refuse(plan_errc::knob_conflict, message);
}

// Knobs that describe a transformer's passes, refused for a policy known only by its parameter count.
check refuse_for_opaque_policy(const plan_knobs& knobs) {
  std::string message;
  if (knobs.lora_rank > 0) message = "--lora-r adapts a transformer's linears; a policy given only as --params has none (give --model)";
  else if (knobs.kv_cache == kv_cache_kind::prealloc) message = "--kv-cache belongs to a transformer's generation; give --model";
  else if (knobs.grad_ckpt) message = "--grad-ckpt recomputes a transformer's layers; a policy given only as --params has none (give --model)";
  else if (knobs.reference != reference_kind::none || knobs.old_logprobs) message = "--ref-model and --old-logprobs score with a transformer; give --model";
  else if (knobs.shard == shard_kind::fsdp) message = "--shard fsdp unshards a transformer's layers; a policy given only as --params has none";
  else return {};
  return refuse(plan_errc::knob_conflict, message);
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

result<void, plan_errc> validate_knobs(const model_architecture& model, const plan_knobs& knobs, const knob_limits& limits) {
  if (check first = first_refusal({positive(knobs.gpus, "--gpus", limits.max_gpus), positive(knobs.epochs, "--epochs", limits.max_rows),
                                   refuse_knobs_that_do_not_apply(knobs)});
      !first.ok()) {
    return first;
  }
  if (model.opaque_params > 0) {
    if (check opaque = refuse_for_opaque_policy(knobs); !opaque.ok()) return opaque;
  }
  if (knobs.epochs > 1 && knobs.phase != plan_phase::grpo_step) {
    return refuse(plan_errc::knob_conflict, "--epochs repeats grpo-step's update over its rollout; train's passes are --grad-accum");
  }
  if (knobs.precision == precision_kind::nanochat && model.model_type != "nanochat") {
    return refuse(plan_errc::knob_conflict,
                  "--precision nanochat is nanochat's (fp32 matrices, bf16 embedding, its layer under autocast); give a nanochat "
                  "config, or bf16 / fp32-master");
  }
  if ((model.model_type == "gpt2" || model.model_type == "gpt_neox") && (knobs.lora_rank > 0 || knobs.precision != precision_kind::bf16)) {
    return refuse(plan_errc::knob_conflict,
                  fmt::format("{} with {} is not modelled (its layers were measured in bf16, every weight trained)", model.model_type,
                              knobs.lora_rank > 0 ? "--lora-r" : "--precision " + std::string(to_string(knobs.precision))));
  }
  if (knobs.precision == precision_kind::nanochat && knobs.lora_rank > 0) {
    return refuse(plan_errc::knob_conflict, "--lora-r with nanochat's model is not modelled (nanochat trains every weight)");
  }
  if (knobs.kv_rows_follow == kv_rows_kind::group && knobs.phase != plan_phase::grpo_step) {
    return refuse(plan_errc::knob_conflict, "--kv-rows group sizes the cache for a prompt's samples; only --phase grpo-step samples a group");
  }
  if (model.mlp != mlp_kind::gated &&
      std::find(knobs.lora_targets.begin(), knobs.lora_targets.end(), "gate_proj") != knobs.lora_targets.end()) {
    return refuse(plan_errc::knob_conflict, "--lora-targets gate_proj: this model's MLP has no gate (up_proj and down_proj only)");
  }
  if (knobs.offload_weights && knobs.shard != shard_kind::fsdp) {
    return refuse(plan_errc::knob_conflict,
                  "--offload all streams weights layer by layer, which needs --shard fsdp (FSDP2 CPUOffloadPolicy)");
  }
  if (knobs.batch > limits.max_rows) {
    return refuse(plan_errc::limit_exceeded, fmt::format("--batch {} is beyond {}", knobs.batch, limits.max_rows));
  }
  if (knobs.buffers.size() > limits.max_buffers) {
    return refuse(plan_errc::limit_exceeded, fmt::format("{} --buffer options; at most {}", knobs.buffers.size(), limits.max_buffers));
  }
  for (std::size_t i = 0; i < knobs.buffers.size(); ++i) {
    if (buffer_bytes(knobs.buffers[i], knobs) > limits.max_buffer_bytes) {
      return refuse(plan_errc::limit_exceeded, fmt::format("--buffer '{}' is {} with these rows and epochs, larger than any GPU",
                                                           knobs.buffers[i].name, knobs.buffers[i].shape));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (knobs.buffers[i].name == knobs.buffers[j].name) {
        return refuse(plan_errc::invalid_knob, fmt::format("--buffer '{}' is given twice", knobs.buffers[i].name));
      }
    }
  }
  if (knobs.lora_rank > 0) {
    const std::uint64_t smallest_width = std::min(model.hidden_size, model.num_kv_heads * model.head_dim);
    if (knobs.lora_rank > smallest_width) {
      return refuse(plan_errc::invalid_knob,
                    fmt::format("--lora-r {} is larger than the narrowest adapted matrix ({})", knobs.lora_rank, smallest_width));
    }
    for (const std::string& target : knobs.lora_targets) {
      if (std::find(linear_names.begin(), linear_names.end(), target) == linear_names.end()) {
        return refuse(plan_errc::invalid_knob,
                      fmt::format("--lora-targets: unknown module '{}' (known: q_proj k_proj v_proj o_proj gate_proj up_proj down_proj)",
                                  target));
      }
    }
  }
  if (chunked_logprobs(knobs)) {
    if (check chunk = positive(knobs.logprob_chunk, "--logprob-chunk", limits.max_length); !chunk.ok()) return chunk;
  }
  switch (knobs.phase) {
    case plan_phase::generate:
      if (check first = first_refusal({positive(knobs.batch, "--batch", limits.max_rows),
                                       positive(knobs.prompt_len, "--prompt-len", limits.max_length),
                                       positive(knobs.new_tokens, "--new-tokens", limits.max_length),
                                       tokens_within(knobs.batch, knobs.prompt_len + knobs.new_tokens, "the generation", limits)});
          !first.ok()) {
        return first;
      }
      break;
    case plan_phase::train:
      if (check first = first_refusal({positive(knobs.micro_batch, "--micro-batch", limits.max_rows),
                                       positive(knobs.seq_len, "--seq-len", limits.max_length),
                                       positive(knobs.logprob_tokens, "--logprob-tokens", limits.max_length),
                                       positive(knobs.grad_accum, "--grad-accum", limits.max_rows),
                                       tokens_within(knobs.micro_batch, knobs.seq_len, "a micro-batch", limits)});
          !first.ok()) {
        return first;
      }
      // nanochat's forward takes its targets beside the inputs (shifted by the caller), so every
      // position can be scored; transformers' log-probs come from the logits of the one before.
      if (scores_every_position(knobs) ? knobs.logprob_tokens > knobs.seq_len : knobs.logprob_tokens >= knobs.seq_len) {
        return refuse(plan_errc::knob_conflict,
                      scores_every_position(knobs)
                          ? fmt::format("--logprob-tokens {} is more than --seq-len {}", knobs.logprob_tokens, knobs.seq_len)
                          : fmt::format("--logprob-tokens {} must be less than --seq-len {} (the first token has no log-prob)",
                                        knobs.logprob_tokens, knobs.seq_len));
      }
      break;
    case plan_phase::grpo_step: {
      if (check first = first_refusal({positive(knobs.prompts, "--prompts", limits.max_rows), positive(knobs.group, "--group", limits.max_rows),
                                       positive(knobs.prompt_len, "--prompt-len", limits.max_length),
                                       positive(knobs.new_tokens, "--new-tokens", limits.max_length),
                                       positive(knobs.micro_batch, "--micro-batch", limits.max_rows)});
          !first.ok()) {
        return first;
      }
      if (knobs.prompts % knobs.gpus != 0) {
        return refuse(plan_errc::knob_conflict,
                      fmt::format("--prompts {} is not divisible by --gpus {}: every GPU takes whole prompts", knobs.prompts, knobs.gpus));
      }
      if (check tokens = tokens_within(knobs.prompts * knobs.group, knobs.prompt_len + knobs.new_tokens, "the rollout", limits);
          !tokens.ok()) {
        return tokens;
      }
      const std::uint64_t rows = knobs.prompts * knobs.group / knobs.gpus;
      if (knobs.group % knobs.micro_batch != 0 && (knobs.micro_batch % knobs.group != 0 || rows % knobs.micro_batch != 0)) {
        return refuse(plan_errc::knob_conflict,
                      fmt::format("--group {} is not divisible by --micro-batch {}, nor does {} hold whole groups of the {} rows per GPU",
                                  knobs.group, knobs.micro_batch, knobs.micro_batch, rows));
      }
      if (knobs.micro_batch > rows) {
        return refuse(plan_errc::knob_conflict,
                      fmt::format("--micro-batch {} is larger than the {} rows each GPU trains on", knobs.micro_batch, rows));
      }
      break;
    }
  }
  if (knobs.kv_cache == kv_cache_kind::prealloc && knobs.phase != plan_phase::train) {
    const std::uint64_t rows = generation_rows(knobs);
    if (kv_cache_rows(knobs) < std::min(rows, limits.max_rows)) {
      return refuse(plan_errc::knob_conflict,
                    fmt::format("--kv-rows {} holds {} rows, fewer than the {} generated together (--gen-batch)",
                                knobs.kv_rows_follow == kv_rows_kind::group ? "group" : fmt::format("{}", knobs.kv_rows),
                                kv_cache_rows(knobs), rows));
    }
    if (knobs.kv_rows > limits.max_rows || knobs.kv_len > limits.max_length) {
      return refuse(plan_errc::limit_exceeded, "--kv-rows or --kv-len is beyond any GPU");
    }
    if (check tokens = tokens_within(knobs.kv_rows, knobs.kv_len, "--kv-rows x --kv-len", limits); !tokens.ok()) return tokens;
    if (knobs.kv_len != 0 && knobs.kv_len < knobs.prompt_len + knobs.new_tokens) {
      return refuse(plan_errc::knob_conflict, fmt::format("--kv-len {} is shorter than prompt + new tokens ({})", knobs.kv_len,
                                                          knobs.prompt_len + knobs.new_tokens));
    }
  }
  return {};
}

result<resident_buffer, plan_errc> parse_buffer_spec(std::string_view spec, const knob_limits& limits) {
  const std::string shown(spec.substr(0, 80));
  const auto equals = spec.find('=');
  if (equals == std::string_view::npos || equals == 0) {
    return refuse(plan_errc::invalid_buffer_spec, fmt::format("--buffer '{}': expected NAME=DIMS:DTYPE, e.g. traj=rows*50*263*1*196:fp32", shown));
  }
  resident_buffer parsed;
  parsed.name = std::string(spec.substr(0, equals));
  std::string_view rest = spec.substr(equals + 1);
  if (const auto at = rest.find('@'); at != std::string_view::npos) {
    std::string_view phases = rest.substr(at + 1);
    rest = rest.substr(0, at);
    if (phases.empty()) {
      return refuse(plan_errc::invalid_buffer_spec,
                    fmt::format("--buffer '{}': no phase after '@' (rollout, old-logprobs, reference, update, optimizer)", shown));
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
        return refuse(plan_errc::invalid_buffer_spec,
                      fmt::format("--buffer '{}': unknown phase '{}' (rollout, old-logprobs, reference, update, optimizer)", shown, phase));
      }
      phases = comma == std::string_view::npos ? std::string_view() : phases.substr(comma + 1);
    }
  }
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos) {
    return refuse(plan_errc::invalid_buffer_spec,
                  fmt::format("--buffer '{}': missing :DTYPE (fp32, bf16, fp16, int64, int32, int8, bool)", shown));
  }
  const std::string_view dtype = rest.substr(colon + 1);
  std::uint64_t element = 0;
  if (dtype == "fp32" || dtype == "float32" || dtype == "int32") element = 4;
  else if (dtype == "bf16" || dtype == "fp16" || dtype == "bfloat16" || dtype == "float16") element = 2;
  else if (dtype == "int64" || dtype == "fp64" || dtype == "float64") element = 8;
  else if (dtype == "int8" || dtype == "uint8" || dtype == "bool" || dtype == "fp8") element = 1;
  else {
    return refuse(plan_errc::invalid_buffer_spec,
                  fmt::format("--buffer '{}': unknown dtype '{}' (fp32, bf16, fp16, int64, int32, int8, bool)", shown, dtype));
  }
  std::string_view dims = rest.substr(0, colon);
  std::uint64_t total = element;
  std::uint32_t count = 0;
  while (true) {
    const auto separator = dims.find_first_of("x*");
    const std::string_view dim = dims.substr(0, separator);
    if (++count > limits.max_buffer_dims) {
      return refuse(plan_errc::limit_exceeded, fmt::format("--buffer '{}' has more than {} dims", shown, limits.max_buffer_dims));
    }
    if (dim == "rows") {
      ++parsed.rows_dims;
    } else if (dim == "epochs") {
      ++parsed.epochs_dims;
    } else {
      std::uint64_t value = 0;
      const auto [end, ec] = std::from_chars(dim.data(), dim.data() + dim.size(), value);
      if (ec != std::errc() || end != dim.data() + dim.size() || value == 0) {
        return refuse(plan_errc::invalid_buffer_spec,
                      fmt::format("--buffer '{}': '{}' is not a positive dimension, rows or epochs", shown, dim.substr(0, 40)));
      }
      if (value > limits.max_buffer_bytes / total) {
        return refuse(plan_errc::limit_exceeded, fmt::format("--buffer '{}' is larger than any GPU", shown));
      }
      total *= value;
    }
    if (separator == std::string_view::npos) break;
    dims = dims.substr(separator + 1);
  }
  parsed.fixed_bytes = total;
  parsed.shape = std::string(rest);
  return parsed;
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
