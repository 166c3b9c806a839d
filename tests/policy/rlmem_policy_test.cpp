// SPDX-License-Identifier: MIT
// The rlmem policy over the fake device: pages counted by the blocks that use them, best fit in
// per-stream address space, cached pages released under pressure, and every page given back.

#include <rlmem/device/fake_device.hpp>
#include <rlmem/policy/rlmem_policy.hpp>

#include <gtest/gtest.h>

#include <vector>

namespace rlmem {
namespace {

constexpr std::uint64_t mib = std::uint64_t{1} << 20;
constexpr std::uint64_t stream = 7;

fake_device_options two_mib_pages(std::uint64_t total_mib = 64) {
  fake_device_options options;
  options.total_bytes = total_mib * mib;
  options.keep_log = true;
  return options;
}

TEST(rlmem_policy, blocks_share_the_pages_they_overlap) {
  fake_device gpu(two_mib_pages());
  rlmem_policy policy(gpu, {});
  model_block* three = policy.allocate(3 * mib, stream);
  ASSERT_NE(three, nullptr);
  EXPECT_EQ(policy.reserved_bytes(), static_cast<std::int64_t>(4 * mib)) << "3 MiB on two 2 MiB pages";
  model_block* one = policy.allocate(1 * mib, stream);
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->ptr, three->ptr + 3 * mib) << "placed right after, at the top";
  EXPECT_EQ(policy.reserved_bytes(), static_cast<std::int64_t>(4 * mib)) << "the second page had room";
  EXPECT_EQ(policy.allocated_bytes(), static_cast<std::int64_t>(4 * mib));
  policy.free_completed(three);
  EXPECT_EQ(policy.allocated_bytes(), static_cast<std::int64_t>(1 * mib));
  EXPECT_EQ(policy.reserved_bytes(), static_cast<std::int64_t>(4 * mib)) << "the freed page stays cached";
  policy.empty_cache();
  EXPECT_EQ(policy.reserved_bytes(), static_cast<std::int64_t>(2 * mib)) << "only the page the 1 MiB block uses";
  EXPECT_EQ(gpu.used_bytes(), 2 * mib);
  EXPECT_TRUE(policy.fault().empty()) << policy.fault();
}

TEST(rlmem_policy, a_freed_gap_is_reused_best_fit_and_the_top_comes_down) {
  fake_device gpu(two_mib_pages());
  rlmem_policy policy(gpu, {});
  model_block* a = policy.allocate(4 * mib, stream);
  model_block* b = policy.allocate(2 * mib, stream);
  model_block* c = policy.allocate(6 * mib, stream);
  model_block* d = policy.allocate(2 * mib, stream);
  ASSERT_TRUE(a && b && c && d);
  std::uint64_t base = a->ptr;
  policy.free_completed(a);  // a 4 MiB gap at the base
  policy.free_completed(c);  // a 6 MiB gap between b and d
  model_block* fits = policy.allocate(4 * mib, stream);
  ASSERT_NE(fits, nullptr);
  EXPECT_EQ(fits->ptr, base) << "the 4 MiB gap fits exactly; the 6 MiB one would leave 2 MiB";
  policy.free_completed(d);  // d was on top: the top comes down over c's gap too
  model_block* large = policy.allocate(8 * mib, stream);
  ASSERT_NE(large, nullptr);
  EXPECT_EQ(large->ptr, base + 6 * mib) << "right after b, where c and d were";
}

TEST(rlmem_policy, a_request_of_4_mib_or_more_takes_mapped_free_pages_before_a_better_fitting_unmapped_gap) {
  fake_device gpu(two_mib_pages());
  rlmem_policy policy(gpu, {});
  model_block* a = policy.allocate(6 * mib, stream);
  model_block* b = policy.allocate(2 * mib, stream);
  model_block* c = policy.allocate(4 * mib, stream);
  model_block* d = policy.allocate(2 * mib, stream);
  ASSERT_TRUE(a && b && c && d);
  std::uint64_t base = a->ptr;
  std::uint64_t c_address = c->ptr;
  policy.free_completed(c);
  policy.empty_cache();      // c's 4 MiB gap has no pages now
  policy.free_completed(a);  // a's 6 MiB gap keeps its 3 pages cached
  std::uint64_t creates = gpu.succeeded(device_op::create);
  model_block* four = policy.allocate(4 * mib, stream);
  ASSERT_NE(four, nullptr);
  EXPECT_EQ(four->ptr, base) << "a's cached pages, not c's gap, which fits exactly but needs 2 new pages";
  EXPECT_EQ(gpu.succeeded(device_op::create) - creates, 0u) << "no new memory";
  model_block* small = policy.allocate(3 * mib, stream);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->ptr, c_address) << "below 4 MiB: best fit among the gaps (c's 4 MiB before a's 2 MiB left), as before";
  EXPECT_TRUE(policy.fault().empty()) << policy.fault();
}

TEST(rlmem_policy, with_mapped_first_off_a_request_takes_the_best_fitting_gap_mapped_or_not) {
  fake_device gpu(two_mib_pages());
  rlmem_policy_options options;
  options.mapped_first_bytes = 0;
  rlmem_policy policy(gpu, options);
  model_block* a = policy.allocate(6 * mib, stream);
  ASSERT_NE(policy.allocate(2 * mib, stream), nullptr);
  model_block* c = policy.allocate(4 * mib, stream);
  ASSERT_NE(policy.allocate(2 * mib, stream), nullptr);
  std::uint64_t c_address = c->ptr;
  policy.free_completed(c);
  policy.empty_cache();
  policy.free_completed(a);
  std::uint64_t creates = gpu.succeeded(device_op::create);
  model_block* four = policy.allocate(4 * mib, stream);
  ASSERT_NE(four, nullptr);
  EXPECT_EQ(four->ptr, c_address) << "the exact fit";
  EXPECT_EQ(gpu.succeeded(device_op::create) - creates, 1u) << "new memory: its 2 pages as one run";
}

TEST(rlmem_policy, pages_cached_above_the_top_serve_the_next_request_there_and_all_go_back) {
  fake_device gpu(two_mib_pages());
  rlmem_policy policy(gpu, {});
  model_block* low = policy.allocate(3 * mib, stream);   // pages 0-1; page 1 half free
  model_block* high = policy.allocate(9 * mib, stream);  // [3, 12): pages 1-5
  ASSERT_TRUE(low && high);
  std::uint64_t base = low->ptr;
  policy.free_completed(high);  // the top comes down to 3 MiB; pages 2-5 stay cached above it
  std::uint64_t creates = gpu.succeeded(device_op::create);
  model_block* eight = policy.allocate(8 * mib, stream);
  ASSERT_NE(eight, nullptr);
  EXPECT_EQ(eight->ptr, base + 3 * mib) << "from the top, over the cached pages";
  EXPECT_EQ(gpu.succeeded(device_op::create) - creates, 0u);
  policy.free_completed(eight);
  policy.free_completed(low);
  policy.empty_cache();
  EXPECT_EQ(policy.reserved_bytes(), 0);
  EXPECT_EQ(gpu.used_bytes(), 0u);
}

TEST(rlmem_policy, under_a_capacity_cached_pages_go_back_before_a_request_fails) {
  fake_device gpu(two_mib_pages());
  rlmem_policy_options options;
  options.capacity_bytes = 8 * mib;
  rlmem_policy policy(gpu, options);
  model_block* first = policy.allocate(6 * mib, stream);
  ASSERT_NE(first, nullptr);
  policy.free_completed(first);  // 6 MiB of cached pages
  model_block* other_stream = policy.allocate(6 * mib, stream + 1);
  ASSERT_NE(other_stream, nullptr) << "the cached pages were released to make room";
  EXPECT_EQ(policy.alloc_retries(), 1u);
  EXPECT_EQ(policy.reserved_bytes(), static_cast<std::int64_t>(6 * mib));
  EXPECT_EQ(policy.allocate(4 * mib, stream), nullptr) << "6 + 4 MiB over an 8 MiB capacity";
  EXPECT_EQ(policy.reserved_bytes(), static_cast<std::int64_t>(6 * mib)) << "a failed request leaves nothing mapped";
  EXPECT_EQ(policy.allocated_bytes(), static_cast<std::int64_t>(6 * mib));
  EXPECT_NE(policy.allocate(2 * mib, stream), nullptr) << "and its address space is free again";
}

TEST(rlmem_policy, pages_wholly_inside_a_block_map_in_runs_and_its_end_pages_alone) {
  fake_device gpu(two_mib_pages(256));
  rlmem_policy_options options;
  options.allocation_run_bytes = 32 * mib;
  rlmem_policy policy(gpu, options);
  // 1 MiB first, so that the next block starts inside a page another block uses.
  ASSERT_NE(policy.allocate(mib, stream), nullptr);
  model_block* large = policy.allocate(100 * mib, stream);
  ASSERT_NE(large, nullptr);
  std::vector<std::uint64_t> mapped_sizes;
  for (const device_call& call : gpu.log()) {
    if (call.op == device_op::map) mapped_sizes.push_back(call.size);
  }
  // Pages: [0,2) shared with the first block (mapped for it), [2,100) inside in 32 MiB runs and
  // a 2 MiB rest, [100,102) the end page, which the block only partly covers.
  std::vector<std::uint64_t> expected{2 * mib, 32 * mib, 32 * mib, 32 * mib, 2 * mib, 2 * mib};
  EXPECT_EQ(mapped_sizes, expected);
  EXPECT_EQ(policy.reserved_bytes(), static_cast<std::int64_t>(102 * mib));
  policy.free_completed(large);
  policy.empty_cache();
  EXPECT_EQ(policy.reserved_bytes(), static_cast<std::int64_t>(2 * mib)) << "every run given back once unused";
}

TEST(rlmem_policy, a_run_another_block_still_uses_stays_mapped_until_that_block_goes) {
  fake_device gpu(two_mib_pages(256));
  rlmem_policy_options options;
  options.allocation_run_bytes = 32 * mib;
  rlmem_policy policy(gpu, options);
  model_block* large = policy.allocate(32 * mib, stream);  // one run
  policy.free_completed(large);
  model_block* small = policy.allocate(mib, stream);  // best fit: the run's first page
  ASSERT_EQ(small->ptr, large->ptr);
  policy.empty_cache();
  EXPECT_EQ(policy.reserved_bytes(), static_cast<std::int64_t>(32 * mib)) << "the price of a run: it goes back whole";
  policy.free_completed(small);
  policy.empty_cache();
  EXPECT_EQ(policy.reserved_bytes(), 0);
}

TEST(rlmem_policy, memory_pressure_releases_the_whole_cache_with_one_fence) {
  fake_device gpu(two_mib_pages());
  rlmem_policy_options options;
  options.capacity_bytes = 20 * mib;  // 10 pages
  rlmem_policy policy(gpu, options);
  std::vector<model_block*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(policy.allocate(2 * mib, stream));
  for (model_block* block : blocks) policy.free_completed(block);  // 8 cached pages
  std::uint64_t fences = gpu.fences();
  ASSERT_NE(policy.allocate(6 * mib, stream + 1), nullptr) << "3 pages on another stream: 1 short";
  EXPECT_EQ(policy.reserved_bytes(), static_cast<std::int64_t>(6 * mib)) << "every cached page went";
  EXPECT_EQ(gpu.fences() - fences, 1u);
  for (int i = 0; i < 3; ++i) ASSERT_NE(policy.allocate(2 * mib, stream + 1), nullptr);
  EXPECT_EQ(gpu.fences() - fences, 1u) << "the requests after it map without fencing again";
  EXPECT_EQ(policy.alloc_retries(), 1u);
}

TEST(rlmem_policy, a_growable_buffer_of_an_impossible_size_is_refused_without_wrapping) {
  fake_device gpu(two_mib_pages());
  rlmem_policy_options options;
  options.reservation_bytes = 64 * mib;
  rlmem_policy policy(gpu, options);
  std::uint64_t base = 0;
  EXPECT_FALSE(policy.reserve_growable(100, ~std::uint64_t{0}, base)) << "2^64 - 1 bytes, rounded up to the page, wraps";
  ASSERT_TRUE(policy.reserve_growable(100, 8 * mib, base));
  EXPECT_FALSE(policy.grow(100, ~std::uint64_t{0})) << "a grow that would wrap is refused, not taken for 0 bytes";
  EXPECT_EQ(policy.grown_bytes(100), 0u);
  EXPECT_TRUE(policy.grow(100, 3 * mib));
  EXPECT_EQ(policy.grown_bytes(100), 4 * mib);
  EXPECT_TRUE(policy.fault().empty()) << policy.fault();
}

TEST(rlmem_policy, released_free_pages_keep_reserved_at_the_pages_live_blocks_use) {
  fake_device gpu(two_mib_pages());
  rlmem_policy_options options;
  options.release_free_pages = true;
  rlmem_policy policy(gpu, options);
  model_block* a = policy.allocate(5 * mib, stream);
  model_block* b = policy.allocate(5 * mib, stream);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(policy.reserved_bytes(), static_cast<std::int64_t>(10 * mib));
  policy.free_completed(a);
  EXPECT_EQ(policy.reserved_bytes(), static_cast<std::int64_t>(6 * mib)) << "pages 0-1 unused; page 2 shared with b";
  EXPECT_EQ(policy.segments(), 1u);
  const std::vector<model_segment_event>& events = policy.segment_events();
  ASSERT_EQ(events.size(), 7u) << "5 maps, 2 unmaps";
  EXPECT_FALSE(events[5].alloc);
  EXPECT_EQ(events[5].address, a->ptr);
}

TEST(rlmem_policy, every_page_and_reservation_goes_back_to_the_device) {
  fake_device gpu(two_mib_pages());
  {
    rlmem_policy policy(gpu, {});
    ASSERT_NE(policy.allocate(3 * mib, stream), nullptr);
    ASSERT_NE(policy.allocate(1 * mib, stream + 1), nullptr);
    EXPECT_EQ(gpu.reservations(), 2u) << "one per stream";
  }
  EXPECT_EQ(gpu.used_bytes(), 0u);
  EXPECT_EQ(gpu.mapped_bytes(), 0u);
  EXPECT_EQ(gpu.reservations(), 0u);
  // Every page was given access before use.
  for (std::size_t i = 0; i < gpu.log().size(); ++i) {
    if (gpu.log()[i].op != device_op::map) continue;
    ASSERT_LT(i + 1, gpu.log().size());
    EXPECT_EQ(gpu.log()[i + 1].op, device_op::set_access) << "call " << i + 1;
  }
}

TEST(rlmem_policy, a_device_that_runs_out_fails_the_request_and_changes_nothing) {
  fake_device_options options = two_mib_pages(6);
  fake_device gpu(options);
  rlmem_policy policy(gpu, {});
  ASSERT_NE(policy.allocate(4 * mib, stream), nullptr);
  EXPECT_EQ(policy.allocate(4 * mib, stream), nullptr) << "4 + 4 MiB on a 6 MiB device";
  EXPECT_EQ(policy.reserved_bytes(), static_cast<std::int64_t>(4 * mib));
  EXPECT_EQ(gpu.used_bytes(), 4 * mib) << "the page mapped before the device ran out was given back";
  EXPECT_TRUE(policy.fault().empty()) << "running out is the program's, not a fault: " << policy.fault();
}

// Restored runs (a resume): paused pages come back as a few large mappings, each given back only
// as a whole. Twelve MiB and four MiB blocks over eight pages, restored in runs of 8 MiB.
struct restored_fixture {
  fake_device gpu{two_mib_pages()};
  rlmem_policy policy;
  model_block* twelve = nullptr;
  model_block* four = nullptr;
  explicit restored_fixture(bool release_free_pages)
      : policy(gpu, [&] {
          rlmem_policy_options options;
          options.release_free_pages = release_free_pages;
          options.restore_run_bytes = 8 * mib;
          return options;
        }()) {
    twelve = policy.allocate(12 * mib, stream);
    four = policy.allocate(4 * mib, stream);
  }
  address_run all() const { return {twelve->ptr, 16 * mib}; }
  /// Both blocks paused and restored, as a pause and a resume of their tag do.
  bool paused_and_restored() {
    std::vector<address_run> restored;
    return policy.release_range(all()) && policy.restore_range(all(), restored);
  }
  std::size_t count(device_op op, std::size_t from) const {
    std::size_t calls = 0;
    for (std::size_t at = from; at < gpu.log().size(); ++at) calls += gpu.log()[at].op == op ? 1 : 0;
    return calls;
  }
};

TEST(rlmem_policy, a_restore_maps_paused_pages_in_runs_of_one_allocation_each) {
  restored_fixture f(false);
  ASSERT_TRUE(f.twelve && f.four);
  ASSERT_TRUE(f.policy.release_range(f.all()));
  EXPECT_EQ(f.gpu.used_bytes(), 0u);
  EXPECT_EQ(f.policy.paused_bytes(), 16 * mib);
  std::size_t before = f.gpu.log().size();
  std::vector<address_run> restored;
  ASSERT_TRUE(f.policy.restore_range(f.all(), restored));
  EXPECT_EQ(restored, (std::vector<address_run>{f.all()}));
  EXPECT_EQ(f.count(device_op::create, before), 2u) << "16 MiB in runs of 8 MiB, not 8 pages";
  EXPECT_EQ(f.count(device_op::set_access, before), 2u);
  EXPECT_EQ(f.policy.reserved_bytes(), static_cast<std::int64_t>(16 * mib));
  EXPECT_EQ(f.gpu.used_bytes(), 16 * mib);
  EXPECT_EQ(f.policy.segments(), 1u) << "one contiguous mapped range";
  EXPECT_TRUE(f.policy.fault().empty()) << f.policy.fault();
}

TEST(rlmem_policy, released_free_pages_give_a_restored_run_back_once_none_of_it_is_used) {
  restored_fixture f(true);
  ASSERT_TRUE(f.paused_and_restored());
  f.policy.free_completed(f.twelve);
  EXPECT_EQ(f.policy.reserved_bytes(), static_cast<std::int64_t>(8 * mib))
      << "the first run is unused and goes; the second holds the four MiB block's pages";
  EXPECT_EQ(f.gpu.used_bytes(), 8 * mib);
  f.policy.free_completed(f.four);
  EXPECT_EQ(f.policy.reserved_bytes(), 0);
  EXPECT_EQ(f.gpu.used_bytes(), 0u);
  EXPECT_EQ(f.gpu.live_handles(), 0u);
  EXPECT_TRUE(f.policy.fault().empty()) << f.policy.fault();
}

TEST(rlmem_policy, empty_cache_gives_back_the_restored_runs_no_block_uses) {
  restored_fixture f(false);
  ASSERT_TRUE(f.paused_and_restored());
  f.policy.free_completed(f.twelve);
  EXPECT_EQ(f.policy.reserved_bytes(), static_cast<std::int64_t>(16 * mib)) << "freed pages stay cached";
  f.policy.empty_cache();
  EXPECT_EQ(f.policy.reserved_bytes(), static_cast<std::int64_t>(8 * mib)) << "a run in part in use stays whole";
  model_block* again = f.policy.allocate(4 * mib, stream);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->ptr, f.twelve->ptr) << "best fit at the base, on fresh pages";
  EXPECT_TRUE(f.policy.fault().empty()) << f.policy.fault();
}

TEST(rlmem_policy, a_pause_releases_a_restored_run_when_its_range_reaches_the_runs_end) {
  restored_fixture f(false);
  ASSERT_TRUE(f.paused_and_restored());
  ASSERT_TRUE(f.policy.release_range({f.twelve->ptr, 12 * mib}));
  EXPECT_EQ(f.policy.reserved_bytes(), static_cast<std::int64_t>(8 * mib))
      << "the second run reaches past the range: it waits for the range that covers its end";
  ASSERT_TRUE(f.policy.release_range({f.twelve->ptr + 12 * mib, 4 * mib}));
  EXPECT_EQ(f.policy.reserved_bytes(), 0);
  EXPECT_EQ(f.policy.paused_bytes(), 16 * mib);
  EXPECT_EQ(f.gpu.used_bytes(), 0u);
  std::vector<address_run> restored;
  ASSERT_TRUE(f.policy.restore_range(f.all(), restored)) << "and it comes back again";
  EXPECT_EQ(f.policy.reserved_bytes(), static_cast<std::int64_t>(16 * mib));
  EXPECT_TRUE(f.policy.fault().empty()) << f.policy.fault();
}

TEST(rlmem_policy, a_restore_short_of_memory_leaves_every_page_paused) {
  restored_fixture f(false);
  std::vector<address_run> restored;
  ASSERT_TRUE(f.policy.release_range(f.all()));
  model_block* other = f.policy.allocate(52 * mib, stream + 1);  // 12 MiB left of 64
  ASSERT_NE(other, nullptr);
  EXPECT_FALSE(f.policy.restore_range(f.all(), restored)) << "the first run fits, the second does not";
  EXPECT_TRUE(restored.empty());
  EXPECT_EQ(f.policy.paused_bytes(), 16 * mib);
  EXPECT_EQ(f.gpu.used_bytes(), 52 * mib) << "the run mapped before the failure went back";
  EXPECT_TRUE(f.policy.fault().empty()) << f.policy.fault();
}

}  // namespace
}  // namespace rlmem
