// SPDX-License-Identifier: MIT
// What only the fake device does: a capacity, deterministic addresses, failure at the Nth call,
// a log, fresh pages that are not zero, and every precondition the driver leaves undefined.

#include <rlmem/device/fake_device.hpp>

#include <gtest/gtest.h>

#include <utility>

#include <vector>

namespace rlmem {
namespace {

constexpr std::uint64_t mib = std::uint64_t{1} << 20;

fake_device_options small_device() {
  fake_device_options options;
  options.total_bytes = 8 * mib;
  options.granularity = 2 * mib;
  options.address_base = 0x10000000;
  return options;
}

// Free and total bytes as the fake reports them.
std::pair<std::uint64_t, std::uint64_t> memory_of(fake_device& gpu) {
  std::uint64_t free_bytes = 0;
  std::uint64_t total_bytes = 0;
  EXPECT_EQ(gpu.memory_info(free_bytes, total_bytes), device_errc::ok);
  return {free_bytes, total_bytes};
}

// A reservation of `reserved_mib` with one 2 MiB handle mapped at its start; returns its address.
std::uint64_t one_page_mapped(fake_device& gpu, std::uint64_t reserved_mib) {
  std::uint64_t base = 0;
  physical_handle handle = 0;
  EXPECT_EQ(gpu.reserve(reserved_mib * mib, 0, base), device_errc::ok);
  EXPECT_EQ(gpu.create(2 * mib, handle), device_errc::ok);
  EXPECT_EQ(gpu.map(base, 2 * mib, handle), device_errc::ok);
  return base;
}

TEST(fake_device, physical_memory_is_bounded_by_its_capacity_and_comes_back_on_release_and_unmap) {
  fake_device gpu(small_device());
  physical_handle a = 0;
  physical_handle b = 0;
  ASSERT_EQ(gpu.create(6 * mib, a), device_errc::ok);
  EXPECT_EQ(gpu.create(4 * mib, b), device_errc::out_of_memory) << "6 + 4 MiB on an 8 MiB device";
  EXPECT_EQ(memory_of(gpu), (std::pair{2 * mib, 8 * mib})) << "free and total";

  std::uint64_t base = 0;
  ASSERT_EQ(gpu.reserve(6 * mib, 0, base), device_errc::ok);
  ASSERT_EQ(gpu.map(base, 6 * mib, a), device_errc::ok);
  ASSERT_EQ(gpu.release(a), device_errc::ok);
  EXPECT_EQ(gpu.used_bytes(), 6 * mib) << "released but mapped: the memory is still held";
  EXPECT_EQ(gpu.release(a), device_errc::invalid_argument) << "a second release";
  ASSERT_EQ(gpu.unmap(base, 6 * mib), device_errc::ok);
  EXPECT_EQ(gpu.used_bytes(), 0u);
  EXPECT_EQ(gpu.live_handles(), 0u);
  EXPECT_EQ(gpu.create(8 * mib, b), device_errc::ok);
}

TEST(fake_device, it_counts_the_calls_of_each_primitive_that_succeeded) {
  fake_device gpu(small_device());
  std::uint64_t address = 0;
  ASSERT_EQ(gpu.reserve(4 * mib, 0, address), device_errc::ok);
  physical_handle handle = 0;
  ASSERT_EQ(map_new_memory(gpu, address, 2 * mib, handle), device_errc::ok);
  physical_handle too_large = 0;
  EXPECT_EQ(gpu.create(16 * mib, too_large), device_errc::out_of_memory);
  EXPECT_EQ(gpu.unmap(address + 2 * mib, 2 * mib), device_errc::invalid_argument) << "nothing mapped there";
  ASSERT_EQ(gpu.synchronize(), device_errc::ok);
  ASSERT_EQ(gpu.unmap(address, 2 * mib), device_errc::ok);
  ASSERT_EQ(gpu.release(handle), device_errc::ok);
  EXPECT_EQ(gpu.succeeded(device_op::reserve), 1u);
  EXPECT_EQ(gpu.succeeded(device_op::create), 1u) << "the refused create is not counted";
  EXPECT_EQ(gpu.succeeded(device_op::map), 1u);
  EXPECT_EQ(gpu.succeeded(device_op::set_access), 1u);
  EXPECT_EQ(gpu.succeeded(device_op::unmap), 1u) << "the refused unmap is not counted";
  EXPECT_EQ(gpu.succeeded(device_op::release), 1u);
  EXPECT_EQ(gpu.succeeded(device_op::synchronize), 1u);
  EXPECT_EQ(gpu.succeeded(device_op::free_reservation), 0u);
}

TEST(fake_device, addresses_are_deterministic_and_never_reused) {
  fake_device gpu(small_device());
  std::uint64_t first = 0;
  std::uint64_t second = 0;
  std::uint64_t third = 0;
  ASSERT_EQ(gpu.reserve(4 * mib, 0, first), device_errc::ok);
  ASSERT_EQ(gpu.reserve(2 * mib, 0, second), device_errc::ok);
  EXPECT_EQ(first, 0x10000000u);
  EXPECT_EQ(second, 0x10000000u + 4 * mib);
  ASSERT_EQ(gpu.free_reservation(first, 4 * mib), device_errc::ok);
  ASSERT_EQ(gpu.reserve(4 * mib, 0, third), device_errc::ok);
  EXPECT_EQ(third, second + 2 * mib) << "a freed range is not handed out again";
  EXPECT_EQ(gpu.free_reservation(first, 4 * mib), device_errc::invalid_argument) << "freed twice";
  EXPECT_EQ(gpu.free_reservation(third, 2 * mib), device_errc::invalid_argument) << "not the reserved size";
}

// A requested address is honoured anywhere (replay asks for recorded addresses, below the base
// or above it); addresses handed out without one step past the reservations in their way, and
// the address space bounds them alone.
TEST(fake_device, requested_addresses_are_taken_anywhere_free_and_others_step_past_them) {
  fake_device_options options = small_device();
  options.address_space_bytes = 16 * mib;
  fake_device gpu(options);
  std::uint64_t low = 0;
  ASSERT_EQ(gpu.reserve(2 * mib, 0x200000, low), device_errc::ok);
  EXPECT_EQ(low, 0x200000u) << "below the base";
  std::uint64_t in_the_way = 0;
  ASSERT_EQ(gpu.reserve(4 * mib, 0x10000000 + 2 * mib, in_the_way), device_errc::ok);
  EXPECT_EQ(in_the_way, 0x10000000u + 2 * mib);
  std::uint64_t first = 0;
  std::uint64_t second = 0;
  ASSERT_EQ(gpu.reserve(2 * mib, 0, first), device_errc::ok);
  EXPECT_EQ(first, 0x10000000u) << "fits below the requested one";
  ASSERT_EQ(gpu.reserve(2 * mib, 0, second), device_errc::ok);
  EXPECT_EQ(second, 0x10000000u + 6 * mib) << "steps past the requested one";
  std::uint64_t taken = 0;
  ASSERT_EQ(gpu.reserve(2 * mib, 0x10000000 + 3 * mib, taken), device_errc::ok);
  EXPECT_EQ(taken, 0x10000000u + 8 * mib) << "misaligned: where it would have gone without one";
  ASSERT_EQ(gpu.reserve(2 * mib, 0x10000000 + 4 * mib, taken), device_errc::ok);
  EXPECT_EQ(taken, 0x10000000u + 10 * mib) << "overlapping a reservation: the same";
  std::uint64_t far = 0;
  ASSERT_EQ(gpu.reserve(2 * mib, std::uint64_t{1} << 60, far), device_errc::ok);
  EXPECT_EQ(far, std::uint64_t{1} << 60) << "above the address space: requested addresses are not bounded by it";
  std::uint64_t last = 0;
  EXPECT_EQ(gpu.reserve(8 * mib, 0, last), device_errc::out_of_memory) << "12 MiB of 16 used";
  EXPECT_EQ(gpu.reserve(4 * mib, 0, last), device_errc::ok);
  EXPECT_EQ(gpu.reserve(4 * mib, UINT64_MAX - 2 * mib + 1, last), device_errc::out_of_memory) << "a requested range that wraps is no request";
}

// A recorded oom tells how much memory the device had free: the fake takes it as its own.
TEST(fake_device, free_memory_can_be_set_as_another_process_would_change_it) {
  fake_device gpu(small_device());
  physical_handle a = 0;
  physical_handle b = 0;
  ASSERT_EQ(gpu.create(4 * mib, a), device_errc::ok);
  gpu.set_free_bytes(2 * mib);
  EXPECT_EQ(gpu.create(4 * mib, b), device_errc::out_of_memory) << "2 MiB free";
  EXPECT_EQ(memory_of(gpu), (std::pair{2 * mib, 6 * mib})) << "free and total";
  gpu.set_free_bytes(UINT64_MAX);
  EXPECT_EQ(gpu.create(64 * mib, b), device_errc::ok) << "more than the device had: the total saturates";
}

TEST(fake_device, the_nth_call_fails_with_out_of_memory_and_changes_nothing) {
  fake_device_options options = small_device();
  options.fail_call = 3;
  options.keep_log = true;
  fake_device gpu(options);
  std::uint64_t base = 0;
  physical_handle handle = 0;
  ASSERT_EQ(gpu.reserve(2 * mib, 0, base), device_errc::ok);              // call 1
  ASSERT_EQ(gpu.create(2 * mib, handle), device_errc::ok);                 // call 2
  EXPECT_EQ(gpu.map(base, 2 * mib, handle), device_errc::out_of_memory);  // call 3
  EXPECT_EQ(gpu.mapped_bytes(), 0u);
  EXPECT_EQ(gpu.map(base, 2 * mib, handle), device_errc::ok) << "the failed map left nothing behind";
  const std::vector<device_call> expected{
      {device_op::reserve, base, 2 * mib, 0, device_errc::ok},
      {device_op::create, 0, 2 * mib, handle, device_errc::ok},
      {device_op::map, base, 2 * mib, handle, device_errc::out_of_memory},
      {device_op::map, base, 2 * mib, handle, device_errc::ok},
  };
  EXPECT_EQ(gpu.log(), expected);
  EXPECT_EQ(gpu.calls(), 4u);
}

TEST(fake_device, new_pages_hold_a_pattern_and_need_access_before_use) {
  fake_device_options options = small_device();
  options.host_backed = true;
  fake_device gpu(options);
  std::uint64_t base = one_page_mapped(gpu, 4);
  std::vector<std::byte> read(16);
  EXPECT_EQ(gpu.copy_to_host(read.data(), base, read.size()), device_errc::invalid_argument) << "no access set yet";
  ASSERT_EQ(gpu.set_access(base, 2 * mib), device_errc::ok);
  ASSERT_EQ(gpu.copy_to_host(read.data(), base, read.size()), device_errc::ok);
  EXPECT_EQ(read, std::vector<std::byte>(16, fake_device::fresh_page_byte)) << "fresh pages are not zero";
  EXPECT_EQ(gpu.copy_to_host(read.data(), base + 2 * mib - 8, read.size()), device_errc::invalid_argument) << "runs past the mapping";
  EXPECT_EQ(gpu.set_access(base, 4 * mib), device_errc::invalid_argument) << "half of it is not mapped";
  EXPECT_EQ(gpu.free_reservation(base, 4 * mib), device_errc::invalid_argument) << "a page is still mapped";
}

TEST(fake_device, copies_need_host_backed_pages) {
  fake_device gpu(small_device());
  std::uint64_t base = one_page_mapped(gpu, 2);
  ASSERT_EQ(gpu.set_access(base, 2 * mib), device_errc::ok);
  std::vector<std::byte> bytes(8);
  EXPECT_EQ(gpu.copy_to_host(bytes.data(), base, bytes.size()), device_errc::not_supported);
  EXPECT_EQ(gpu.copy_from_host(base, bytes.data(), bytes.size()), device_errc::not_supported);
}

TEST(fake_device, a_handle_maps_only_at_its_size_inside_a_reservation_over_nothing_mapped) {
  fake_device gpu(small_device());
  std::uint64_t base = 0;
  physical_handle handle = 0;
  ASSERT_EQ(gpu.reserve(4 * mib, 0, base), device_errc::ok);
  ASSERT_EQ(gpu.create(2 * mib, handle), device_errc::ok);
  EXPECT_EQ(gpu.map(base, 4 * mib, handle), device_errc::invalid_argument) << "not the handle's size";
  EXPECT_EQ(gpu.map(base + 4 * mib, 2 * mib, handle), device_errc::invalid_argument) << "outside the reservation";
  EXPECT_EQ(gpu.map(base + 2 * mib, 2 * mib, 12345), device_errc::invalid_argument) << "no such handle";
  ASSERT_EQ(gpu.map(base, 2 * mib, handle), device_errc::ok);
  EXPECT_EQ(gpu.map(base, 2 * mib, handle), device_errc::invalid_argument) << "over a mapping";
  EXPECT_EQ(gpu.map(base + 2 * mib, 2 * mib, handle), device_errc::ok) << "a second address for the same handle";
}

}  // namespace
}  // namespace rlmem
