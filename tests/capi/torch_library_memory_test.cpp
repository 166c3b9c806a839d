// SPDX-License-Identifier: MIT
// The torch entry point puts a cuBLAS workspace in the library tag, whatever region is open: a
// function named as torch's (exported from this executable, where dladdr finds it) asks for one.

#include <rlmem/rlmem_runtime.h>

#include "../../src/capi/torch_library_memory.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <string>

namespace at::cuda {
// As torch's CublasHandlePool.cpp: the workspace of the handle's first GEMM on a stream.
__attribute__((noinline)) void* getCurrentCUDABlasHandle() {
  void* workspace = rlmem_torch_malloc(std::size_t{32} << 20, 0, reinterpret_cast<void*>(std::uintptr_t{5}));
  asm volatile("" ::: "memory");  // not a tail call: this frame stays on the stack
  return workspace;
}
}  // namespace at::cuda

namespace {

// On another stream, so that the compiler cannot fold it into the getter (identical bodies).
__attribute__((noinline)) void* a_tensor_of_the_same_size() {
  void* tensor = rlmem_torch_malloc(std::size_t{32} << 20, 0, reinterpret_cast<void*>(std::uintptr_t{6}));
  asm volatile("" ::: "memory");
  return tensor;
}

std::uint64_t allocated_in(const nlohmann::json& statistics, const std::string& tag) {
  for (const auto& each : statistics["tags"]) {
    if (each["name"] == tag) return each["allocated_bytes"]["current"].get<std::uint64_t>();
  }
  return 0;
}

nlohmann::json statistics() {
  char* json = nullptr;
  EXPECT_EQ(rlmem_runtime_statistics_json(0, &json, nullptr), RLMEM_OK);
  nlohmann::json parsed = nlohmann::json::parse(json);
  rlmem_string_free(json);
  return parsed;
}

TEST(torch_library_memory, names_torchs_workspace_getters_and_nothing_else) {
  using rlmem::capi::is_torch_library_function;
  EXPECT_TRUE(is_torch_library_function("_ZN2at4cuda24getCurrentCUDABlasHandleEv"));
  EXPECT_TRUE(is_torch_library_function("_ZN2at4cuda26getCurrentCUDABlasLtHandleEv"));
  EXPECT_TRUE(is_torch_library_function("_ZN2at4cuda22getCUDABlasLtWorkspaceEv"));
  EXPECT_FALSE(is_torch_library_function("_ZN2at6detail10empty_cudaEN3c108ArrayRefIlEE"));
  EXPECT_FALSE(is_torch_library_function("_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator8allocateEm"));
}

TEST(torch_library_memory, a_workspace_made_inside_a_region_goes_to_the_library_tag_and_stays_mapped) {
  ASSERT_EQ(rlmem_runtime_open_fake(0, std::uint64_t{256} << 20, std::uint64_t{2} << 20, nullptr, nullptr), RLMEM_OK);
  ASSERT_EQ(rlmem_runtime_enter_region(0, "kv", nullptr), RLMEM_OK);
  void* workspace = at::cuda::getCurrentCUDABlasHandle();
  void* tensor = a_tensor_of_the_same_size();
  ASSERT_EQ(rlmem_runtime_leave_region(0, nullptr), RLMEM_OK);
  ASSERT_NE(workspace, nullptr);
  ASSERT_NE(tensor, nullptr);
  nlohmann::json seen = statistics();
  EXPECT_EQ(allocated_in(seen, "libraries"), std::uint64_t{32} << 20) << seen.dump();
  EXPECT_EQ(allocated_in(seen, "kv"), std::uint64_t{32} << 20) << "a tensor of the workspace's size stays in its region";

  char* error = nullptr;
  ASSERT_EQ(rlmem_runtime_pause(0, "kv", 0, &error), RLMEM_OK) << (error != nullptr ? error : "");
  std::uint32_t word = 0x12345678;
  EXPECT_EQ(rlmem_runtime_write(0, reinterpret_cast<std::uintptr_t>(workspace), &word, sizeof word, nullptr), RLMEM_OK)
      << "the workspace is still memory while 'kv' is paused";
  EXPECT_EQ(rlmem_runtime_pause(0, "libraries", 1, &error), RLMEM_E_INVALID_ARGUMENT);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("never paused"), std::string::npos) << error;
  rlmem_string_free(error);
  rlmem_torch_free(workspace, 0, 0, nullptr);
  EXPECT_EQ(rlmem_runtime_close(0), RLMEM_OK);
}

}  // namespace
