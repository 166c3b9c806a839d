// SPDX-License-Identifier: MIT
// Parameter counts of decoder-only transformers, and the built-in architectures.

#include <rlmem/plan/plan.hpp>

#include <algorithm>
#include <array>
#include <cctype>

namespace rlmem {

parameter_count count_parameters(const model_architecture& model) {
  const std::uint64_t h = model.hidden_size;
  const std::uint64_t q_width = model.num_heads * model.head_dim;
  const std::uint64_t kv_width = model.num_kv_heads * model.head_dim;
  std::uint64_t attention = h * q_width + 2 * h * kv_width + q_width * h;
  if (model.qkv_bias) attention += q_width + 2 * kv_width;
  if (model.output_bias) attention += h;
  if (model.qk_norm && model.norm_weights) attention += 2 * model.head_dim;

  // A gated MLP has gate, up and down; a plain one (ReLU^2, GELU) only up and down.
  const std::uint64_t matrices = model.mlp == mlp_kind::gated ? 3 : 2;
  auto swiglu = [&](std::uint64_t intermediate) {
    return matrices * h * intermediate + (model.mlp_bias ? (matrices - 1) * intermediate + h : 0);
  };
  std::uint64_t mlp = 0;
  std::uint64_t active_mlp = 0;
  if (model.num_experts == 0) {
    mlp = active_mlp = swiglu(model.intermediate_size);
  } else {
    const std::uint64_t router = h * model.num_experts;
    std::uint64_t shared = 0;
    if (model.shared_expert_intermediate_size > 0) shared = swiglu(model.shared_expert_intermediate_size);
    if (model.shared_expert_gate) shared += h;
    mlp = model.num_experts * swiglu(model.expert_intermediate_size) + router + shared;
    active_mlp = model.experts_per_token * swiglu(model.expert_intermediate_size) + router + shared;
  }
  // LayerNorm has a bias beside its weight; RMSNorm only the weight.
  const std::uint64_t norm = model.norm_weights ? (model.layer_norm ? 2 * h : h) : 0;
  const std::uint64_t norms = model.norms_per_layer * norm;

  parameter_count count;
  if (model.opaque_params > 0) {
    count.total = count.active_per_token = model.opaque_params;
    return count;
  }
  count.per_layer = attention + mlp + norms;
  count.embedding = model.vocab_size * h;
  count.lm_head = model.tied_embeddings ? 0 : model.vocab_size * h;
  count.total = model.num_layers * count.per_layer + norm + count.embedding + count.lm_head + model.learned_positions * h;
  count.active_per_token = count.total - model.num_layers * (mlp - active_mlp);
  return count;
}

namespace {

model_architecture dense(const char* name, const char* type, std::uint64_t hidden, std::uint64_t layers,
                         std::uint64_t heads, std::uint64_t kv_heads, std::uint64_t head_dim,
                         std::uint64_t intermediate, std::uint64_t vocab, bool tied) {
  model_architecture model;
  model.name = name;
  model.model_type = type;
  model.hidden_size = hidden;
  model.num_layers = layers;
  model.num_heads = heads;
  model.num_kv_heads = kv_heads;
  model.head_dim = head_dim != 0 ? head_dim : hidden / heads;
  model.intermediate_size = intermediate;
  model.vocab_size = vocab;
  model.tied_embeddings = tied;
  const std::string_view family = type;
  model.qkv_bias = family == "qwen2" || family == "qwen2_moe";
  model.qk_norm = family == "qwen3" || family == "qwen3_moe";
  return model;
}

model_architecture moe(model_architecture model, std::uint64_t experts, std::uint64_t per_token,
                       std::uint64_t expert_intermediate) {
  model.num_experts = experts;
  model.experts_per_token = per_token;
  model.expert_intermediate_size = expert_intermediate;
  return model;
}

// Values from each model's config.json on the Hugging Face Hub.
const std::vector<model_architecture>& presets() {
  static const std::vector<model_architecture> table = {
      dense("qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 0, 4864, 151936, true),
      dense("qwen2.5-1.5b", "qwen2", 1536, 28, 12, 2, 0, 8960, 151936, true),
      dense("qwen2.5-3b", "qwen2", 2048, 36, 16, 2, 0, 11008, 151936, true),
      dense("qwen2.5-7b", "qwen2", 3584, 28, 28, 4, 0, 18944, 152064, false),
      dense("qwen2.5-14b", "qwen2", 5120, 48, 40, 8, 0, 13824, 152064, false),
      dense("qwen2.5-32b", "qwen2", 5120, 64, 40, 8, 0, 27648, 152064, false),
      dense("qwen2.5-72b", "qwen2", 8192, 80, 64, 8, 0, 29568, 152064, false),
      dense("qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 128, 3072, 151936, true),
      dense("qwen3-1.7b", "qwen3", 2048, 28, 16, 8, 128, 6144, 151936, true),
      dense("qwen3-4b", "qwen3", 2560, 36, 32, 8, 128, 9728, 151936, true),
      dense("qwen3-8b", "qwen3", 4096, 36, 32, 8, 128, 12288, 151936, false),
      dense("qwen3-14b", "qwen3", 5120, 40, 40, 8, 128, 17408, 151936, false),
      dense("qwen3-32b", "qwen3", 5120, 64, 64, 8, 128, 25600, 151936, false),
      moe(dense("qwen3-30b-a3b", "qwen3_moe", 2048, 48, 32, 4, 128, 6144, 151936, false), 128, 8, 768),
      dense("llama3.2-1b", "llama", 2048, 16, 32, 8, 64, 8192, 128256, true),
      dense("llama3.2-3b", "llama", 3072, 28, 24, 8, 128, 8192, 128256, true),
      dense("llama3-8b", "llama", 4096, 32, 32, 8, 128, 14336, 128256, false),
      dense("llama3.1-8b", "llama", 4096, 32, 32, 8, 128, 14336, 128256, false),
      dense("llama3-70b", "llama", 8192, 80, 64, 8, 128, 28672, 128256, false),
      dense("llama3.1-70b", "llama", 8192, 80, 64, 8, 128, 28672, 128256, false),
      dense("llama3.3-70b", "llama", 8192, 80, 64, 8, 128, 28672, 128256, false),
      dense("mistral-7b-v0.1", "mistral", 4096, 32, 32, 8, 128, 14336, 32000, false),
      dense("mistral-7b-v0.3", "mistral", 4096, 32, 32, 8, 128, 14336, 32768, false),
      dense("gemma-2b", "gemma", 2048, 18, 8, 1, 256, 16384, 256000, true),
      dense("gemma-7b", "gemma", 3072, 28, 16, 16, 256, 24576, 256000, true),
  };
  return table;
}

// Lower case, no organisation prefix, no chat suffix, no separators: "Qwen/Qwen2.5-7B-Instruct"
// and "qwen2.5-7b" meet at "qwen2.57b".
std::string normalized(std::string_view name) {
  if (auto slash = name.rfind('/'); slash != std::string_view::npos) name.remove_prefix(slash + 1);
  std::string text;
  for (char c : name) text.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (std::string_view suffix : {"-instruct", "-chat", "-base", "-it", "-hf"}) {
    if (text.size() > suffix.size() && text.ends_with(suffix)) text.resize(text.size() - suffix.size());
  }
  if (text.starts_with("meta-")) text.erase(0, 5);
  std::erase_if(text, [](char c) { return c == '-' || c == '_' || c == ' '; });
  return text;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

const model_architecture* find_preset(std::string_view name) {
  const std::string key = normalized(name);
  for (const model_architecture& model : presets()) {
    if (normalized(model.name) == key) return &model;
  }
  return nullptr;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const model_architecture& model : presets()) names.push_back(model.name);
  return names;
}

std::vector<std::string> similar_preset_names(std::string_view name, std::size_t count) {
  const std::string key = normalized(name.substr(0, 200));
  std::vector<std::pair<std::size_t, std::string>> ranked;
  for (const model_architecture& model : presets()) {
    ranked.emplace_back(edit_distance(key, normalized(model.name)), model.name);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> names;
  for (std::size_t i = 0; i < ranked.size() && i < count; ++i) names.push_back(ranked[i].second);
  return names;
}

}  // namespace rlmem
