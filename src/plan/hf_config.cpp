// SPDX-License-Identifier: MIT
// Reads a Hugging Face config.json into a model_architecture; never throws out.

#include <rlmem/plan/plan.hpp>

#include "json_nesting.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <string_view>

namespace rlmem {

namespace {

using json = nlohmann::json;

// Bounds on each field reject nonsense early; products are bounded below.
constexpr std::uint64_t max_dimension = 1u << 20;
constexpr std::uint64_t max_vocab = 1u << 24;
constexpr std::uint64_t max_layers = 4096;
constexpr std::uint64_t max_experts = 4096;

class field_reader {
 public:
  field_reader(const json& config, std::string& message) : config_(config), message_(message) {}

  bool failed() const { return failed_; }

  /// A positive integer field; `fallback` when absent (0: required).
  std::uint64_t count(const char* key, std::uint64_t limit, std::optional<std::uint64_t> fallback = std::nullopt) {
    if (failed_) return 0;
    auto it = config_.find(key);
    if (it == config_.end() || it->is_null()) {
      if (fallback) return *fallback;
      return fail(fmt::format("config.json lacks \"{}\"", key));
    }
    if (!it->is_number_integer() || it->get<std::int64_t>() <= 0) {
      return fail(fmt::format("config.json: \"{}\" must be a positive integer, not {}", key, it->dump()));
    }
    const auto value = it->get<std::uint64_t>();
    if (value > limit) return fail(fmt::format("config.json: \"{}\" = {} is beyond {}", key, value, limit));
    return value;
  }

  bool flag(const char* key, bool fallback) {
    if (failed_) return fallback;
    auto it = config_.find(key);
    if (it == config_.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) {
      fail(fmt::format("config.json: \"{}\" must be true or false, not {}", key, it->dump()));
      return fallback;
    }
    return it->get<bool>();
  }

  std::string text(const char* key) {
    auto it = config_.find(key);
    return it != config_.end() && it->is_string() ? it->get<std::string>() : std::string();
  }

 private:
  std::uint64_t fail(std::string message) {
    if (!failed_) message_ = std::move(message);
    failed_ = true;
    return 0;
  }

  const json& config_;
  std::string& message_;
  bool failed_ = false;
};

// nlohmann's parser keeps a stack per nesting level; configs nest two or three levels deep.
constexpr std::uint32_t max_nesting = 64;


// nanochat's GPT (nanochat/gpt.py): untied wte and lm_head, no biases, F.rms_norm without
// weights (on the layer inputs and on q and k), a ReLU^2 MLP of 4 x n_embd, rotary tables of
// 10 x sequence_len positions kept as buffers.
bool parse_nanochat_config(const json& config, model_architecture& model, std::string& message) {
  field_reader read(config, message);
  model_architecture parsed;
  parsed.name = parsed.model_type = "nanochat";
  parsed.num_layers = read.count("n_layer", max_layers);
  parsed.num_heads = read.count("n_head", max_dimension);
  parsed.num_kv_heads = read.count("n_kv_head", max_dimension, parsed.num_heads);
  parsed.hidden_size = read.count("n_embd", max_dimension);
  parsed.vocab_size = read.count("vocab_size", max_vocab);
  const std::uint64_t sequence_len = read.count("sequence_len", max_dimension);
  if (read.failed()) return false;
  if (parsed.hidden_size % parsed.num_heads != 0) {
    message = fmt::format("nanochat config: n_embd {} is not a multiple of n_head {}", parsed.hidden_size, parsed.num_heads);
    return false;
  }
  if (parsed.num_kv_heads > parsed.num_heads || parsed.num_heads % parsed.num_kv_heads != 0) {
    message = fmt::format("nanochat config: n_head {} is not a multiple of n_kv_head {}", parsed.num_heads, parsed.num_kv_heads);
    return false;
  }
  parsed.head_dim = parsed.hidden_size / parsed.num_heads;
  parsed.intermediate_size = 4 * parsed.hidden_size;
  parsed.tied_embeddings = false;
  parsed.qk_norm = true;
  parsed.norm_weights = false;
  parsed.mlp = mlp_kind::relu2;
  parsed.rotary_positions = 10 * sequence_len;
  model = std::move(parsed);
  return true;
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
bool parse_gpt2_config(const json& config, model_architecture& model, std::string& message) {
  field_reader read(config, message);
  model_architecture parsed;
  parsed.name = parsed.model_type = "gpt2";
  parsed.hidden_size = read.count("n_embd", max_dimension);
  parsed.num_layers = read.count("n_layer", max_layers);
  parsed.num_heads = parsed.num_kv_heads = read.count("n_head", max_dimension);
  parsed.vocab_size = read.count("vocab_size", max_vocab);
  parsed.learned_positions = read.count("n_positions", max_dimension, 1024);
  parsed.intermediate_size = read.count("n_inner", max_dimension, 4 * parsed.hidden_size);
  parsed.tied_embeddings = read.flag("tie_word_embeddings", true);
  if (read.failed()) return false;
  if (parsed.hidden_size % parsed.num_heads != 0) {
    message = fmt::format("config.json: n_embd {} is not a multiple of n_head {}", parsed.hidden_size, parsed.num_heads);
    return false;
  }
  parsed.head_dim = parsed.hidden_size / parsed.num_heads;
  parsed.qkv_bias = parsed.output_bias = parsed.mlp_bias = true;
  parsed.layer_norm = true;
  parsed.mlp = mlp_kind::gelu;
  parsed.residual_dropout = positive_fraction(config, "resid_pdrop", 0.1);
  model = std::move(parsed);
  return true;
}

}  // namespace

bool parse_hf_config(std::string_view json_text, model_architecture& model, std::string& message) {
  if (detail::json_nests_deeper(json_text, max_nesting)) {
    message = fmt::format("config.json nests deeper than {} levels", max_nesting);
    return false;
  }
  json document;
  try {
    document = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& failure) {
    message = fmt::format("config.json is not JSON (byte {})", failure.byte);
    return false;
  } catch (const json::exception& failure) {  // e.g. a number beyond any type
    message = fmt::format("config.json is not JSON we can read ({})", failure.what());
    return false;
  }
  if (!document.is_object()) {
    message = "config.json is not a JSON object";
    return false;
  }
  // nanochat keeps its GPTConfig at the top level or, in checkpoint metadata, under
  // "model_config"; GPT-2's config shares the n_* names but says model_type.
  const json& nanochat = document.contains("model_config") && document["model_config"].is_object() ? document["model_config"] : document;
  if (!nanochat.contains("model_type") && !document.contains("model_type") && nanochat.contains("n_layer") && nanochat.contains("n_embd")) {
    return parse_nanochat_config(nanochat, model, message);
  }
  // Multimodal configs (Gemma 3, Qwen2.5-VL, ...) keep the language model in text_config.
  const json& config = document.contains("text_config") && document["text_config"].is_object() ? document["text_config"] : document;
  // Layouts the memory terms do not describe: latent attention and DeepSeek's routed experts.
  for (const char* unsupported : {"kv_lora_rank", "q_lora_rank", "n_routed_experts"}) {
    if (config.contains(unsupported)) {
      message = fmt::format("config.json: \"{}\" (DeepSeek-style latent attention or routed experts) is not modelled; "
                            "supported: Llama, Qwen2/2.5/3 (and MoE), Mistral, Mixtral, Gemma, GPT-2, GPT-NeoX", unsupported);
      return false;
    }
  }
  field_reader read(config, message);
  model_architecture parsed;
  parsed.model_type = read.text("model_type");
  if (parsed.model_type.empty()) parsed.model_type = field_reader(document, message).text("model_type");
  parsed.name = parsed.model_type.empty() ? "config.json" : parsed.model_type;
  const std::string& type = parsed.model_type;
  const bool gemma = type.starts_with("gemma");
  if (type == "gpt2") return parse_gpt2_config(config, model, message);
  if (std::find(ungated_families.begin(), ungated_families.end(), type) != ungated_families.end()) {
    message = fmt::format("config.json: model_type \"{}\" has an MLP without a gate and LayerNorm biases or learned positions, "
                          "which are not modelled (it is not counted as SwiGLU); modelled: Llama, Qwen2/2.5/3 (and MoE), "
                          "Mistral, Mixtral, Gemma, GPT-2, GPT-NeoX, nanochat",
                          type.substr(0, 40));
    return false;
  }

  parsed.hidden_size = read.count("hidden_size", max_dimension);
  parsed.num_layers = read.count("num_hidden_layers", max_layers);
  parsed.num_heads = read.count("num_attention_heads", max_dimension);
  parsed.num_kv_heads = read.count("num_key_value_heads", max_dimension, parsed.num_heads);
  parsed.vocab_size = read.count("vocab_size", max_vocab);
  parsed.num_experts = read.count("num_experts", max_experts, read.count("num_local_experts", max_experts, 0));
  parsed.intermediate_size = read.count("intermediate_size", max_dimension, parsed.num_experts > 0 ? std::optional<std::uint64_t>(0) : std::nullopt);
  if (read.failed()) return false;
  const std::uint64_t default_head_dim = parsed.num_heads != 0 ? parsed.hidden_size / parsed.num_heads : 0;
  parsed.head_dim = read.count("head_dim", max_dimension, default_head_dim);
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
    parsed.expert_intermediate_size = read.count("moe_intermediate_size", max_dimension, parsed.intermediate_size);
    parsed.shared_expert_intermediate_size = read.count("shared_expert_intermediate_size", max_dimension, 0);
    parsed.shared_expert_gate = type == "qwen2_moe" && parsed.shared_expert_intermediate_size > 0;
    if (!read.failed() && parsed.expert_intermediate_size == 0) {
      message = "config.json has experts but no \"moe_intermediate_size\" or \"intermediate_size\"";
      return false;
    }
  }
  if (read.failed()) return false;
  if (parsed.head_dim == 0) {
    message = fmt::format("config.json: hidden_size {} is smaller than num_attention_heads {} and there is no head_dim",
                          parsed.hidden_size, parsed.num_heads);
    return false;
  }
  // Keep every parameter count inside 64 bits (a layer's matrices are at most 2^46 elements).
  if (parsed.num_heads * parsed.head_dim > max_dimension || parsed.num_experts * parsed.expert_intermediate_size > (1u << 24)) {
    message = "config.json: attention width (heads x head_dim) or experts x their width is beyond any model";
    return false;
  }
  if (parsed.num_kv_heads > parsed.num_heads || parsed.num_heads % parsed.num_kv_heads != 0) {
    message = fmt::format("config.json: num_attention_heads {} is not a multiple of num_key_value_heads {}",
                          parsed.num_heads, parsed.num_kv_heads);
    return false;
  }
  if (parsed.num_experts > 0 && (parsed.experts_per_token == 0 || parsed.experts_per_token > parsed.num_experts)) {
    message = fmt::format("config.json: num_experts_per_tok must be 1 to {}", parsed.num_experts);
    return false;
  }
  model = std::move(parsed);
  return true;
}

}  // namespace rlmem
