// SPDX-License-Identifier: MIT
// One conformance suite for every device (RMM's typed suites): what the seam promises, run on the
// fake device here and on CUDA's driver where a GPU is present (skipped, with the reason, where not).

#include <rlmem/device/cuda_device.hpp>
#include <rlmem/device/fake_device.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace rlmem {
namespace {

struct fake_host_backed {
  static std::unique_ptr<device> open(std::string&) {
    fake_device_options options;
    options.host_backed = true;
    options.total_bytes = std::uint64_t{1} << 30;
    return std::make_unique<fake_device>(options);
  }
};

struct cuda_gpu0 {
  static std::unique_ptr<device> open(std::string& why) {
    auto opened = open_cuda_device(0);
    if (!opened.ok()) {
      why = opened.failure().detail;
      return nullptr;
    }
    return std::move(opened).value();
  }
};

template <typename Device>
class device_conformance : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    device_ = Device::open(why);
    if (!device_) GTEST_SKIP() << "no device to test: " << why;
    granularity_ = device_->config().granularity;
  }

  // A reservation of `pages` granules; released by the test.
  std::uint64_t reserve(std::uint64_t pages) {
    std::uint64_t address = 0;
    EXPECT_EQ(device_->reserve(pages * granularity_, 0, address), device_errc::ok);
    return address;
  }

  physical_handle create(std::uint64_t pages) {
    physical_handle handle = 0;
    EXPECT_EQ(device_->create(pages * granularity_, handle), device_errc::ok);
    return handle;
  }

  std::unique_ptr<device> device_;
  std::uint64_t granularity_ = 0;
};

using devices = ::testing::Types<fake_host_backed, cuda_gpu0>;
class device_names {
 public:
  template <typename T>
  static std::string GetName(int) {
    return std::is_same_v<T, fake_host_backed> ? "fake" : "cuda";
  }
};
TYPED_TEST_SUITE(device_conformance, devices, device_names);

TYPED_TEST(device_conformance, describes_itself) {
  const device_config& config = this->device_->config();
  EXPECT_GT(config.granularity, 0u);
  EXPECT_EQ(config.granularity & (config.granularity - 1), 0u) << "a power of two, saw " << config.granularity;
  EXPECT_GT(config.total_bytes, config.granularity);
  std::uint64_t free_bytes = 0;
  std::uint64_t total_bytes = 0;
  ASSERT_EQ(this->device_->memory_info(free_bytes, total_bytes), device_errc::ok);
  EXPECT_LE(free_bytes, total_bytes);
}

// One handle mapped at two addresses: both see the same memory, which stays until the handle is
// released and both mappings are gone (the runtime's checking mode maps one poison page under
// every paused page).
TYPED_TEST(device_conformance, maps_one_handle_at_two_addresses) {
  device& gpu = *this->device_;
  std::uint64_t page = this->granularity_;
  std::uint64_t base = this->reserve(2);
  physical_handle handle = this->create(1);
  ASSERT_EQ(gpu.map(base, page, handle), device_errc::ok);
  ASSERT_EQ(gpu.map(base + page, page, handle), device_errc::ok);
  ASSERT_EQ(gpu.set_access(base, 2 * page), device_errc::ok);
  std::vector<std::byte> written(page, std::byte{0x5a});
  ASSERT_EQ(gpu.copy_from_host(base, written.data(), page), device_errc::ok);
  std::vector<std::byte> seen(page);
  ASSERT_EQ(gpu.copy_to_host(seen.data(), base + page, page), device_errc::ok);
  EXPECT_EQ(seen, written) << "a write through the first mapping is read through the second";
  ASSERT_EQ(gpu.release(handle), device_errc::ok);
  ASSERT_EQ(gpu.unmap(base, page), device_errc::ok);
  ASSERT_EQ(gpu.copy_to_host(seen.data(), base + page, page), device_errc::ok) << "the other mapping still holds the memory";
  EXPECT_EQ(seen, written);
  ASSERT_EQ(gpu.unmap(base + page, page), device_errc::ok);
  EXPECT_EQ(gpu.free_reservation(base, 2 * page), device_errc::ok);
}

// Two handles mapped side by side read and write as one range, before and after the release of
// their handles (memory lives until it is unmapped), and everything goes back.
TYPED_TEST(device_conformance, mapped_pages_hold_what_was_copied_in) {
  device& gpu = *this->device_;
  const std::uint64_t page = this->granularity_;
  std::uint64_t base = this->reserve(4);
  physical_handle first = this->create(1);
  physical_handle second = this->create(1);
  ASSERT_EQ(gpu.map(base, page, first), device_errc::ok);
  ASSERT_EQ(gpu.map(base + page, page, second), device_errc::ok);
  ASSERT_EQ(gpu.set_access(base, 2 * page), device_errc::ok);

  std::vector<std::uint8_t> written(2 * page);
  std::iota(written.begin(), written.end(), std::uint8_t{7});
  ASSERT_EQ(gpu.copy_from_host(base, written.data(), written.size()), device_errc::ok);
  ASSERT_EQ(gpu.release(first), device_errc::ok);
  ASSERT_EQ(gpu.release(second), device_errc::ok);
  std::vector<std::uint8_t> read(2 * page);
  ASSERT_EQ(gpu.copy_to_host(read.data(), base, read.size()), device_errc::ok);
  EXPECT_EQ(read, written) << "the pages' bytes after a round trip through the device";
  // A window across the boundary of the two mappings.
  std::vector<std::uint8_t> window(64);
  ASSERT_EQ(gpu.copy_to_host(window.data(), base + page - 32, window.size()), device_errc::ok);
  EXPECT_TRUE(std::equal(window.begin(), window.end(), written.begin() + static_cast<std::ptrdiff_t>(page - 32)));

  EXPECT_EQ(gpu.unmap(base, page), device_errc::ok);
  EXPECT_EQ(gpu.unmap(base + page, page), device_errc::ok);
  EXPECT_EQ(gpu.free_reservation(base, 4 * page), device_errc::ok);
}

// The same addresses take new memory after an unmap: what pause and resume do.
TYPED_TEST(device_conformance, an_unmapped_range_maps_again_at_the_same_address) {
  device& gpu = *this->device_;
  const std::uint64_t page = this->granularity_;
  std::uint64_t base = this->reserve(1);
  for (int round = 0; round < 3; ++round) {
    physical_handle handle = this->create(1);
    ASSERT_EQ(gpu.map(base, page, handle), device_errc::ok) << "round " << round;
    ASSERT_EQ(gpu.set_access(base, page), device_errc::ok) << "round " << round;
    std::vector<std::uint8_t> marker(256, static_cast<std::uint8_t>(round + 1));
    ASSERT_EQ(gpu.copy_from_host(base, marker.data(), marker.size()), device_errc::ok);
    std::vector<std::uint8_t> back(256);
    ASSERT_EQ(gpu.copy_to_host(back.data(), base, back.size()), device_errc::ok);
    EXPECT_EQ(back, marker) << "round " << round;
    ASSERT_EQ(gpu.unmap(base, page), device_errc::ok);
    ASSERT_EQ(gpu.release(handle), device_errc::ok);
  }
  EXPECT_EQ(gpu.free_reservation(base, page), device_errc::ok);
}

// Pinned host memory and the copy stream: a backup out, a fill, and a restore in, each enqueued
// and then waited for, as pause and resume use them.
TYPED_TEST(device_conformance, async_copies_and_fills_on_the_copy_stream_round_trip_through_pinned_memory) {
  device& gpu = *this->device_;
  const std::uint64_t page = this->granularity_;
  std::uint64_t base = this->reserve(2);
  physical_handle first = this->create(1);
  physical_handle second = this->create(1);
  ASSERT_EQ(gpu.map(base, page, first), device_errc::ok);
  ASSERT_EQ(gpu.map(base + page, page, second), device_errc::ok);
  ASSERT_EQ(gpu.set_access(base, 2 * page), device_errc::ok);
  void* pinned = nullptr;
  ASSERT_EQ(gpu.host_allocate(2 * page, pinned), device_errc::ok);
  auto* bytes = static_cast<std::uint8_t*>(pinned);
  std::iota(bytes, bytes + 2 * page, std::uint8_t{3});
  std::vector<std::uint8_t> written(bytes, bytes + 2 * page);

  ASSERT_EQ(gpu.copy_from_host_async(base, pinned, 2 * page), device_errc::ok);
  ASSERT_EQ(gpu.wait_copies(), device_errc::ok);
  std::fill(bytes, bytes + 2 * page, std::uint8_t{0});
  std::uint64_t mark = 0;
  ASSERT_EQ(gpu.copy_to_host_async(pinned, base, 2 * page), device_errc::ok);
  ASSERT_EQ(gpu.mark_copies(mark), device_errc::ok);
  ASSERT_EQ(gpu.wait_mark(mark), device_errc::ok);
  EXPECT_TRUE(std::equal(written.begin(), written.end(), bytes)) << "two mappings copied out and back as one range";

  ASSERT_EQ(gpu.fill_async(base + page, page, 0x5A), device_errc::ok);
  ASSERT_EQ(gpu.copy_to_host_async(pinned, base, 2 * page), device_errc::ok);
  ASSERT_EQ(gpu.wait_copies(), device_errc::ok);
  EXPECT_TRUE(std::equal(written.begin(), written.begin() + static_cast<std::ptrdiff_t>(page), bytes)) << "the first page is untouched";
  EXPECT_TRUE(std::all_of(bytes + page, bytes + 2 * page, [](std::uint8_t byte) { return byte == 0x5A; })) << "the second is filled";

  EXPECT_EQ(gpu.synchronize(), device_errc::ok);
  EXPECT_EQ(gpu.host_free(pinned), device_errc::ok);
  EXPECT_EQ(gpu.unmap(base, page), device_errc::ok);
  EXPECT_EQ(gpu.unmap(base + page, page), device_errc::ok);
  EXPECT_EQ(gpu.release(first), device_errc::ok);
  EXPECT_EQ(gpu.release(second), device_errc::ok);
  EXPECT_EQ(gpu.free_reservation(base, 2 * page), device_errc::ok);
}

// A reservation starts at the requested address where that range is free (replay places memory
// where the recording had it, as cuMemAddressReserve's hint does); where a reservation holds
// part of it, or the address is misaligned, the device places it elsewhere, overlapping nothing.
TYPED_TEST(device_conformance, a_reservation_starts_at_the_requested_address_when_that_range_is_free) {
  device& gpu = *this->device_;
  const std::uint64_t page = this->granularity_;
  std::uint64_t base = this->reserve(4);
  ASSERT_EQ(gpu.free_reservation(base, 4 * page), device_errc::ok);
  std::uint64_t at = 0;
  ASSERT_EQ(gpu.reserve(2 * page, base + page, at), device_errc::ok);
  EXPECT_EQ(at, base + page) << "a free range, asked for";
  std::uint64_t elsewhere = 0;
  ASSERT_EQ(gpu.reserve(2 * page, base, elsewhere), device_errc::ok);
  EXPECT_TRUE(elsewhere + 2 * page <= at || elsewhere >= at + 2 * page) << "asked for a range that overlaps one reserved";
  EXPECT_EQ(elsewhere % page, 0u);
  std::uint64_t misaligned = 0;
  ASSERT_EQ(gpu.reserve(page, base + page / 2, misaligned), device_errc::ok);
  EXPECT_EQ(misaligned % page, 0u) << "a misaligned address is no request";
  EXPECT_TRUE(misaligned + page <= at || misaligned >= at + 2 * page);
  // The requested range is a reservation like any other.
  physical_handle handle = this->create(1);
  ASSERT_EQ(gpu.map(at + page, page, handle), device_errc::ok);
  ASSERT_EQ(gpu.set_access(at + page, page), device_errc::ok);
  EXPECT_EQ(gpu.unmap(at + page, page), device_errc::ok);
  EXPECT_EQ(gpu.release(handle), device_errc::ok);
  EXPECT_EQ(gpu.free_reservation(at, 2 * page), device_errc::ok);
  EXPECT_EQ(gpu.free_reservation(elsewhere, 2 * page), device_errc::ok);
  EXPECT_EQ(gpu.free_reservation(misaligned, page), device_errc::ok);
}

// Preconditions the seam states are refused with invalid_argument, and refusing changes nothing.
TYPED_TEST(device_conformance, broken_preconditions_are_refused) {
  device& gpu = *this->device_;
  const std::uint64_t page = this->granularity_;
  std::uint64_t address = 0;
  physical_handle handle = 0;
  EXPECT_EQ(gpu.reserve(0, 0, address), device_errc::invalid_argument);
  EXPECT_EQ(gpu.reserve(page + 1, 0, address), device_errc::invalid_argument);
  EXPECT_EQ(gpu.create(0, handle), device_errc::invalid_argument);
  EXPECT_EQ(gpu.create(page / 2, handle), device_errc::invalid_argument);

  std::uint64_t base = this->reserve(4);
  physical_handle two_pages = this->create(2);
  EXPECT_EQ(gpu.map(base + 1, 2 * page, two_pages), device_errc::invalid_argument) << "misaligned";
  ASSERT_EQ(gpu.map(base, 2 * page, two_pages), device_errc::ok);
  physical_handle other = this->create(1);
  EXPECT_EQ(gpu.map(base + page, page, other), device_errc::invalid_argument) << "onto a mapped page";
  EXPECT_EQ(gpu.unmap(base, page), device_errc::invalid_argument) << "part of a mapping";
  EXPECT_EQ(gpu.unmap(base, 2 * page), device_errc::ok) << "the refusals changed nothing";
  EXPECT_EQ(gpu.release(two_pages), device_errc::ok);
  EXPECT_EQ(gpu.release(other), device_errc::ok);
  EXPECT_EQ(gpu.free_reservation(base, 4 * page), device_errc::ok);
}

}  // namespace
}  // namespace rlmem
