// SPDX-License-Identifier: MIT
// Reads a Hugging Face config.json into a model_architecture; never throws out.

#include <rlmem/plan/plan.hpp>

#include "json_nesting.hpp"
#include "plan_refusal.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <string_view>

namespace rlmem {

namespace {

using json = nlohmann::json;

using detail::refuse;
using model_result = result<model_architecture, plan_errc>;

// Reads fields until the first refusal, which it keeps.
class field_reader {
 public:
  explicit field_reader(const json& config) : config_(config) {}

  bool failed() const { return failed_; }
  /// The first refusal. Precondition: failed().
  plan_error failure() const { return failure_; }

  /// A positive integer field; `fallback` when absent (0: required).
  std::uint64_t count(const char* key, std::uint64_t limit, std::optional<std::uint64_t> fallback = std::nullopt) {
    if (failed_) return 0;
    auto it = config_.find(key);
    if (it == config_.end() || it->is_null()) {
      if (fallback) return *fallback;
      return fail(plan_errc::missing_field, fmt::format("config.json lacks \"{}\"", key));
    }
    if (!it->is_number_integer() || it->get<std::int64_t>() <= 0) {
      return fail(plan_errc::invalid_field, fmt::format("config.json: \"{}\" must be a positive integer, not {}", key, it->dump()));
    }
    const auto value = it->get<std::uint64_t>();
    if (value > limit) return fail(plan_errc::limit_exceeded, fmt::format("config.json: \"{}\" = {} is beyond {}", key, value, limit));
    return value;
  }

  bool flag(const char* key, bool fallback) {
    if (failed_) return fallback;
    auto it = config_.find(key);
    if (it == config_.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) {
      fail(plan_errc::invalid_field, fmt::format("config.json: \"{}\" must be true or false, not {}", key, it->dump()));
      return fallback;
    }
    return it->get<bool>();
  }

  std::string text(const char* key) {
    auto it = config_.find(key);
    return it != config_.end() && it->is_string() ? it->get<std::string>() : std::string();
  }

 private:
  std::uint64_t fail(plan_errc code, std::string sentence) {
    if (!failed_) failure_ = refuse(code, sentence);
    failed_ = true;
    return 0;
  }

  const json& config_;
  plan_error failure_;
  bool failed_ = false;
};

// nanochat's GPT (nanochat/gpt.py): untied wte and lm_head, no biases, F.rms_norm without
// weights (on the layer inputs and on q and k), a ReLU^2 MLP of 4 x n_embd, rotary tables of
// 10 x sequence_len positions kept as buffers.
model_result parse_nanochat_config(const json& config, const hf_config_limits& limits) {
  field_reader read(config);
  model_architecture parsed;
  parsed.name = parsed.model_type = "nanochat";
  parsed.num_layers = read.count("n_layer", limits.max_layers);
  parsed.num_heads = read.count("n_head", limits.max_dimension);
  parsed.num_kv_heads = read.count("n_kv_head", limits.max_dimension, parsed.num_heads);
  parsed.hidden_size = read.count("n_embd", limits.max_dimension);
  parsed.vocab_size = read.count("vocab_size", limits.max_vocab);
  const std::uint64_t sequence_len = read.count("sequence_len", limits.max_dimension);
  if (read.failed()) return read.failure();
  if (parsed.hidden_size % parsed.num_heads != 0) {
    return refuse(plan_errc::invalid_field,
                   fmt::format("nanochat config: n_embd {} is not a multiple of n_head {}", parsed.hidden_size, parsed.num_heads));
  }
  if (parsed.num_kv_heads > parsed.num_heads || parsed.num_heads % parsed.num_kv_heads != 0) {
    return refuse(plan_errc::invalid_field,
                   fmt::format("nanochat config: n_head {} is not a multiple of n_kv_head {}", parsed.num_heads, parsed.num_kv_heads));
  }
  parsed.head_dim = parsed.hidden_size / parsed.num_heads;
  parsed.intermediate_size = 4 * parsed.hidden_size;
  parsed.tied_embeddings = false;
  parsed.qk_norm = true;
  parsed.norm_weights = false;
  parsed.mlp = mlp_kind::relu2;
  parsed.rotary_positions = 10 * sequence_len;
  return parsed;
}

// Hugging Face families whose MLP has no gate whose terms are not derived (other layer layouts):
// refused rather than counted as SwiGLU. GPT-2 and GPT-NeoX are read below.
constexpr std::array<std::string_view, 9> ungated_families = {"gptj", "gpt_bigcode", "nemotron", "phi", "opt",
                                                              "bloom", "falcon", "starcoder2", "mpt"};

bool positive_fraction(const json& config, const char* key, double fallback) {
  auto it = config.find(key);
  return (it != config.end() && it->is_number() ? it->get<double>() : fallback) > 0;
}

// GPT-2 (modeling_gpt2.py): Conv1D c_attn (q, k, v fused, with biases), c_proj, an MLP of c_fc,
// GELU (tanh) and c_proj without a gate, LayerNorms with biases, learned positions, a tied head,
// dropout 0.1 on the residual branches and the embeddings by default.
model_result parse_gpt2_config(const json& config, const hf_config_limits& limits) {
  field_reader read(config);
  model_architecture parsed;
  parsed.name = parsed.model_type = "gpt2";
  parsed.hidden_size = read.count("n_embd", limits.max_dimension);
  parsed.num_layers = read.count("n_layer", limits.max_layers);
  parsed.num_heads = parsed.num_kv_heads = read.count("n_head", limits.max_dimension);
  parsed.vocab_size = read.count("vocab_size", limits.max_vocab);
  parsed.learned_positions = read.count("n_positions", limits.max_dimension, 1024);
  parsed.intermediate_size = read.count("n_inner", limits.max_dimension, 4 * parsed.hidden_size);
  parsed.tied_embeddings = read.flag("tie_word_embeddings", true);
  if (read.failed()) return read.failure();
  if (parsed.hidden_size % parsed.num_heads != 0) {
    return refuse(plan_errc::invalid_field,
                   fmt::format("config.json: n_embd {} is not a multiple of n_head {}", parsed.hidden_size, parsed.num_heads));
  }
  parsed.head_dim = parsed.hidden_size / parsed.num_heads;
  parsed.qkv_bias = parsed.output_bias = parsed.mlp_bias = true;
  parsed.layer_norm = true;
  parsed.mlp = mlp_kind::gelu;
  parsed.residual_dropout = positive_fraction(config, "resid_pdrop", 0.1);
  return parsed;
}

}  // namespace

result<model_architecture, plan_errc> parse_hf_config(std::string_view json_text, const hf_config_limits& limits) {
  if (detail::json_nests_deeper(json_text, limits.max_nesting)) {
    return refuse(plan_errc::limit_exceeded, fmt::format("config.json nests deeper than {} levels", limits.max_nesting));
  }
  json document;
  try {
    document = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& failure) {
    return refuse(plan_errc::not_json, fmt::format("config.json is not JSON (byte {})", failure.byte));
  } catch (const json::exception& failure) {  // e.g. a number beyond any type
    return refuse(plan_errc::not_json, fmt::format("config.json is not JSON we can read ({})", failure.what()));
  }
  if (!document.is_object()) return refuse(plan_errc::not_json, "config.json is not a JSON object");
  // nanochat keeps its GPTConfig at the top level or, in checkpoint metadata, under
  // "model_config"; GPT-2's config shares the n_* names but says model_type.
  const json& nanochat = document.contains("model_config") && document["model_config"].is_object() ? document["model_config"] : document;
  if (!nanochat.contains("model_type") && !document.contains("model_type") && nanochat.contains("n_layer") && nanochat.contains("n_embd")) {
    return parse_nanochat_config(nanochat, limits);
  }
  // Multimodal configs (Gemma 3, Qwen2.5-VL, ...) keep the language model in text_config.
  const json& config = document.contains("text_config") && document["text_config"].is_object() ? document["text_config"] : document;
  // Layouts the memory terms do not describe: latent attention and DeepSeek's routed experts.
  for (const char* unsupported : {"kv_lora_rank", "q_lora_rank", "n_routed_experts"}) {
    if (config.contains(unsupported)) {
      return refuse(plan_errc::unsupported_architecture,
                     fmt::format("config.json: \"{}\" (DeepSeek-style latent attention or routed experts) is not modelled; "
                                 "supported: Llama, Qwen2/2.5/3 (and MoE), Mistral, Mixtral, Gemma, GPT-2, GPT-NeoX",
                                 unsupported));
    }
  }
  field_reader read(config);
  model_architecture parsed;
  parsed.model_type = read.text("model_type");
  if (parsed.model_type.empty()) parsed.model_type = field_reader(document).text("model_type");
  parsed.name = parsed.model_type.empty() ? "config.json" : parsed.model_type;
  const std::string& type = parsed.model_type;
  const bool gemma = type.starts_with("gemma");
  if (type == "gpt2") return parse_gpt2_config(config, limits);
  if (std::find(ungated_families.begin(), ungated_families.end(), type) != ungated_families.end()) {
    return refuse(plan_errc::unsupported_architecture, fmt::format("config.json: model_type \"{}\" has an MLP without a gate and LayerNorm biases or learned positions, "
                          "which are not modelled (it is not counted as SwiGLU); modelled: Llama, Qwen2/2.5/3 (and MoE), "
                          "Mistral, Mixtral, Gemma, GPT-2, GPT-NeoX, nanochat",
                          type.substr(0, 40)));
  }

  parsed.hidden_size = read.count("hidden_size", limits.max_dimension);
  parsed.num_layers = read.count("num_hidden_layers", limits.max_layers);
  parsed.num_heads = read.count("num_attention_heads", limits.max_dimension);
  parsed.num_kv_heads = read.count("num_key_value_heads", limits.max_dimension, parsed.num_heads);
  parsed.vocab_size = read.count("vocab_size", limits.max_vocab);
  parsed.num_experts = read.count("num_experts", limits.max_experts, read.count("num_local_experts", limits.max_experts, 0));
  parsed.intermediate_size = read.count("intermediate_size", limits.max_dimension,
                                        parsed.num_experts > 0 ? std::optional<std::uint64_t>(0) : std::nullopt);
  if (read.failed()) return read.failure();
  const std::uint64_t default_head_dim = parsed.num_heads != 0 ? parsed.hidden_size / parsed.num_heads : 0;
  parsed.head_dim = read.count("head_dim", limits.max_dimension, default_head_dim);
  parsed.tied_embeddings = read.flag("tie_word_embeddings", gemma);
  // Llama and Mistral put one attention_bias on q, k, v and o; Qwen2 always has q, k, v biases.
  const bool attention_bias = read.flag("attention_bias", false);
  parsed.qkv_bias = attention_bias || type == "qwen2" || type == "qwen2_moe";
  parsed.output_bias = attention_bias && type != "qwen3" && type != "qwen3_moe";
  parsed.mlp_bias = read.flag("mlp_bias", false);
  parsed.qk_norm = type == "qwen3" || type == "qwen3_moe" || type.starts_with("gemma3");
  if (type == "gpt_neox") {
    // GPT-NeoX (Pythia): fused query_key_value and dense with biases, a GELU MLP without a gate
    // (dense_h_to_4h, dense_4h_to_h, biased), LayerNorms, rotary on part of each head, an untied head.
    parsed.qkv_bias = parsed.output_bias = parsed.mlp_bias = read.flag("attention_bias", true);
    parsed.mlp_bias = true;
    parsed.layer_norm = true;
    parsed.mlp = mlp_kind::gelu;
  }
  parsed.norms_per_layer = type.starts_with("gemma2") || type.starts_with("gemma3") ? 4 : 2;
  if (parsed.num_experts > 0) {
    parsed.experts_per_token = read.count("num_experts_per_tok", parsed.num_experts);
    // Mixtral's experts use intermediate_size; Qwen's MoE models name theirs.
    parsed.expert_intermediate_size = read.count("moe_intermediate_size", limits.max_dimension, parsed.intermediate_size);
    parsed.shared_expert_intermediate_size = read.count("shared_expert_intermediate_size", limits.max_dimension, 0);
    parsed.shared_expert_gate = type == "qwen2_moe" && parsed.shared_expert_intermediate_size > 0;
    if (!read.failed() && parsed.expert_intermediate_size == 0) {
      return refuse(plan_errc::missing_field, "config.json has experts but no \"moe_intermediate_size\" or \"intermediate_size\"");
    }
  }
  if (read.failed()) return read.failure();
  if (parsed.head_dim == 0) {
    return refuse(plan_errc::invalid_field,
                   fmt::format("config.json: hidden_size {} is smaller than num_attention_heads {} and there is no head_dim",
                               parsed.hidden_size, parsed.num_heads));
  }
  // With the default limits every parameter count stays inside 64 bits (a layer's matrices are at
  // most 2^46 elements).
  if (parsed.num_heads * parsed.head_dim > limits.max_dimension ||
      parsed.num_experts * parsed.expert_intermediate_size > limits.max_expert_width) {
    return refuse(plan_errc::limit_exceeded, "config.json: attention width (heads x head_dim) or experts x their width is beyond any model");
  }
  if (parsed.num_kv_heads > parsed.num_heads || parsed.num_heads % parsed.num_kv_heads != 0) {
    return refuse(plan_errc::invalid_field, fmt::format("config.json: num_attention_heads {} is not a multiple of num_key_value_heads {}",
                                                         parsed.num_heads, parsed.num_kv_heads));
  }
  if (parsed.num_experts > 0 && (parsed.experts_per_token == 0 || parsed.experts_per_token > parsed.num_experts)) {
    return refuse(plan_errc::invalid_field, fmt::format("config.json: num_experts_per_tok must be 1 to {}", parsed.num_experts));
  }
  return parsed;
}

}  // namespace rlmem
