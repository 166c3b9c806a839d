// SPDX-License-Identifier: MIT
// The leak rule on its own: growth that continues past step 1 is a leak, one-time growth,
// sizes that wander with sequence length, and flat series are not.

#include "inspect/analysis.hpp"

#include <gtest/gtest.h>

namespace rlmem::detail {

namespace {

site_series series(std::vector<std::int64_t> bytes, std::vector<std::uint64_t> counts) {
  site_series made;
  made.site.label = "site";
  made.bytes = std::move(bytes);
  made.counts = std::move(counts);
  return made;
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

TEST(leak_rule, leaks_are_ranked_by_growth) {
  auto leaks = detect_leaks({series({0, 1, 2, 3}, {0, 1, 2, 3}), series({0, 10, 20, 30}, {0, 1, 2, 3})});
  ASSERT_EQ(leaks.size(), 2u);
  EXPECT_EQ(leaks[0].bytes_per_step, 10);
}

}  // namespace rlmem::detail
