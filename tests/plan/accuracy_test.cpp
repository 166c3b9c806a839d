// SPDX-License-Identifier: MIT
// The planner against peaks PyTorch measured on an H200 (testdata/planner): the issue's bounds,
// median error at most 5% and every row within 12%, per file and over all rows.

#include "planner_support.hpp"

#include <rlmem/plan.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace rlmem {
namespace {

using testing::read_text;
std::string testdata(const std::string& name) { return testing::planner_testdata(name); }

// The architecture from its config.json when the fixture has one, else the built-in preset.
model_architecture model_named(const std::string& name) {
  std::ifstream probe(testdata("configs/" + name + ".json"));
  if (probe) {
    model_architecture model;
    std::string message;
    EXPECT_TRUE(parse_hf_config(read_text(testdata("configs/" + name + ".json")), model, message)) << message;
    return model;
  }
  const model_architecture* preset = find_preset(name);
  EXPECT_NE(preset, nullptr) << "no preset for " << name;
  return preset != nullptr ? *preset : model_architecture{};
}

// measure.py's rows as knobs: each phase exactly as that script ran it.
plan_knobs knobs_of(const nlohmann::json& row) {
  plan_knobs knobs;
  const std::string phase = row.at("phase");
  const std::string optimizer = row.value("optimizer", "adamw");
  knobs.optimizer = optimizer == "sgd" ? optimizer_kind::sgd : optimizer == "muon" ? optimizer_kind::muon : optimizer_kind::adamw;
  const std::string precision = row.value("precision", "bf16");
  knobs.precision = precision == "fp32-master" ? precision_kind::fp32_master
                    : precision == "nanochat"  ? precision_kind::nanochat
                                               : precision_kind::bf16;
  if (row.value("kv_cache", "grow") == "prealloc") knobs.kv_cache = kv_cache_kind::prealloc;
  knobs.gpus = row.value("gpus", 1);
  knobs.shard = row.value("shard", "none") == "fsdp" ? shard_kind::fsdp : shard_kind::none;
  if (phase == "generate") {
    knobs.phase = plan_phase::generate;
    knobs.batch = row.at("batch");
    knobs.prompt_len = row.at("prompt");
    knobs.new_tokens = row.at("new");
  } else if (phase == "train" || phase == "train_lora") {
    knobs.phase = plan_phase::train;
    knobs.micro_batch = row.at("micro_batch");
    knobs.seq_len = row.at("seq");
    knobs.logprob_tokens = row.at("logprob_tokens");
    knobs.grad_ckpt = row.at("grad_ckpt");
    knobs.lora_rank = row.value("lora_r", 0);
  } else {
    knobs.phase = plan_phase::grpo_step;
    knobs.prompts = row.at("prompts");
    knobs.group = row.at("group");
    knobs.prompt_len = row.at("prompt");
    knobs.new_tokens = row.at("new");
    knobs.micro_batch = row.at("micro_batch");
    // measure_lora_reference.py names its reference; measure.py's is always a copy.
    const std::string reference = row.value("reference", row.at("ref_model").get<bool>() ? "copy" : "none");
    knobs.reference = reference == "adapter-disabled" ? reference_kind::adapter_disabled
                      : reference == "copy"           ? reference_kind::copy
                                                      : reference_kind::none;
    knobs.lora_rank = row.value("lora_r", 0);
    // measure_issue12.py: the generation batch, PPO's epochs and old-policy pass, a scaled buffer.
    knobs.batch = row.value("gen_batch", 0);
    knobs.epochs = row.value("epochs", 1);
    knobs.old_logprobs = row.value("old_logprobs", false);
    if (row.contains("buffer")) {
      resident_buffer buffer;
      std::string message;
      EXPECT_TRUE(parse_buffer_spec(row.at("buffer").get<std::string>(), buffer, message)) << message;
      knobs.buffers.push_back(buffer);
    }
  }
  return knobs;
}

struct row_error {
  std::string label;
  double relative = 0;
};

// Each phase's measured peak (the peak statistic reset at the phase's boundaries) against the
// planner's phase of that name.
std::vector<row_error> phase_errors_of(const std::string& file) {
  const auto rows = nlohmann::json::parse(read_text(testdata(file)));
  std::vector<row_error> errors;
  for (const auto& row : rows) {
    if (!row.contains("truth_phase_peaks")) continue;
    const plan_result plan = plan_memory(model_named(row.at("model")), knobs_of(row));
    for (const auto& [name, truth_json] : row.at("truth_phase_peaks").items()) {
      const auto phase = std::find_if(plan.phases.begin(), plan.phases.end(), [&](const phase_estimate& p) { return p.name == name; });
      EXPECT_NE(phase, plan.phases.end()) << "the plan has no phase " << name;
      if (phase == plan.phases.end()) continue;
      const auto truth = truth_json.get<double>();
      std::ostringstream label;
      label << row.at("label").get<std::string>() << " " << name << " predicted " << phase->peak_bytes << " truth "
            << static_cast<std::uint64_t>(truth);
      errors.push_back({label.str(), (static_cast<double>(phase->peak_bytes) - truth) / truth});
    }
  }
  return errors;
}

std::vector<row_error> errors_of(const std::string& file) {
  const auto rows = nlohmann::json::parse(read_text(testdata(file)));
  std::vector<row_error> errors;
  for (const auto& row : rows) {
    const model_architecture model = model_named(row.at("model"));
    const plan_knobs knobs = knobs_of(row);
    std::string message;
    EXPECT_TRUE(validate_knobs(model, knobs, message)) << message;
    const plan_result plan = plan_memory(model, knobs);
    const auto truth = row.at("truth_peak").get<double>();
    std::ostringstream label;
    label << row.at("model").get<std::string>() << " " << row.at("phase").get<std::string>() << " "
          << "predicted " << plan.peak_bytes << " truth " << static_cast<std::uint64_t>(truth);
    errors.push_back({label.str(), (static_cast<double>(plan.peak_bytes) - truth) / truth});
  }
  return errors;
}

// Issue 12's bound for newly measured paths is tighter (median 1%, max 3%) than the first rows'.
void expect_within_bounds(const std::vector<row_error>& errors, double max_error = 0.12, double max_median = 0.05) {
  ASSERT_FALSE(errors.empty());
  std::vector<double> magnitudes;
  std::ostringstream table;
  for (const row_error& error : errors) {
    magnitudes.push_back(std::abs(error.relative));
    table << "  " << error.label << "  error " << 100 * error.relative << "%\n";
    EXPECT_LE(std::abs(error.relative), max_error) << "expected every row within " << 100 * max_error << "%, saw " << error.label;
  }
  std::sort(magnitudes.begin(), magnitudes.end());
  const std::size_t n = magnitudes.size();
  const double median = n % 2 == 1 ? magnitudes[n / 2] : (magnitudes[n / 2 - 1] + magnitudes[n / 2]) / 2;
  EXPECT_LE(median, max_median) << "expected a median error of at most " << 100 * max_median << "%, saw " << 100 * median << "%\n" << table.str();
  std::cout << table.str() << "  median |error| " << 100 * median << "%, max " << 100 * magnitudes.back() << "%\n";
}

TEST(PlanAccuracy, IssueFixtureRows) { expect_within_bounds(errors_of("measured_peaks.json")); }

TEST(PlanAccuracy, GrpoStepsAndLoraMeasuredWithTheSameScript) { expect_within_bounds(errors_of("measured_extra.json")); }

// Paths derived before they were measured: mixture of experts, Gemma, fp32 master weights, FSDP2.
TEST(PlanAccuracy, MoeGemmaFp32MasterWeightsAndFsdp) { expect_within_bounds(errors_of("measured_variants.json")); }
// Issue 12, item 3: GRPO steps of a LoRA policy with its reference taken with the adapter
// disabled (no second copy) or from a bf16 copy, measured on an H100 by
// tools/planner/measure_lora_reference.py (r 16 and 64; the run stopped at its time limit after
// the first 1.5B row).
TEST(PlanAccuracy, LoraReferenceAdapterDisabledAndCopy) {
  expect_within_bounds(errors_of("measured_lora_reference.json"), 0.03, 0.01);
}

// Issue 12, items 4, 5, 6 and 9: measured on an H100 by tools/planner/measure_issue12.py. A
// nanochat-style model (ReLU^2 MLP without a gate, norms without weights, fp32 weights with a bf16
// embedding under autocast) trained with Muon or AdamW, generating into a preallocated cache, and
// a GRPO step of it generating 8 rows at a time; Qwen2.5-0.5B GRPO steps generating 64 or 16 rows
// at a time; a PPO step with a buffer of rows x epochs x ... in every phase and two epochs; GPT-2
// small and GPT-NeoX at Pythia-160M's shape (GELU MLPs without a gate) generating and training.
TEST(PlanAccuracy, GenerationBatchNanochatMuonAndBuffersTimesEpochs) {
  expect_within_bounds(errors_of("measured_issue12.json"), 0.03, 0.01);
}

// The same rows phase by phase: the generation batch moves the rollout's peak, not the update's.
TEST(PlanAccuracy, IssueTwelvePhasesOneByOne) { expect_within_bounds(phase_errors_of("measured_issue12.json"), 0.03, 0.01); }

}  // namespace
}  // namespace rlmem
