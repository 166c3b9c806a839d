// SPDX-License-Identifier: MIT
// --fit starts from the user's configuration: its peak against the card, each knob changed alone
// with the exact peak, then the configurations that fit, best first, keeping the algorithm's
// settings unless --vary opens them, and then never below a quarter of the user's value.

#include "planner_support.hpp"

#include <rlmem/plan/plan.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

namespace rlmem {
namespace {

plan_knobs grpo_base() { return testing::grpo_knobs(8, 8, 512, 512, 16); }

fit_options card(const char* name) {
  fit_options options;
  options.budget_bytes = gpu_memory_bytes(name);
  EXPECT_GT(options.budget_bytes, 0u) << name;
  return options;
}

constexpr unsigned every_algorithm_knob = search_bit(search_knob::group) | search_bit(search_knob::new_tokens) |
                                          search_bit(search_knob::prompt_len) | search_bit(search_knob::lora_rank);

fit_options card_varying(const char* name, unsigned vary) {
  fit_options options = card(name);
  options.vary = vary;
  return options;
}

// The issue's field report: a LoRA GRPO run of Qwen2.5-7B that OOMs on an A100-40GB (4 prompts x
// 4 rollouts, 896-token inputs, 128 new tokens, LoRA r 16, micro-batch 16), its reference the
// base with the adapter disabled, as TRL does with peft.
plan_knobs issue_lora_run() {
  plan_knobs knobs = testing::grpo_knobs(4, 4, 896, 128, 16);
  knobs.lora_rank = 16;
  knobs.reference = reference_kind::adapter_disabled;
  return knobs;
}

using testing::component;

const what_if_row* row_of(const fit_result& fit, const std::string& knob, const std::string& to) {
  for (const what_if_row& row : fit.what_if) {
    if (row.knob == knob && row.to == to) return &row;
  }
  return nullptr;
}

TEST(Fit, TheIssuesLoraRunNeedsItsPeakCheckedAgainstItsComponents) {
  const model_architecture& model = *find_preset("qwen2.5-7b");
  const plan_knobs knobs = issue_lora_run();
  const fit_result fit = fit_configuration(model, knobs, card("a100-40g"));
  // 157.8 GiB against 35.7 GiB usable: "your config needs 157.8 GiB; 35.7 GiB usable".
  EXPECT_EQ(fit.your_peak_bytes, 169'476'041'728u);
  EXPECT_EQ(fit.usable_bytes, 38'331'351'040u);
  EXPECT_FALSE(fit.yours_fits);

  const plan_result plan = plan_memory(model, knobs);
  ASSERT_EQ(plan.peak_phase, "update");
  const phase_estimate& update = *std::find_if(plan.phases.begin(), plan.phases.end(), [](const phase_estimate& p) { return p.name == "update"; });
  // Each component by hand: 16 rows of 896 + 128 tokens, hidden 3584, 28 layers, vocabulary 152,064.
  const std::uint64_t tokens = 16 * 1024;
  const std::uint64_t scored = 16 * 128;
  const std::uint64_t h = 3584, q = 3584, kv = 512, heads = 28, intermediate = 18944, rank = 16, vocab = 152064;
  const std::uint64_t trainable = 40'370'176;
  EXPECT_EQ(plan.trainable_params, trainable);
  EXPECT_EQ(component(update, "policy weights"), 2 * plan.params.total + 4 * trainable);  // bf16 base, fp32 adapters
  EXPECT_EQ(component(update, "reference weights"), 0u) << "the adapter-disabled reference is the policy's own base";
  EXPECT_EQ(component(update, "optimizer state"), 8 * trainable);
  EXPECT_EQ(component(update, "logits (bf16)"), 2 * tokens * vocab);
  EXPECT_EQ(component(update, "response logits (fp32)"), 4 * scored * vocab);
  EXPECT_EQ(component(update, "final norm and head input"), tokens * (4 * h + 4 + 8));
  EXPECT_EQ(component(update, "rotary tables"), 4 * 128 * 1024u);
  EXPECT_EQ(component(update, "rollout sequences"), tokens * 8);
  // Per token per layer: two frozen RMSNorms (fp32 input and rsqrt), SDPA's q, k, v, output and
  // logsumexp, SwiGLU's gate, SiLU and product, and peft's fp32 input copy and lora_A output per target.
  std::uint64_t per_token_layer = 2 * (4 * h + 4) + 2 * q + 4 * kv + 2 * q + 4 * heads + 6 * intermediate;
  for (std::uint64_t in : {h, h, h, q, h, h, intermediate}) per_token_layer += 4 * in + 4 * rank;
  EXPECT_EQ(component(update, "activations"), per_token_layer * 28 * tokens);
  std::uint64_t sum = 0;
  for (const memory_component& part : update.components) sum += part.bytes;
  EXPECT_EQ(sum, fit.your_peak_bytes);
}

TEST(Fit, EachKnobAloneIsExactFromYourConfigWithTheLeastChangeThatFits) {
  const model_architecture& model = *find_preset("qwen2.5-7b");
  const plan_knobs base = issue_lora_run();
  const fit_result fit = fit_configuration(model, base, card_varying("a100-40g", every_algorithm_knob));
  ASSERT_FALSE(fit.what_if.empty());
  std::set<std::string> knobs;
  for (const what_if_row& row : fit.what_if) {
    knobs.insert(row.knob);
    EXPECT_EQ(row.saved_bytes, static_cast<std::int64_t>(fit.your_peak_bytes) - static_cast<std::int64_t>(row.peak_bytes)) << row.knob;
    EXPECT_EQ(row.fits, row.peak_bytes <= fit.usable_bytes) << row.knob;
  }
  // Opened by --vary, the algorithm's knobs are in the table too: the answer to the guessed
  // "~40% / ~20% / ~15% / ~10%".
  for (const char* knob : {"micro-batch", "group", "new tokens", "prompt length", "LoRA rank", "grad checkpointing", "offload", "reference"}) {
    EXPECT_EQ(knobs.count(knob), 1u) << knob;
  }
  const auto peak_with = [&](auto change) {
    plan_knobs changed = base;
    change(changed);
    return plan_memory(model, changed).peak_bytes;
  };
  const what_if_row* halved = row_of(fit, "micro-batch", "8");
  ASSERT_NE(halved, nullptr);
  EXPECT_EQ(halved->peak_bytes, peak_with([](plan_knobs& k) { k.micro_batch = 8; }));
  // Micro-batch 2 is the least change that fits: 4 (the next valid one up) does not.
  const what_if_row* least = row_of(fit, "micro-batch", "2");
  ASSERT_NE(least, nullptr);
  EXPECT_TRUE(least->limit && least->fits);
  EXPECT_EQ(least->peak_bytes, peak_with([](plan_knobs& k) { k.micro_batch = 2; }));
  EXPECT_GT(peak_with([](plan_knobs& k) { k.micro_batch = 4; }), fit.usable_bytes);
  // New tokens one notch down (128 -> 96) buys 4.7 GiB: nowhere near enough, and no length fits.
  const what_if_row* shorter = row_of(fit, "new tokens", "96");
  ASSERT_NE(shorter, nullptr);
  EXPECT_EQ(shorter->peak_bytes, peak_with([](plan_knobs& k) { k.new_tokens = 96; }));
  EXPECT_FALSE(shorter->fits);
  EXPECT_GT(peak_with([](plan_knobs& k) { k.new_tokens = 1; }), fit.usable_bytes);
  // A prompt of a quarter (224 tokens) does not fit alone, so no prompt length is the limit:
  // 896 -> 3 fits, and is no advice (the data needs its prompts).
  EXPECT_GT(peak_with([](plan_knobs& k) { k.prompt_len = 224; }), fit.usable_bytes);
  EXPECT_LE(peak_with([](plan_knobs& k) { k.prompt_len = 3; }), fit.usable_bytes);
  for (const what_if_row& row : fit.what_if) {
    if (row.knob == "prompt length") {
      EXPECT_GE(std::stoull(row.to), 224u) << "prompt length 896 -> " << row.to;
      EXPECT_FALSE(row.fits) << "prompt length 896 -> " << row.to;
    }
  }
  // The copy a bare --ref-model used to mean costs a second set of bf16 weights.
  const what_if_row* copy = row_of(fit, "reference", "copy");
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(-copy->saved_bytes, static_cast<std::int64_t>(2 * count_parameters(model).total));
}

TEST(Fit, LimitIsTheMostThatFitsWhenYoursFits) {
  const model_architecture& model = *find_preset("qwen2.5-0.5b");
  const plan_knobs base = grpo_base();
  const fit_result fit = fit_configuration(model, base, card_varying("h100-80g", every_algorithm_knob));
  ASSERT_TRUE(fit.yours_fits);
  // Four times the group still fits: that is the end of the range, not a limit found.
  EXPECT_TRUE(std::none_of(fit.what_if.begin(), fit.what_if.end(), [](const what_if_row& r) { return r.knob == "group" && r.limit; }));
  const auto limit = std::find_if(fit.what_if.begin(), fit.what_if.end(), [](const what_if_row& r) { return r.knob == "new tokens" && r.limit; });
  ASSERT_NE(limit, fit.what_if.end());
  EXPECT_TRUE(limit->fits);
  plan_knobs one_more = base;
  one_more.new_tokens = std::stoull(limit->to) + 1;
  EXPECT_GT(plan_memory(model, one_more).peak_bytes, fit.usable_bytes) << "new tokens " << one_more.new_tokens << " fits too";
}

TEST(Fit, DefaultSearchKeepsTheAlgorithmAndMovesOnlyHowItRuns) {
  const model_architecture& model = *find_preset("qwen2.5-7b");
  const plan_knobs base = issue_lora_run();
  const fit_result fit = fit_configuration(model, base, card("a100-40g"));
  ASSERT_TRUE(fit.found) << fit.reason;
  ASSERT_FALSE(fit.combinations.empty());
  for (const fit_candidate& candidate : fit.combinations) {
    EXPECT_EQ(candidate.knobs.group, base.group);
    EXPECT_EQ(candidate.knobs.new_tokens, base.new_tokens);
    EXPECT_EQ(candidate.knobs.prompt_len, base.prompt_len);
    EXPECT_EQ(candidate.knobs.lora_rank, base.lora_rank);
    EXPECT_EQ(candidate.knobs.prompts, base.prompts);
    EXPECT_LE(candidate.peak_bytes, fit.usable_bytes);
    EXPECT_EQ(candidate.peak_bytes, plan_memory(model, candidate.knobs).peak_bytes);
    EXPECT_FALSE(candidate.changes.empty()) << "yours does not fit, so every combination changes something";
  }
  // The best keeps the forward whole if it can: micro-batch 2, no recomputation.
  EXPECT_EQ(fit.best.micro_batch, 2u);
  EXPECT_FALSE(fit.best.grad_ckpt);
  EXPECT_EQ(fit.best_plan.peak_bytes, fit.combinations.front().peak_bytes);
}

TEST(Fit, NoCombinationChangesMoreKnobsThanOneThatDoesAsWell) {
  const model_architecture& model = *find_preset("qwen2.5-7b");
  fit_options options = card("h100-80g");
  options.combinations = 50;
  const fit_result fit = fit_configuration(model, issue_lora_run(), options);
  ASSERT_GE(fit.combinations.size(), 2u);
  for (const fit_candidate& a : fit.combinations) {
    for (const fit_candidate& b : fit.combinations) {
      if (&a == &b || a.changes.size() >= b.changes.size()) continue;
      const bool subset = std::all_of(a.changes.begin(), a.changes.end(), [&](const knob_change& change) {
        return std::any_of(b.changes.begin(), b.changes.end(), [&](const knob_change& other) { return other.knob == change.knob; });
      });
      // b changes every knob a does and more: it must do more work (it ranks below a otherwise).
      if (subset) {
        EXPECT_GT(work_per_step(b.knobs), work_per_step(a.knobs));
      }
    }
  }
}

TEST(Fit, VaryOpensTheAlgorithmsKnobsAndNoOneNotchMoreWorkFits) {
  const model_architecture& model = *find_preset("qwen2.5-1.5b");
  fit_options options = card("h100-80g");
  options.vary = search_bit(search_knob::group) | search_bit(search_knob::new_tokens);
  const plan_knobs base = grpo_base();
  const fit_result fit = fit_configuration(model, base, options);
  ASSERT_TRUE(fit.found) << fit.reason;
  EXPECT_GT(work_per_step(fit.best), work_per_step(base));
  EXPECT_LE(fit.best_plan.peak_bytes, fit.usable_bytes);
  const plan_knobs& best = fit.best;
  EXPECT_TRUE(best.group % best.micro_batch == 0 || best.micro_batch % best.group == 0);
  plan_knobs longer = best;
  longer.new_tokens = best.new_tokens * 3 / 2;
  if (longer.new_tokens <= 4 * base.new_tokens && validate_knobs(model, longer).ok()) {
    EXPECT_GT(plan_memory(model, longer).peak_bytes, fit.usable_bytes) << "new tokens " << longer.new_tokens << " fits too";
  }
}

TEST(Fit, VaryIsRefusedWhereTheKnobDoesNotExist) {
  plan_knobs training = testing::train_knobs(4, 1024);
  EXPECT_NE(why_not_varied(search_knob::group, training), "");
  EXPECT_NE(why_not_varied(search_knob::new_tokens, training), "");
  EXPECT_NE(why_not_varied(search_knob::lora_rank, training), "") << "full fine-tuning has no rank";
  EXPECT_EQ(why_not_varied(search_knob::batch, training), "");
  EXPECT_NE(why_not_varied(search_knob::batch, grpo_base()), "");
  EXPECT_EQ(why_not_varied(search_knob::group, grpo_base()), "");
  const auto knob = parse_search_knob("prompt-len");
  ASSERT_TRUE(knob.ok()) << knob.failure().detail;
  EXPECT_EQ(knob.value(), search_knob::prompt_len);
  const auto unknown = parse_search_knob("temperature");
  EXPECT_EQ(unknown.code(), plan_errc::unknown_search_knob);
  EXPECT_EQ(unknown.failure().detail, "--vary 'temperature': expected a comma list of group, new-tokens, prompt-len, lora-r, batch");
}

TEST(Fit, ExploresTenThousandConfigurationsWhenTheAlgorithmIsVaried) {
  const model_architecture& model = *find_preset("qwen2.5-7b");
  fit_options options = card("a100-80g");
  options.vary = search_bit(search_knob::lora_rank) | search_bit(search_knob::group) | search_bit(search_knob::new_tokens);
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
  const fit_result fit = fit_configuration(model, base, card("h100-80g"));
  ASSERT_TRUE(fit.found) << fit.reason;
  for (const fit_candidate& candidate : fit.combinations) EXPECT_EQ(candidate.knobs.micro_batch * candidate.knobs.grad_accum, 16u);
  EXPECT_LE(fit.best_plan.peak_bytes, fit.usable_bytes);
  // 8 B parameters with bf16 AdamW take 64 GB before any activation: only recomputation,
  // offload or one row at a time leave room for 4,096-token rows.
  EXPECT_TRUE(fit.best.grad_ckpt || fit.best.offload_optimizer || fit.best.micro_batch == 1);
}

TEST(Fit, GenerateWithVariedBatchFindsTheLargestThatFits) {
  const model_architecture& model = *find_preset("qwen2.5-7b");
  const plan_knobs base = testing::generate_knobs(8, 1024, 4096);
  fit_options options = card("a100-40g");
  options.vary = search_bit(search_knob::batch);
  const fit_result fit = fit_configuration(model, base, options);
  ASSERT_TRUE(fit.found) << fit.reason;
  EXPECT_LE(fit.best_plan.peak_bytes, fit.usable_bytes);
  plan_knobs doubled = fit.best;
  doubled.batch *= 2;
  EXPECT_GT(plan_memory(model, doubled).peak_bytes, fit.usable_bytes) << "batch " << doubled.batch << " would fit too";
  // Without --vary batch the rows stay at most the ones asked for.
  const fit_result kept = fit_configuration(model, base, card("a100-40g"));
  ASSERT_TRUE(kept.found);
  EXPECT_LE(kept.best.batch, base.batch);
}

TEST(Fit, NothingFitsSaysWhatTheSmallestNeeds) {
  const model_architecture& model = *find_preset("qwen2.5-72b");
  const fit_result fit = fit_configuration(model, grpo_base(), card("rtx4090-24g"));
  EXPECT_FALSE(fit.found);
  EXPECT_FALSE(fit.yours_fits);
  EXPECT_GT(fit.smallest_peak_bytes, fit.usable_bytes);
  EXPECT_FALSE(fit.reason.empty());
}

TEST(Fit, CardPresetsAreTheMemoryTheDriverReports) {
  // MiB as nvidia-smi (rocm-smi for the MI300X) reports the card's total.
  const std::pair<const char*, std::uint64_t> cards[] = {{"v100-32g", 32510},  {"rtx5090-32g", 32607}, {"l40s-48g", 46068},
                                                         {"a6000-48g", 49140}, {"h20-96g", 97871},     {"b200-180g", 183359},
                                                         {"mi300x-192g", 196592}};
  for (const auto& [name, mebibytes] : cards) EXPECT_EQ(gpu_memory_bytes(name), mebibytes << 20) << name;
  EXPECT_EQ(gpu_memory_bytes("h100-81g"), 0u);
}

}  // namespace
}  // namespace rlmem

namespace rlmem {
namespace {

// Issue 12, item 4: the generation batch keeps the algorithm, so the default search moves it:
// down when the rollout is what does not fit, up (to all of a GPU's rows) on a roomy card.
TEST(Fit, GenerationBatchIsSearchedByDefaultBothWays) {
  const model_architecture& model = *find_preset("qwen2.5-0.5b");
  plan_knobs base = testing::grpo_knobs(1, 64, 1024, 32, 1);
  const plan_result yours = plan_memory(model, base);
  ASSERT_EQ(yours.peak_phase, "rollout");
  std::uint64_t others = 0;
  for (const phase_estimate& phase : yours.phases) {
    if (phase.name != "rollout") others = std::max(others, phase.peak_bytes);
  }
  fit_options options;
  options.budget_bytes = yours.overhead.cuda_context_bytes + yours.overhead.cublas_workspace_bytes +
                         static_cast<std::uint64_t>(static_cast<double>(others) * 1.1) + (64ull << 20);
  const fit_result lower = fit_configuration(model, base, options);
  ASSERT_TRUE(lower.found) << lower.reason;
  EXPECT_FALSE(lower.yours_fits);
  EXPECT_NE(lower.best.batch, 0u);
  EXPECT_LT(generation_rows(lower.best), 64u);
  EXPECT_EQ(lower.best.micro_batch, 1u) << "the update already fits; only the rollout has to change";

  base.batch = 8;
  options.budget_bytes = 80ull << 30;
  const fit_result raise = fit_configuration(model, base, options);
  ASSERT_TRUE(raise.found) << raise.reason;
  EXPECT_EQ(generation_rows(raise.best), 64u);
  bool raised_alone = false;
  for (const what_if_row& row : raise.what_if) raised_alone |= row.knob == "generation batch" && row.to == "16" && row.fits;
  EXPECT_TRUE(raised_alone) << "each knob alone: one notch up from 8";
}

}  // namespace
}  // namespace rlmem

namespace rlmem {
namespace {

// Issue 29, item 5: advice a person would take.
TEST(Fit, WithoutVaryNoWhatIfOrCombinationTouchesTheAlgorithm) {
  const model_architecture& model = *find_preset("qwen2.5-7b");
  const fit_result fit = fit_configuration(model, issue_lora_run(), card("a100-40g"));
  ASSERT_FALSE(fit.what_if.empty());
  for (const what_if_row& row : fit.what_if) {
    for (const char* kept : {"group", "new tokens", "prompt length", "LoRA rank", "effective batch"}) EXPECT_NE(row.knob, kept) << row.from << " -> " << row.to;
  }
  for (const fit_candidate& candidate : fit.every_fitting) {
    for (const knob_change& change : candidate.changes) {
      for (const char* kept : {"group", "new tokens", "prompt length", "LoRA rank"}) EXPECT_NE(change.knob, kept) << change.from << " -> " << change.to;
    }
  }
}

TEST(Fit, VariedKnobsStopAtAQuarterOfYours) {
  const model_architecture& model = *find_preset("qwen2.5-7b");
  plan_knobs base = issue_lora_run();
  const fit_result fit = fit_configuration(model, base, card_varying("a100-40g", every_algorithm_knob));
  ASSERT_TRUE(fit.found) << fit.reason;
  for (const what_if_row& row : fit.what_if) {
    const std::map<std::string, std::uint64_t> least = {{"prompt length", 224}, {"new tokens", 32}, {"group", 2}, {"LoRA rank", 4}};
    const auto floor = least.find(row.knob);
    // "4 -> 2 (micro-batch 8)" reads as 2.
    if (floor != least.end()) {
      EXPECT_GE(std::stoull(row.to), floor->second) << row.knob << " " << row.from << " -> " << row.to;
    }
  }
  ASSERT_FALSE(fit.every_fitting.empty());
  for (const fit_candidate& candidate : fit.every_fitting) {
    EXPECT_GE(candidate.knobs.prompt_len, 224u);
    EXPECT_GE(candidate.knobs.new_tokens, 32u);
    EXPECT_GE(candidate.knobs.group, 2u);
    EXPECT_GE(candidate.knobs.lora_rank, 4u);
  }
  EXPECT_EQ(least_proposed(896), 224u);
  EXPECT_EQ(least_proposed(3), 1u);
  EXPECT_EQ(least_proposed(130), 33u) << "a quarter, rounded up";
}

TEST(Fit, NoChangeListedLeavesAKnobAsItWas) {
  // The generation batch of all 64 rows and 64 of 128 rows (--vary group doubling the rows)
  // generate alike: no "generation batch all 64 -> 64".
  const model_architecture& model = *find_preset("qwen2.5-0.5b");
  const plan_knobs base = testing::grpo_knobs(8, 8, 512, 512, 16);
  const fit_result fit = fit_configuration(model, base, card_varying("h100-80g", search_bit(search_knob::group)));
  ASSERT_TRUE(fit.found) << fit.reason;
  std::size_t changes = 0;
  for (const fit_candidate& candidate : fit.every_fitting) {
    for (const knob_change& change : candidate.changes) {
      ++changes;
      EXPECT_NE(change.from, change.to) << change.knob;
      if (change.knob == "generation batch") {
        EXPECT_NE(generation_rows(base), generation_rows(candidate.knobs)) << change.from << " -> " << change.to;
      }
    }
  }
  EXPECT_GT(changes, 0u);
}

TEST(Fit, EveryFittingConfigurationIsKeptInRankOrder) {
  const model_architecture& model = *find_preset("qwen2.5-7b");
  const fit_result fit = fit_configuration(model, issue_lora_run(), card("a100-40g"));
  ASSERT_TRUE(fit.found) << fit.reason;
  EXPECT_EQ(fit.every_fitting.size(), fit.fitting);
  EXPECT_GT(fit.every_fitting.size(), fit.combinations.size());
  for (const fit_candidate& candidate : fit.every_fitting) {
    EXPECT_LE(candidate.peak_bytes, fit.usable_bytes);
    EXPECT_EQ(candidate.peak_bytes, plan_memory(model, candidate.knobs).peak_bytes);
  }
  for (std::size_t i = 1; i < fit.every_fitting.size(); ++i) {
    EXPECT_GE(work_per_step(fit.every_fitting[i - 1].knobs), work_per_step(fit.every_fitting[i].knobs)) << "position " << i;
  }
  // The best of all is the shortlist's first.
  EXPECT_EQ(fit.every_fitting.front().peak_bytes, fit.combinations.front().peak_bytes);
  EXPECT_EQ(fit.every_fitting.front().changes.size(), fit.combinations.front().changes.size());
  EXPECT_NE(fit_ranking_rule().find("tokens per step"), std::string_view::npos);
}

}  // namespace
}  // namespace rlmem
