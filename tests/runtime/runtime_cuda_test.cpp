// SPDX-License-Identifier: MIT
// The runtime over CUDA's driver, where a GPU is present (skipped, with the reason, where not):
// a tag paused to host and resumed holds its bytes at its address, a discarded one comes back
// as zeros, and the device's memory goes back while paused.

#include <rlmem/device/cuda_device.hpp>
#include <rlmem/runtime/runtime.hpp>

#include "byte_units.hpp"
#include "runtime_checks.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

namespace rlmem {
namespace {

using testing::sizes::mib;

class runtime_on_cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = open_cuda_device(0);
    if (!opened.ok()) GTEST_SKIP() << "no GPU to test on: " << opened.failure().detail;
    gpu_ = std::move(opened).value();
    runtime_options options;
    options.policy.reservation_bytes = 4096 * mib;
    options.copy_chunk_bytes = 16 * mib;
    rt_ = std::make_unique<runtime>(*gpu_, options);
  }

  std::unique_ptr<device> gpu_;
  std::unique_ptr<runtime> rt_;
};

TEST_F(runtime_on_cuda, a_tag_paused_to_host_returns_its_memory_and_resumes_bit_exact) {
  constexpr std::uint64_t size = 200 * mib + 4096;
  EXPECT_TRUE(succeeded(rt_->enter_region("train")));
  std::uint64_t address = 0;
  ASSERT_TRUE(succeeded(rt_->allocate(size, 0), address));
  EXPECT_TRUE(succeeded(rt_->leave_region()));
  std::vector<std::uint32_t> written(size / 4);
  std::iota(written.begin(), written.end(), 0x9E3779B9u);
  ASSERT_TRUE(succeeded(rt_->write(address, written.data(), size)));

  std::uint64_t free_before = 0;
  std::uint64_t total = 0;
  ASSERT_EQ(gpu_->memory_info(free_before, total), device_errc::ok);
  ASSERT_TRUE(succeeded(rt_->pause("train", keep_contents::host)));
  std::uint64_t free_paused = 0;
  ASSERT_EQ(gpu_->memory_info(free_paused, total), device_errc::ok);
  EXPECT_GE(free_paused, free_before + 200 * mib) << "the driver reports the tag's pages free while paused";

  ASSERT_TRUE(succeeded(rt_->resume("train")));
  std::vector<std::uint32_t> read(size / 4);
  ASSERT_TRUE(succeeded(rt_->read(address, read.data(), size)));
  EXPECT_TRUE(read == written) << "contents differ after pause and resume";
  EXPECT_TRUE(succeeded(rt_->free(address)));
}

TEST_F(runtime_on_cuda, a_discarded_tag_comes_back_as_zeros) {
  EXPECT_TRUE(succeeded(rt_->enter_region("kv")));
  std::uint64_t address = 0;
  ASSERT_TRUE(succeeded(rt_->allocate(6 * mib, 0), address));
  EXPECT_TRUE(succeeded(rt_->leave_region()));
  std::vector<std::uint8_t> ones(6 * mib, 0xFF);
  ASSERT_TRUE(succeeded(rt_->write(address, ones.data(), ones.size())));
  ASSERT_TRUE(succeeded(rt_->pause("kv", keep_contents::discard)));
  ASSERT_TRUE(succeeded(rt_->resume("kv")));
  std::vector<std::uint8_t> read(6 * mib, 0x11);
  ASSERT_TRUE(succeeded(rt_->read(address, read.data(), read.size())));
  EXPECT_TRUE(std::all_of(read.begin(), read.end(), [](std::uint8_t byte) { return byte == 0; }));
  EXPECT_TRUE(succeeded(rt_->free(address)));
}

}  // namespace
}  // namespace rlmem
