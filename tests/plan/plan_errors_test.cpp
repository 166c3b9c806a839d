// SPDX-License-Identifier: MIT
// plan's error table has one distinct NAME and a message per code, and real refusals carry theirs.

#include "error_table_checks.hpp"

#include <rlmem/plan/plan.hpp>

#include <gtest/gtest.h>

#include <string_view>

namespace rlmem {
namespace {

TEST(PlanErrors, EveryCodeHasADistinctNameAndAMessage) {
  testing::expect_every_code_named<plan_errc>();
  EXPECT_EQ(error_name(plan_errc::ok), "OK");
}

TEST(PlanErrors, RefusalsCarryTheirCodeAndTheLinePrinted) {
  const auto not_json = parse_hf_config("{");
  EXPECT_EQ(error_name(not_json.code()), "NOT_JSON");
  EXPECT_EQ(not_json.failure().detail, "config.json is not JSON (byte 2)");
  EXPECT_EQ(error_name(parse_buffer_spec("traj").code()), "INVALID_BUFFER_SPEC");
  EXPECT_EQ(error_name(parse_length_quantiles("p50").code()), "INVALID_QUANTILES");
  EXPECT_EQ(error_name(parse_search_knob("temperature").code()), "UNKNOWN_SEARCH_KNOB");
  plan_knobs knobs;
  knobs.phase = plan_phase::train;
  knobs.engine.rollout = rollout_kind::vllm;
  const auto engine = validate_engine_knobs(knobs);
  EXPECT_EQ(error_name(engine.code()), "KNOB_CONFLICT");
  EXPECT_EQ(engine.failure().detail, "--rollout applies to --phase generate and grpo-step: train generates nothing");
  EXPECT_EQ(validate_engine_knobs(plan_knobs{}).code(), plan_errc::ok) << "hf generates in the trainer: nothing to check";
}

// A refusal quotes what the user gave; a newline or an escape in it must not break the line.
TEST(PlanErrors, ADetailIsOnePrintableLineWhateverTheInputHolds) {
  EXPECT_EQ(parse_buffer_spec("a=2:fp32\n@x").failure().detail,
            "--buffer 'a=2:fp32\\x0a@x': unknown phase 'x' (rollout, old-logprobs, reference, update, optimizer)");
  EXPECT_EQ(parse_search_knob("group\x1b[2J").failure().detail,
            "--vary 'group\\x1b[2J': expected a comma list of group, new-tokens, prompt-len, lora-r, batch");
}

}  // namespace
}  // namespace rlmem
