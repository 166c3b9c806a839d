// SPDX-License-Identifier: MIT
// The JSON reports follow the schemas documented in docs/schema/, checked by the tests' small
// validator (json_schema.hpp) over real outputs.

#include "fixtures.hpp"
#include "grpo_plan.hpp"
#include "json_schema.hpp"

#include <rlmem/report/report.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <limits>

namespace rlmem {

namespace {

using json = nlohmann::json;

void expect_valid(const std::string& output, const std::string& schema_name) {
  std::vector<std::string> problems = testing::schema_problems(json::parse(output), schema_name);
  for (std::size_t i = 0; i < std::min<std::size_t>(problems.size(), 10); ++i) ADD_FAILURE() << schema_name << ": " << problems[i];
}

}  // namespace

class inspect_schema : public ::testing::TestWithParam<const char*> {};

TEST_P(inspect_schema, output_follows_the_documented_schema) {
  const snapshot& snap = testing::fixture(GetParam());
  expect_valid(render_inspection_json(snap, inspect(snap), GetParam()), "inspect.schema.json");
}

INSTANTIATE_TEST_SUITE_P(fixtures, inspect_schema,
                         ::testing::Values("grpo_leak_logits.pickle.zst", "frag_default_oom.pickle.zst", "tiny_oom_cpp_stacks.pickle",
                                           "tiny_oom_expandable_compile.pickle", "validation_kv_leak.pickle.zst"));

TEST(schema, diff_output_follows_the_documented_schema) {
  inspect_options every_site;
  every_site.top = std::numeric_limits<std::size_t>::max();
  inspection a = inspect(testing::fixture("grpo_clean.pickle.zst"), every_site);
  inspection b = inspect(testing::fixture("grpo_leak_logits.pickle.zst"), every_site);
  expect_valid(render_diff_json(diff_inspections(a, b), "a", "b"), "diff.schema.json");
}

TEST(schema, folder_output_follows_the_documented_schema) {
  std::vector<rank_result> ranks(2);
  ranks[0].rank = 0;
  ranks[0].ok = true;
  ranks[0].result = inspect(testing::fixture("frag_default_oom.pickle.zst"));
  ranks[1].rank = 1;
  ranks[1].failure = describe({errc::truncated, 12, "inside BININT1"});
  expect_valid(render_ranks_json(ranks, measure_imbalance(ranks), "dir"), "ranks.schema.json");
}

TEST(schema, replay_output_follows_the_documented_schema) {
  const snapshot& snap = testing::fixture("frag_default_oom.pickle.zst");
  replay_report report;
  report.file = "frag_default_oom";
  report.settings = settings_of(snap);
  report.capacity_bytes = 2'805'590'497;
  replay_options options;
  options.capacity_bytes = report.capacity_bytes;
  report.result = replay(snap, options);
  report.min_capacity_bytes = min_capacity(snap, options);
  report.comparison = compare_settings(snap, options);
  expect_valid(render_replay_json(report), "replay.schema.json");
}

TEST(schema, plan_output_with_a_trainer_config_follows_the_documented_schema) {
  plan_report report = testing::grpo_plan_fitted_to_h100("qwen2.5-1.5b", {});
  trainer_config_mapping mapping;
  mapping.format = trainer_config_format::trl_yaml;
  mapping.defaults_from = "huggingface/trl f2cd577";
  mapping.mapped.push_back({"per_device_train_batch_size", "16", "--micro-batch", "16", "", false, true});
  mapping.ignored.push_back({"use_vllm", "true", "--from does not map the vLLM rollout yet (give --rollout vllm and its knobs)"});
  report.from_config = mapping;
  report.from_file = "recipe.yaml";
  const std::string output = render_plan_json(report);
  expect_valid(output, "plan.schema.json");
  const json source = json::parse(output)["from"];
  EXPECT_EQ(source["format"], "trl-grpo-yaml");
  EXPECT_EQ(source["mapped"][0]["overridden"], true);
  EXPECT_EQ(source["ignored"][0]["key"], "use_vllm");
}

TEST(schema, plan_with_response_lengths_follows_the_documented_schema) {
  plan_report report = testing::grpo_plan_fitted_to_h100("qwen2.5-1.5b", {});
  length_view_options options;
  options.max_length = report.knobs.new_tokens;
  const auto quantiles = parse_length_quantiles("p50=100,p90=300");
  ASSERT_TRUE(quantiles.ok()) << quantiles.failure().detail;
  options.quantiles = quantiles.value();
  // Without a card, then on the card --fit used.
  for (const std::uint64_t usable : {std::uint64_t{0}, report.fit->usable_bytes}) {
    options.usable_bytes = usable;
    report.response_lengths = plan_response_lengths(report.model, report.knobs, options);
    report.response_lengths_card = "h100-80g";
    const std::string output = render_plan_json(report);
    expect_valid(output, "plan.schema.json");
    const json lengths = json::parse(output)["response_lengths"];
    EXPECT_EQ(lengths["points"].size(), 3u);
    EXPECT_EQ(lengths.contains("fitting_length"), usable != 0);
  }
}

TEST(schema, plan_output_follows_the_documented_schema) {
  const auto latents = parse_buffer_spec("latents=8x50x263x196:fp32@rollout");
  ASSERT_TRUE(latents.ok()) << latents.failure().detail;
  const plan_report report = testing::grpo_plan_fitted_to_h100("qwen2.5-1.5b", {latents.value()});
  const std::string output = render_plan_json(report);
  expect_valid(output, "plan.schema.json");
  // The components of every phase add up to its peak, and the buffer sits where it was put.
  const json plan = json::parse(output);
  std::uint64_t largest = 0;
  for (const auto& phase : plan["phases"]) {
    std::uint64_t sum = 0;
    for (const auto& [name, bytes] : phase["components"].items()) sum += bytes.get<std::uint64_t>();
    EXPECT_EQ(sum, phase["peak_bytes"].get<std::uint64_t>()) << phase["name"];
    largest = std::max(largest, phase["peak_bytes"].get<std::uint64_t>());
  }
  EXPECT_EQ(plan["peak_bytes"].get<std::uint64_t>(), largest);
  EXPECT_EQ(plan["phases"][0]["components"]["buffer latents"], 82476800);
  EXPECT_TRUE(plan["fit"]["found"].get<bool>());
}

TEST(schema, plan_with_a_rollout_engine_follows_the_documented_schema) {
  plan_report report;
  report.model = *find_preset("qwen2.5-1.5b");
  report.knobs.phase = plan_phase::grpo_step;
  report.knobs.prompts = 8;
  report.knobs.group = 8;
  report.knobs.prompt_len = 512;
  report.knobs.new_tokens = 512;
  report.knobs.micro_batch = 8;
  for (const rollout_kind engine : {rollout_kind::vllm, rollout_kind::sglang}) {
    report.knobs.engine.rollout = engine;
    report.knobs.engine.device_bytes = gpu_memory_bytes("h100-80g");
    report.knobs.engine.gpu_memory_utilization = 0.3;
    report.knobs.engine.mem_fraction_static = 0.4;
    report.knobs.engine.sleep_level = 1;
    report.plan = plan_memory(report.model, report.knobs);
    ASSERT_TRUE(report.plan.engine.refusal.empty()) << report.plan.engine.refusal;
    const std::string output = render_plan_json(report);
    expect_valid(output, "plan.schema.json");
    const json plan = json::parse(output);
    EXPECT_EQ(plan["rollout_engine"]["engine"], to_string(engine));
    EXPECT_EQ(plan["knobs"]["rollout"]["sleep_level"], 1);
  }
}

// --handoff and --host-memory add the transitions as phases, the hand-off's summary, the host per
// GPU and node and fit's host verdict: each in the schema.
TEST(schema, plan_with_a_handoff_and_host_memory_follows_the_documented_schema) {
  plan_report report = testing::grpo_plan_fitted_to_h100("qwen2.5-1.5b");
  report.knobs.micro_batch = 8;
  report.knobs.engine.rollout = rollout_kind::vllm;
  report.knobs.engine.device_bytes = gpu_memory_bytes("h100-80g");
  report.knobs.engine.gpu_memory_utilization = 0.5;
  report.knobs.engine.sleep_level = 1;
  report.knobs.handoff = handoff_kind::rlmem_pause;
  report.knobs.wake_order = wake_order_kind::together;
  report.knobs.gpus_per_node = 1;
  report.plan = plan_memory(report.model, report.knobs);
  ASSERT_TRUE(report.plan.engine.refusal.empty()) << report.plan.engine.refusal;
  report.host_memory_bytes = report.plan.host.per_node_bytes - 1;
  fit_options options;
  options.budget_bytes = report.fit_budget_bytes;
  options.host_memory_bytes = report.host_memory_bytes;
  report.fit = fit_configuration(report.model, report.knobs, options);
  const std::string output = render_plan_json(report);
  expect_valid(output, "plan.schema.json");
  const json plan = json::parse(output);
  EXPECT_EQ(plan["knobs"]["handoff"]["mode"], "rlmem-pause");
  EXPECT_EQ(plan["handoff"]["transitions"][1], "wake-all");
  EXPECT_EQ(plan["host"]["fits"], false);
  EXPECT_EQ(plan["fit"]["yours"]["host"]["fits_host"], false);
}

TEST(schema, the_validator_catches_a_missing_key) {
  EXPECT_FALSE(testing::schema_problems(json{{"schema_version", 3}}, "inspect.schema.json").empty());
}

}  // namespace rlmem
