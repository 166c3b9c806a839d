// SPDX-License-Identifier: MIT
// rlmem_torch_malloc's OOM, as torch's bindings see it. With a c10 in the process (the stand-in
// of fake_c10.hpp, linked into this test like libc10 into torch) it is a c10::OutOfMemoryError,
// which torch turns into torch.OutOfMemoryError; the GPU validation shows the same with torch.
#include "capi/fake_c10.hpp"

#include <rlmem/rlmem_runtime.h>

#include <gtest/gtest.h>

#include <string>
#include <typeinfo>

namespace {

constexpr int kDevice = 5;
constexpr std::uint64_t kPage = 2ull << 20;

class TorchOutOfMemory : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(rlmem_runtime_open_fake(kDevice, 16 * kPage, kPage, nullptr, nullptr), RLMEM_OK); }
  void TearDown() override { rlmem_runtime_close(kDevice); }
};

TEST_F(TorchOutOfMemory, IsC10OutOfMemoryErrorWithTheReason) {
  bool caught = false;
  try {
    rlmem_torch_malloc(64 * kPage, kDevice, nullptr);
  } catch (const c10::OutOfMemoryError& error) {
    caught = true;
    EXPECT_EQ(error.msg().rfind("CUDA out of memory (rlmem runtime): ", 0), 0u) << "message: " << error.msg();
    EXPECT_NE(std::string(error.what()).find(error.msg()), std::string::npos) << "what(): " << error.what();
    // The object is wholly an OutOfMemoryError: its vtable, not only the typeinfo it was thrown with.
    const c10::Error& base = error;
    EXPECT_EQ(typeid(base), typeid(c10::OutOfMemoryError)) << "dynamic type: " << typeid(base).name();
    EXPECT_NE(dynamic_cast<const c10::OutOfMemoryError*>(&base), nullptr);
  }
  EXPECT_TRUE(caught) << "expected c10::OutOfMemoryError from a request of 128 MiB on a 32 MiB device";
}

TEST_F(TorchOutOfMemory, IsCaughtAsC10ErrorAndStdException) {
  EXPECT_THROW(rlmem_torch_malloc(64 * kPage, kDevice, nullptr), c10::Error);
  EXPECT_THROW(rlmem_torch_malloc(64 * kPage, kDevice, nullptr), std::exception);
}

TEST_F(TorchOutOfMemory, LeavesTheRuntimeUsable) {
  EXPECT_THROW(rlmem_torch_malloc(64 * kPage, kDevice, nullptr), c10::OutOfMemoryError);
  void* address = rlmem_torch_malloc(kPage, kDevice, nullptr);
  EXPECT_NE(address, nullptr) << "a request that fits, after the OOM";
  rlmem_torch_free(address, kPage, kDevice, nullptr);
}

TEST(TorchOutOfMemoryStandIn, ThrowsLikeTheRealOne) {
  // The stand-in's own throw, so that a change to fake_c10 that breaks its likeness shows here.
  EXPECT_THROW(c10::throw_out_of_memory_for_test("x"), c10::OutOfMemoryError);
}

}  // namespace
