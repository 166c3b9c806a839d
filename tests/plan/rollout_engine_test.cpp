// SPDX-License-Identifier: MIT
// vLLM's and SGLang's budgets: the engines' formulas against the numbers their own logs print
// (issues and pull requests quoting start-up logs), and how the budget enters the phases.

#include "planner_support.hpp"

#include <rlmem/plan/plan.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

namespace rlmem {
namespace {

constexpr double bytes_per_gib = 1024.0 * 1024.0 * 1024.0;

using testing::model;

std::uint64_t gib_bytes(double value) { return static_cast<std::uint64_t>(std::llround(value * bytes_per_gib)); }

std::string two_decimals(double value) { return fmt::format("{:.2f}", value); }

using testing::component;
using testing::phase_named;

plan_knobs with_vllm(plan_knobs knobs, std::uint64_t device_bytes, double utilization) {
  knobs.engine.rollout = rollout_kind::vllm;
  knobs.engine.device_bytes = device_bytes;
  knobs.engine.gpu_memory_utilization = utilization;
  return knobs;
}

plan_knobs with_sglang(plan_knobs knobs, std::uint64_t device_bytes, double fraction) {
  knobs.engine.rollout = rollout_kind::sglang;
  knobs.engine.device_bytes = device_bytes;
  knobs.engine.mem_fraction_static = fraction;
  return knobs;
}

// vllm-project/vllm#10517, Llama-3.1-8B on an RTX 3090: "kv_cache_size=3.81GiB ... # GPU blocks:
// 1952 ... Maximum concurrency for 20000 tokens per request: 1.56x", and with 29000 tokens
// "kv_cache_size=2.89GiB ... # GPU blocks: 1478 ... Maximum concurrency ... 0.82x ... the maximum
// number of tokens that can be stored in KV cache (23648)".
TEST(RolloutEngine, VllmBlocksTokensAndConcurrencyMatchItsLogForLlama31_8b) {
  const model_architecture& llama = model("llama3.1-8b");
  // A block of 16 tokens over 32 layers x 2 x 8 KV heads x 128 x 2 bytes: 2 MiB.
  const vllm_kv_cache one = vllm_kv_cache_of(llama, 1 << 30, 16, 20000);
  EXPECT_EQ(one.page_bytes * llama.num_layers, 2u << 20) << "expected 2 MiB per block of every layer";
  struct logged {
    std::uint64_t blocks;
    const char* kv_gib;
    std::uint64_t max_model_len;
    const char* concurrency;
  };
  for (const logged row : {logged{1952, "3.81", 20000, "1.56"}, logged{1478, "2.89", 29000, "0.82"}}) {
    // The logged GiB is rounded; the blocks' own bytes print as the log does.
    const std::uint64_t blocks_bytes = row.blocks * one.page_bytes * llama.num_layers;
    EXPECT_EQ(two_decimals(static_cast<double>(blocks_bytes) / bytes_per_gib), row.kv_gib) << row.blocks << " blocks";
    const vllm_kv_cache cache = vllm_kv_cache_of(llama, static_cast<std::int64_t>(blocks_bytes) + 1000, 16, row.max_model_len);
    EXPECT_EQ(cache.blocks, row.blocks);
    EXPECT_EQ(two_decimals(cache.max_concurrency), row.concurrency) << row.max_model_len << " tokens per request";
  }
  EXPECT_EQ(vllm_kv_cache_of(llama, static_cast<std::int64_t>(1478) * (2 << 20), 16, 29000).tokens, 23648u);
}

// vllm-project/vllm#13596 (the log line's own PR): "GPU KV cache size: 2,042,016 tokens" and
// "Maximum concurrency for 2,048 tokens per request: 997.08x" from 127,626 blocks of 16.
TEST(RolloutEngine, VllmTokenCountAndConcurrencyFromBlocksMatchTheLogLinesPr) {
  const model_architecture& qwen = model("qwen2.5-7b");
  const vllm_kv_cache page = vllm_kv_cache_of(qwen, 1, 16, 2048);
  const auto available = static_cast<std::int64_t>(127626 * page.page_bytes * qwen.num_layers);
  const vllm_kv_cache cache = vllm_kv_cache_of(qwen, available, 16, 2048);
  EXPECT_EQ(cache.tokens, 2042016u);
  EXPECT_EQ(two_decimals(cache.max_concurrency), "997.08");
  // One byte short of the last block drops it.
  EXPECT_EQ(vllm_kv_cache_of(qwen, available - 1, 16, 2048).blocks, 127625u);
}

// The whole vLLM budget against #10517's profile: total 23.58 GiB x 0.90, weights 14.99 GiB, the
// torch peak 17.06 GiB with a 20000-token profile forward, non-torch 0.35 GiB -> 3.81 GiB of KV.
// The planner estimates the profile peak (2.21 GiB here, vLLM V0 measured 2.07) and no non-torch
// memory, so its pool is larger: 4.05 GiB, 6% more than the engine found. Pinned so a change shows.
TEST(RolloutEngine, VllmBudgetAgainstALoggedProfileOfLlama31_8b) {
  plan_knobs knobs = with_vllm(testing::generate_knobs(1, 19000, 1000), gib_bytes(23.58), 0.90);
  knobs.engine.max_num_batched_tokens = 20000;
  const engine_budget budget = plan_rollout_engine(model("llama3.1-8b"), knobs, 0);
  ASSERT_TRUE(budget.refusal.empty()) << budget.refusal;
  EXPECT_EQ(budget.requested_bytes, static_cast<std::uint64_t>(static_cast<double>(gib_bytes(23.58)) * 0.90));
  EXPECT_NEAR(static_cast<double>(budget.weights_bytes) / bytes_per_gib, 14.99, 0.05) << "vLLM logged 'Loading model weights took 14.9888 GB'";
  EXPECT_NEAR(static_cast<double>(budget.activation_bytes) / bytes_per_gib, 2.07, 0.07 * 2.07 + 0.01) << "the profile's torch peak less the weights";
  const double kv_gib = static_cast<double>(budget.kv_bytes) / bytes_per_gib;
  EXPECT_GT(kv_gib, 3.81) << "without the 0.35 GiB non-torch memory the modelled pool is larger than the logged one";
  EXPECT_LT(kv_gib, 3.81 * 1.07) << "expected within 7% of the logged 3.81 GiB";
  EXPECT_EQ(budget.reserved_bytes, budget.requested_bytes) << "the KV pool takes all the budget leaves";
}

TEST(RolloutEngine, VllmRefusesWhatTheEngineRefuses) {
  const model_architecture& qwen = model("qwen2.5-7b");
  const std::uint64_t h100 = gpu_memory_bytes("h100-80g");
  // Free at init below the budget: a colocated trainer holding 20 GiB leaves less than 0.9 x 80.
  plan_knobs knobs = with_vllm(testing::generate_knobs(8, 512, 512), h100, 0.9);
  engine_budget budget = plan_rollout_engine(qwen, knobs, gib_bytes(20));
  EXPECT_NE(budget.refusal.find("is less than desired GPU memory utilization (0.9"), std::string::npos) << budget.refusal;
  // A budget below the weights: no KV.
  knobs.engine.gpu_memory_utilization = 0.15;
  budget = plan_rollout_engine(qwen, knobs, 0);
  EXPECT_NE(budget.refusal.find("no available memory for the cache blocks"), std::string::npos) << budget.refusal;
  EXPECT_LT(budget.kv_bytes, 0);
  // max_model_len beyond what the pool holds for one sequence: the engine's estimate is the pool.
  knobs.engine.gpu_memory_utilization = 0.25;
  knobs.engine.max_model_len = 2'000'000;
  budget = plan_rollout_engine(qwen, knobs, 0);
  EXPECT_NE(budget.refusal.find("max seq len (2000000)"), std::string::npos) << budget.refusal;
  EXPECT_NE(budget.refusal.find(fmt::format("estimated maximum model length is {}", budget.kv_tokens)), std::string::npos)
      << budget.refusal;
}

// sgl-project/sglang#18263, Qwen3-30B-A3B: "Load weight end ... avail mem=230.20 GB, mem
// usage=56.98 GB", mem_fraction_static 0.911, "initial available_bytes 219721119039 / 204.63 GB",
// and "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1669816, K size: 76.44 GB".
TEST(RolloutEngine, SglangPoolMatchesItsLogForQwen3_30b_a3b) {
  const model_architecture& qwen = model("qwen3-30b-a3b");
  // Free at init = what was free after the weights plus the weights.
  const double free_at_init = 230.20 + 56.98;
  plan_knobs knobs = with_sglang(testing::generate_knobs(8, 512, 512), gib_bytes(free_at_init) + 718077952, 0.911);
  const engine_budget budget = plan_rollout_engine(qwen, knobs, 0);
  ASSERT_TRUE(budget.refusal.empty()) << budget.refusal;
  EXPECT_EQ(budget.free_at_init_bytes, gib_bytes(free_at_init));
  EXPECT_NEAR(static_cast<double>(budget.weights_bytes) / bytes_per_gib, 56.98, 0.2) << "the planner's bf16 weights against the logged usage";
  // The logged pool from the logged weights: f x free - weights, within the rounding of three
  // logged figures (each to 0.005).
  EXPECT_NEAR(0.911 * free_at_init - 56.98, 204.63, 0.02);
  EXPECT_NEAR(static_cast<double>(budget.kv_bytes) / bytes_per_gib, 204.63, 0.2) << "the pool from the planner's weights";
  // K per token: 48 layers x 4 KV heads x 128 x 2 bytes; the log's K size for its token count.
  EXPECT_EQ(budget.bytes_per_token, 2u * 48 * 4 * 128 * 2);
  EXPECT_EQ(two_decimals(1669816.0 * static_cast<double>(budget.bytes_per_token / 2) / bytes_per_gib), "76.44");
  EXPECT_EQ(budget.kv_tokens, static_cast<std::uint64_t>(budget.kv_bytes) / budget.bytes_per_token);
  EXPECT_EQ(budget.concurrent_sequences, budget.kv_tokens / 1024);
}

TEST(RolloutEngine, SglangShrinksWithATrainerResidentAtInitAndRefusesWithoutKv) {
  const model_architecture& qwen = model("qwen2.5-7b");
  const std::uint64_t h100 = gpu_memory_bytes("h100-80g");
  const plan_knobs knobs = with_sglang(testing::generate_knobs(8, 512, 512), h100, 0.5);
  const engine_budget alone = plan_rollout_engine(qwen, knobs, 0);
  const engine_budget beside = plan_rollout_engine(qwen, knobs, gib_bytes(20));
  // The same fraction of less free memory: half of the trainer's 20 GiB comes off the pool.
  EXPECT_NEAR(static_cast<double>(alone.kv_bytes - beside.kv_bytes), static_cast<double>(gib_bytes(10)), 1.0);
  const engine_budget tight = plan_rollout_engine(qwen, with_sglang(testing::generate_knobs(8, 512, 512), h100, 0.15), 0);
  EXPECT_NE(tight.refusal.find("Not enough memory. Please try to increase --mem-fraction-static"), std::string::npos) << tight.refusal;
}

TEST(RolloutEngine, RolloutPeakIsTheReservationAndSleepSetsWhatTheUpdateSees) {
  const model_architecture& qwen = model("qwen2.5-1.5b");
  const std::uint64_t h100 = gpu_memory_bytes("h100-80g");
  plan_knobs knobs = with_vllm(testing::grpo_knobs(8, 8, 512, 512, 8), h100, 0.3);
  knobs.reference = reference_kind::none;
  const auto checked = validate_knobs(qwen, knobs);
  ASSERT_TRUE(checked.ok()) << checked.failure().detail;
  const auto engine_checked = validate_engine_knobs(knobs);
  ASSERT_TRUE(engine_checked.ok()) << engine_checked.failure().detail;
  const plan_result awake = plan_memory(qwen, knobs);
  const engine_budget& engine = awake.engine;
  ASSERT_TRUE(engine.refusal.empty()) << engine.refusal;
  EXPECT_EQ(engine.trainer_at_init_bytes, 2 * count_parameters(qwen).total) << "the colocated trainer's bf16 weights";
  const phase_estimate& rollout = phase_named(awake, "rollout");
  EXPECT_EQ(component(rollout, "engine weights (its bf16 copy)") + component(rollout, "engine KV cache pool") +
                component(rollout, "engine activation workspace (estimated)"),
            engine.requested_bytes)
      << "the engine's part of the rollout is its whole budget";
  EXPECT_EQ(component(phase_named(awake, "update"), "engine KV cache pool (awake, sleep level 0)"), static_cast<std::uint64_t>(engine.kv_bytes));

  knobs.engine.sleep_level = 1;
  knobs.engine.graph_bytes = gib_bytes(0.5);
  const plan_result asleep = plan_memory(qwen, knobs);
  const phase_estimate& update = phase_named(asleep, "update");
  EXPECT_EQ(component(update, "engine KV cache pool (awake, sleep level 0)"), 0u);
  EXPECT_EQ(component(update, "engine CUDA graph pool (kept asleep)"), gib_bytes(0.5));
  EXPECT_EQ(phase_named(awake, "update").peak_bytes - update.peak_bytes,
            engine.weights_bytes + static_cast<std::uint64_t>(engine.kv_bytes) - gib_bytes(0.5));
  EXPECT_EQ(asleep.engine.host_bytes, engine.weights_bytes) << "level 1 backs the weights up in host memory";
  EXPECT_EQ(asleep.host_bytes, engine.weights_bytes);
  knobs.engine.sleep_level = 2;
  EXPECT_EQ(plan_memory(qwen, knobs).engine.host_bytes, 0u);
}

TEST(RolloutEngine, HfRolloutIsUnchangedByTheEngineKnobsDefaults) {
  const model_architecture& qwen = model("qwen2.5-0.5b");
  const plan_knobs knobs = testing::grpo_knobs(8, 8, 512, 512, 16);
  const plan_result plan = plan_memory(qwen, knobs);
  EXPECT_EQ(plan.engine.rollout, rollout_kind::hf);
  EXPECT_EQ(phase_named(plan, "rollout").peak_at.find("reservation"), std::string::npos);
  EXPECT_TRUE(validate_engine_knobs(knobs).ok());
}

TEST(RolloutEngine, KnobsOutsideTheEnginesRangesAreRefused) {
  plan_knobs knobs = with_vllm(testing::generate_knobs(8, 512, 512), gpu_memory_bytes("h100-80g"), 0.9);
  // The refusal's code, and a part of its line.
  auto expect_refused = [](const plan_knobs& refused, plan_errc code, const char* expected) {
    const auto checked = validate_engine_knobs(refused);
    EXPECT_EQ(error_name(checked.code()), error_name(code)) << expected;
    EXPECT_NE(checked.failure().detail.find(expected), std::string::npos) << "expected '" << expected << "' in '" << checked.failure().detail << "'";
  };
  knobs.engine.block_size = 24;
  expect_refused(knobs, plan_errc::invalid_knob, "1, 8, 16, 32, 64 or 128");
  knobs.engine.block_size = 16;
  knobs.engine.max_model_len = 1000;
  expect_refused(knobs, plan_errc::knob_conflict, "shorter than a row");
  knobs.engine.max_model_len = 0;
  knobs.engine.device_bytes = 0;
  expect_refused(knobs, plan_errc::missing_knob, "--card");
  plan_knobs sglang = with_sglang(testing::generate_knobs(8, 512, 512), gpu_memory_bytes("h100-80g"), 0);
  expect_refused(sglang, plan_errc::missing_knob, "needs --mem-fraction-static");
}

}  // namespace
}  // namespace rlmem
