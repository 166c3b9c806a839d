// SPDX-License-Identifier: MIT
// Torch's library workspaces, told apart from tensors by the functions that ask for them.

#include "torch_library_memory.hpp"

#include <dlfcn.h>
#include <link.h>
#include <execinfo.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace rlmem::capi {

namespace {

// torch's cuBLAS workspace (CublasHandlePool.cpp): CUBLAS_WORKSPACE_CONFIG's ":SIZE_KiB:COUNT"
// pairs summed, else 4096 KiB x 8 (Hopper and later) or 4096 KiB x 2 + 16 KiB x 8; its
// cuBLASLt workspace: CUBLASLT_WORKSPACE_SIZE KiB, else 1 MiB (or 4 MiB, by version).
std::vector<std::size_t> workspace_sizes() {
  std::vector<std::size_t> sizes{std::size_t{4096} * 1024 * 8, std::size_t{4096} * 1024 * 2 + std::size_t{16} * 1024 * 8,
                                 std::size_t{1} << 20, std::size_t{4} << 20};
  if (const char* config = std::getenv("CUBLAS_WORKSPACE_CONFIG")) {
    std::size_t total = 0;
    std::string text(config);
    for (std::size_t at = text.find(':'); at != std::string::npos;) {
      std::size_t next = text.find(':', at + 1);
      std::size_t after = next == std::string::npos ? std::string::npos : text.find(':', next + 1);
      if (next == std::string::npos) break;
      total += std::strtoull(text.substr(at + 1, next - at - 1).c_str(), nullptr, 10) * 1024 *
               std::strtoull(text.substr(next + 1, after == std::string::npos ? std::string::npos : after - next - 1).c_str(), nullptr, 10);
      at = after;
    }
    if (total > 0) sizes.push_back(total);
  }
  if (const char* lt = std::getenv("CUBLASLT_WORKSPACE_SIZE")) sizes.push_back(std::strtoull(lt, nullptr, 10) * 1024);
  return sizes;
}

// Frames from here up: this function and the entry point, the pluggable allocator's std::function
// thunk, malloc and allocate, torch's workspace helper and the handle getter that called it.
// Each frame costs about half a microsecond to unwind in libtorch_cuda.
constexpr int frames_looked_at = 8;
// torch makes one cuBLAS and one cuBLASLt workspace per handle (one per thread) and stream; once
// both were seen for this thread on a stream, requests there are tensors. (A workspace torch
// makes again after clearing its own is then missed: torch does that in cudagraph trees only.)
constexpr int workspaces_per_thread_and_stream = 2;

std::atomic<std::uint64_t> unwinds{0};

// Whether `address` lies inside one of those functions. dladdr names the nearest exported symbol
// below an address, which for a function the symbol table does not list (a static one) is
// whatever precedes it: the symbol's own size must cover the address too.
bool inside_library_function(void* address) {
  Dl_info info{};
  void* entry = nullptr;
  if (dladdr1(address, &info, &entry, RTLD_DL_SYMENT) == 0) return false;
  const auto* symbol = static_cast<const ElfW(Sym)*>(entry);
  if (info.dli_sname == nullptr || symbol == nullptr || info.dli_saddr == nullptr) return false;
  auto start = reinterpret_cast<std::uintptr_t>(info.dli_saddr);
  auto at = reinterpret_cast<std::uintptr_t>(address);
  return at - start < symbol->st_size && is_torch_library_function(info.dli_sname);
}

}  // namespace

bool is_torch_library_function(std::string_view symbol) noexcept {
  // at::cuda::getCurrentCUDABlasHandle, getCurrentCUDABlasLtHandle, getCUDABlasLtWorkspace and
  // the getNewWorkspace / getNewCUDABlasLtWorkspace helpers they call.
  return symbol.find("CUDABlas") != std::string_view::npos || symbol.find("NewWorkspace") != std::string_view::npos;
}

std::uint64_t library_check_unwinds() noexcept { return unwinds.load(std::memory_order_relaxed); }

bool allocated_for_torch_library(std::size_t size, std::uint64_t stream) noexcept {
  try {
    static const std::vector<std::size_t> sizes = workspace_sizes();
    bool candidate = false;
    for (std::size_t each : sizes) candidate = candidate || each == size;
    if (!candidate) return false;
    thread_local std::unordered_map<std::uint64_t, int> found_on_stream;
    int& found = found_on_stream[stream];
    if (found >= workspaces_per_thread_and_stream) return false;
    std::array<void*, frames_looked_at> frames{};
    unwinds.fetch_add(1, std::memory_order_relaxed);
    int depth = backtrace(frames.data(), frames_looked_at);
    static std::mutex lock;
    static std::unordered_map<void*, bool> known;  // return address -> inside such a function
    std::lock_guard hold(lock);
    for (int i = 0; i < depth; ++i) {
      void* frame = frames[static_cast<std::size_t>(i)];
      auto answer = known.find(frame);
      if (answer == known.end()) answer = known.emplace(frame, inside_library_function(frame)).first;
      if (answer->second) {
        ++found;
        return true;
      }
    }
  } catch (...) {
    // Out of host memory for the cache: an ordinary allocation, as without the check.
  }
  return false;
}

}  // namespace rlmem::capi
