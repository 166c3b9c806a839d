// SPDX-License-Identifier: MIT
// The colocated hand-off as phases: each transition's peak is the sum of what is resident then
// (checked part by part against the formula in docs/plan.md on the configs in testdata), the
// transition that sets the step's peak is named, and waking the weights, syncing, then the KV
// peaks lower than waking everything before the sync.

#include "planner_support.hpp"

#include <rlmem/plan/plan.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace rlmem {
namespace {

const phase_estimate* find_phase(const plan_result& plan, const std::string& name) {
  const auto it = std::find_if(plan.phases.begin(), plan.phases.end(), [&](const phase_estimate& p) { return p.name == name; });
  return it == plan.phases.end() ? nullptr : &*it;
}

using testing::component;

std::vector<std::string> names(const plan_result& plan) {
  std::vector<std::string> out;
  for (const phase_estimate& phase : plan.phases) out.push_back(phase.name);
  return out;
}

// A GRPO step of full fine-tuning beside vLLM on an H100, sleeping at `level`, handed off by `mode`.
plan_knobs colocated(handoff_kind mode, std::uint32_t level, double utilization = 0.7) {
  plan_knobs knobs = testing::grpo_knobs(8, 8, 512, 512, 8);
  knobs.grad_ckpt = true;
  knobs.engine.rollout = rollout_kind::vllm;
  knobs.engine.device_bytes = gpu_memory_bytes("h100-80g");
  knobs.engine.gpu_memory_utilization = utilization;
  knobs.engine.sleep_level = level;
  knobs.engine.graph_bytes = 1ull << 30;
  knobs.handoff = mode;
  return knobs;
}

// Qwen2.5-0.5B (testdata/planner/configs/qwen2.5-0.5b.json), bf16 AdamW: weights 2P, the reference
// copy 2P, AdamW's two moments 4P; the engine's bf16 copy 2P; the sync reads the full weights in
// bf16 (2P) when the trainer's are not on the GPU.
TEST(Handoff, EachTransitionIsWhatIsResidentThenOnQwen25_0_5b) {
  const model_architecture model = testing::config_model("qwen2.5-0.5b.json");
  const std::uint64_t p = count_parameters(model).total;
  EXPECT_EQ(p, 494032768u) << "Qwen2.5-0.5B's parameters, as transformers counts them";
  const plan_knobs knobs = colocated(handoff_kind::offload, 1);
  const auto checked = validate_knobs(model, knobs);
  ASSERT_TRUE(checked.ok()) << checked.failure().detail;
  const auto handoff_checked = validate_handoff_knobs(knobs);
  ASSERT_TRUE(handoff_checked.ok()) << handoff_checked.failure().detail;
  const plan_result plan = plan_memory(model, knobs);
  ASSERT_TRUE(plan.engine.refusal.empty()) << plan.engine.refusal;
  const std::uint64_t graphs = 1ull << 30;
  const std::uint64_t kv = static_cast<std::uint64_t>(plan.engine.kv_bytes);
  const std::uint64_t sequences = 64 * 1024 * 8;  // 64 rows of 512 + 512 int64 ids

  EXPECT_EQ(names(plan), (std::vector<std::string>{"hand-off", "wake-weights", "weight-sync", "wake-kv", "rollout", "sleep", "resume",
                                                   "reference", "update", "optimizer"}));
  EXPECT_EQ(plan.engine.weights_bytes, 2 * p);
  // The trainer offloads its weights before the engine starts (verl), so the engine sees none.
  EXPECT_EQ(plan.engine.trainer_at_init_bytes, 0u);
  EXPECT_EQ(plan.handoff.moved_bytes, 2 * p + 2 * p + 4 * p) << "policy weights, reference copy and AdamW's state";
  EXPECT_EQ(plan.handoff.sync_source_bytes, 2 * p);

  const phase_estimate& handoff = *find_phase(plan, "hand-off");
  EXPECT_EQ(handoff.peak_bytes, 2 * p + 2 * p + 4 * p + graphs);
  EXPECT_EQ(component(handoff, "optimizer state"), 4 * p);
  EXPECT_EQ(find_phase(plan, "wake-weights")->peak_bytes, 2 * p + graphs);
  const phase_estimate& sync = *find_phase(plan, "weight-sync");
  EXPECT_EQ(sync.peak_bytes, 2 * p + graphs + 2 * p);
  EXPECT_EQ(component(sync, "weights gathered for the sync (bf16, full)"), 2 * p);
  EXPECT_EQ(component(sync, "engine KV cache pool"), 0u) << "staged: the KV pool comes after the sync";
  EXPECT_EQ(find_phase(plan, "wake-kv")->peak_bytes, 2 * p + kv + graphs);
  EXPECT_EQ(find_phase(plan, "rollout")->peak_bytes, 2 * p + kv + plan.engine.activation_bytes + graphs);
  EXPECT_EQ(component(*find_phase(plan, "rollout"), "policy weights"), 0u) << "offloaded while the engine is awake";
  EXPECT_EQ(find_phase(plan, "sleep")->peak_bytes, 2 * p + kv + graphs + sequences);
  EXPECT_EQ(find_phase(plan, "resume")->peak_bytes, 8 * p + graphs + sequences);
  // The training phases are as without a hand-off: the trainer is back, the engine asleep.
  plan_knobs unmodelled = knobs;
  unmodelled.handoff = handoff_kind::unmodelled;
  const plan_result before = plan_memory(model, unmodelled);
  for (const char* name : {"reference", "update", "optimizer"}) {
    EXPECT_EQ(find_phase(plan, name)->peak_bytes, find_phase(before, name)->peak_bytes) << name;
  }
}

// Waking the weights and the KV pool together before the sync holds the old weights, the new
// ones and the KV at once (vllm-project/vllm RFC #15254): with a large pool that sets the step's
// peak, and the staged order (weights, sync, KV) lowers it by the sync's copy less the rollout's
// activation workspace.
TEST(Handoff, TheStagedOrderLowersThePeakThatWakingAllTogetherSets) {
  const model_architecture model = testing::config_model("qwen2.5-0.5b.json");
  const std::uint64_t p = count_parameters(model).total;
  plan_knobs knobs = colocated(handoff_kind::offload, 1);
  knobs.wake_order = wake_order_kind::together;
  const plan_result together = plan_memory(model, knobs);
  const std::uint64_t kv = static_cast<std::uint64_t>(together.engine.kv_bytes);
  const std::uint64_t graphs = 1ull << 30;
  EXPECT_EQ(names(together)[1], "wake-all");
  EXPECT_EQ(find_phase(together, "wake-kv"), nullptr);
  const phase_estimate& sync = *find_phase(together, "weight-sync");
  EXPECT_EQ(sync.peak_bytes, 2 * p + kv + graphs + 2 * p);
  EXPECT_EQ(together.peak_phase, "weight-sync") << "the sync with the KV woken sets the step's peak";
  EXPECT_EQ(together.peak_bytes, sync.peak_bytes);

  knobs.wake_order = wake_order_kind::staged;
  const plan_result staged = plan_memory(model, knobs);
  EXPECT_EQ(staged.peak_phase, "rollout") << "staged, the sync no longer sets the peak";
  EXPECT_LT(staged.peak_bytes, together.peak_bytes);
  EXPECT_EQ(together.peak_bytes - staged.peak_bytes, 2 * p - staged.engine.activation_bytes);
  // Each plan knows the other order's step peak.
  for (const plan_result* plan : {&staged, &together}) {
    EXPECT_EQ(plan->handoff.step_peak_staged, staged.peak_bytes);
    EXPECT_EQ(plan->handoff.step_peak_together, together.peak_bytes);
    EXPECT_EQ(plan->handoff.peak_transition_staged, "rollout");
    EXPECT_EQ(plan->handoff.peak_transition_together, "weight-sync");
    EXPECT_EQ(plan->handoff.wake_peak_together, sync.peak_bytes);
    EXPECT_EQ(plan->handoff.wake_peak_staged, 2 * p + kv + graphs);
  }
}

// Where training sets the step's peak, the order changes the wake-ups but not the step.
TEST(Handoff, TheOrderDoesNotMoveAPeakTheUpdateSets) {
  const model_architecture model = testing::config_model("llama3.2-1b.json");
  plan_knobs knobs = colocated(handoff_kind::keep, 1, 0.3);
  knobs.grad_ckpt = false;
  knobs.micro_batch = 32;
  knobs.sync_bucket_bytes = 512ull << 20;  // a sync beside the KV costs a bucket more
  const plan_result plan = plan_memory(model, knobs);
  ASSERT_TRUE(plan.engine.refusal.empty()) << plan.engine.refusal;
  EXPECT_EQ(plan.peak_phase, "update");
  EXPECT_EQ(plan.handoff.step_peak_staged, plan.handoff.step_peak_together);
  EXPECT_LT(plan.handoff.wake_peak_staged, plan.handoff.wake_peak_together);
}

// keep: the trainer stays, and its bf16 weights are what the engine loads, read in place.
TEST(Handoff, KeepingTheTrainerReadsItsBf16WeightsInPlace) {
  const model_architecture model = testing::config_model("llama3.2-1b.json");
  const std::uint64_t p = count_parameters(model).total;
  const plan_result plan = plan_memory(model, colocated(handoff_kind::keep, 2, 0.3));
  ASSERT_TRUE(plan.engine.refusal.empty()) << plan.engine.refusal;
  EXPECT_EQ(plan.handoff.sync_source_bytes, 0u);
  EXPECT_EQ(plan.handoff.moved_bytes, 0u);
  EXPECT_EQ(plan.engine.trainer_at_init_bytes, 4 * p) << "its weights and the reference copy";
  EXPECT_EQ(find_phase(plan, "hand-off"), nullptr);
  EXPECT_EQ(find_phase(plan, "resume"), nullptr);
  const phase_estimate& sync = *find_phase(plan, "weight-sync");
  EXPECT_EQ(sync.peak_bytes, 2 * p + 2 * p + 4 * p + 2 * p + (1ull << 30));
  EXPECT_EQ(find_phase(plan, "sleep")->peak_at, "engine going to sleep: weights and KV dropped");
  // fp32 master weights are not the engine's: the sync gathers a bf16 copy.
  plan_knobs fp32 = colocated(handoff_kind::keep, 2, 0.3);
  fp32.precision = precision_kind::fp32_master;
  EXPECT_EQ(plan_memory(model, fp32).handoff.sync_source_bytes, 2 * p);
  // A bucketed sync holds one bucket.
  plan_knobs bucketed = colocated(handoff_kind::keep, 2, 0.3);
  bucketed.sync_bucket_bytes = 512ull << 20;
  const plan_result with_buckets = plan_memory(model, bucketed);
  EXPECT_EQ(with_buckets.handoff.sync_source_bytes, 512ull << 20);
  EXPECT_EQ(component(*find_phase(with_buckets, "weight-sync"), "weight sync bucket in flight"), 512ull << 20);
}

// At sleep level 0 the engine never sleeps: no wake-ups, the sync beside its KV in any order.
TEST(Handoff, AnEngineThatNeverSleepsHasNoWakeUps) {
  const model_architecture model = testing::config_model("qwen2.5-0.5b.json");
  const std::uint64_t p = count_parameters(model).total;
  const plan_result plan = plan_memory(model, colocated(handoff_kind::offload, 0, 0.3));
  ASSERT_TRUE(plan.engine.refusal.empty()) << plan.engine.refusal;
  EXPECT_EQ(names(plan), (std::vector<std::string>{"hand-off", "weight-sync", "rollout", "resume", "reference", "update", "optimizer"}));
  const std::uint64_t kv = static_cast<std::uint64_t>(plan.engine.kv_bytes);
  EXPECT_EQ(find_phase(plan, "weight-sync")->peak_bytes, 2 * p + kv + (1ull << 30) + 2 * p);
  EXPECT_EQ(plan.handoff.step_peak_staged, plan.handoff.step_peak_together);
  plan_knobs together = colocated(handoff_kind::offload, 0, 0.3);
  together.wake_order = wake_order_kind::together;
  const auto refused = validate_handoff_knobs(together);
  EXPECT_EQ(refused.code(), plan_errc::knob_conflict);
  EXPECT_NE(refused.failure().detail.find("never sleeps"), std::string::npos) << refused.failure().detail;
}

// rlmem.runtime's pause takes the whole tag, DDP's buckets too; offload's .to("cpu") cannot.
TEST(Handoff, APauseTakesDdpsBucketsAndOffloadDoesNot) {
  const model_architecture model = testing::config_model("qwen2.5-0.5b.json");
  const std::uint64_t p = count_parameters(model).total;
  plan_knobs knobs = colocated(handoff_kind::rlmem_pause, 1, 0.3);
  knobs.gpus = 2;
  knobs.micro_batch = 4;
  const plan_result paused = plan_memory(model, knobs);
  ASSERT_TRUE(paused.engine.refusal.empty()) << paused.engine.refusal;
  EXPECT_EQ(paused.handoff.moved_bytes, 2 * p + 2 * p + 4 * p + 2 * p) << "DDP's buckets hold a bf16 gradient of every parameter";
  EXPECT_EQ(paused.engine.trainer_at_init_bytes, 0u);
  EXPECT_EQ(component(*find_phase(paused, "rollout"), "DDP gradient buckets"), 0u);
  knobs.handoff = handoff_kind::offload;
  const plan_result offloaded = plan_memory(model, knobs);
  EXPECT_EQ(offloaded.handoff.moved_bytes, 8 * p);
  EXPECT_EQ(offloaded.engine.trainer_at_init_bytes, 2 * p);
  EXPECT_EQ(component(*find_phase(offloaded, "rollout"), "DDP gradient buckets"), 2 * p);
}

TEST(Handoff, IsRefusedWithoutAnEngineOrAStep) {
  plan_knobs knobs = colocated(handoff_kind::keep, 1);
  knobs.engine.rollout = rollout_kind::hf;
  auto refused = validate_handoff_knobs(knobs);
  EXPECT_EQ(refused.code(), plan_errc::missing_knob);
  EXPECT_NE(refused.failure().detail.find("give --rollout vllm or sglang"), std::string::npos) << refused.failure().detail;
  knobs = colocated(handoff_kind::keep, 1);
  knobs.phase = plan_phase::generate;
  refused = validate_handoff_knobs(knobs);
  EXPECT_EQ(refused.code(), plan_errc::knob_conflict);
  EXPECT_NE(refused.failure().detail.find("--phase grpo-step"), std::string::npos) << refused.failure().detail;
}

}  // namespace
}  // namespace rlmem
