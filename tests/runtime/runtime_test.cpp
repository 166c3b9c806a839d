// SPDX-License-Identifier: MIT
// The runtime on a host-backed fake device: tags, pause and resume (contents, memory returned,
// the known failures of other runtimes designed out), counters, and many threads at once.

#include <rlmem/device/fake_device.hpp>
#include <rlmem/runtime/runtime.hpp>

#include "byte_units.hpp"
#include "runtime_checks.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace rlmem {
namespace {

using testing::sizes::mib;

fake_device_options device_of(std::uint64_t total_mib) {
  fake_device_options options;
  options.total_bytes = total_mib * mib;
  options.granularity = 2 * mib;
  options.host_backed = true;
  options.keep_log = true;
  return options;
}

runtime_options small_chunks() {
  runtime_options options;
  options.policy.reservation_bytes = 64 * mib;
  options.copy_chunk_bytes = 4 * mib;  // several chunks per tag, so chunking is exercised
  return options;
}

std::vector<std::uint8_t> pattern(std::uint64_t size, std::uint32_t seed) {
  std::vector<std::uint8_t> bytes(size);
  std::mt19937 random(seed);
  for (auto& byte : bytes) byte = static_cast<std::uint8_t>(random());
  return bytes;
}

const tag_statistics& stats_of(const std::vector<tag_statistics>& all, std::string_view name) {
  auto found = std::find_if(all.begin(), all.end(), [&](const tag_statistics& each) { return each.name == name; });
  if (found == all.end()) throw std::runtime_error("no tag " + std::string(name));
  return *found;
}

// Allocates `size` bytes in `tag` on stream 0 and writes a pattern; returns the address.
std::uint64_t filled(runtime& rt, std::string_view tag, std::uint64_t size, std::uint32_t seed) {
  EXPECT_TRUE(succeeded(rt.enter_region(tag)));
  std::uint64_t address = 0;
  EXPECT_TRUE(succeeded(rt.allocate(size, 0), address));
  EXPECT_TRUE(succeeded(rt.leave_region()));
  std::vector<std::uint8_t> bytes = pattern(size, seed);
  EXPECT_TRUE(succeeded(rt.write(address, bytes.data(), size)));
  return address;
}

bool holds(runtime& rt, std::uint64_t address, std::uint64_t size, std::uint32_t seed) {
  std::vector<std::uint8_t> read(size);
  if (!rt.read(address, read.data(), size).ok()) return false;
  return read == pattern(size, seed);
}

TEST(runtime, pause_to_host_returns_the_memory_and_resume_restores_every_byte_at_the_same_address) {
  fake_device gpu(device_of(64));
  runtime rt(gpu, small_chunks());
  std::uint64_t weights = filled(rt, "train", 9 * mib + 300, 1);
  std::uint64_t optimizer = filled(rt, "train", 5 * mib, 2);
  std::uint64_t other = filled(rt, "rollout", 3 * mib, 3);
  std::uint64_t used_before = gpu.used_bytes();

  ASSERT_TRUE(succeeded(rt.pause("train", keep_contents::host)));
  EXPECT_EQ(gpu.used_bytes(), 2 * mib * 2) << "only the rollout tag's pages (3 MiB: 2 pages) are held while train is paused";
  EXPECT_LT(gpu.used_bytes(), used_before);
  EXPECT_TRUE(holds(rt, other, 3 * mib, 3)) << "another tag is untouched";
  tag_statistics paused = stats_of(rt.statistics(), "train");
  EXPECT_TRUE(paused.paused);
  EXPECT_EQ(paused.mapped_bytes.current, 0u);
  EXPECT_EQ(paused.paused_bytes, 16 * mib) << "9 MiB + 300 B and 5 MiB from 14 MiB + 300 B on one stream: 8 pages";
  EXPECT_EQ(paused.host_backup_bytes, 16 * mib);
  EXPECT_EQ(paused.last_pause_copied_bytes, 16 * mib);

  ASSERT_TRUE(succeeded(rt.resume("train")));
  EXPECT_TRUE(holds(rt, weights, 9 * mib + 300, 1)) << "weights restored bit-exact at the same address";
  EXPECT_TRUE(holds(rt, optimizer, 5 * mib, 2));
  EXPECT_EQ(gpu.used_bytes(), used_before);
  EXPECT_EQ(gpu.host_buffers(), 0u) << "pinned backups are freed once restored";
  tag_statistics resumed = stats_of(rt.statistics(), "train");
  EXPECT_FALSE(resumed.paused);
  EXPECT_EQ(resumed.host_backup_bytes, 0u);
  EXPECT_EQ(resumed.last_resume_copied_bytes, 16 * mib);
  EXPECT_EQ(resumed.pauses, 1u);
  EXPECT_EQ(resumed.resumes, 1u);
}

runtime_options keeping_host_buffers() {
  runtime_options options = small_chunks();
  options.keep_host_buffers = true;
  return options;
}

// Host slabs pinned since the `from`th call of the device's log.
std::ptrdiff_t pinned_since(const fake_device& gpu, std::size_t from = 0) {
  return std::count_if(gpu.log().begin() + static_cast<std::ptrdiff_t>(from), gpu.log().end(),
                       [](const device_call& call) { return call.op == device_op::host_allocate; });
}

TEST(runtime, kept_host_buffers_serve_the_next_pause_without_pinning_again_until_released) {
  fake_device gpu(device_of(64));
  runtime rt(gpu, keeping_host_buffers());
  std::uint64_t weights = filled(rt, "train", 10 * mib, 1);
  auto pinned = [&] { return pinned_since(gpu); };
  ASSERT_TRUE(succeeded(rt.pause("train", keep_contents::host)));
  ASSERT_TRUE(succeeded(rt.resume("train")));
  EXPECT_EQ(pinned(), 3) << "10 MiB in slabs of 4 MiB";
  EXPECT_EQ(gpu.host_buffers(), 3u) << "kept after the resume";
  EXPECT_EQ(rt.totals().host_buffer_bytes, 12 * mib);
  std::vector<std::uint8_t> other = pattern(10 * mib, 2);
  ASSERT_TRUE(succeeded(rt.write(weights, other.data(), other.size())));
  ASSERT_TRUE(succeeded(rt.pause("train", keep_contents::host)));
  ASSERT_TRUE(succeeded(rt.resume("train")));
  EXPECT_EQ(pinned(), 3) << "the second pause pinned nothing";
  EXPECT_TRUE(holds(rt, weights, 10 * mib, 2)) << "a reused slab holds the new contents, not the old";
  rt.release_host_buffers();
  EXPECT_EQ(gpu.host_buffers(), 0u);
  EXPECT_EQ(rt.totals().host_buffer_bytes, 0u);
}

TEST(runtime, host_buffers_reserved_ahead_serve_the_first_pause_without_pinning) {
  fake_device gpu(device_of(64));
  runtime rt(gpu, keeping_host_buffers());
  std::uint64_t weights = filled(rt, "train", 10 * mib, 1);
  ASSERT_TRUE(succeeded(rt.reserve_host_buffers(10 * mib)));
  EXPECT_EQ(gpu.host_buffers(), 3u) << "10 MiB in whole slabs of 4 MiB";
  EXPECT_EQ(rt.totals().host_buffer_bytes, 12 * mib);
  std::size_t before = gpu.log().size();
  ASSERT_TRUE(succeeded(rt.pause("train", keep_contents::host)));
  ASSERT_TRUE(succeeded(rt.resume("train")));
  EXPECT_EQ(pinned_since(gpu, before), 0) << "the pause took the reserved slabs";
  EXPECT_TRUE(holds(rt, weights, 10 * mib, 1));
  ASSERT_TRUE(succeeded(rt.reserve_host_buffers(4 * mib)));
  EXPECT_EQ(gpu.host_buffers(), 3u) << "enough are waiting already";
}

TEST(runtime, a_runtime_destroyed_while_a_tag_is_paused_gives_every_host_and_device_byte_back) {
  fake_device gpu(device_of(64));
  {
    runtime rt(gpu, small_chunks());
    filled(rt, "train", 6 * mib, 1);
    ASSERT_TRUE(succeeded(rt.pause("train", keep_contents::host)));
    EXPECT_GT(gpu.host_buffers(), 0u);
  }
  EXPECT_EQ(gpu.host_buffers(), 0u);
  EXPECT_EQ(gpu.used_bytes(), 0u);
  EXPECT_EQ(gpu.reservations(), 0u);
}

TEST(runtime, a_growable_buffer_grows_in_place_keeping_its_data_and_pauses_with_its_tag) {
  fake_device gpu(device_of(64));
  runtime rt(gpu, small_chunks());
  EXPECT_TRUE(succeeded(rt.enter_region("kv")));
  std::uint64_t kv = 0;
  ASSERT_TRUE(succeeded(rt.reserve_growable(40 * mib), kv));
  EXPECT_TRUE(succeeded(rt.leave_region()));
  EXPECT_EQ(gpu.used_bytes(), 0u) << "reserved, nothing mapped";
  ASSERT_TRUE(succeeded(rt.grow(kv, 3 * mib)));
  EXPECT_EQ(rt.grown_bytes(kv), 4 * mib);
  std::vector<std::uint8_t> first = pattern(3 * mib, 11);
  ASSERT_TRUE(succeeded(rt.write(kv, first.data(), first.size())));
  ASSERT_TRUE(succeeded(rt.grow(kv, 9 * mib)));
  EXPECT_EQ(gpu.used_bytes(), 10 * mib);
  EXPECT_TRUE(holds(rt, kv, 3 * mib, 11)) << "the data did not move";
  std::vector<std::uint8_t> tail(mib, 0x42);
  ASSERT_TRUE(succeeded(rt.write(kv + 8 * mib, tail.data(), tail.size()))) << "the grown part is memory";
  EXPECT_EQ(rt.grow(kv, 41 * mib).code(), runtime_errc::invalid_argument) << "past max_bytes";
  EXPECT_TRUE(succeeded(rt.grow(kv, 2 * mib))) << "never shrinks: a smaller size is already there";
  EXPECT_EQ(stats_of(rt.statistics(), "kv").allocated_bytes.current, 10 * mib);

  ASSERT_TRUE(succeeded(rt.pause("kv", keep_contents::host)));
  EXPECT_EQ(gpu.used_bytes(), 0u);
  EXPECT_EQ(rt.grow(kv, 12 * mib).code(), runtime_errc::paused);
  ASSERT_TRUE(succeeded(rt.resume("kv")));
  EXPECT_TRUE(holds(rt, kv, 3 * mib, 11)) << "restored at the same address";

  ASSERT_TRUE(succeeded(rt.release_growable(kv)));
  EXPECT_EQ(rt.release_growable(kv).code(), runtime_errc::unknown_pointer);
  EXPECT_EQ(gpu.used_bytes(), 0u);
  EXPECT_EQ(stats_of(rt.statistics(), "kv").allocated_bytes.current, 0u);
}

TEST(runtime, a_growable_buffer_that_cannot_grow_changes_nothing) {
  fake_device gpu(device_of(8));  // 4 pages
  runtime rt(gpu, small_chunks());
  std::uint64_t kv = 0;
  ASSERT_TRUE(succeeded(rt.reserve_growable(64 * mib), kv));
  ASSERT_TRUE(succeeded(rt.grow(kv, 4 * mib)));
  EXPECT_EQ(rt.grow(kv, 12 * mib).code(), runtime_errc::out_of_memory) << "6 pages on a 4-page device";
  EXPECT_EQ(rt.grown_bytes(kv), 4 * mib);
  EXPECT_EQ(gpu.used_bytes(), 4 * mib);
  ASSERT_TRUE(succeeded(rt.grow(kv, 8 * mib))) << "the whole device";
}

// Issue 28: a grow past max_bytes was an out-of-memory (or, near 2^64, a success that grew
// nothing); it is a bad argument, refused before anything is mapped.
TEST(runtime, growing_a_buffer_past_its_max_bytes_is_refused_as_a_bad_argument_and_changes_nothing) {
  fake_device gpu(device_of(64));
  runtime rt(gpu, small_chunks());
  std::uint64_t kv = 0;
  ASSERT_TRUE(succeeded(rt.reserve_growable(3 * mib), kv));
  ASSERT_TRUE(succeeded(rt.grow(kv, 2 * mib)));
  for (std::uint64_t bytes : {3 * mib + 1, 4 * mib, std::uint64_t{1} << 63, UINT64_MAX}) {
    EXPECT_TRUE(refused(rt.grow(kv, bytes), runtime_errc::invalid_argument, "more than its max_bytes, 3145728"))
        << "grow to " << bytes << " of a 3 MiB buffer";
    EXPECT_EQ(rt.grown_bytes(kv), 2 * mib) << "expected nothing grown by a grow to " << bytes;
  }
  EXPECT_EQ(gpu.used_bytes(), 2 * mib);
  EXPECT_TRUE(succeeded(rt.grow(kv, 3 * mib))) << "max_bytes itself fits";
}

// Issue 28: reserve_host_buffers pinned until the host refused (a 24 GB host met the OOM killer).
TEST(runtime, host_buffers_past_what_a_pause_could_back_up_are_refused_at_once_and_nothing_is_pinned) {
  fake_device gpu(device_of(64));
  runtime rt(gpu, small_chunks());
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(refused(rt.reserve_host_buffers(UINT64_MAX), runtime_errc::invalid_argument,
                      "more than 67108864 (64 MiB, the device's memory"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1)) << "expected a refusal, not an attempt";
  EXPECT_EQ(rt.reserve_host_buffers(64 * mib + 1).code(), runtime_errc::invalid_argument) << "a byte past the device";
  EXPECT_EQ(gpu.host_buffers(), 0u) << "expected nothing pinned";
  EXPECT_EQ(rt.totals().host_buffer_bytes, 0u);
  EXPECT_TRUE(succeeded(rt.reserve_host_buffers(64 * mib))) << "the whole device is a pause's most";
  EXPECT_EQ(rt.totals().host_buffer_bytes, 64 * mib);

  runtime_options capped = small_chunks();
  capped.policy.capacity_bytes = 16 * mib;
  fake_device other(device_of(64));
  runtime within(other, capped);
  EXPECT_TRUE(refused(within.reserve_host_buffers(32 * mib), runtime_errc::invalid_argument, "16 MiB, the runtime's capacity"));
  EXPECT_EQ(other.host_buffers(), 0u);
}

TEST(runtime, host_buffers_past_half_the_hosts_physical_memory_are_refused_whatever_the_device) {
  fake_device gpu(device_of(std::uint64_t{1} << 30));  // a 1 PiB device: more than any host has
  runtime rt(gpu, small_chunks());
  host_buffers_bound limit = rt.host_buffers_limit();
  EXPECT_EQ(limit.why, "half the host's physical memory");
  EXPECT_LT(limit.bytes, std::uint64_t{1} << 50);
  EXPECT_TRUE(refused(rt.reserve_host_buffers(limit.bytes + 1), runtime_errc::invalid_argument, "half the host's physical memory"));
  EXPECT_EQ(gpu.host_buffers(), 0u) << "expected nothing pinned";
}

TEST(runtime, its_history_and_state_read_as_torchs_snapshot_would_name_them) {
  fake_device gpu(device_of(8));
  runtime_options options = small_chunks();
  options.history_entries = 64;
  runtime rt(gpu, options);
  std::uint64_t first = 0;
  std::uint64_t second = 0;
  ASSERT_TRUE(succeeded(rt.allocate(3 * mib, 5), first));
  ASSERT_TRUE(succeeded(rt.allocate(1000, 5), second));
  ASSERT_TRUE(succeeded(rt.free(first)));
  ASSERT_EQ(rt.allocate(20 * mib, 5).code(), runtime_errc::out_of_memory);
  runtime_snapshot taken = rt.snapshot();
  using kind = history_event::kind;
  std::vector<kind> actions;
  for (const history_event& event : taken.events) actions.push_back(event.action);
  ASSERT_GE(actions.size(), 7u);
  EXPECT_EQ(std::vector<kind>(actions.begin(), actions.begin() + 6),
            (std::vector<kind>{kind::segment_map, kind::segment_map, kind::alloc, kind::alloc, kind::free_requested, kind::free_completed}));
  // Then the refused request: pages mapped for it, given back with the cached one, and the OOM.
  EXPECT_EQ(actions.back(), kind::oom);
  EXPECT_EQ(std::count(actions.begin(), actions.end(), kind::segment_map) - 2,
            std::count(actions.begin(), actions.end(), kind::segment_unmap) - 1)
      << "every page mapped for the refused request is unmapped again, and so is the cached one";
  EXPECT_EQ(taken.events[2].address, first);
  EXPECT_EQ(taken.events[2].stream, 5u) << "the caller's stream, not the arena's key";
  EXPECT_EQ(taken.events.back().size, 20 * mib);
  EXPECT_EQ(taken.events.back().device_free, 8 * mib - gpu.used_bytes()) << "as the driver said after the failure";
  ASSERT_EQ(taken.segments.size(), 1u) << "the page the live block uses";
  EXPECT_EQ(taken.segments[0].size, 2 * mib);
  ASSERT_EQ(taken.segments[0].blocks.size(), 1u);
  EXPECT_EQ(taken.segments[0].blocks[0].address, second);
  EXPECT_EQ(taken.segments[0].blocks[0].size, 1024u);
  EXPECT_EQ(taken.segments[0].blocks[0].requested, 1000u);

  const std::uint64_t before = taken.events.size();
  for (int i = 0; i < 40; ++i) {
    std::uint64_t address = 0;
    ASSERT_TRUE(succeeded(rt.allocate(512, 5), address));
    ASSERT_TRUE(succeeded(rt.free(address)));
  }
  taken = rt.snapshot();
  EXPECT_EQ(taken.events.size(), 64u) << "a ring of 64";
  EXPECT_EQ(taken.events_dropped, before + 1u + 120u - 64u)
      << "three events a round, and one page mapped for the first (best fit puts it in the freed 3 MiB, whose page went back)";
  EXPECT_EQ(taken.events.back().action, kind::free_completed) << "the newest last";
}

TEST(runtime, a_discarded_tag_comes_back_filled_with_zeros_never_with_stale_or_fresh_page_bytes) {
  fake_device gpu(device_of(64));
  runtime rt(gpu, small_chunks());
  std::uint64_t kv = filled(rt, "kv_cache", 6 * mib, 7);
  ASSERT_TRUE(succeeded(rt.pause("kv_cache", keep_contents::discard)));
  EXPECT_EQ(gpu.host_buffers(), 0u) << "a discard copies nothing";
  ASSERT_TRUE(succeeded(rt.resume("kv_cache")));
  std::vector<std::uint8_t> read(6 * mib, 0xEE);
  ASSERT_TRUE(succeeded(rt.read(kv, read.data(), read.size())));
  EXPECT_TRUE(std::all_of(read.begin(), read.end(), [](std::uint8_t byte) { return byte == 0; }))
      << "expected every byte 0 (the fake's fresh pages hold 0xA5)";
}

TEST(runtime, the_device_is_fenced_before_any_page_is_copied_or_unmapped) {
  fake_device gpu(device_of(64));
  runtime rt(gpu, small_chunks());
  filled(rt, "train", 4 * mib, 1);
  std::size_t logged = gpu.log().size();
  ASSERT_TRUE(succeeded(rt.pause("train", keep_contents::host)));
  std::vector<device_op> ops;
  for (std::size_t at = logged; at < gpu.log().size(); ++at) ops.push_back(gpu.log()[at].op);
  auto fence = std::find(ops.begin(), ops.end(), device_op::synchronize);
  auto copy = std::find(ops.begin(), ops.end(), device_op::copy_to_host_async);
  auto unmap = std::find(ops.begin(), ops.end(), device_op::unmap);
  auto waited = std::find(ops.begin(), ops.end(), device_op::wait_mark);
  ASSERT_NE(fence, ops.end());
  ASSERT_NE(unmap, ops.end());
  EXPECT_LT(fence, copy) << "synchronize before the first backup copy";
  EXPECT_LT(waited, unmap) << "the first piece's backup is waited for before its pages are unmapped";
  EXPECT_EQ(gpu.open_marks(), 0u) << "every mark waited for";
}

TEST(runtime, allocations_in_a_paused_tag_are_refused_and_other_tags_use_the_memory_it_gave_back) {
  fake_device gpu(device_of(16));  // 8 pages
  runtime rt(gpu, small_chunks());
  std::uint64_t train = filled(rt, "train", 12 * mib, 4);
  ASSERT_TRUE(succeeded(rt.pause("train", keep_contents::host)));

  EXPECT_TRUE(succeeded(rt.enter_region("train")));
  EXPECT_TRUE(refused(rt.allocate(mib, 0), runtime_errc::paused, "paused"));
  EXPECT_TRUE(succeeded(rt.leave_region()));

  std::uint64_t rollout = filled(rt, "rollout", 12 * mib, 5);
  EXPECT_EQ(rt.resume("train").code(), runtime_errc::out_of_memory) << "12 + 12 MiB on a 16 MiB device";
  EXPECT_TRUE(stats_of(rt.statistics(), "train").paused) << "a resume that cannot finish leaves the tag paused";
  EXPECT_EQ(stats_of(rt.statistics(), "train").host_backup_bytes, 12 * mib) << "with its backup";
  EXPECT_TRUE(holds(rt, rollout, 12 * mib, 5));

  ASSERT_TRUE(succeeded(rt.free(rollout)));
  ASSERT_TRUE(succeeded(rt.resume("train")));
  EXPECT_TRUE(holds(rt, train, 12 * mib, 4));
}

TEST(runtime, freeing_a_paused_block_releases_nothing_twice_and_its_pages_are_not_restored) {
  fake_device gpu(device_of(64));
  runtime rt(gpu, small_chunks());
  std::uint64_t kept = filled(rt, "train", 4 * mib, 8);
  std::uint64_t dropped = filled(rt, "train", 6 * mib, 9);
  ASSERT_TRUE(succeeded(rt.pause("train", keep_contents::host)));
  ASSERT_TRUE(succeeded(rt.free(dropped)));
  EXPECT_EQ(rt.free(dropped).code(), runtime_errc::unknown_pointer) << "a second free";
  EXPECT_EQ(stats_of(rt.statistics(), "train").paused_bytes, 4 * mib);
  ASSERT_TRUE(succeeded(rt.resume("train")));
  EXPECT_EQ(gpu.used_bytes(), 4 * mib) << "only the block still live is mapped again";
  EXPECT_TRUE(holds(rt, kept, 4 * mib, 8));
  std::set<physical_handle> released;
  std::uint64_t unmapped_bytes = 0;
  for (const device_call& call : gpu.log()) {
    EXPECT_EQ(call.result, device_errc::ok) << device_op_name(call.op) << " failed: the runtime broke a precondition";
    if (call.op == device_op::release) {
      EXPECT_TRUE(released.insert(call.handle).second) << "handle " << call.handle << " released twice";
    }
    if (call.op == device_op::unmap) unmapped_bytes += call.size;
  }
  EXPECT_EQ(unmapped_bytes, 10 * mib) << "the 5 pages of both blocks unmapped once each at the pause";
}

TEST(runtime, a_pause_whose_backup_cannot_be_pinned_changes_nothing) {
  fake_device_options options = device_of(64);
  // A run up to the pause, to count its calls; then the same run with the pause's second
  // host_allocate failing.
  std::uint64_t calls_before_pause = 0;
  {
    fake_device gpu(options);
    runtime rt(gpu, small_chunks());
    filled(rt, "train", 10 * mib, 1);
    calls_before_pause = gpu.calls();
  }
  options.fail_call = calls_before_pause + 2;  // synchronize is not counted; the slabs are pinned first
  fake_device gpu(options);
  runtime rt(gpu, small_chunks());
  std::uint64_t train = filled(rt, "train", 10 * mib, 1);
  std::uint64_t used = gpu.used_bytes();
  EXPECT_TRUE(refused(rt.pause("train", keep_contents::host), runtime_errc::out_of_memory, "nothing paused"));
  EXPECT_FALSE(stats_of(rt.statistics(), "train").paused);
  EXPECT_EQ(gpu.used_bytes(), used);
  EXPECT_EQ(gpu.host_buffers(), 0u) << "the chunk pinned before the failure is freed";
  EXPECT_TRUE(holds(rt, train, 10 * mib, 1));
}

TEST(runtime, pause_and_resume_refuse_what_makes_no_sense) {
  fake_device gpu(device_of(64));
  runtime rt(gpu, small_chunks());
  EXPECT_EQ(rt.pause("nowhere", keep_contents::host).code(), runtime_errc::unknown_tag);
  filled(rt, "train", mib, 1);
  EXPECT_EQ(rt.resume("train").code(), runtime_errc::not_paused);
  ASSERT_TRUE(succeeded(rt.pause("train", keep_contents::discard)));
  EXPECT_EQ(rt.pause("train", keep_contents::host).code(), runtime_errc::already_paused);
  EXPECT_EQ(rt.allocate(0, 0).code(), runtime_errc::invalid_argument);
  EXPECT_EQ(rt.free(12345).code(), runtime_errc::unknown_pointer);
  EXPECT_EQ(rt.leave_region().code(), runtime_errc::invalid_argument) << "no region open";
}

TEST(runtime, counters_hold_current_peak_and_total_per_tag_and_overall) {
  fake_device gpu(device_of(64));
  runtime rt(gpu, small_chunks());
  std::uint64_t a = filled(rt, "train", 3 * mib, 1);
  std::uint64_t b = filled(rt, "train", 1000, 2);
  ASSERT_TRUE(succeeded(rt.free(a)));
  filled(rt, "default", 512, 3);
  std::vector<tag_statistics> all = rt.statistics();
  const tag_statistics& train = stats_of(all, "train");
  EXPECT_EQ(train.allocated_bytes.current, 1024u) << "1000 B rounds up to 1024";
  EXPECT_EQ(train.allocated_bytes.peak, 3 * mib + 1024);
  EXPECT_EQ(train.allocated_bytes.total, 3 * mib + 1024);
  EXPECT_EQ(train.allocations.current, 1u);
  EXPECT_EQ(train.allocations.total, 2u);
  EXPECT_EQ(train.mapped_bytes.peak, 4 * mib);
  EXPECT_EQ(train.mapped_bytes.current, 4 * mib) << "freed pages stay cached until empty_cache";
  ASSERT_TRUE(succeeded(rt.empty_cache()));
  EXPECT_EQ(stats_of(rt.statistics(), "train").mapped_bytes.current, 2 * mib);
  runtime_totals totals = rt.totals();
  EXPECT_EQ(totals.allocated_bytes.current, 1024u + 512u);
  EXPECT_EQ(totals.reserved_bytes.current, 4 * mib) << "a page for train's block and one for default's";
  EXPECT_EQ(totals.reserved_bytes.current, gpu.mapped_bytes());
  EXPECT_EQ(rt.current_tag(), "default");
  ASSERT_TRUE(succeeded(rt.free(b)));
}

TEST(runtime, out_of_memory_says_what_was_asked_and_what_the_device_has) {
  fake_device gpu(device_of(8));
  runtime rt(gpu, small_chunks());
  EXPECT_TRUE(refused(rt.allocate(10 * mib, 0), runtime_errc::out_of_memory, "10485760 bytes requested in tag 'default'"));
  EXPECT_EQ(rt.totals().ooms, 1u);
  EXPECT_EQ(gpu.used_bytes(), 0u) << "a failed request holds nothing";
}

TEST(runtime, threads_on_several_streams_and_tags_keep_their_contents) {
  fake_device gpu(device_of(256));
  runtime_options options = small_chunks();
  options.policy.reservation_bytes = 256 * mib;
  runtime rt(gpu, options);
  constexpr int threads = 4;
  std::vector<std::thread> workers;
  std::vector<int> bad(threads, 0);
  for (int worker = 0; worker < threads; ++worker) {
    workers.emplace_back([&, worker] {
      std::mt19937 random(static_cast<std::uint32_t>(worker));
      std::vector<std::pair<std::uint64_t, std::uint32_t>> mine;  // address, seed (size from seed)
      for (int step = 0; step < 200; ++step) {
        if (mine.size() > 6 || (!mine.empty() && random() % 3 == 0)) {
          auto [address, seed] = mine[random() % mine.size()];
          if (!holds(rt, address, (seed % 97 + 1) * 4099, seed)) ++bad[worker];
          if (!rt.free(address).ok()) ++bad[worker];
          mine.erase(std::find(mine.begin(), mine.end(), std::pair{address, seed}));
          continue;
        }
        auto seed = static_cast<std::uint32_t>(random());
        std::uint64_t size = (seed % 97 + 1) * 4099;
        auto made = rt.allocate(size, static_cast<std::uint64_t>(worker % 2));
        if (!made.ok()) {
          ++bad[worker];
          continue;
        }
        std::vector<std::uint8_t> bytes = pattern(size, seed);
        if (!rt.write(made.value(), bytes.data(), size).ok()) ++bad[worker];
        mine.emplace_back(made.value(), seed);
      }
      for (auto [address, seed] : mine) {
        if (!holds(rt, address, (seed % 97 + 1) * 4099, seed)) ++bad[worker];
        if (!rt.free(address).ok()) ++bad[worker];
      }
    });
  }
  for (auto& worker : workers) worker.join();
  EXPECT_EQ(std::accumulate(bad.begin(), bad.end(), 0), 0) << "a block lost its contents or a call failed";
  EXPECT_EQ(rt.totals().allocated_bytes.current, 0u);
}

TEST(runtime, library_memory_goes_to_its_own_tag_whatever_the_region_and_is_never_paused) {
  fake_device gpu(device_of(64));
  runtime rt(gpu, small_chunks());
  ASSERT_TRUE(succeeded(rt.enter_region("kv")));
  std::uint64_t workspace = 0;
  ASSERT_TRUE(succeeded(rt.allocate_for_library(32 * mib, 0), workspace));
  std::uint64_t cache = 0;
  ASSERT_TRUE(succeeded(rt.allocate(8 * mib, 0), cache));
  EXPECT_TRUE(succeeded(rt.leave_region()));
  std::vector<std::uint8_t> bytes = pattern(32 * mib, 11);
  ASSERT_TRUE(succeeded(rt.write(workspace, bytes.data(), bytes.size())));
  EXPECT_EQ(stats_of(rt.statistics(), runtime::library_tag).allocated_bytes.current, 32 * mib);
  EXPECT_EQ(stats_of(rt.statistics(), "kv").allocated_bytes.current, 8 * mib);

  ASSERT_TRUE(succeeded(rt.pause("kv", keep_contents::discard)));
  EXPECT_TRUE(holds(rt, workspace, 32 * mib, 11)) << "the workspace stays mapped and intact while 'kv' is paused";
  EXPECT_TRUE(refused(rt.pause(runtime::library_tag, keep_contents::host), runtime_errc::invalid_argument, "never paused"));

  EXPECT_EQ(rt.enter_region(runtime::library_tag).code(), runtime_errc::invalid_argument) << "no region may name it";
  EXPECT_EQ(rt.current_tag(), runtime::default_tag);
}

TEST(runtime, a_tag_holding_memory_that_may_be_a_librarys_is_not_paused_until_that_block_is_freed) {
  fake_device gpu(device_of(64));
  runtime rt(gpu, small_chunks());
  ASSERT_TRUE(succeeded(rt.enter_region("kv")));
  std::uint64_t tensor = 0;
  ASSERT_TRUE(succeeded(rt.allocate(8 * mib, 3), tensor));
  std::uint64_t maybe_workspace = 0;
  ASSERT_TRUE(succeeded(rt.allocate_unproven(32 * mib, 3, "a workspace's size, stack unread"), maybe_workspace));
  ASSERT_TRUE(succeeded(rt.leave_region()));
  EXPECT_EQ(stats_of(rt.statistics(), "kv").allocated_bytes.current, 40 * mib) << "it is the region's memory";

  std::uint64_t fences = gpu.fences();
  std::uint64_t unmaps = gpu.succeeded(device_op::unmap);
  auto pause = rt.pause("kv", keep_contents::discard);
  EXPECT_EQ(pause.code(), runtime_errc::invalid_argument);
  const std::string& why = pause.failure().detail;
  char where[64];
  std::snprintf(where, sizeof where, "at 0x%llx on stream 0x3", static_cast<unsigned long long>(maybe_workspace));
  for (std::string expected : {std::string("tag 'kv' is not paused"), std::to_string(32 * mib) + " bytes " + where,
                               std::string("a workspace's size, stack unread")}) {
    EXPECT_NE(why.find(expected), std::string::npos) << "expected \"" << expected << "\" in: " << why;
  }
  EXPECT_FALSE(stats_of(rt.statistics(), "kv").paused);
  EXPECT_EQ(gpu.succeeded(device_op::unmap), unmaps) << "a refused pause unmaps nothing";
  EXPECT_EQ(gpu.fences(), fences) << "nor fences the device";

  ASSERT_TRUE(succeeded(rt.free(maybe_workspace)));
  EXPECT_TRUE(succeeded(rt.pause("kv", keep_contents::discard)));
  EXPECT_TRUE(stats_of(rt.statistics(), "kv").paused);
}

TEST(runtime, a_block_a_graph_capture_allocated_is_kept_when_freed_until_the_graph_memory_is_released) {
  fake_device gpu(device_of(64));
  runtime rt(gpu, small_chunks());
  constexpr std::uint64_t capture_stream = 9;
  gpu.set_capturing(capture_stream, true);
  EXPECT_TRUE(succeeded(rt.enter_region("graph")));
  std::uint64_t intermediate = 0;
  ASSERT_TRUE(succeeded(rt.allocate(6 * mib, capture_stream), intermediate));
  std::uint64_t ordinary = 0;
  ASSERT_TRUE(succeeded(rt.allocate(2 * mib, 0), ordinary)) << "a stream not capturing";
  EXPECT_TRUE(succeeded(rt.leave_region()));
  gpu.set_capturing(capture_stream, false);
  std::vector<std::uint8_t> bytes = pattern(6 * mib, 12);
  ASSERT_TRUE(succeeded(rt.write(intermediate, bytes.data(), bytes.size())));

  ASSERT_TRUE(succeeded(rt.free(intermediate))) << "freed by the program during the capture";
  ASSERT_TRUE(succeeded(rt.free(ordinary)));
  EXPECT_EQ(rt.free(intermediate).code(), runtime_errc::unknown_pointer) << "a second free";
  EXPECT_EQ(stats_of(rt.statistics(), "graph").graph_held_bytes, 6 * mib);
  ASSERT_TRUE(succeeded(rt.empty_cache()));
  EXPECT_TRUE(holds(rt, intermediate, 6 * mib, 12)) << "a replay's memory stays mapped through empty_cache";
  ASSERT_TRUE(succeeded(rt.pause("graph", keep_contents::host)));
  ASSERT_TRUE(succeeded(rt.resume("graph")));
  EXPECT_TRUE(holds(rt, intermediate, 6 * mib, 12)) << "and comes back bit-exact at the same address after a pause";

  ASSERT_TRUE(succeeded(rt.release_graph_memory("graph")));
  EXPECT_EQ(stats_of(rt.statistics(), "graph").graph_held_bytes, 0u);
  EXPECT_EQ(stats_of(rt.statistics(), "graph").allocated_bytes.current, 0u);
  ASSERT_TRUE(succeeded(rt.empty_cache()));
  EXPECT_EQ(gpu.used_bytes(), 0u);
}

runtime_options checking() {
  runtime_options options = small_chunks();
  options.check_contents = true;
  return options;
}

TEST(runtime, in_the_checking_mode_paused_memory_reads_as_nan_bytes_and_a_write_into_it_is_counted) {
  fake_device gpu(device_of(64));
  runtime rt(gpu, checking());
  std::uint64_t weights = filled(rt, "train", 10 * mib, 13);
  std::uint64_t used_before = gpu.used_bytes();
  ASSERT_TRUE(succeeded(rt.pause("train", keep_contents::host)));
  EXPECT_EQ(gpu.used_bytes(), used_before - 10 * mib + 2 * mib) << "the memory goes back but for one check page";
  std::vector<std::uint8_t> seen(10 * mib);
  ASSERT_TRUE(succeeded(rt.read(weights, seen.data(), seen.size()))) << "a read while paused does not fault";
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](std::uint8_t byte) { return byte == 0xFF; }));
  std::uint8_t stray = 1;
  ASSERT_TRUE(succeeded(rt.write(weights + 5 * mib, &stray, 1)));
  ASSERT_TRUE(succeeded(rt.resume("train")));
  EXPECT_EQ(stats_of(rt.statistics(), "train").writes_while_paused, 1u);
  EXPECT_TRUE(holds(rt, weights, 10 * mib, 13)) << "the backup, not the stray write, comes back";
  ASSERT_TRUE(succeeded(rt.pause("train", keep_contents::host)));
  ASSERT_TRUE(succeeded(rt.resume("train")));
  EXPECT_EQ(stats_of(rt.statistics(), "train").writes_while_paused, 1u) << "a clean pause counts nothing";
}

TEST(runtime, in_the_checking_mode_weights_discarded_and_not_loaded_again_are_named) {
  fake_device gpu(device_of(64));
  runtime rt(gpu, checking());
  std::uint64_t loaded = filled(rt, "weights", 4 * mib, 14);
  std::uint64_t forgotten = filled(rt, "weights", 6 * mib, 15);
  ASSERT_TRUE(succeeded(rt.pause("weights", keep_contents::discard)));
  ASSERT_TRUE(succeeded(rt.resume("weights")));
  std::vector<std::uint8_t> reloaded = pattern(4 * mib, 14);
  ASSERT_TRUE(succeeded(rt.write(loaded, reloaded.data(), reloaded.size())));
  auto found = rt.blocks_still_filled("weights");
  ASSERT_TRUE(succeeded(found));
  const std::vector<address_run>& still = found.value();
  ASSERT_EQ(still.size(), 1u);
  EXPECT_EQ(still[0].address, forgotten);
  EXPECT_EQ(still[0].bytes, 6 * mib);
  EXPECT_EQ(gpu.used_bytes(), 10 * mib + 2 * mib) << "the check page stays for the next pause";
}

TEST(runtime, every_device_call_is_counted_and_timed) {
  fake_device gpu(device_of(128));
  runtime rt(gpu, small_chunks());
  filled(rt, "train", 64 * mib, 16);
  runtime_totals totals = rt.totals();
  EXPECT_EQ(totals.device_calls[device_op::map].calls, 2u) << "64 MiB from a page boundary: two 32 MiB runs";
  EXPECT_EQ(totals.device_calls[device_op::create].calls, 2u);
  ASSERT_TRUE(succeeded(rt.pause("train", keep_contents::discard)));
  totals = rt.totals();
  EXPECT_EQ(totals.device_calls[device_op::unmap].calls, 2u);
  EXPECT_EQ(totals.device_calls[device_op::synchronize].calls, 1u) << "one fence for the pause";
  EXPECT_GE(totals.device_calls[device_op::map].seconds, 0.0);
}

// The fake, but waits for a backup's copy only once the test says so, and lets the runtime wait
// without its lock: a pause that held the lock across its copies would keep the test's other
// thread from allocating (it gives up after 10 s and the test fails).
class copy_waiting_device final : public device {
 public:
  explicit copy_waiting_device(fake_device& inner) : inner_(inner) {}
  std::future<void> pause_waits() { return waiting_.get_future(); }
  void let_copies_finish() { go_.set_value(); }

  const device_config& config() const noexcept override { return inner_.config(); }
  device_errc reserve(std::uint64_t s, std::uint64_t r, std::uint64_t& a) noexcept override { return inner_.reserve(s, r, a); }
  device_errc free_reservation(std::uint64_t a, std::uint64_t s) noexcept override { return inner_.free_reservation(a, s); }
  device_errc create(std::uint64_t s, physical_handle& h) noexcept override { return inner_.create(s, h); }
  device_errc release(physical_handle h) noexcept override { return inner_.release(h); }
  device_errc map(std::uint64_t a, std::uint64_t s, physical_handle h) noexcept override { return inner_.map(a, s, h); }
  device_errc set_access(std::uint64_t a, std::uint64_t s) noexcept override { return inner_.set_access(a, s); }
  device_errc unmap(std::uint64_t a, std::uint64_t s) noexcept override { return inner_.unmap(a, s); }
  device_errc memory_info(std::uint64_t& f, std::uint64_t& t) noexcept override { return inner_.memory_info(f, t); }
  device_errc copy_to_host(void* d, std::uint64_t s, std::uint64_t n) noexcept override { return inner_.copy_to_host(d, s, n); }
  device_errc copy_from_host(std::uint64_t d, const void* s, std::uint64_t n) noexcept override { return inner_.copy_from_host(d, s, n); }
  device_errc synchronize() noexcept override { return inner_.synchronize(); }
  device_errc host_allocate(std::uint64_t s, void*& h) noexcept override { return inner_.host_allocate(s, h); }
  device_errc host_free(void* h) noexcept override { return inner_.host_free(h); }
  device_errc copy_to_host_async(void* d, std::uint64_t s, std::uint64_t n) noexcept override { return inner_.copy_to_host_async(d, s, n); }
  device_errc copy_from_host_async(std::uint64_t d, const void* s, std::uint64_t n) noexcept override {
    return inner_.copy_from_host_async(d, s, n);
  }
  device_errc fill_async(std::uint64_t d, std::uint64_t s, std::uint8_t v) noexcept override { return inner_.fill_async(d, s, v); }
  device_errc wait_copies() noexcept override { return inner_.wait_copies(); }
  device_errc mark_copies(std::uint64_t& m) noexcept override { return inner_.mark_copies(m); }
  device_errc wait_mark(std::uint64_t m) noexcept override {
    if (first_wait_) {
      first_wait_ = false;
      waiting_.set_value();
      go_.get_future().wait();
    }
    return inner_.wait_mark(m);
  }
  bool concurrent_wait() const noexcept override { return true; }
  bool stream_capturing(std::uint64_t s) noexcept override { return inner_.stream_capturing(s); }

 private:
  fake_device& inner_;
  std::promise<void> waiting_;
  std::promise<void> go_;
  bool first_wait_ = true;
};

TEST(runtime, another_thread_allocates_while_a_pause_waits_for_its_copies) {
  fake_device fake(device_of(64));
  copy_waiting_device gpu(fake);
  runtime rt(gpu, small_chunks());
  std::uint64_t weights = filled(rt, "train", 12 * mib, 17);
  std::future<void> waiting = gpu.pause_waits();
  std::future<result<void, runtime_errc>> paused = std::async(std::launch::async, [&] { return rt.pause("train", keep_contents::host); });
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "the pause never waited for a copy";
  std::future<result<std::uint64_t, runtime_errc>> allocated = std::async(std::launch::async, [&] {
    return rt.allocate(2 * mib, 0);  // in "default", while "train" is being paused
  });
  bool allocated_meanwhile = allocated.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  EXPECT_EQ(rt.resume("train").code(), runtime_errc::not_paused) << "no resume while the pause is under way";
  gpu.let_copies_finish();
  ASSERT_TRUE(allocated_meanwhile) << "the allocation waited for the pause's copies: the lock was held across them";
  EXPECT_TRUE(succeeded(allocated.get()));
  ASSERT_TRUE(succeeded(paused.get()));
  ASSERT_TRUE(succeeded(rt.resume("train")));
  EXPECT_TRUE(holds(rt, weights, 12 * mib, 17));
}

}  // namespace
}  // namespace rlmem
