// SPDX-License-Identifier: MIT
// Parameter counts against the published models, config.json reading, presets by name.

#include "planner_support.hpp"

#include <rlmem/plan/plan.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace rlmem {
namespace {


const model_architecture& preset(const char* name) {
  const model_architecture* model = find_preset(name);
  EXPECT_NE(model, nullptr) << "expected a preset named " << name;
  static const model_architecture none;
  return model != nullptr ? *model : none;
}

// sum(p.numel() for p in model.parameters()) of the Hugging Face models (the safetensors
// totals the Hub shows, tied heads counted once); the model cards round these.
TEST(ParameterCount, MatchesTheModelsExactly) {
  const std::pair<const char*, std::uint64_t> expected[] = {
      {"qwen2.5-0.5b", 494032768},     {"qwen2.5-1.5b", 1543714304},    {"qwen2.5-3b", 3085938688},
      {"qwen2.5-7b", 7615616512},      {"qwen2.5-14b", 14770033664},    {"qwen2.5-32b", 32763876352},
      {"qwen2.5-72b", 72706203648},    {"qwen3-0.6b", 596049920},       {"qwen3-1.7b", 1720574976},
      {"qwen3-4b", 4022468096},        {"qwen3-8b", 8190735360},        {"qwen3-14b", 14768307200},
      {"qwen3-32b", 32762123264},      {"llama3.2-1b", 1235814400},     {"llama3.2-3b", 3212749824},
      {"llama3.1-8b", 8030261248},     {"llama3.1-70b", 70553706496},   {"mistral-7b-v0.1", 7241732096},
      {"gemma-2b", 2506172416},        {"gemma-7b", 8537680896},
  };
  for (const auto& [name, total] : expected) {
    EXPECT_EQ(count_parameters(preset(name)).total, total) << name;
  }
}

// The cards' "Number of Parameters (Non-Embedding)" to their two decimals.
TEST(ParameterCount, NonEmbeddingAsTheCardsRoundIt) {
  struct card {
    const char* name;
    double billions;
    double half_last_digit;
  };
  const card expected[] = {{"qwen2.5-0.5b", 0.36, 0.005}, {"qwen2.5-1.5b", 1.31, 0.005}, {"qwen2.5-7b", 6.53, 0.005},
                           {"qwen3-0.6b", 0.44, 0.005},   {"qwen3-1.7b", 1.4, 0.05},     {"qwen3-8b", 6.95, 0.005}};
  for (const card& entry : expected) {
    const double got = static_cast<double>(count_parameters(preset(entry.name)).non_embedding()) / 1e9;
    EXPECT_NEAR(got, entry.billions, entry.half_last_digit) << entry.name;
  }
}

TEST(ParameterCount, MixtureOfExpertsTotalAndActive) {
  // Qwen3-30B-A3B: 30.5 B total, 3.3 B activated (model card). rlmem counts both embedding
  // matrices as active (3.35 B); the card's figure sits between that and counting neither.
  const parameter_count count = count_parameters(preset("qwen3-30b-a3b"));
  EXPECT_NEAR(static_cast<double>(count.total) / 1e9, 30.5, 0.05);
  EXPECT_EQ(count.active_per_token, count.total - 48ull * 120 * 3 * 2048 * 768);  // 120 of 128 experts idle per layer
  EXPECT_NEAR(static_cast<double>(count.active_per_token) / 1e9, 3.3, 0.06);
}

TEST(HfConfig, FixtureConfigsGiveTheMeasuredParameterCounts) {
  for (const auto& [file, params] : {std::pair<const char*, std::uint64_t>{"qwen2.5-0.5b.json", 494032768},
                                     std::pair<const char*, std::uint64_t>{"llama3.2-1b.json", 1235814400}}) {
    EXPECT_EQ(count_parameters(testing::config_model(file)).total, params) << file;
  }
}

TEST(HfConfig, ReadsHeadDimTextConfigAndBiases) {
  auto parsed = parse_hf_config(R"({"model_type":"qwen3","hidden_size":1024,"num_hidden_layers":28,"num_attention_heads":16,
      "num_key_value_heads":8,"head_dim":128,"intermediate_size":3072,"vocab_size":151936,"tie_word_embeddings":true})");
  ASSERT_TRUE(parsed.ok()) << parsed.failure().detail;
  model_architecture model = parsed.value();
  EXPECT_EQ(count_parameters(model).total, 596049920u);
  EXPECT_TRUE(model.qk_norm);
  parsed = parse_hf_config(R"({"model_type":"gemma3","text_config":{"model_type":"gemma3_text","hidden_size":64,
      "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":1,"head_dim":16,"intermediate_size":128,
      "vocab_size":1000}})");
  ASSERT_TRUE(parsed.ok()) << parsed.failure().detail;
  model = parsed.value();
  EXPECT_EQ(model.norms_per_layer, 4u);
  EXPECT_TRUE(model.tied_embeddings);  // Gemma ties by default
  parsed = parse_hf_config(R"({"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,
      "intermediate_size":128,"vocab_size":1000,"attention_bias":true,"mlp_bias":true})");
  ASSERT_TRUE(parsed.ok()) << parsed.failure().detail;
  model = parsed.value();
  EXPECT_EQ(model.num_kv_heads, 4u);
  EXPECT_FALSE(model.tied_embeddings);
  // q, k, v and o biases (4 x 64), MLP biases (2 x 128 + 64), norms (2 x 64) per layer.
  EXPECT_EQ(count_parameters(model).per_layer, 4u * 64 * 64 + 4 * 64 + 3 * 64 * 128 + 2 * 128 + 64 + 2 * 64);
}

TEST(HfConfig, RejectsWhatIsNotAConfigWithTheFieldNamed) {
  struct refusal_case {
    const char* text;
    plan_errc code;
    const char* expected;
  };
  const refusal_case cases[] = {
      {"{not json", plan_errc::not_json, "not JSON"},
      {"[1, 2]", plan_errc::not_json, "not a JSON object"},
      {R"({"hidden_size": 64})", plan_errc::missing_field, "num_hidden_layers"},
      {R"({"hidden_size": "64", "num_hidden_layers": 2})", plan_errc::invalid_field, "\"hidden_size\" must be a positive integer"},
      {R"({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 10})", plan_errc::missing_field,
       "intermediate_size"},
      {R"({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 3, "num_key_value_heads": 2,
           "intermediate_size": 8, "vocab_size": 10})", plan_errc::invalid_field, "not a multiple"},
      {R"({"hidden_size": 99999999999, "num_hidden_layers": 2})", plan_errc::limit_exceeded, "beyond"},
      {R"({"hidden_size": -4, "num_hidden_layers": 2})", plan_errc::invalid_field, "positive integer"},
      {R"({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 10,
           "tie_word_embeddings": "yes"})", plan_errc::invalid_field, "true or false"},
      {R"({"model_type": "deepseek_v3", "kv_lora_rank": 512})", plan_errc::unsupported_architecture, "is not modelled"},
  };
  for (const auto& [text, code, expected] : cases) {
    const auto parsed = parse_hf_config(text);
    EXPECT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(error_name(parsed.code()), error_name(code)) << text;
    const std::string& message = parsed.failure().detail;
    EXPECT_NE(message.find(expected), std::string::npos) << "expected '" << expected << "' in '" << message << "'";
  }
}

// Each limit is a parameter: a config within the defaults is refused under smaller ones.
TEST(HfConfig, LimitsAreParameters) {
  const char* text = R"({"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,
      "intermediate_size":128,"vocab_size":1000})";
  ASSERT_TRUE(parse_hf_config(text).ok());
  hf_config_limits few_layers;
  few_layers.max_layers = 1;
  const auto refused = parse_hf_config(text, few_layers);
  EXPECT_EQ(refused.code(), plan_errc::limit_exceeded);
  EXPECT_EQ(refused.failure().detail, "config.json: \"num_hidden_layers\" = 2 is beyond 1");
  hf_config_limits shallow;
  shallow.max_nesting = 1;
  EXPECT_EQ(parse_hf_config(R"({"text_config": {"hidden_size": 64}})", shallow).failure().detail, "config.json nests deeper than 1 levels");
}

TEST(Presets, FoundByHubNamesAndSuggestedWhenMisspelt) {
  EXPECT_EQ(find_preset("Qwen/Qwen2.5-7B-Instruct"), find_preset("qwen2.5-7b"));
  EXPECT_EQ(find_preset("meta-llama/Llama-3.1-8B-Instruct"), find_preset("llama3.1-8b"));
  EXPECT_EQ(find_preset("qwen2.5-8b"), nullptr);
  const auto similar = similar_preset_names("qwen2.5-05b");
  ASSERT_FALSE(similar.empty());
  EXPECT_EQ(similar.front(), "qwen2.5-0.5b");
  EXPECT_EQ(similar_preset_names("lama3.1-70b").front(), "llama3.1-70b");
  // Every family the issue names is there.
  for (const char* name : {"qwen2.5-0.5b", "qwen2.5-72b", "qwen3-0.6b", "qwen3-32b", "llama3.2-1b", "llama3.3-70b"}) {
    EXPECT_NE(find_preset(name), nullptr) << name;
  }
}

}  // namespace
}  // namespace rlmem

namespace rlmem {
namespace {

// nanochat's d20 (n_layer 20, n_embd 1280, 10 heads, vocab 65536): sum(p.numel()) of its GPT is
// 560,988,160: untied wte and lm_head, no biases, norms without weights, ReLU^2 MLP of 4 x n_embd.
TEST(NanochatConfig, D20HasExactlyItsParameters) {
  const auto parsed = parse_hf_config(R"({"sequence_len": 2048, "vocab_size": 65536, "n_layer": 20, "n_head": 10,
                                           "n_kv_head": 10, "n_embd": 1280})");
  ASSERT_TRUE(parsed.ok()) << parsed.failure().detail;
  const model_architecture& model = parsed.value();
  EXPECT_EQ(model.model_type, "nanochat");
  EXPECT_EQ(model.mlp, mlp_kind::relu2);
  EXPECT_EQ(model.intermediate_size, 4u * 1280);
  EXPECT_FALSE(model.tied_embeddings);
  EXPECT_FALSE(model.norm_weights);
  const parameter_count count = count_parameters(model);
  EXPECT_EQ(count.total, 560988160u);
  EXPECT_EQ(count.lm_head, 65536u * 1280);
  EXPECT_EQ(count.per_layer, 4u * 1280 * 1280 + 2u * 1280 * 5120);
}

// Checkpoint metadata keeps the GPTConfig under model_config; GPT-2's config shares the n_* names
// but says model_type. Other ungated families are refused by name, not counted as SwiGLU.
TEST(NanochatConfig, ReadUnderModelConfigAndToldApartFromGpt2) {
  auto parsed = parse_hf_config(R"({"step": 21400, "model_config": {"sequence_len": 2048, "vocab_size": 65536, "n_layer": 12,
                                     "n_head": 6, "n_kv_head": 6, "n_embd": 768}, "user_config": {}})");
  ASSERT_TRUE(parsed.ok()) << parsed.failure().detail;
  EXPECT_EQ(parsed.value().num_layers, 12u);
  EXPECT_EQ(parsed.value().rotary_positions, 20480u);
  parsed = parse_hf_config(R"({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257})");
  ASSERT_TRUE(parsed.ok()) << parsed.failure().detail;
  EXPECT_EQ(parsed.value().model_type, "gpt2");
  EXPECT_EQ(parsed.value().mlp, mlp_kind::gelu);
  parsed = parse_hf_config(R"({"model_type": "phi", "hidden_size": 512, "num_hidden_layers": 6, "num_attention_heads": 8,
                               "intermediate_size": 2048, "vocab_size": 50304})");
  EXPECT_EQ(parsed.code(), plan_errc::unsupported_architecture);
  EXPECT_NE(parsed.failure().detail.find("not counted as SwiGLU"), std::string::npos) << parsed.failure().detail;
  parsed = parse_hf_config(R"({"n_layer": 12, "n_embd": 768, "n_head": 5, "vocab_size": 65536, "sequence_len": 1024})");
  EXPECT_EQ(parsed.code(), plan_errc::invalid_field);
  EXPECT_NE(parsed.failure().detail.find("n_embd 768 is not a multiple of n_head 5"), std::string::npos) << parsed.failure().detail;
}

// sum(p.numel()) of transformers' GPT2LMHeadModel (GPT-2 small: biases everywhere, LayerNorms,
// 1024 learned positions, tied head) and GPTNeoXForCausalLM at Pythia-160M's shape (untied), as
// measure_issue12.py counted them on the GPU.
TEST(ParameterCount, Gpt2AndGptNeoxWithTheirBiasesNormsAndPositions) {
  for (const auto& [name, total] : {std::pair<const char*, std::uint64_t>{"gpt2-small", 124439808}, {"pythia-160m", 162322944}}) {
    const model_architecture model = testing::config_model(std::string(name) + ".json");
    EXPECT_EQ(count_parameters(model).total, total) << name;
    EXPECT_EQ(model.mlp, mlp_kind::gelu) << name;
  }
}

// A plain MLP has up and down only: two thirds of a gated one's matrices at the same width.
TEST(ParameterCount, UngatedMlpHasNoGate) {
  model_architecture gated = *find_preset("qwen2.5-0.5b");
  model_architecture plain = gated;
  plain.mlp = mlp_kind::gelu;
  const std::uint64_t mlp = gated.hidden_size * gated.intermediate_size;
  EXPECT_EQ(count_parameters(gated).per_layer - count_parameters(plain).per_layer, mlp);
}

}  // namespace
}  // namespace rlmem
