// SPDX-License-Identifier: MIT
// The growth rule on crafted series: each shape of docs/monitor.md's matrix, the clearing of a
// cache that filled, and inputs at the ends of int64.

#include "byte_units.hpp"

#include <rlmem/step_rules/step_rules.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace rlmem {

namespace {

using testing::figures::mib;
using testing::figures::gib;

// `quiet` flat step ends at `level`, then the bytes kept at each step after.
std::vector<std::int64_t> flat_then(const std::vector<std::int64_t>& kept, std::size_t quiet = 8, std::int64_t level = 4 * gib) {
  std::vector<std::int64_t> series(quiet, level);
  std::int64_t total = 0;
  for (std::int64_t one : kept) series.push_back(level + (total += one));
  return series;
}

}  // namespace

TEST(growth_rule, three_rises_over_a_quiet_series_are_a_leak_with_its_start_and_rate) {
  growth_verdict verdict = judge_growth(flat_then({16 * mib, 16 * mib, 16 * mib}));
  EXPECT_TRUE(verdict.growing);
  EXPECT_EQ(verdict.first, 8u) << "the change point is the first step end that grew";
  EXPECT_EQ(verdict.steps, 3u);
  EXPECT_EQ(verdict.events, 3u);
  EXPECT_EQ(verdict.period, 1u);
  EXPECT_EQ(verdict.bytes_per_step, 16 * mib);
  EXPECT_FALSE(judge_growth(flat_then({16 * mib, 16 * mib})).growing) << "two rises every step are not yet a leak";
}

TEST(growth_rule, growth_whose_size_follows_the_response_length_is_measured_by_its_mean) {
  growth_verdict verdict = judge_growth(flat_then({10 * mib, 30 * mib, 20 * mib, 40 * mib, 20 * mib}));
  EXPECT_TRUE(verdict.growing);
  EXPECT_EQ(verdict.bytes_per_step, 24 * mib) << "120 MiB over 5 steps";
}

TEST(growth_rule, a_leak_every_fourth_step_is_found_at_its_second_alike_rise) {
  growth_verdict verdict = judge_growth(flat_then({32 * mib, 0, 0, 0, 32 * mib}));
  EXPECT_TRUE(verdict.growing);
  EXPECT_EQ(verdict.first, 8u);
  EXPECT_EQ(verdict.period, 4u);
  EXPECT_EQ(verdict.bytes_per_step, 8 * mib) << "32 MiB every 4 steps";
  EXPECT_FALSE(judge_growth(flat_then({32 * mib, 0, 0, 0, 80 * mib})).growing) << "unlike rises: a buffer re-grown";
  // In a run's first steps buffers grow to new longest lengths often, and alike; with too few
  // quiet step ends before to tell, four rises are needed.
  EXPECT_FALSE(judge_growth(flat_then({32 * mib, 0, 0, 0, 32 * mib, 0, 0, 0, 32 * mib}, 3)).growing);
  EXPECT_TRUE(judge_growth(flat_then({32 * mib, 0, 0, 0, 32 * mib, 0, 0, 0, 32 * mib, 0, 0, 0, 32 * mib}, 3)).growing);
}

TEST(growth_rule, a_slow_leak_after_a_few_kb_of_jitter_starts_where_it_started) {
  // The case: 1.2 MB a step on a 3.8 GB job, with a 3 KB wobble the step before.
  std::vector<std::int64_t> series(10, 3'800'000'000);
  series[8] += 3072;
  for (std::int64_t k = 1; k <= 3; ++k) series.push_back(3'800'000'000 + 1'200'000 * k);
  growth_verdict verdict = judge_growth(series);
  EXPECT_TRUE(verdict.growing);
  EXPECT_EQ(verdict.first, 10u);
  EXPECT_EQ(verdict.bytes_per_step, 1'200'000) << "expected the series' own slope, saw " << verdict.bytes_per_step;
}

TEST(growth_rule, a_cache_that_filled_is_cleared_by_the_third_step_after_it_stopped) {
  std::vector<std::int64_t> series = flat_then({64 * mib, 64 * mib, 64 * mib, 64 * mib});
  ASSERT_TRUE(judge_growth(series).growing) << "while it fills an alert is allowed";
  for (int quiet = 1; quiet <= 3; ++quiet) {
    series.push_back(series.back());
    EXPECT_EQ(judge_growth(series).growing, quiet < 3) << quiet << " quiet step ends after the last growth";
  }
}

TEST(growth_rule, a_buffer_that_grows_ever_more_rarely_is_no_leak) {
  // New longest lengths at steps 10, 12, 16 and 24: gaps of 2, 4, 8.
  std::vector<std::int64_t> series(30, 2 * gib);
  for (std::size_t at : {10u, 12u, 16u, 24u}) {
    for (std::size_t i = at; i < series.size(); ++i) series[i] += 8 * mib;
  }
  for (std::size_t end = 10; end <= series.size(); ++end) {
    std::vector<std::int64_t> seen(series.begin(), series.begin() + static_cast<std::ptrdiff_t>(end));
    EXPECT_FALSE(judge_growth(seen).growing && end > 18) << "alert at step end " << end;
  }
}

TEST(growth_rule, step_ends_that_follow_the_response_length_are_no_leak_and_a_leak_in_them_is) {
  // The last batch left alive: +-120 MiB with the length, a cycle of 5; then 24 MiB a step.
  const std::int64_t cycle[] = {0, 120 * mib, 40 * mib, 90 * mib, 10 * mib};
  std::vector<std::int64_t> series;
  for (int step = 0; step < 60; ++step) series.push_back(6 * gib + cycle[step % 5] + (step >= 30 ? (step - 29) * 24 * mib : 0));
  for (std::size_t end = 3; end <= 30; ++end) {
    EXPECT_FALSE(judge_growth(std::span(series).first(end)).growing) << "no leak yet at step end " << end;
  }
  growth_verdict verdict = judge_growth(series);
  EXPECT_TRUE(verdict.growing) << "30 steps of 24 MiB under 120 MiB of scatter";
  // The leak starts at step 30; under the scatter the rule places its start 2 steps later.
  EXPECT_EQ(verdict.first, 32u) << "expected the start at step 32, saw " << verdict.first;
  EXPECT_EQ(verdict.bytes_per_step, 24 * mib) << "expected 24 MiB a step exactly, saw " << verdict.bytes_per_step;
}

TEST(growth_rule, clean_and_short_series_say_nothing) {
  EXPECT_FALSE(judge_growth(std::vector<std::int64_t>{}).growing);
  EXPECT_FALSE(judge_growth(std::vector<std::int64_t>{1, 2}).growing);
  EXPECT_FALSE(judge_growth(std::vector<std::int64_t>(100, 7 * gib)).growing);
  std::vector<std::int64_t> decreasing;
  for (int i = 0; i < 50; ++i) decreasing.push_back(8 * gib - i * mib);
  EXPECT_FALSE(judge_growth(decreasing).growing);
}

TEST(growth_rule, the_ends_of_int64_neither_overflow_nor_leak_by_accident) {
  std::vector<std::int64_t> extreme(6, INT64_MIN);
  extreme.insert(extreme.end(), {INT64_MIN / 2, 0, INT64_MAX / 2});
  growth_verdict verdict = judge_growth(extreme);
  EXPECT_TRUE(verdict.growing);
  EXPECT_EQ(verdict.bytes_per_step, std::int64_t{1} << 62);
  std::vector<std::int64_t> alternating;
  for (int i = 0; i < 40; ++i) alternating.push_back(i % 2 ? INT64_MAX : INT64_MIN);
  EXPECT_FALSE(judge_growth(alternating).growing);
}

TEST(growth_rule, only_the_newest_max_points_are_judged) {
  std::vector<std::int64_t> series(1'000'000, gib);
  for (std::int64_t k = 1; k <= 3; ++k) series.push_back(gib + k * mib);
  growth_verdict verdict = judge_growth(series);
  EXPECT_TRUE(verdict.growing);
  EXPECT_EQ(verdict.first, 1'000'000u) << "indexes are into the series given";
}

}  // namespace rlmem
