// SPDX-License-Identifier: MIT
#pragma once
// Test support for the planner: the measured rows and configs in testdata/planner, and knobs
// for each phase.

#include <rlmem/plan/plan.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace rlmem::testing {

inline std::string planner_testdata(const std::string& name) { return std::string(RLMEM_TESTDATA_DIR) + "/planner/" + name; }

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The architecture of testdata/planner/configs/`file` (a config.json), the test failing when it
/// does not parse.
inline model_architecture config_model(const std::string& file) {
  auto parsed = parse_hf_config(read_text(planner_testdata("configs/" + file)));
  EXPECT_TRUE(parsed.ok()) << file << " refused: " << parsed.failure().detail;
  return parsed.ok() ? std::move(parsed).value() : model_architecture{};
}

inline plan_knobs grpo_knobs(std::uint64_t prompts, std::uint64_t group, std::uint64_t prompt, std::uint64_t new_tokens,
                             std::uint64_t micro_batch) {
  plan_knobs knobs;
  knobs.phase = plan_phase::grpo_step;
  knobs.prompts = prompts;
  knobs.group = group;
  knobs.prompt_len = prompt;
  knobs.new_tokens = new_tokens;
  knobs.micro_batch = micro_batch;
  knobs.reference = reference_kind::copy;
  return knobs;
}

inline plan_knobs train_knobs(std::uint64_t micro_batch, std::uint64_t seq) {
  plan_knobs knobs;
  knobs.phase = plan_phase::train;
  knobs.micro_batch = micro_batch;
  knobs.seq_len = seq;
  knobs.logprob_tokens = seq / 2;
  return knobs;
}

inline plan_knobs generate_knobs(std::uint64_t batch, std::uint64_t prompt, std::uint64_t new_tokens) {
  plan_knobs knobs;
  knobs.phase = plan_phase::generate;
  knobs.batch = batch;
  knobs.prompt_len = prompt;
  knobs.new_tokens = new_tokens;
  return knobs;
}

/// The phase of `plan` named `name` (a failed expectation when there is none).
inline const phase_estimate& phase_named(const plan_result& plan, const std::string& name) {
  auto it = std::find_if(plan.phases.begin(), plan.phases.end(), [&](const phase_estimate& p) { return p.name == name; });
  EXPECT_NE(it, plan.phases.end()) << "expected a phase named " << name;
  return *it;
}

/// The preset architecture `name` ("qwen2.5-0.5b"). Pre: find_preset knows it.
inline const model_architecture& model(const char* name) { return *find_preset(name); }

/// The bytes of the part of `phase` named `name`; 0 when it has none.
inline std::uint64_t component(const phase_estimate& phase, const std::string& name) {
  for (const memory_component& part : phase.components) {
    if (part.name == name) return part.bytes;
  }
  return 0;
}

}  // namespace rlmem::testing
