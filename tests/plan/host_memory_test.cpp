// SPDX-License-Identifier: MIT
// Host memory: offloaded state and the pinned backups of a colocated step add up per GPU and per
// node, and --fit counts a configuration whose host memory a node lacks as not fitting.

#include "planner_support.hpp"

#include <rlmem/plan/plan.hpp>

#include <gtest/gtest.h>

#include <string>

namespace rlmem {
namespace {

// FSDP over the 4 GPUs of a node, AdamW offloaded, vLLM sleeping at level 1, the trainer
// offloaded while the engine is awake.
plan_knobs sharded_colocated() {
  plan_knobs knobs = testing::grpo_knobs(8, 8, 512, 512, 4);
  knobs.grad_ckpt = true;
  knobs.gpus = 4;
  knobs.gpus_per_node = 4;
  knobs.shard = shard_kind::fsdp;
  knobs.offload_optimizer = true;
  knobs.engine.rollout = rollout_kind::vllm;
  knobs.engine.device_bytes = gpu_memory_bytes("h100-80g");
  knobs.engine.gpu_memory_utilization = 0.3;
  knobs.engine.sleep_level = 1;
  knobs.handoff = handoff_kind::offload;
  return knobs;
}

std::uint64_t part(const host_memory& host, const std::string& name) {
  for (const memory_component& component : host.parts) {
    if (component.name == name) return component.bytes;
  }
  ADD_FAILURE() << "expected a host part named " << name;
  return 0;
}

TEST(HostMemory, BackupsAddUpPerGpuAndPerNode) {
  const model_architecture model = testing::config_model("qwen2.5-0.5b.json");
  const std::uint64_t p = count_parameters(model).total;
  const plan_knobs knobs = sharded_colocated();
  const auto checked = validate_knobs(model, knobs);
  ASSERT_TRUE(checked.ok()) << checked.failure().detail;
  const auto handoff_checked = validate_handoff_knobs(knobs);
  ASSERT_TRUE(handoff_checked.ok()) << handoff_checked.failure().detail;
  const plan_result plan = plan_memory(model, knobs);
  ASSERT_TRUE(plan.engine.refusal.empty()) << plan.engine.refusal;
  // AdamW's bf16 moments (4P) sharded over 4 GPUs; the engine's full bf16 copy (2P); the
  // trainer's shards of the policy and the reference (2P / 4 each) while the engine is awake.
  EXPECT_EQ(part(plan.host, "optimizer state (--offload optimizer)"), p);
  EXPECT_EQ(part(plan.host, "engine weights while it sleeps (sleep level 1's backup)"), 2 * p);
  EXPECT_EQ(part(plan.host, "trainer state offloaded while the engine is awake (--handoff offload)"), p);
  EXPECT_EQ(plan.host.per_gpu_bytes, 4 * p);
  EXPECT_EQ(plan.host_bytes, 4 * p) << "host_bytes is the same sum";
  EXPECT_EQ(plan.host.gpus_per_node, 4u);
  EXPECT_EQ(plan.host.per_node_bytes, 16 * p);
  EXPECT_TRUE(host_fits(plan, 16 * p));
  EXPECT_FALSE(host_fits(plan, 16 * p - 1));
  EXPECT_TRUE(host_fits(plan, 0)) << "0: the host is not checked";
}

TEST(HostMemory, NotReportedWithoutANode) {
  plan_knobs knobs = sharded_colocated();
  knobs.gpus_per_node = 0;
  const plan_result plan = plan_memory(testing::config_model("qwen2.5-0.5b.json"), knobs);
  EXPECT_TRUE(plan.host.parts.empty());
  EXPECT_EQ(plan.host.per_node_bytes, 0u);
}

// A configuration that fits the card but not the host does not fit, and the search keeps to the
// host: every configuration it offers fits both.
TEST(HostMemory, FitChecksTheHostAsWellAsTheCard) {
  const model_architecture model = testing::config_model("qwen2.5-0.5b.json");
  plan_knobs knobs = sharded_colocated();
  // The trainer stays through the rollout: the host holds AdamW's shard and the engine's backup.
  knobs.handoff = handoff_kind::keep;
  const plan_result plan = plan_memory(model, knobs);
  const std::uint64_t p = count_parameters(model).total;
  EXPECT_EQ(plan.host.per_node_bytes, 4 * (p + 2 * p));
  fit_options options;
  options.budget_bytes = gpu_memory_bytes("h100-80g");
  options.host_memory_bytes = plan.host.per_node_bytes - 1;
  const fit_result short_host = fit_configuration(model, knobs, options);
  EXPECT_TRUE(short_host.yours_fits_card);
  EXPECT_FALSE(short_host.yours_fits) << "its host memory is a byte over the node's";
  EXPECT_EQ(short_host.your_host_bytes, plan.host.per_node_bytes);
  ASSERT_TRUE(short_host.found) << short_host.reason;
  for (const fit_candidate& candidate : short_host.every_fitting) {
    const plan_result fitted = plan_memory(model, candidate.knobs);
    EXPECT_LE(fitted.host.per_node_bytes, options.host_memory_bytes);
    EXPECT_LE(fitted.peak_bytes, short_host.usable_bytes);
  }
  // The what-if rows judge each change by the host too: keeping the optimizer on the GPU frees
  // its host memory, so it fits.
  bool offload_row = false;
  for (const what_if_row& row : short_host.what_if) {
    if (row.knob == "offload" && row.to == "none") {
      offload_row = true;
      EXPECT_TRUE(row.fits);
    }
  }
  EXPECT_TRUE(offload_row) << "expected an offload optimizer -> none row";
  // Sleep level 2 keeps no backup of the engine's weights: 2P less per GPU.
  bool sleep_row = false;
  for (const what_if_row& row : short_host.what_if) {
    if (row.knob == "sleep level" && row.from == "1" && row.to == "2") {
      sleep_row = true;
      EXPECT_TRUE(row.fits);
      EXPECT_EQ(row.peak_bytes, plan.peak_bytes) << "the engine's device memory is the same at levels 1 and 2";
    }
  }
  EXPECT_TRUE(sleep_row) << "expected a sleep level 1 -> 2 row where the host is checked";

  options.host_memory_bytes = plan.host.per_node_bytes;
  EXPECT_TRUE(fit_configuration(model, knobs, options).yours_fits);
}

}  // namespace
}  // namespace rlmem
