// SPDX-License-Identifier: MIT
// The allocator's size rules on their own: rounding (with roundup_power2_divisions), pools,
// segment sizes, the oversize rules and splitting, at the edges of their ranges.

#include "byte_units.hpp"

#include <rlmem/model/allocator_rules.hpp>

#include <gtest/gtest.h>

namespace rlmem {

namespace {
using testing::sizes::mib;
}  // namespace

TEST(round_request, follows_round_size) {
  allocator_settings defaults;
  EXPECT_EQ(round_request(1, defaults), 512u);
  EXPECT_EQ(round_request(1200, defaults), 1536u);
  EXPECT_EQ(round_request(490'880'000, defaults), 490'880'000u);
  allocator_settings four;
  four.roundup_power2_divisions.fill(4);
  EXPECT_EQ(round_request(1200, four), 1536u) << "small sizes are never power-2 rounded";
  EXPECT_EQ(round_request((5 * mib) + 1, four), 6 * mib);
  EXPECT_EQ(round_request(8 * mib, four), 8 * mib);
}

TEST(round_request, divisions_apply_per_power_of_two_bucket) {
  allocator_settings settings;
  settings.roundup_power2_divisions[2] = 2;  // the [4 MiB, 8 MiB) bucket in halves
  EXPECT_EQ(round_request(5 * mib, settings), 6 * mib) << "5 MiB is in the [4, 8) MiB bucket: up to the next half of 4 MiB";
  EXPECT_EQ(round_request(3 * mib + 1, settings), 3 * mib + 512) << "the [2, 4) MiB bucket has no divisions";
  EXPECT_EQ(round_request(9 * mib, settings), 9 * mib) << "the [8, 16) MiB bucket has no divisions";
}

TEST(round_request, holds_at_the_top_of_the_range) {
  allocator_settings defaults;
  EXPECT_EQ(round_request(std::uint64_t{36} << 40, defaults), std::uint64_t{36} << 40);
  EXPECT_EQ(round_request((std::uint64_t{1} << 63) - 1, defaults), std::uint64_t{1} << 63);
  EXPECT_EQ(round_request(UINT64_MAX, defaults), UINT64_MAX / 512 * 512) << "held, not wrapped to 0";
  allocator_settings four;
  four.roundup_power2_divisions.fill(4);
  EXPECT_EQ(round_request(UINT64_MAX, four), UINT64_MAX / 512 * 512) << "the division step past 2^64 is held too";
}

TEST(pools, follow_the_request_and_the_segment_size) {
  allocator_settings defaults;
  EXPECT_TRUE(small_pool_request(round_request(mib, defaults)));
  EXPECT_FALSE(small_pool_request(round_request(mib + 1, defaults)));
  EXPECT_TRUE(small_pool_segment(2 * mib));
  EXPECT_FALSE(small_pool_segment(20 * mib));
}

TEST(segment_size_for, follows_get_allocation_size) {
  EXPECT_EQ(segment_size_for(512), 2 * mib);
  EXPECT_EQ(segment_size_for(mib), 2 * mib);
  EXPECT_EQ(segment_size_for(mib + 512), 20 * mib);
  EXPECT_EQ(segment_size_for(10 * mib - 512), 20 * mib);
  EXPECT_EQ(segment_size_for(10 * mib), 10 * mib);
  EXPECT_EQ(segment_size_for(21 * mib + 512), 22 * mib);
  EXPECT_EQ(segment_size_for(UINT64_MAX), UINT64_MAX / (2 * mib) * (2 * mib)) << "held, not wrapped to 0";
}

TEST(should_split, small_blocks_split_when_512_bytes_remain_large_ones_past_1_mib) {
  allocator_settings defaults;
  EXPECT_TRUE(should_split(2 * mib, 512, defaults));
  EXPECT_FALSE(should_split(1024, 1024, defaults));
  EXPECT_TRUE(should_split(20 * mib, 4 * mib, defaults));
  EXPECT_FALSE(should_split(20 * mib, 19 * mib, defaults)) << "exactly 1 MiB left: handed out whole";
  allocator_settings split;
  split.max_split_size = 64 * mib;
  EXPECT_FALSE(should_split(200 * mib, 100 * mib, split)) << "oversize requests are never split";
  allocator_settings expandable;
  expandable.expandable_segments = true;
  EXPECT_TRUE(should_split(20 * mib, 19 * mib, expandable)) << "expandable segments split down to 512 bytes";
}

TEST(may_serve, keeps_oversize_blocks_for_oversize_requests) {
  allocator_settings split;
  split.max_split_size = 64 * mib;
  EXPECT_FALSE(may_serve(100 * mib, 30 * mib, split)) << "rule 1: an oversize block serves no small request";
  EXPECT_TRUE(may_serve(100 * mib, 90 * mib, split)) << "rule 2: 100 < 90 + 20";
  EXPECT_FALSE(may_serve(120 * mib, 90 * mib, split)) << "rule 2: 120 >= 90 + 20";
  EXPECT_TRUE(may_serve(40 * mib, 30 * mib, split));
  EXPECT_TRUE(may_serve(std::uint64_t{1} << 40, 30 * mib, allocator_settings{})) << "no max_split_size: every block serves";
}

}  // namespace rlmem
