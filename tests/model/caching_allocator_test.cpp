// SPDX-License-Identifier: MIT
// The allocator model on its own, for paths the recordings do not exercise: splitting and
// merging, the oversize rules, the garbage collector, and its memory as the device gives it.

#include "byte_units.hpp"

#include <rlmem/model/caching_allocator.hpp>
#include <rlmem/device/fake_device.hpp>

#include <gtest/gtest.h>

namespace rlmem {

namespace {

using testing::sizes::mib;

std::vector<std::pair<bool, std::uint64_t>> segment_history(const caching_allocator_model& model) {
  std::vector<std::pair<bool, std::uint64_t>> history;
  for (const auto& event : model.segment_events()) history.emplace_back(event.alloc, event.size / mib);
  return history;
}

}  // namespace

TEST(caching_allocator, splits_the_low_end_and_merges_back) {
  fake_device gpu;
  caching_allocator_model model(gpu, allocator_settings{}, 0);
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
  fake_device gpu;
  caching_allocator_model model(gpu, settings, 0);
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
  fake_device gpu;
  caching_allocator_model model(gpu, allocator_settings{}, 100 * mib);
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
  fake_device gpu;
  caching_allocator_model model(gpu, settings, 100 * mib);
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
  fake_device keeps_gpu;
  caching_allocator_model keeps(keeps_gpu, allocator_settings{}, 100 * mib);
  model_block* c = keeps.allocate(30 * mib, 0);
  model_block* d = keeps.allocate(30 * mib, 0);
  keeps.free_completed(c);
  keeps.free_completed(d);
  ASSERT_NE(keeps.allocate(40 * mib, 0), nullptr);
  EXPECT_EQ(keeps.segment_events().size(), 3u);
}

TEST(caching_allocator, streams_do_not_share_free_blocks) {
  fake_device gpu;
  caching_allocator_model model(gpu, allocator_settings{}, 0);
  model_block* a = model.allocate(30 * mib, 7);
  model.free_completed(a);
  ASSERT_NE(model.allocate(30 * mib, 8), nullptr);
  EXPECT_EQ(model.segment_events().size(), 2u);
  ASSERT_NE(model.allocate(30 * mib, 7), nullptr);
  EXPECT_EQ(model.segment_events().size(), 2u);
}

// Every segment is a reservation with memory mapped into it, where the recording had it when
// the device has that range free; each page of an expandable segment is one, at its address in
// the segment's reservation.
TEST(caching_allocator, segments_and_pages_are_the_devices_memory_at_the_recorded_addresses) {
  fake_device gpu;
  recorded_addresses recorded;
  recorded.segments = {{true, std::uint64_t{0x7000} << 32, 20 * mib}, {true, std::uint64_t{0x7100} << 32, 40 * mib}};
  caching_allocator_model model(gpu, allocator_settings{}, 0, recorded);
  model_block* a = model.allocate(4 * mib, 0);
  model_block* b = model.allocate(40 * mib, 0);
  model_block* c = model.allocate(40 * mib, 0);  // no recorded segment left: where the device puts it
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(a->ptr, std::uint64_t{0x7000} << 32);
  EXPECT_EQ(b->ptr, std::uint64_t{0x7100} << 32);
  EXPECT_EQ(c->ptr, fake_device_options{}.address_base);
  EXPECT_EQ(gpu.reservations(), 3u);
  EXPECT_EQ(gpu.mapped_bytes(), 100 * mib);
  model.free_completed(b);
  model.empty_cache();
  EXPECT_EQ(gpu.mapped_bytes(), 60 * mib);
  EXPECT_EQ(gpu.reservations(), 2u) << "cudaFree gives the reservation back too";

  fake_device pages_gpu;
  allocator_settings settings;
  settings.expandable_segments = true;
  recorded_addresses maps;
  maps.maps = {std::uint64_t{0x7200} << 32};
  caching_allocator_model expandable(pages_gpu, settings, 0, maps);
  model_block* d = expandable.allocate(50 * mib, 0);  // three 20 MiB pages
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->ptr, std::uint64_t{0x7200} << 32);
  EXPECT_EQ(pages_gpu.reservations(), 3u) << "one a page";
  EXPECT_EQ(pages_gpu.mapped_bytes(), 60 * mib);
  EXPECT_EQ(static_cast<std::uint64_t>(expandable.reserved_bytes()), pages_gpu.mapped_bytes());
}

// A crafted dump's segment at address 0 and off the 2 MiB grid: the model keeps the recorded
// address, the device holds whole granules where it can, and all of it goes back.
TEST(caching_allocator, a_trace_start_segment_the_device_cannot_place_as_recorded_keeps_its_address) {
  fake_device gpu;
  caching_allocator_model model(gpu, allocator_settings{}, 0);
  model_block live;
  live.ptr = 0;
  live.size = 273 * mib;
  live.allocated = true;
  std::vector<model_block*> made = model.add_existing_segment(0, 275 * mib, 0, {live}, false, false);
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0]->ptr, 0u);
  EXPECT_EQ(model.fault(), "");
  EXPECT_EQ(model.reserved_bytes(), static_cast<std::int64_t>(275 * mib));
  EXPECT_EQ(gpu.mapped_bytes(), 276 * mib) << "whole granules";
  model.free_completed(made[0]);
  model.empty_cache();
  EXPECT_EQ(model.reserved_bytes(), 0);
  EXPECT_EQ(gpu.used_bytes(), 0u);
  EXPECT_EQ(gpu.reservations(), 0u);
}

// cudaMalloc failing (the device fails the Nth call) is an OOM to the model: the slow path frees
// the cache and tries again (num_alloc_retries), and when that fails too the request is refused
// with no trace of the failed call: nothing reserved on the device, no segment event.
TEST(caching_allocator, a_device_failure_is_an_oom_that_takes_the_slow_path) {
  fake_device_options once;
  once.fail_call = 1;  // the first reservation
  fake_device gpu(once);
  caching_allocator_model model(gpu, allocator_settings{}, 0);
  ASSERT_NE(model.allocate(30 * mib, 0), nullptr) << "served on the retry";
  EXPECT_EQ(model.alloc_retries(), 1u);
  EXPECT_EQ(segment_history(model), (std::vector<std::pair<bool, std::uint64_t>>{{true, 30}}));
  EXPECT_EQ(gpu.reservations(), 1u);

  // Under a 100 MiB capacity: 60 MiB cached, 70 MiB asked for. The capacity refuses, the slow path
  // releases the cached segment (calls 5 to 7: unmap, release, free_reservation), and the
  // device fails the retry's reservation (call 8).
  fake_device_options eighth;
  eighth.fail_call = 8;
  fake_device capped_gpu(eighth);
  caching_allocator_model capped(capped_gpu, allocator_settings{}, 100 * mib);
  model_block* cached = capped.allocate(60 * mib, 0);
  ASSERT_NE(cached, nullptr);
  capped.free_completed(cached);
  EXPECT_EQ(capped.allocate(70 * mib, 0), nullptr);
  EXPECT_EQ(capped_gpu.calls(), 8u);
  EXPECT_EQ(capped.alloc_retries(), 1u);
  EXPECT_EQ(capped.allocated_bytes(), 0);
  EXPECT_EQ(capped.reserved_bytes(), 0);
  EXPECT_EQ(capped_gpu.mapped_bytes(), 0u);
  EXPECT_EQ(capped_gpu.reservations(), 0u);
  EXPECT_EQ(capped_gpu.live_handles(), 0u);
  EXPECT_EQ(segment_history(capped), (std::vector<std::pair<bool, std::uint64_t>>{{true, 60}, {false, 60}}));
  EXPECT_EQ(capped.fault(), "") << "running out of memory is no fault";
  ASSERT_NE(capped.allocate(70 * mib, 0), nullptr) << "the next call is served";
}

// A device with less memory than the capacity refuses first: the OOM is the device's.
TEST(caching_allocator, the_devices_memory_bounds_segments_and_pages) {
  fake_device_options small;
  small.total_bytes = 64 * mib;
  fake_device gpu(small);
  caching_allocator_model model(gpu, allocator_settings{}, 0);
  ASSERT_NE(model.allocate(40 * mib, 0), nullptr);
  EXPECT_EQ(model.allocate(40 * mib, 0), nullptr) << "80 MiB on a 64 MiB device";
  EXPECT_EQ(model.reserved_bytes(), static_cast<std::int64_t>(40 * mib));

  fake_device pages_gpu(small);
  allocator_settings settings;
  settings.expandable_segments = true;
  caching_allocator_model expandable(pages_gpu, settings, 0);
  ASSERT_NE(expandable.allocate(50 * mib, 0), nullptr);  // 60 MiB of pages, 10 MiB of them free
  EXPECT_EQ(expandable.allocate(12 * mib, 0), nullptr) << "a fourth 20 MiB page does not fit";
  EXPECT_EQ(expandable.reserved_bytes(), static_cast<std::int64_t>(60 * mib));
  EXPECT_EQ(pages_gpu.mapped_bytes(), 60 * mib);
  pages_gpu.set_free_bytes(20 * mib);  // another process gave memory back
  EXPECT_NE(expandable.allocate(12 * mib, 0), nullptr);
  EXPECT_EQ(pages_gpu.mapped_bytes(), 80 * mib);
}

}  // namespace rlmem
