// SPDX-License-Identifier: MIT
// --fit: the best configuration fits, is the most work, keeps the divisibility rules, and the
// what-if rows are exact.

#include "planner_support.hpp"

#include <rlmem/plan.hpp>

#include <gtest/gtest.h>

namespace rlmem {
namespace {

plan_knobs grpo_base() { return testing::grpo_knobs(8, 8, 512, 512, 16); }

fit_options card(const char* name) {
  fit_options options;
  options.budget_bytes = gpu_memory_bytes(name);
  EXPECT_GT(options.budget_bytes, 0u) << name;
  return options;
}

TEST(Fit, BestFitsTheUsableMemoryAndRespectsDivisibility) {
  const model_architecture& model = *find_preset("qwen2.5-1.5b");
  const fit_options options = card("h100-80g");
  const fit_result fit = fit_configuration(model, grpo_base(), options);
  ASSERT_TRUE(fit.found) << fit.reason;
  const plan_result base = plan_memory(model, grpo_base());
  const std::uint64_t overhead = base.overhead.cuda_context_bytes + base.overhead.cublas_workspace_bytes;
  EXPECT_EQ(fit.usable_bytes, static_cast<std::uint64_t>(static_cast<double>(options.budget_bytes - overhead) / 1.10));
  EXPECT_LE(fit.best_plan.peak_bytes, fit.usable_bytes);
  EXPECT_EQ(fit.best_plan.peak_bytes, plan_memory(model, fit.best).peak_bytes);
  const plan_knobs& best = fit.best;
  EXPECT_TRUE(best.group % best.micro_batch == 0 || best.micro_batch % best.group == 0)
      << "group " << best.group << " micro-batch " << best.micro_batch;
  EXPECT_EQ(best.prompts, 8u);
  EXPECT_GT(fit.configurations, fit.fitting);
}

TEST(Fit, NoOneNotchMoreWorkFitsAndEveryWhatIfIsExact) {
  const model_architecture& model = *find_preset("qwen2.5-1.5b");
  const fit_result fit = fit_configuration(model, grpo_base(), card("h100-80g"));
  ASSERT_TRUE(fit.found);
  ASSERT_FALSE(fit.what_if.empty());
  for (const what_if_row& row : fit.what_if) {
    const bool more_work = (row.knob == "group" || row.knob == "new tokens") && std::stoull(row.to) > std::stoull(row.from);
    if (more_work) {
      EXPECT_FALSE(row.fits) << row.knob << " " << row.from << " -> " << row.to << " fits, so it was the better answer";
    }
    if (row.knob == "micro-batch") {
      plan_knobs changed = fit.best;
      changed.micro_batch = std::stoull(row.to);
      const auto expected = static_cast<std::int64_t>(plan_memory(model, changed).peak_bytes) -
                            static_cast<std::int64_t>(fit.best_plan.peak_bytes);
      EXPECT_EQ(row.delta_bytes, expected);
    }
  }
}

TEST(Fit, KeepShapeOnlyMovesHowTheWorkIsDone) {
  const model_architecture& model = *find_preset("qwen2.5-7b");
  fit_options options = card("h100-80g");
  options.keep_shape = true;
  plan_knobs base = grpo_base();
  base.ref_model = false;
  const fit_result fit = fit_configuration(model, base, options);
  ASSERT_TRUE(fit.found) << fit.reason;
  EXPECT_EQ(fit.best.group, base.group);
  EXPECT_EQ(fit.best.new_tokens, base.new_tokens);
  // Full fine-tuning of 7.6 B parameters with AdamW bf16 (8 bytes each) and 16 rows of 1024
  // tokens does not fit 80 GB as given: the search has to recompute or offload.
  EXPECT_LE(plan_memory(model, fit.best).peak_bytes, fit.usable_bytes);
  EXPECT_TRUE(fit.best.grad_ckpt || fit.best.offload_optimizer || fit.best.micro_batch < base.micro_batch);
}

TEST(Fit, ExploresTenThousandConfigurationsWhenLoraAndOffloadAreSearched) {
  const model_architecture& model = *find_preset("qwen2.5-7b");
  fit_options options = card("a100-80g");
  options.search_lora = true;
  plan_knobs base = grpo_base();
  base.gpus = 8;
  base.shard = shard_kind::fsdp;
  base.prompts = 256;
  base.lora_rank = 16;
  const fit_result fit = fit_configuration(model, base, options);
  EXPECT_GE(fit.configurations, 10000u);
  EXPECT_TRUE(fit.found);
}

TEST(Fit, TrainKeepsEachEffectiveBatchWhole) {
  const model_architecture& model = *find_preset("llama3.1-8b");
  plan_knobs base = testing::train_knobs(4, 4096);
  base.grad_accum = 4;
  fit_options options = card("h100-80g");
  options.keep_shape = true;
  const fit_result fit = fit_configuration(model, base, options);
  ASSERT_TRUE(fit.found) << fit.reason;
  EXPECT_EQ(fit.best.micro_batch * fit.best.grad_accum, 16u);
  EXPECT_LE(fit.best_plan.peak_bytes, fit.usable_bytes);
  // 8 B parameters with bf16 AdamW take 64 GB before any activation: only recomputation,
  // offload or one row at a time leave room for 4,096-token rows.
  EXPECT_TRUE(fit.best.grad_ckpt || fit.best.offload_optimizer || fit.best.micro_batch == 1);
}

TEST(Fit, GenerateFindsTheLargestBatchThatFits) {
  const model_architecture& model = *find_preset("qwen2.5-7b");
  const plan_knobs base = testing::generate_knobs(8, 1024, 4096);
  const fit_result fit = fit_configuration(model, base, card("a100-40g"));
  ASSERT_TRUE(fit.found) << fit.reason;
  EXPECT_LE(fit.best_plan.peak_bytes, fit.usable_bytes);
  plan_knobs doubled = fit.best;
  doubled.batch *= 2;
  EXPECT_GT(plan_memory(model, doubled).peak_bytes, fit.usable_bytes) << "batch " << doubled.batch << " would fit too";
}

TEST(Fit, NothingFitsSaysWhatTheSmallestNeeds) {
  const model_architecture& model = *find_preset("qwen2.5-72b");
  const fit_result fit = fit_configuration(model, grpo_base(), card("rtx4090-24g"));
  EXPECT_FALSE(fit.found);
  EXPECT_GT(fit.smallest_peak_bytes, fit.usable_bytes);
  EXPECT_FALSE(fit.reason.empty());
}

}  // namespace
}  // namespace rlmem
