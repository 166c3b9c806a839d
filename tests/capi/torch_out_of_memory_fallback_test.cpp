// SPDX-License-Identifier: MIT
// rlmem_torch_malloc's OOM with no c10 in the process (librlmem used without torch, or a torch
// whose c10::Error has other constructors): a std::bad_alloc carrying the reason.
#include <rlmem/rlmem_runtime.h>

#include <gtest/gtest.h>

#include <new>
#include <string>

namespace {

constexpr int kDevice = 6;
constexpr std::uint64_t kPage = 2ull << 20;

TEST(TorchOutOfMemoryWithoutC10, IsBadAllocWithTheReason) {
  ASSERT_EQ(rlmem_runtime_open_fake(kDevice, 16 * kPage, kPage, nullptr, nullptr), RLMEM_OK);
  bool caught = false;
  try {
    rlmem_torch_malloc(64 * kPage, kDevice, nullptr);
  } catch (const std::bad_alloc& error) {
    caught = true;
    EXPECT_EQ(std::string(error.what()).rfind("CUDA out of memory (rlmem runtime): ", 0), 0u) << "what(): " << error.what();
  }
  EXPECT_TRUE(caught) << "expected std::bad_alloc from a request of 128 MiB on a 32 MiB device";
  rlmem_runtime_close(kDevice);
}

}  // namespace
