// SPDX-License-Identifier: MIT
// The rules of one step end: figures in, flags and the figures behind them out.

#include "byte_units.hpp"

#include <rlmem/step_rules/step_rules.hpp>

#include <gtest/gtest.h>

#include <vector>

namespace rlmem {

namespace {

using testing::figures::mib;
using testing::figures::gib;

// An 80 GiB card with 1 GiB outside PyTorch.
step_sample at(std::int64_t step, std::int64_t allocated, std::int64_t reserved, std::int64_t peak) {
  step_sample sample;
  sample.step = step;
  sample.allocated = allocated;
  sample.reserved = reserved;
  sample.step_peak_allocated = peak;
  sample.step_peak_reserved = reserved;
  sample.allocations = 500;
  sample.device_total = 80 * gib;
  sample.device_free = 80 * gib - reserved - gib;
  return sample;
}

}  // namespace

TEST(step_rules, a_leak_carries_its_forecast_and_the_headroom_rule_reads_it) {
  std::vector<step_sample> history;
  for (std::int64_t step = 1; step <= 12; ++step) {
    std::int64_t kept = step >= 8 ? (step - 7) * 256 * mib : 0;
    history.push_back(at(step, 10 * gib + kept, 60 * gib, 55 * gib + kept));
    history.back().allocations += step >= 8 ? step - 7 : 0;
  }
  step_judgment judged = judge_step(history, 0);
  ASSERT_TRUE(judged.leak.growing);
  EXPECT_EQ(judged.leak.first, 7u) << "index of step 8";
  EXPECT_EQ(judged.leak.bytes_per_step, 256 * mib);
  EXPECT_EQ(judged.leak_count_before, 500);
  // Room for the allocated peak: 80 - 1 - (55 GiB + 1.25 GiB) = 22.75 GiB, 91 steps of 256 MiB.
  ASSERT_TRUE(judged.steps_to_limit.has_value());
  EXPECT_EQ(*judged.steps_to_limit, 91);
  EXPECT_EQ(judged.free_at_peak, 19 * gib) << "80 - 1 outside - 60 reserved";
  EXPECT_TRUE(judged.headroom) << "91 steps is under headroom_steps (500)";
  step_rules patient;
  patient.headroom_steps = 50;
  EXPECT_FALSE(judge_step(history, 0, patient).headroom) << "19 GiB is above 10% and 91 steps above 50";
}

TEST(step_rules, a_memory_fraction_caps_the_forecast_and_the_headroom) {
  std::vector<step_sample> history;
  for (std::int64_t step = 1; step <= 12; ++step) {
    history.push_back(at(step, 10 * gib + (step >= 8 ? (step - 7) * 256 * mib : 0), 30 * gib, 28 * gib));
    history.back().limit = 32 * gib;
  }
  step_judgment judged = judge_step(history, 0);
  EXPECT_EQ(judged.limit_bytes, 32 * gib);
  EXPECT_EQ(judged.free_at_peak, 2 * gib) << "the cap counts PyTorch's reserved memory alone";
  EXPECT_TRUE(judged.headroom) << "2 GiB is under 10% of 32 GiB";
  ASSERT_TRUE(judged.steps_to_limit.has_value());
  EXPECT_EQ(*judged.steps_to_limit, 16) << "4 GiB above the 28 GiB allocated peak at 256 MiB a step";
}

TEST(step_rules, fragmentation_is_a_state_for_watch_and_an_alert_when_it_grows) {
  std::vector<step_sample> history;
  for (std::int64_t step = 1; step <= 8; ++step) history.push_back(at(step, 8 * gib, 40 * gib + (step >= 5 ? step * gib : 0), 30 * gib));
  step_judgment judged = judge_step(history, 0);
  EXPECT_EQ(judged.peak_allocated_seen, 30 * gib);
  EXPECT_EQ(judged.unused_reserved, 18 * gib) << "48 GiB reserved beyond the 30 GiB peak";
  EXPECT_TRUE(judged.fragmented);
  EXPECT_TRUE(judged.fragmentation);
  EXPECT_EQ(judged.fragmentation_growth, 8 * gib);
  std::vector<step_sample> steady(8, at(1, 8 * gib, 40 * gib, 30 * gib));
  for (std::int64_t i = 0; i < 8; ++i) steady[static_cast<std::size_t>(i)].step = i + 1;
  judged = judge_step(steady, 0);
  EXPECT_TRUE(judged.fragmented);
  EXPECT_FALSE(judged.fragmentation) << "not grown over the window";
  EXPECT_FALSE(judge_step(steady, 41 * gib).fragmented) << "a longer step before the history needed it all";
}

TEST(step_rules, retries_and_ooms_count_since_the_step_end_before) {
  std::vector<step_sample> history = {at(1, gib, 2 * gib, gib), at(2, gib, 2 * gib, gib)};
  history[1].num_alloc_retries = 3;
  history[1].num_ooms = 1;
  step_judgment judged = judge_step(history, 0);
  EXPECT_TRUE(judged.alloc_retries);
  EXPECT_EQ(judged.new_alloc_retries, 3);
  EXPECT_TRUE(judged.oom);
  EXPECT_EQ(judged.new_ooms, 1);
  EXPECT_FALSE(judge_step(std::span(history).first(1), 0).alloc_retries) << "one step end has no before";
}

TEST(step_rules, imbalance_names_the_first_largest_and_smallest_rank) {
  std::vector<std::int64_t> peaks = {30 * gib, 42 * gib, 29 * gib, 42 * gib};
  imbalance_verdict verdict = judge_imbalance(peaks);
  EXPECT_TRUE(verdict.imbalanced);
  EXPECT_EQ(verdict.high, 1u);
  EXPECT_EQ(verdict.low, 2u);
  EXPECT_EQ(verdict.spread_bytes, 13 * gib);
  EXPECT_FALSE(judge_imbalance(peaks, 0.5).imbalanced) << "13 of 42 GiB is under half";
  EXPECT_FALSE(judge_imbalance(std::vector<std::int64_t>{}).imbalanced);
}

TEST(step_rules, absurd_figures_give_a_result_not_a_crash) {
  std::vector<step_sample> history(5);
  for (std::size_t i = 0; i < history.size(); ++i) {
    history[i] = {static_cast<std::int64_t>(i), INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, -1, -5, INT64_MAX, INT64_MIN, INT64_MIN, INT64_MAX, INT64_MIN};
  }
  step_judgment judged = judge_step(history, INT64_MAX);
  EXPECT_FALSE(judged.leak.growing);
  EXPECT_EQ(judged.unused_reserved, 0);
}

}  // namespace rlmem
