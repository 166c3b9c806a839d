// SPDX-License-Identifier: MIT
// The torch entry point puts a cuBLAS workspace in the library tag, whatever region is open: a
// function named as torch's (exported from this executable, where dladdr finds it) asks for one.

#include <rlmem/rlmem_runtime.h>

#include "../../src/capi/torch_library_memory.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdlib>
#include <set>
#include <thread>
#include <string>

namespace fake_torch {
// c10's current device and stream of the calling thread, as torch's getters read them.
thread_local int current_device = 0;
thread_local std::uintptr_t current_stream = 5;
// torch 2.11's cuBLASLt takes cuBLAS's workspace: getCUDABlasLtWorkspace then allocates nothing.
std::atomic<bool> lt_shares_cublas_workspace{false};
thread_local std::set<std::pair<int, std::uintptr_t>> streams_with_workspaces;
}  // namespace fake_torch

namespace at::cuda {
// As torch's CublasHandlePool.cpp: the workspace of the handle's first GEMM on a stream.
__attribute__((noinline)) void* getCurrentCUDABlasHandle() {
  void* workspace = rlmem_torch_malloc(std::size_t{32} << 20, fake_torch::current_device, reinterpret_cast<void*>(fake_torch::current_stream));
  asm volatile("" ::: "memory");  // not a tail call: this frame stays on the stack
  return workspace;
}
// cuBLASLt's workspace of the thread's handle on the current stream, made on first use.
__attribute__((noinline)) void* getCUDABlasLtWorkspace() {
  bool first = fake_torch::streams_with_workspaces.insert({fake_torch::current_device, fake_torch::current_stream}).second;
  if (fake_torch::lt_shares_cublas_workspace || !first) return nullptr;
  void* workspace = rlmem_torch_malloc(std::size_t{1} << 20, fake_torch::current_device, reinterpret_cast<void*>(fake_torch::current_stream));
  asm volatile("" ::: "memory");
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

nlohmann::json statistics(int device = 0) {
  char* json = nullptr;
  EXPECT_EQ(rlmem_runtime_statistics_json(device, &json, nullptr), RLMEM_OK);
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

TEST(torch_library_memory, a_workspace_sized_request_whose_stack_cannot_be_read_is_unproven_not_a_tensor) {
  using rlmem::capi::classify_torch_request;
  using rlmem::capi::torch_request;
  auto unreadable = [](void**, int) noexcept { return 0; };
  auto only_unknown_frames = [](void** frames, int) noexcept {
    frames[0] = reinterpret_cast<void*>(std::uintptr_t{0x10});  // no object maps it: dladdr says nothing
    return 1;
  };
  EXPECT_EQ(classify_torch_request(0, std::size_t{32} << 20, 77, unreadable), torch_request::unproven);
  EXPECT_EQ(classify_torch_request(0, std::size_t{32} << 20, 78, only_unknown_frames), torch_request::unproven);
  EXPECT_EQ(classify_torch_request(0, (std::size_t{32} << 20) + 512, 77, unreadable), torch_request::tensor)
      << "no size of torch's workspaces: never looked at";
  EXPECT_EQ(classify_torch_request(0, std::size_t{32} << 20, 79), torch_request::tensor) << "a readable stack with no getter on it";
}

// Every thread and device together: the process's count (any open device's statistics give it).
std::uint64_t unwinds() {
  return statistics(fake_torch::current_device)["totals"]["library_check_unwinds"].get<std::uint64_t>();
}

// Each case on its own thread and device: torch keeps workspaces per thread's handle and stream,
// and the check learns per device.
template <typename Body>
void on_a_new_thread(int device, std::uintptr_t stream, Body body) {
  std::thread worker([&] {
    fake_torch::current_device = device;
    fake_torch::current_stream = stream;
    body();
  });
  worker.join();
}

void* tensor_of(std::size_t bytes) {
  return rlmem_torch_malloc(bytes, fake_torch::current_device, reinterpret_cast<void*>(fake_torch::current_stream));
}

constexpr std::size_t mib = std::size_t{1} << 20;

TEST(torch_library_memory, a_prepared_stream_holds_its_workspaces_in_the_library_tag_and_is_never_looked_at_again) {
  constexpr int device = 1;
  ASSERT_EQ(rlmem_runtime_open_fake(device, 256 * mib, 2 * mib, nullptr, nullptr), RLMEM_OK);
  on_a_new_thread(device, 21, [] {
    char* error = nullptr;
    ASSERT_EQ(rlmem_torch_prepare_libraries(device, reinterpret_cast<void*>(std::uintptr_t{21}), &error), RLMEM_OK)
        << (error != nullptr ? error : "");
    nlohmann::json prepared = statistics(device);
    EXPECT_EQ(allocated_in(prepared, "libraries"), 33 * mib) << "cuBLAS's and cuBLASLt's workspaces: " << prepared.dump();

    std::uint64_t looked = unwinds();
    ASSERT_EQ(rlmem_runtime_enter_region(device, "kv", nullptr), RLMEM_OK);
    void* again = at::cuda::getCurrentCUDABlasHandle();  // the getter asks again: a tensor now
    void* small = tensor_of(1 * mib);
    ASSERT_EQ(rlmem_runtime_leave_region(device, nullptr), RLMEM_OK);
    EXPECT_EQ(unwinds(), looked) << "a prepared stream's requests are never looked at";
    EXPECT_EQ(allocated_in(statistics(device), "kv"), 33 * mib);
    ASSERT_EQ(rlmem_runtime_pause(device, "kv", 0, &error), RLMEM_OK) << (error != nullptr ? error : "");
    ASSERT_EQ(rlmem_runtime_resume(device, "kv", &error), RLMEM_OK) << (error != nullptr ? error : "");
    rlmem_torch_free(again, 0, device, nullptr);
    rlmem_torch_free(small, 0, device, nullptr);
  });
  EXPECT_EQ(rlmem_runtime_close(device), RLMEM_OK);
}

// Autograd's backward thread has a handle of its own, never prepared: after a preparation on its
// device it reads stacks only for requests of the sizes torch was seen to make, each until found.
TEST(torch_library_memory, other_threads_look_only_at_the_sizes_a_preparation_saw_made_each_until_found) {
  constexpr int device = 2;
  ASSERT_EQ(rlmem_runtime_open_fake(device, 256 * mib, 2 * mib, nullptr, nullptr), RLMEM_OK);
  on_a_new_thread(device, 31, [] { ASSERT_EQ(rlmem_torch_prepare_libraries(device, reinterpret_cast<void*>(std::uintptr_t{31}), nullptr), RLMEM_OK); });
  on_a_new_thread(device, 31, [] {
    ASSERT_EQ(rlmem_runtime_enter_region(device, "train", nullptr), RLMEM_OK);
    std::uint64_t start = unwinds();
    void* workspace = at::cuda::getCurrentCUDABlasHandle();
    EXPECT_EQ(unwinds() - start, 1u) << "its first 32 MiB, the size of cuBLAS's workspace, is looked at";
    void* activation = tensor_of(4 * mib);  // an older cuBLASLt's size, not this torch's
    void* same_as_cublas = tensor_of(32 * mib);
    EXPECT_EQ(unwinds() - start, 1u) << "4 MiB was never made; 32 MiB was found already";
    void* same_as_lt = tensor_of(1 * mib);
    EXPECT_EQ(unwinds() - start, 2u) << "1 MiB, cuBLASLt's, is looked at until found";
    ASSERT_EQ(rlmem_runtime_leave_region(device, nullptr), RLMEM_OK);
    nlohmann::json seen = statistics(device);
    EXPECT_EQ(allocated_in(seen, "libraries"), 33 * mib + 32 * mib) << seen.dump();
    EXPECT_EQ(allocated_in(seen, "train"), 37 * mib) << seen.dump();
    for (void* each : {workspace, activation, same_as_cublas, same_as_lt}) rlmem_torch_free(each, 0, device, nullptr);
  });
  EXPECT_EQ(rlmem_runtime_close(device), RLMEM_OK);
}

TEST(torch_library_memory, a_torch_whose_cublaslt_shares_the_workspace_teaches_one_size) {
  constexpr int device = 3;
  ASSERT_EQ(rlmem_runtime_open_fake(device, 256 * mib, 2 * mib, nullptr, nullptr), RLMEM_OK);
  fake_torch::lt_shares_cublas_workspace = true;
  on_a_new_thread(device, 41, [] { ASSERT_EQ(rlmem_torch_prepare_libraries(device, reinterpret_cast<void*>(std::uintptr_t{41}), nullptr), RLMEM_OK); });
  fake_torch::lt_shares_cublas_workspace = false;
  EXPECT_EQ(allocated_in(statistics(device), "libraries"), 32 * mib);
  on_a_new_thread(device, 41, [] {
    std::uint64_t start = unwinds();
    void* small = tensor_of(1 * mib);
    void* activation = tensor_of(4 * mib);
    EXPECT_EQ(unwinds(), start) << "neither 1 MiB nor 4 MiB is a size this torch makes";
    for (void* each : {small, activation}) rlmem_torch_free(each, 0, device, nullptr);
  });
  on_a_new_thread(4, 41, [] {  // a device nothing was prepared on keeps every size torch may use
    ASSERT_EQ(rlmem_runtime_open_fake(4, 256 * mib, 2 * mib, nullptr, nullptr), RLMEM_OK);
    std::uint64_t start = unwinds();
    void* activation = tensor_of(4 * mib);
    EXPECT_EQ(unwinds() - start, 1u);
    rlmem_torch_free(activation, 0, 4, nullptr);
    EXPECT_EQ(rlmem_runtime_close(4), RLMEM_OK);
  });
  EXPECT_EQ(rlmem_runtime_close(device), RLMEM_OK);
}

}  // namespace
