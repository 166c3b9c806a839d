// SPDX-License-Identifier: MIT
// The phases' terms: what each knob changes, in exact bytes where the code path fixes them.

#include "planner_support.hpp"

#include <rlmem/plan/plan.hpp>

#include <gtest/gtest.h>

#include <algorithm>

namespace rlmem {
namespace {

using testing::model;

using testing::component;
using testing::phase_named;

constexpr auto grpo = testing::grpo_knobs;
constexpr auto train = testing::train_knobs;
constexpr auto generate = testing::generate_knobs;

plan_result planned(const char* name, const plan_knobs& knobs) {
  const auto checked = validate_knobs(model(name), knobs);
  EXPECT_TRUE(checked.ok()) << checked.failure().detail;
  return plan_memory(model(name), knobs);
}

TEST(Phases, ComponentsAddUpToEachPeakAndTheLargestIsThePeak) {
  plan_knobs lora = grpo(8, 8, 512, 512, 16);
  lora.lora_rank = 16;
  plan_knobs sharded = grpo(8, 8, 512, 512, 8);
  sharded.gpus = 8;
  sharded.shard = shard_kind::fsdp;
  for (const auto& [name, knobs] : {std::pair{"qwen2.5-7b", grpo(8, 8, 512, 512, 16)}, std::pair{"llama3.1-8b", lora},
                                    std::pair{"qwen3-30b-a3b", sharded}, std::pair{"qwen3-8b", train(4, 2048)},
                                    std::pair{"gemma-2b", generate(16, 128, 128)}}) {
    const plan_result plan = planned(name, knobs);
    std::uint64_t largest = 0;
    for (const phase_estimate& phase : plan.phases) {
      std::uint64_t sum = 0;
      for (const memory_component& part : phase.components) sum += part.bytes;
      EXPECT_EQ(sum, phase.peak_bytes) << name << " " << phase.name;
      largest = std::max(largest, phase.peak_bytes);
    }
    EXPECT_EQ(plan.peak_bytes, largest) << name;
  }
}

TEST(Phases, KvCacheBytesPerTokenFollowTheArchitecture) {
  // 2 (k, v) x layers x kv heads x head_dim x 2 bytes: Qwen2.5-0.5B 12 KiB, Qwen2.5-7B 56 KiB,
  // Llama-3-8B 128 KiB, Qwen3-8B 144 KiB per token.
  for (const auto& [name, per_token] : {std::pair{"qwen2.5-0.5b", 12288u}, std::pair{"qwen2.5-7b", 57344u},
                                        std::pair{"llama3.1-8b", 131072u}, std::pair{"qwen3-8b", 147456u}}) {
    // A long generation of one row ends at the last sampling step holding prompt + new - 1 positions.
    const plan_result plan = planned(name, generate(1, 16, 4096));
    EXPECT_EQ(component(plan.phases[0], "KV cache"), per_token * (16 + 4096 - 1)) << name;
  }
}

TEST(Phases, TrainPeakIsTheLogSoftmaxBackwardOfTheResponseLogits) {
  // Qwen2.5-0.5B, micro-batch 4 x 512 tokens, 256 scored: three fp32 tensors of 4 x 256 x 151,936.
  const plan_result plan = planned("qwen2.5-0.5b", train(4, 512));
  const phase_estimate& phase = plan.phases[0];
  EXPECT_EQ(phase.peak_at, "log_softmax backward");
  const std::uint64_t one = 4ull * 4 * 256 * 151936;
  EXPECT_EQ(component(phase, "log-probs (fp32, saved)"), one);
  EXPECT_EQ(component(phase, "gradient of log-probs"), one);
  EXPECT_EQ(component(phase, "gradient of logits (fp32)"), one);
  EXPECT_EQ(component(phase, "weights"), 2ull * 494032768);
  EXPECT_EQ(component(phase, "optimizer state"), 4ull * 494032768);
}

TEST(Phases, CheckpointingKeepsOnlyLayerInputs) {
  plan_knobs knobs = train(8, 1024);
  const plan_result full = planned("qwen2.5-0.5b", knobs);
  knobs.grad_ckpt = true;
  const plan_result checkpointed = planned("qwen2.5-0.5b", knobs);
  // 24 layers x 8 x 1024 tokens x 896 x 2 bytes.
  EXPECT_EQ(component(checkpointed.phases[0], "checkpointed layer inputs"), 24ull * 8 * 1024 * 896 * 2);
  EXPECT_EQ(component(checkpointed.phases[0], "activations"), 0u);
  // The measured rows: 21,780,210,432 without, 10,848,035,584 with (measured_peaks.json).
  const double measured_saving = 21780210432.0 - 10848035584.0;
  const double predicted_saving = static_cast<double>(full.peak_bytes) - static_cast<double>(checkpointed.peak_bytes);
  EXPECT_NEAR(predicted_saving / measured_saving, 1.0, 0.01);
}

TEST(Phases, LoraTrainsExactlyPeftsParameters) {
  // `trainable` as peft counted it in the measured rows (testdata/planner/measured_extra.json).
  for (const auto& [name, rank, trainable] : {std::tuple{"llama3.2-1b", 8u, 5636096u}, std::tuple{"llama3.2-1b", 64u, 45088768u},
                                              std::tuple{"qwen2.5-1.5b", 8u, 9232384u}, std::tuple{"qwen3-0.6b", 16u, 10092544u}}) {
    plan_knobs knobs = train(8, 1024);
    knobs.lora_rank = rank;
    const plan_result plan = planned(name, knobs);
    EXPECT_EQ(plan.trainable_params, trainable) << name << " r=" << rank;
    // fp32 adapters: AdamW keeps 8 bytes per trainable parameter.
    EXPECT_EQ(component(plan.phases[0], "optimizer state"), 8ull * trainable) << name;
  }
  plan_knobs attention_only = train(8, 1024);
  attention_only.lora_rank = 8;
  attention_only.lora_targets = {"q_proj", "v_proj"};
  // Llama-3.2-1B: 16 layers x 8 x ((2048 + 2048) + (2048 + 512)).
  EXPECT_EQ(planned("llama3.2-1b", attention_only).trainable_params, 16u * 8 * (4096 + 2560));
}

TEST(Phases, PreallocatedCacheHoldsEveryRowItIsSizedFor) {
  // nanochat: the decode cache is sized for num_samples (16) rows of prompt + max_tokens even when
  // device_batch_size (8) rows are generated at a time.
  plan_knobs grown = generate(8, 256, 256);
  plan_knobs prealloc = grown;
  prealloc.kv_cache = kv_cache_kind::prealloc;
  prealloc.kv_rows = 16;
  const plan_result a = planned("qwen2.5-0.5b", grown);
  const plan_result b = planned("qwen2.5-0.5b", prealloc);
  EXPECT_EQ(component(b.phases[0], "KV cache (preallocated)"), 16ull * 512 * 12288);
  EXPECT_GT(b.peak_bytes, a.peak_bytes);
}

TEST(Phases, NamedBuffersAreHeldInTheirPhasesOnly) {
  plan_knobs knobs = grpo(4, 8, 256, 256, 8);
  const auto parsed = parse_buffer_spec("trajectories=8x50x263x196:fp32@rollout,update");
  ASSERT_TRUE(parsed.ok()) << parsed.failure().detail;
  const resident_buffer& latents = parsed.value();
  EXPECT_EQ(latents.fixed_bytes, 8ull * 50 * 263 * 196 * 4);
  knobs.buffers.push_back(latents);
  const plan_result plan = planned("qwen2.5-0.5b", knobs);
  EXPECT_EQ(component(phase_named(plan, "rollout"), "buffer trajectories"), latents.fixed_bytes);
  EXPECT_EQ(component(phase_named(plan, "update"), "buffer trajectories"), latents.fixed_bytes);
  EXPECT_EQ(component(phase_named(plan, "reference"), "buffer trajectories"), 0u);
  EXPECT_EQ(component(phase_named(plan, "optimizer"), "buffer trajectories"), 0u);
}

TEST(Phases, BufferSpecsAreCheckedWithAClearMessage) {
  for (const char* spec : {"x", "=1x2:fp32", "a=1x2", "a=1x0:fp32", "a=1xq:fp32", "a=2:fp7", "a=2:fp32@later"}) {
    const auto parsed = parse_buffer_spec(spec);
    EXPECT_EQ(parsed.code(), plan_errc::invalid_buffer_spec) << spec << ": " << parsed.failure().detail;
    EXPECT_NE(parsed.failure().detail.find("--buffer"), std::string::npos) << parsed.failure().detail;
  }
  const auto huge = parse_buffer_spec("a=1099511627776x1099511627776:fp32");
  EXPECT_EQ(huge.code(), plan_errc::limit_exceeded);
  EXPECT_EQ(huge.failure().detail, "--buffer 'a=1099511627776x1099511627776:fp32' is larger than any GPU");
  knob_limits few_dims;
  few_dims.max_buffer_dims = 2;
  EXPECT_EQ(parse_buffer_spec("a=2x3x4:fp32", few_dims).failure().detail, "--buffer 'a=2x3x4:fp32' has more than 2 dims");
}

TEST(Phases, ShardingDividesStateAndAddsLayersInFlight) {
  plan_knobs knobs = grpo(8, 8, 512, 512, 8);
  const plan_result single = planned("qwen2.5-7b", knobs);
  knobs.gpus = 8;
  knobs.shard = shard_kind::fsdp;
  const plan_result sharded = planned("qwen2.5-7b", knobs);
  const phase_estimate& one = phase_named(single, "optimizer");
  const phase_estimate& eight = phase_named(sharded, "optimizer");
  EXPECT_EQ(component(eight, "optimizer state"), component(one, "optimizer state") / 8);
  EXPECT_EQ(component(eight, "policy weights"), component(one, "policy weights") / 8);
  EXPECT_GT(component(phase_named(sharded, "update"), "unsharded layers in flight"), 0u);
  plan_knobs replicated = grpo(8, 8, 512, 512, 8);
  replicated.gpus = 8;
  EXPECT_EQ(component(phase_named(planned("qwen2.5-7b", replicated), "rollout"), "DDP gradient buckets"), 2ull * 7615616512);
  knobs.offload_optimizer = true;
  const plan_result offloaded = planned("qwen2.5-7b", knobs);
  EXPECT_EQ(component(phase_named(offloaded, "optimizer"), "optimizer state"), 0u);
  EXPECT_EQ(offloaded.host_bytes, component(eight, "optimizer state"));
}

TEST(Phases, ChunkedAndFusedLogProbsShrinkTheUpdate) {
  plan_knobs knobs = grpo(8, 8, 512, 1024, 16);
  const std::uint64_t full = phase_named(planned("qwen2.5-7b", knobs), "update").peak_bytes;
  knobs.logprob = logprob_impl::chunked;
  const std::uint64_t chunked = phase_named(planned("qwen2.5-7b", knobs), "update").peak_bytes;
  knobs.logprob = logprob_impl::fused;
  const plan_result fused_plan = planned("qwen2.5-7b", knobs);
  EXPECT_LT(chunked, full);
  EXPECT_LT(phase_named(fused_plan, "update").peak_bytes, chunked);
  EXPECT_EQ(component(phase_named(fused_plan, "update"), "logits (bf16)"), 0u);
}

TEST(Phases, GradientsOfEarlierMicroBatchesStayResident) {
  const plan_result accumulating = planned("qwen2.5-0.5b", grpo(4, 8, 256, 256, 8));
  EXPECT_EQ(component(phase_named(accumulating, "update"), "gradients (earlier micro-batches)"), 2ull * 494032768);
  const plan_result single = planned("qwen2.5-0.5b", grpo(1, 8, 256, 256, 8));
  EXPECT_EQ(component(phase_named(single, "update"), "gradients (earlier micro-batches)"), 0u);
}

TEST(Phases, OldLogProbsScoreTheRolloutBeforeAnyGradient) {
  plan_knobs knobs = grpo(4, 8, 256, 256, 8);
  knobs.old_logprobs = true;
  const plan_result plan = planned("qwen2.5-0.5b", knobs);
  const phase_estimate& old = phase_named(plan, "old-logprobs");
  const phase_estimate& reference = phase_named(plan, "reference");
  EXPECT_EQ(component(old, "gradients (earlier micro-batches)"), 0u);
  EXPECT_EQ(old.peak_bytes + 2ull * 494032768, reference.peak_bytes);  // the reference's pass comes after gradients exist
}

TEST(Phases, AnAdapterDisabledReferenceHoldsNoSecondCopy) {
  plan_knobs knobs = grpo(4, 8, 256, 256, 8);
  knobs.lora_rank = 16;
  knobs.reference = reference_kind::copy;
  const plan_result copy = planned("qwen2.5-1.5b", knobs);
  knobs.reference = reference_kind::adapter_disabled;
  const plan_result disabled = planned("qwen2.5-1.5b", knobs);
  const std::uint64_t copy_bytes = 2 * copy.params.total;  // bf16
  EXPECT_EQ(component(phase_named(copy, "reference"), "reference weights"), copy_bytes);
  EXPECT_EQ(component(phase_named(disabled, "reference"), "reference weights"), 0u);
  EXPECT_EQ(copy.weights_bytes - disabled.weights_bytes, copy_bytes);
  // The same pass on the same base weights: every phase is the copy's less the copy.
  for (const char* phase : {"rollout", "reference", "update", "optimizer"}) {
    EXPECT_EQ(phase_named(copy, phase).peak_bytes - phase_named(disabled, phase).peak_bytes, copy_bytes) << phase;
  }
  // The reference scores without adapters: its layer moment is the frozen base's, with no fp32
  // LoRA input copies, so it equals a full fine-tuning plan's reference pass on the same rows.
  EXPECT_EQ(phase_named(disabled, "reference").peak_at, phase_named(copy, "reference").peak_at);
  knobs.reference = reference_kind::none;
  const plan_result none = planned("qwen2.5-1.5b", knobs);
  EXPECT_EQ(none.phases.size(), copy.phases.size() - 1);
  EXPECT_EQ(phase_named(none, "update").peak_bytes, phase_named(disabled, "update").peak_bytes);
}

TEST(Knobs, KnobsThatDoNotApplyAreRefusedWithTheReason) {
  const model_architecture& qwen = model("qwen2.5-0.5b");
  plan_knobs targets_without_rank = train(4, 512);
  targets_without_rank.lora_targets = {"q_proj"};
  plan_knobs rows_without_prealloc = generate(8, 64, 64);
  rows_without_prealloc.kv_rows = 16;
  plan_knobs train_with_batch = train(4, 512);
  train_with_batch.batch = 8;
  plan_knobs fsdp_on_one = grpo(4, 8, 256, 256, 8);
  fsdp_on_one.shard = shard_kind::fsdp;
  plan_knobs disabled_without_lora = grpo(4, 8, 256, 256, 8);
  disabled_without_lora.reference = reference_kind::adapter_disabled;
  plan_knobs reference_in_train = train(4, 512);
  reference_in_train.reference = reference_kind::copy;
  const std::pair<plan_knobs, const char*> cases[] = {
      {targets_without_rank, "--lora-targets names the modules LoRA adapts; it needs --lora-r"},
      {rows_without_prealloc, "--kv-rows sizes a preallocated KV cache; it needs --kv-cache prealloc"},
      {train_with_batch, "--batch is the rows generated together; --phase train generates nothing"},
      {fsdp_on_one, "--shard fsdp divides state over --gpus; on 1 GPU it divides nothing"},
      {disabled_without_lora, "--ref-model adapter-disabled scores with the policy's LoRA adapter switched off; it needs --lora-r"},
      {reference_in_train, "--ref-model belongs to --phase grpo-step"},
  };
  for (const auto& [knobs, expected] : cases) {
    const auto checked = validate_knobs(qwen, knobs);
    EXPECT_EQ(checked.code(), plan_errc::knob_conflict) << expected;
    const std::string& message = checked.failure().detail;
    EXPECT_NE(message.find(expected), std::string::npos) << "expected '" << expected << "' in '" << message << "'";
  }
  // FSDP on one GPU is how CPU offload of the weights runs: that one is kept.
  fsdp_on_one.offload_optimizer = fsdp_on_one.offload_weights = true;
  const auto kept = validate_knobs(qwen, fsdp_on_one);
  EXPECT_TRUE(kept.ok()) << kept.failure().detail;
}

TEST(Knobs, ImpossibleKnobsAreNamed) {
  const model_architecture& qwen = model("qwen2.5-0.5b");
  struct knobs_case {
    plan_knobs knobs;
    plan_errc code;
    const char* expected;
  };
  const knobs_case cases[] = {
      {grpo(4, 6, 256, 256, 4), plan_errc::knob_conflict, "not divisible by --micro-batch"},
      {grpo(4, 8, 0, 256, 8), plan_errc::invalid_knob, "--prompt-len must be at least 1"},
      {grpo(3, 8, 256, 256, 8), plan_errc::knob_conflict, "--prompts 3 is not divisible by --gpus"},
      {generate(0, 16, 16), plan_errc::invalid_knob, "--batch must be at least 1"},
      {generate(1u << 21, 16, 16), plan_errc::limit_exceeded, "--batch 2097152 is beyond 1048576"},
      {train(4, 512), plan_errc::ok, ""},
  };
  for (auto [knobs, code, expected] : cases) {
    if (knobs.prompts == 3) {
      knobs.gpus = 2;
      knobs.shard = shard_kind::fsdp;
    }
    const auto checked = validate_knobs(qwen, knobs);
    const std::string& message = checked.failure().detail;
    EXPECT_EQ(error_name(checked.code()), error_name(code)) << message;
    EXPECT_NE(message.find(expected), std::string::npos) << "expected '" << expected << "' in '" << message << "'";
  }
  plan_knobs long_scores = train(4, 512);
  long_scores.logprob_tokens = 512;
  const auto refused = validate_knobs(qwen, long_scores);
  EXPECT_EQ(refused.code(), plan_errc::knob_conflict);
  EXPECT_NE(refused.failure().detail.find("--logprob-tokens 512 must be less than --seq-len 512"), std::string::npos)
      << refused.failure().detail;
  // The limits are a parameter: 4 rows pass the defaults and not a limit of 2.
  knob_limits two_rows;
  two_rows.max_rows = 2;
  EXPECT_EQ(validate_knobs(qwen, train(4, 512), two_rows).failure().detail, "--micro-batch 4 is beyond 2");
}

}  // namespace
}  // namespace rlmem

namespace rlmem {
namespace {

std::uint64_t part(const phase_estimate& phase, const std::string& name) {
  for (const memory_component& c : phase.components) {
    if (c.name == name) return c.bytes;
  }
  return 0;
}

// `rows` and `epochs` in a buffer's dims follow the knobs: the same spec grows with the group and
// the epochs, and lives in every phase, the optimizer step included, when no @phases is given.
TEST(Buffers, RowsAndEpochsScaleAndAnUnphasedBufferLivesEverywhere) {
  const auto parsed = parse_buffer_spec("traj=rows*epochs*50x263*1*196:fp32");
  ASSERT_TRUE(parsed.ok()) << parsed.failure().detail;
  const resident_buffer& traj = parsed.value();
  EXPECT_EQ(traj.rows_dims, 1u);
  EXPECT_EQ(traj.epochs_dims, 1u);
  plan_knobs knobs = testing::grpo_knobs(2, 8, 256, 64, 8);
  knobs.epochs = 2;
  knobs.buffers.push_back(traj);
  EXPECT_EQ(buffer_bytes(traj, knobs), 16ull * 2 * 50 * 263 * 196 * 4);
  knobs.group = 16;
  knobs.epochs = 4;
  EXPECT_EQ(buffer_bytes(traj, knobs), 32ull * 4 * 50 * 263 * 196 * 4);
  const model_architecture model = *find_preset("qwen2.5-0.5b");
  const auto checked = validate_knobs(model, knobs);
  ASSERT_TRUE(checked.ok()) << checked.failure().detail;
  const plan_result plan = plan_memory(model, knobs);
  for (const phase_estimate& phase : plan.phases) EXPECT_EQ(part(phase, "buffer traj"), buffer_bytes(traj, knobs)) << phase.name;
  const std::string refusal = parse_buffer_spec("traj=rows*steps:fp32").failure().detail;
  EXPECT_NE(refusal.find("'steps' is not a positive dimension, rows or epochs"), std::string::npos) << refusal;
}

// Muon keeps one momentum per layer matrix (fp32 under nanochat's precision) and AdamW's two
// moments for the embedding (bf16) and the head (fp32): less state than AdamW everywhere.
TEST(Optimizers, MuonKeepsOneMomentumPerMatrixAndAdamwForTheRest) {
  const model_architecture model = testing::config_model("nanochat-d12.json");
  plan_knobs knobs = testing::train_knobs(8, 1024);
  knobs.precision = precision_kind::nanochat;
  knobs.optimizer = optimizer_kind::muon;
  const auto checked = validate_knobs(model, knobs);
  ASSERT_TRUE(checked.ok()) << checked.failure().detail;
  const parameter_count count = count_parameters(model);
  const std::uint64_t matrices = 12ull * count.per_layer;
  const std::uint64_t expected = matrices * 4 + 2 * (count.embedding * 2 + count.lm_head * 4);
  EXPECT_EQ(part(plan_memory(model, knobs).phases[0], "optimizer state"), expected);
  plan_knobs adamw = knobs;
  adamw.optimizer = optimizer_kind::adamw;
  EXPECT_GT(part(plan_memory(model, adamw).phases[0], "optimizer state"), expected);
  // Weights: fp32 matrices and head, a bf16 embedding, and its rotary tables.
  EXPECT_EQ(part(plan_memory(model, knobs).phases[0], "weights"), (count.total - count.embedding) * 4 + count.embedding * 2);
}

// --kv-rows follows the generation batch (or the group) as --fit moves it; a fixed number that
// holds fewer rows than are generated together is refused.
TEST(Generation, PreallocatedCacheFollowsTheGenerationBatch) {
  const model_architecture model = testing::config_model("nanochat-d12.json");
  plan_knobs knobs = testing::grpo_knobs(2, 16, 128, 48, 8);
  knobs.reference = reference_kind::none;
  knobs.precision = precision_kind::nanochat;
  knobs.kv_cache = kv_cache_kind::prealloc;
  knobs.batch = 8;
  EXPECT_EQ(kv_cache_rows(knobs), 8u);
  knobs.kv_rows_follow = kv_rows_kind::group;
  EXPECT_EQ(kv_cache_rows(knobs), 16u);
  const auto checked = validate_knobs(model, knobs);
  ASSERT_TRUE(checked.ok()) << checked.failure().detail;
  knobs.kv_rows_follow = kv_rows_kind::fixed;
  knobs.kv_rows = 4;
  const std::string refusal = validate_knobs(model, knobs).failure().detail;
  EXPECT_NE(refusal.find("fewer than the 8 generated together"), std::string::npos) << refusal;
  // Generating 16 rows at a time instead of 8 doubles the rollout's cache.
  knobs.kv_rows = 0;
  const plan_result eight = plan_memory(model, knobs);
  knobs.batch = 16;
  const plan_result sixteen = plan_memory(model, knobs);
  EXPECT_EQ(part(sixteen.phases[0], "KV cache (preallocated)"), 2 * part(eight.phases[0], "KV cache (preallocated)"));
}

// A policy known only by its parameter count: its phases are its state and its buffers.
TEST(Phases, APolicyGivenAsParametersIsItsStateAndBuffers) {
  model_architecture model;
  model.name = model.model_type = "params-only";
  model.opaque_params = 3'000'000;
  plan_knobs knobs = testing::grpo_knobs(8, 4, 1, 1, 8);
  knobs.reference = reference_kind::none;
  knobs.epochs = 4;
  const auto traj = parse_buffer_spec("traj=rows*epochs*50*263*1*196:fp32");
  ASSERT_TRUE(traj.ok()) << traj.failure().detail;
  knobs.buffers.push_back(traj.value());
  const auto checked = validate_knobs(model, knobs);
  ASSERT_TRUE(checked.ok()) << checked.failure().detail;
  const plan_result plan = plan_memory(model, knobs);
  ASSERT_EQ(plan.phases.size(), 3u);
  const std::uint64_t state = 3'000'000ull * 2 * 3;  // bf16 weights and AdamW's two moments
  EXPECT_EQ(plan.phases[0].peak_bytes, state + 32ull * 4 * 50 * 263 * 196 * 4);
  knobs.lora_rank = 8;
  EXPECT_EQ(validate_knobs(model, knobs).code(), plan_errc::knob_conflict);
}

}  // namespace
}  // namespace rlmem
