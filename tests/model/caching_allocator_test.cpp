// SPDX-License-Identifier: MIT
// The allocator model on its own, for paths the recordings do not exercise: splitting and
// merging, the oversize rules, and the garbage collector.

#include <rlmem/caching_allocator.hpp>

#include <gtest/gtest.h>

namespace rlmem {

namespace {

constexpr std::uint64_t mib = std::uint64_t{1} << 20;

struct device {
  std::uint64_t next = std::uint64_t{1} << 40;
  std::uint64_t operator()(std::uint64_t size) {
    std::uint64_t address = next;
    next += size;
    return address;
  }
};

std::vector<std::pair<bool, std::uint64_t>> segment_history(const caching_allocator_model& model) {
  std::vector<std::pair<bool, std::uint64_t>> history;
  for (const auto& event : model.segment_events()) history.emplace_back(event.alloc, event.size / mib);
  return history;
}

}  // namespace

TEST(caching_allocator, splits_the_low_end_and_merges_back) {
  caching_allocator_model model(allocator_settings{}, 0, device{});
  model_block* a = model.allocate(4 * mib, 0);  // a 20 MiB segment, split
  model_block* b = model.allocate(4 * mib, 0);  // the next 4 MiB of the same segment
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->ptr, a->ptr + 4 * mib);
  EXPECT_EQ(model.reserved_bytes(), static_cast<std::int64_t>(20 * mib));
  EXPECT_EQ(model.allocated_bytes(), static_cast<std::int64_t>(8 * mib));
  model.free_completed(a);
  model.free_completed(b);
  model_block* whole = model.allocate(19 * mib, 0);  // fits only if the three free parts merged
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(model.segment_events().size(), 1u);
  EXPECT_EQ(whole->size, 20 * mib) << "a remainder of 1 MiB or less is not split off";
}

TEST(caching_allocator, oversize_blocks_serve_only_oversize_requests) {
  allocator_settings settings;
  settings.max_split_size = 64 * mib;
  caching_allocator_model model(settings, 0, device{});
  model_block* big = model.allocate(100 * mib, 0);
  model.free_completed(big);
  model_block* small = model.allocate(30 * mib, 0);  // rule 1: may not take the 100 MiB block
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(model.segment_events().size(), 2u);
  model_block* again = model.allocate(90 * mib, 0);  // rule 2: 100 < 90 + 20, reused whole
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->size, 100 * mib);
  EXPECT_EQ(model.segment_events().size(), 2u);
}

TEST(caching_allocator, capacity_triggers_the_flush_and_retry) {
  caching_allocator_model model(allocator_settings{}, 100 * mib, device{});
  model_block* a = model.allocate(60 * mib, 0);
  model.free_completed(a);
  model_block* b = model.allocate(70 * mib, 0);  // 60 cached + 70 > 100: flush, retry
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(model.alloc_retries(), 1u);
  EXPECT_EQ(segment_history(model), (std::vector<std::pair<bool, std::uint64_t>>{{true, 60}, {false, 60}, {true, 70}}));
  EXPECT_EQ(model.allocate(40 * mib, 0), nullptr) << "70 live + 40 cannot fit under 100";
}

TEST(caching_allocator, garbage_collection_frees_old_segments_before_growing) {
  allocator_settings settings;
  settings.garbage_collection_threshold = 0.5;
  caching_allocator_model model(settings, 100 * mib, device{});
  model_block* a = model.allocate(30 * mib, 0);
  model_block* b = model.allocate(30 * mib, 0);
  model.free_completed(a);
  model.free_completed(b);
  // 60 MiB reserved is above 0.5 x 100 MiB: both cached segments are as old as the average,
  // so the collector releases them before the new segment, with no retry.
  ASSERT_NE(model.allocate(40 * mib, 0), nullptr);
  EXPECT_EQ(model.alloc_retries(), 0u);
  EXPECT_EQ(segment_history(model),
            (std::vector<std::pair<bool, std::uint64_t>>{{true, 30}, {true, 30}, {false, 30}, {false, 30}, {true, 40}}));
  // Without a threshold the same sequence keeps its cache.
  caching_allocator_model keeps(allocator_settings{}, 100 * mib, device{});
  model_block* c = keeps.allocate(30 * mib, 0);
  model_block* d = keeps.allocate(30 * mib, 0);
  keeps.free_completed(c);
  keeps.free_completed(d);
  ASSERT_NE(keeps.allocate(40 * mib, 0), nullptr);
  EXPECT_EQ(keeps.segment_events().size(), 3u);
}

TEST(caching_allocator, streams_do_not_share_free_blocks) {
  caching_allocator_model model(allocator_settings{}, 0, device{});
  model_block* a = model.allocate(30 * mib, 7);
  model.free_completed(a);
  ASSERT_NE(model.allocate(30 * mib, 8), nullptr);
  EXPECT_EQ(model.segment_events().size(), 2u);
  ASSERT_NE(model.allocate(30 * mib, 7), nullptr);
  EXPECT_EQ(model.segment_events().size(), 2u);
}

}  // namespace rlmem
