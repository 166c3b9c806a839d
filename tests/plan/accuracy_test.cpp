// SPDX-License-Identifier: MIT
// The planner against peaks PyTorch measured on H200s and H100s (testdata/planner): every row
// within its measured error plus half a point, each file's median within docs/plan.md's figure.

#include "planner_support.hpp"

#include <rlmem/plan/plan.hpp>

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
    return testing::config_model(name + ".json");
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
  knobs.generate_inference_mode = row.value("generate_mode", "no_grad") == "inference";
  const std::string logprob = row.value("logprob_impl", "full");
  knobs.logprob = logprob == "softcap"        ? logprob_impl::softcap
                  : logprob == "softcap-fp32" ? logprob_impl::softcap_fp32
                                              : logprob_impl::full;
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
      const auto buffer = parse_buffer_spec(row.at("buffer").get<std::string>());
      EXPECT_TRUE(buffer.ok()) << buffer.failure().detail;
      if (buffer.ok()) knobs.buffers.push_back(buffer.value());
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
    const auto checked = validate_knobs(model, knobs);
    EXPECT_TRUE(checked.ok()) << checked.failure().detail;
    const plan_result plan = plan_memory(model, knobs);
    const auto truth = row.at("truth_peak").get<double>();
    std::ostringstream label;
    label << row.at("model").get<std::string>() << " " << row.at("phase").get<std::string>() << " "
          << "predicted " << plan.peak_bytes << " truth " << static_cast<std::uint64_t>(truth);
    errors.push_back({label.str(), (static_cast<double>(plan.peak_bytes) - truth) / truth});
  }
  return errors;
}

// Every row is held to the error it has now (|error| rounded up to 0.01%, in percent, in the
// fixture's row order) plus half a percentage point, and the median to the figure docs/plan.md
// states. The issue's bounds (every row within 12%, median 5%) and issue 12's (3%, 1%) are far
// looser; these catch a change that makes any one row worse.
constexpr double row_margin_percent = 0.5;

void expect_as_measured(const std::vector<row_error>& errors, const std::vector<double>& measured_percent,
                        double documented_median_percent) {
  ASSERT_EQ(errors.size(), measured_percent.size()) << "expected one measured error per row of the fixture";
  std::vector<double> magnitudes;
  std::ostringstream table;
  for (std::size_t k = 0; k < errors.size(); ++k) {
    const double seen = 100 * std::abs(errors[k].relative);
    magnitudes.push_back(seen);
    table << "  " << errors[k].label << "  error " << 100 * errors[k].relative << "%\n";
    EXPECT_LE(seen, measured_percent[k] + row_margin_percent)
        << "row " << k << ": expected |error| at most " << measured_percent[k] << "% + " << row_margin_percent
        << " points, saw " << seen << "% (" << errors[k].label << ")";
  }
  std::sort(magnitudes.begin(), magnitudes.end());
  const std::size_t n = magnitudes.size();
  const double median = n % 2 == 1 ? magnitudes[n / 2] : (magnitudes[n / 2 - 1] + magnitudes[n / 2]) / 2;
  EXPECT_LE(median, documented_median_percent) << "expected the median |error| docs/plan.md states, at most "
                                               << documented_median_percent << "%, saw " << median << "%\n" << table.str();
  std::cout << table.str() << "  median |error| " << median << "%, max " << magnitudes.back() << "%\n";
}

// Median 0.022%, max 3.36% (the first generate of a process, with its cuBLAS workspace).
TEST(PlanAccuracy, IssueFixtureRows) {
  expect_as_measured(errors_of("measured_peaks.json"),
                     {3.36, 0.01, 2.89, 1.48, 0.01, 0.05, 0.02, 0.04, 0.01, 0.08, 0.79, 0.05, 0.01, 0.01, 0.01, 0.01}, 0.022);
}

// Median 0.065%, max 1.14%.
TEST(PlanAccuracy, GrpoStepsAndLoraMeasuredWithTheSameScript) {
  expect_as_measured(errors_of("measured_extra.json"),
                     {0.66, 0.23, 0.11, 0.04, 0.49, 1.14, 0.04, 0.01, 0.99, 0.03, 0.02,
                      0.01, 0.03, 0.03, 0.60, 0.07, 0.48, 0.37, 0.01, 0.04, 0.08},
                     0.065);
}

// Paths derived before they were measured: mixture of experts, Gemma, fp32 master weights, FSDP2.
// Median 0.29%, max 2.30%.
TEST(PlanAccuracy, MoeGemmaFp32MasterWeightsAndFsdp) {
  expect_as_measured(errors_of("measured_variants.json"), {2.30, 0.09, 0.47, 0.01, 0.01, 0.01, 0.90, 0.10, 1.26, 0.61}, 0.29);
}
// Issue 12, item 3: GRPO steps of a LoRA policy with its reference taken with the adapter
// disabled (no second copy) or from a bf16 copy, measured on an H100 by
// tools/planner/measure_lora_reference.py (r 16 and 64; the run stopped at its time limit after
// the first 1.5B row). Median 0.20%, max 0.78%.
TEST(PlanAccuracy, LoraReferenceAdapterDisabledAndCopy) {
  expect_as_measured(errors_of("measured_lora_reference.json"), {0.50, 0.04, 0.50, 0.05, 0.78, 0.12, 0.73, 0.12, 0.20}, 0.20);
}

// Issue 12, items 4, 5, 6 and 9: measured on an H100 by tools/planner/measure_issue12.py. A
// nanochat-style model (ReLU^2 MLP without a gate, norms without weights, fp32 weights with a bf16
// embedding under autocast) trained with Muon or AdamW, generating into a preallocated cache, and
// a GRPO step of it generating 8 rows at a time; Qwen2.5-0.5B GRPO steps generating 64 or 16 rows
// at a time; a PPO step with a buffer of rows x epochs x ... in every phase and two epochs; GPT-2
// small and GPT-NeoX at Pythia-160M's shape (GELU MLPs without a gate) generating and training.
// Median 0.35%, max 1.16%.
TEST(PlanAccuracy, GenerationBatchNanochatMuonAndBuffersTimesEpochs) {
  expect_as_measured(errors_of("measured_issue12.json"),
                     {1.16, 0.48, 0.41, 0.98, 0.99, 0.22, 0.38, 0.45, 0.31, 0.21, 0.09, 0.06, 0.29, 0.29}, 0.35);
}

// The same rows phase by phase (16 phases): the generation batch moves the rollout's peak, not
// the update's. Median 0.45%, max 1.89%.
TEST(PlanAccuracy, IssueTwelvePhasesOneByOne) {
  expect_as_measured(phase_errors_of("measured_issue12.json"),
                     {0.79, 1.89, 0.99, 0.56, 0.45, 0.22, 0.46, 0.30, 0.23, 0.42, 0.38, 0.01, 0.69, 0.49, 0.01, 0.45}, 0.45);
}

// Issue 30, item 1: nanochat's own training path, measured on an H100 with nanochat's gpt.py and
// engine.py as published (tools/planner/measure_nanochat.py): GPT.forward with targets computes
// every position's logits, softcaps them and takes the cross-entropy in fp32. Two orders, two
// commits: 5c93a56 softcaps in bf16, then casts (--logprob-impl softcap, nanochat's default here);
// e1770a3 casts first (softcap-fp32). Depths 8 to 20, vocabularies of 32K and 64K, Muon and AdamW,
// and chat_rl's step (Engine.generate_batch, then the policy-gradient pass). Median 0.74%, max 1.26%.
TEST(PlanAccuracy, NanochatOwnLossAsPublished) {
  expect_as_measured(errors_of("measured_nanochat.json"),
                     {0.77, 0.75, 0.73, 1.09, 1.10, 0.81, 0.66, 1.26, 0.64, 0.67,
                      0.72, 0.69, 0.68, 1.02, 1.01, 0.78, 0.63, 1.17, 0.57, 0.65},
                     0.74);
}

// The RL rows phase by phase (optimizer, rollout, update): the rollout under inference_mode keeps
// no autocast copies, only the head's while it runs; the rollout and optimizer phases run 1.4-5.2%
// low because the measured resident memory holds 70-85 MB more than weights and optimizer state
// (cuBLAS's workspaces, which the plan reports outside its peaks). Median 2.14%, max 5.15%.
TEST(PlanAccuracy, NanochatReinforcementStepPhases) {
  expect_as_measured(phase_errors_of("measured_nanochat.json"),
                     {2.86, 4.08, 1.26, 3.46, 3.96, 0.64, 1.44, 2.02, 0.67, 2.87, 4.92, 1.17, 3.50, 5.15, 0.57, 1.48, 2.26, 0.65},
                     2.14);
}

}  // namespace
}  // namespace rlmem
