// SPDX-License-Identifier: MIT
// The leak rule on its own: growth that continues past step 1 is a leak, one-time growth,
// sizes that wander with sequence length, and flat series are not.

#include "inspect/analysis.hpp"

#include <gtest/gtest.h>

namespace rlmem::detail {

namespace {

// The sparse series of a dense one: only the step ends where a figure changed.
site_series series(const std::vector<std::int64_t>& bytes, const std::vector<std::uint64_t>& counts, const char* label = "site") {
  site_series made;
  made.site.label = label;
  for (std::uint32_t step = 0; step < bytes.size(); ++step) {
    bool unchanged = made.steps.empty() ? bytes[step] == 0 && counts[step] == 0
                                        : bytes[step] == made.bytes.back() && counts[step] == made.counts.back();
    if (unchanged) continue;
    made.steps.push_back(step);
    made.bytes.push_back(bytes[step]);
    made.counts.push_back(counts[step]);
  }
  return made;
}

// Series without stacks: each site is its own cause.
const snapshot no_frames;

// detect_leaks over series that were all `length` step ends long when dense.
std::vector<leak> detect_leaks(const std::vector<site_series>& all, std::size_t length = 0, std::size_t max_leaks = 64) {
  std::size_t growing = 0;
  if (length == 0) {
    for (const site_series& one : all) length = std::max<std::size_t>(length, one.steps.empty() ? 0 : one.steps.back() + 1);
  }
  frame_index frames(no_frames);
  return rlmem::detail::detect_leaks(frames, all, length, max_leaks, growing);
}

}  // namespace

TEST(leak_rule, kept_allocations_every_step_are_a_leak) {
  auto leaks = detect_leaks({series({0, 100, 200, 300}, {0, 1, 2, 3})});
  ASSERT_EQ(leaks.size(), 1u);
  EXPECT_EQ(leaks[0].bytes_per_step, 100);
  EXPECT_EQ(leaks[0].steps, 3u);
  EXPECT_EQ(leaks[0].first_step, 1u);
}

TEST(leak_rule, state_created_in_step_1_is_not_a_leak) {
  EXPECT_TRUE(detect_leaks({series({0, 500, 500, 500}, {0, 4, 4, 4})}).empty());
}

TEST(leak_rule, a_buffer_that_follows_the_sequence_length_is_not_a_leak) {
  // One live tensor whose size changes with the batch: bytes go up twice by chance.
  EXPECT_TRUE(detect_leaks({series({0, 10, 30, 70}, {0, 1, 1, 1})}).empty());
  EXPECT_TRUE(detect_leaks({series({0, 10, 30, 20, 40}, {0, 1, 2, 1, 2})}).empty());
}

TEST(leak_rule, a_tensor_grown_steadily_in_place_is_a_leak) {
  // torch.cat onto one tensor: the count stays 1, the growth is steady over 4 steps.
  auto leaks = detect_leaks({series({0, 10, 20, 30, 40}, {0, 1, 1, 1, 1})});
  ASSERT_EQ(leaks.size(), 1u);
  EXPECT_EQ(leaks[0].bytes_per_step, 10);
}

TEST(leak_rule, growth_that_starts_late_counts_from_where_it_starts) {
  auto leaks = detect_leaks({series({0, 50, 50, 60, 70, 80}, {0, 1, 1, 2, 3, 4})});
  ASSERT_EQ(leaks.size(), 1u);
  EXPECT_EQ(leaks[0].first_step, 3u);
  EXPECT_EQ(leaks[0].bytes_per_step, 10);
}

TEST(leak_rule, too_few_steps_say_nothing) {
  EXPECT_TRUE(detect_leaks({series({0, 100}, {0, 1})}).empty());
}

TEST(leak_rule, a_site_that_stops_changing_before_the_last_step_end_is_not_a_leak) {
  // Grew over steps 1 to 3, then held still for steps 4 and 5: no entries at 4 and 5.
  EXPECT_TRUE(detect_leaks({series({0, 10, 20, 30, 30, 30}, {0, 1, 2, 3, 3, 3})}, 6).empty());
}

TEST(leak_rule, the_step_series_of_a_leak_is_rebuilt_from_its_changes) {
  // Live from the start, quiet in steps 1 and 2, then kept one more tensor at each of 3, 4, 5.
  auto leaks = detect_leaks({series({7, 7, 7, 17, 27, 37}, {1, 1, 1, 2, 3, 4})}, 6);
  ASSERT_EQ(leaks.size(), 1u);
  EXPECT_EQ(leaks[0].bytes_at_step_end, (std::vector<std::int64_t>{7, 7, 7, 17, 27, 37}));
  EXPECT_EQ(leaks[0].first_step, 3u) << "the growth run starts at step 3";
  EXPECT_EQ(leaks[0].steps, 3u);
  EXPECT_EQ(leaks[0].bytes_per_step, 10);
  EXPECT_EQ(leaks[0].live_count_at_end, 4u);
}

TEST(leak_rule, only_the_fastest_max_leaks_are_kept_and_the_rest_counted) {
  std::vector<site_series> all;
  for (int k = 1; k <= 5; ++k) all.push_back(series({0, k, 2 * k, 3 * k}, {0, 1, 2, 3}, "site"));
  std::size_t growing = 0;
  frame_index frames(no_frames);
  auto leaks = rlmem::detail::detect_leaks(frames, all, 4, 2, growing);
  EXPECT_EQ(growing, 5u);
  ASSERT_EQ(leaks.size(), 2u);
  EXPECT_EQ(leaks[0].bytes_per_step, 5);
  EXPECT_EQ(leaks[1].bytes_per_step, 4);
}

TEST(leak_rule, leaks_are_ranked_by_growth) {
  auto leaks = detect_leaks({series({0, 1, 2, 3}, {0, 1, 2, 3}), series({0, 10, 20, 30}, {0, 1, 2, 3})});
  ASSERT_EQ(leaks.size(), 2u);
  EXPECT_EQ(leaks[0].bytes_per_step, 10);
}

}  // namespace rlmem::detail

namespace rlmem {

// The per-site rule on one series: the growth rule with two events enough while the site's
// own allocation count grows, four without.
TEST(leak_trend, without_counts_four_growing_steps_are_needed) {
  std::vector<std::int64_t> bytes{0, 10, 20, 30};
  EXPECT_FALSE(leak_trend_of(bytes, {}).leaking) << "three growing steps without counts";
  bytes.push_back(40);
  leak_trend trend = leak_trend_of(bytes, {});
  EXPECT_TRUE(trend.leaking) << "four growing steps";
  EXPECT_EQ(trend.first_step, 1u);
  EXPECT_EQ(trend.steps, 4u);
  EXPECT_EQ(trend.bytes_per_step, 10);
}

TEST(leak_trend, two_growing_steps_with_new_allocations_leak) {
  std::vector<std::int64_t> bytes{100, 100, 150, 200};
  EXPECT_FALSE(leak_trend_of(bytes, {}).leaking) << "two steps without counts";
  leak_trend trend = leak_trend_of(bytes, std::vector<std::uint64_t>{3, 3, 4, 5});
  EXPECT_TRUE(trend.leaking);
  EXPECT_EQ(trend.first_step, 2u) << "the change point: growth began at step end 2";
  EXPECT_EQ(trend.bytes_per_step, 50);
  EXPECT_FALSE(leak_trend_of(bytes, std::vector<std::uint64_t>{3, 3, 3, 3}).leaking) << "no new allocations";
}

TEST(leak_trend, a_site_that_grew_and_gave_back_is_no_leak) {
  std::vector<std::int64_t> bytes{0, 100, 200, 300, 0, 100, 200};
  std::vector<std::uint64_t> counts{0, 1, 2, 3, 0, 1, 2};
  leak_trend trend = leak_trend_of(bytes, counts);
  EXPECT_TRUE(!trend.leaking || trend.first_step >= 4u) << "growth before the drop is not part of it; first " << trend.first_step;
}

TEST(leak_trend, counts_of_another_length_are_ignored) {
  std::vector<std::int64_t> bytes{0, 10, 20, 30};
  std::vector<std::uint64_t> counts{0, 1};
  EXPECT_FALSE(leak_trend_of(bytes, counts).leaking);
}

TEST(leak_trend, figures_across_the_whole_int64_range_do_not_overflow) {
  std::vector<std::int64_t> bytes{INT64_MIN, INT64_MIN, 0, INT64_MAX};
  std::vector<std::uint64_t> counts{0, 0, 1, 2};
  leak_trend trend = leak_trend_of(bytes, counts);
  EXPECT_TRUE(trend.leaking);
  EXPECT_EQ(trend.bytes_per_step, INT64_MAX) << "a rate of 2^63 per step clamps";
}

}  // namespace rlmem
