// SPDX-License-Identifier: MIT
// The device seam's error table has one distinct NAME and a message per code, and real refusals
// carry the expected code.

#include "error_table_checks.hpp"

#include <rlmem/device/cuda_device.hpp>
#include <rlmem/device/fake_device.hpp>

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace rlmem {
namespace {

TEST(device_errors, every_code_has_a_distinct_name_and_a_message) {
  testing::expect_every_code_named<device_errc>();
  EXPECT_EQ(error_name(device_errc::ok), "OK");
  EXPECT_EQ(error_name(device_errc::out_of_memory), "OUT_OF_MEMORY");
  EXPECT_EQ(error_message(device_errc::count_), "unknown error");
}

TEST(device_errors, refusals_of_the_fake_device_carry_their_codes) {
  fake_device_options options;
  options.total_bytes = 4 * options.granularity;
  fake_device gpu(options);
  std::uint64_t address = 0;
  EXPECT_EQ(gpu.reserve(options.granularity + 1, 0, address), device_errc::invalid_argument) << "a size off the granularity";
  physical_handle handle = 0;
  EXPECT_EQ(gpu.create(8 * options.granularity, handle), device_errc::out_of_memory) << "more than the device holds";
}

// Without a GPU (this machine) the failure is a code and one line; with one, a device.
TEST(device_errors, opening_cuda_fails_with_a_code_and_one_line_or_opens) {
  auto opened = open_cuda_device(0);
  if (opened.ok()) {
    EXPECT_EQ(opened.code(), device_errc::ok);
    EXPECT_NE(opened.value(), nullptr);
    return;
  }
  device_errc code = opened.code();
  EXPECT_TRUE(code == device_errc::unavailable || code == device_errc::not_supported || code == device_errc::driver_error)
      << "seen: " << error_name(code);
  const std::string& why = opened.failure().detail;
  EXPECT_FALSE(why.empty()) << "a failure without its reason";
  EXPECT_EQ(why.find('\n'), std::string::npos) << "one line: " << why;
}

}  // namespace
}  // namespace rlmem
