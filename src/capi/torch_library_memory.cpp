// SPDX-License-Identifier: MIT
// Torch's library workspaces, told apart from tensors by the functions that ask for them.

#include "torch_library_memory.hpp"

#include "torch_symbols.hpp"

#include <dlfcn.h>
#include <link.h>
#include <execinfo.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <utility>
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
// torch makes its workspaces per handle (one per thread) and stream. Until a preparation saw what
// this torch makes on a device, a thread's requests on a stream are looked at while they have
// the size of any of torch's workspaces and fewer than two (cuBLAS's and cuBLASLt's) were found.
// Once one did (prepare_torch_library_memory()), only requests of the sizes it saw made, each
// until found, are: torch 2.11 on an H100 makes 32 MiB and 1 MiB, so its 4 MiB activations,
// the size of an older cuBLASLt workspace, are never unwound. (A workspace torch makes again
// after clearing its own is then missed: torch does that in cudagraph trees only.)
constexpr int workspaces_before_learned = 2;
constexpr std::size_t most_workspaces = 4;
constexpr int most_devices = 64;  // devices past it keep the check before learning
struct learned_workspaces {
  std::array<std::atomic<std::size_t>, most_workspaces> sizes{};
  std::atomic<int> count{-1};  // -1: not learned; published after the sizes
};
std::array<learned_workspaces, most_devices> learned_by_device;

struct stream_state {
  int found = 0;
  unsigned found_sizes = 0;  // bit i: learned size i was found
  bool prepared = false;     // its workspaces were made by a preparation: nothing to look for
};

std::atomic<std::uint64_t> unwinds{0};

// This thread's state on each (device, stream).
stream_state& state_of(int device, std::uint64_t stream) {
  thread_local std::map<std::pair<int, std::uint64_t>, stream_state> states;
  return states[{device, stream}];
}

// The sizes a preparation records on this thread, while it runs.
thread_local std::vector<std::size_t>* recording = nullptr;

// Whether `address` lies inside one of those functions. dladdr names the nearest exported symbol
// below an address, which for a function the symbol table does not list (a static one) is
// whatever precedes it: the symbol's own size must cover the address too. `resolved` says
// whether the address belongs to any symbol at all.
bool inside_library_function(void* address, bool& resolved) {
  Dl_info info{};
  void* entry = nullptr;
  resolved = false;
  if (dladdr1(address, &info, &entry, RTLD_DL_SYMENT) == 0) return false;
  const auto* symbol = static_cast<const ElfW(Sym)*>(entry);
  if (info.dli_sname == nullptr || symbol == nullptr || info.dli_saddr == nullptr) return false;
  resolved = true;
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

int read_caller_stack(void** frames, int capacity) noexcept { return backtrace(frames, capacity); }

torch_request classify_torch_request(int device, std::size_t size, std::uint64_t stream, stack_reader read) noexcept {
  try {
    static const std::vector<std::size_t> sizes = workspace_sizes();
    const learned_workspaces* learned = device >= 0 && device < most_devices ? &learned_by_device[static_cast<std::size_t>(device)] : nullptr;
    int learned_count = learned != nullptr ? learned->count.load(std::memory_order_acquire) : -1;
    auto learned_size = [&](int i) { return learned->sizes[static_cast<std::size_t>(i)].load(std::memory_order_relaxed); };
    // Most requests have no workspace's size: answered before any lookup.
    bool candidate = false;
    if (learned_count < 0) {
      for (std::size_t each : sizes) candidate = candidate || each == size;
    } else {
      for (int i = 0; i < learned_count; ++i) candidate = candidate || learned_size(i) == size;
    }
    if (!candidate) return torch_request::tensor;
    stream_state& state = state_of(device, stream);
    if (state.prepared) return torch_request::tensor;
    int learned_index = -1;
    if (learned_count < 0) {
      if (state.found >= workspaces_before_learned) return torch_request::tensor;
    } else {
      for (int i = 0; i < learned_count && learned_index < 0; ++i) {
        if ((state.found_sizes & (1u << i)) == 0 && learned_size(i) == size) learned_index = i;
      }
      if (learned_index < 0) return torch_request::tensor;
    }
    std::array<void*, frames_looked_at> frames{};
    unwinds.fetch_add(1, std::memory_order_relaxed);
    int depth = read(frames.data(), frames_looked_at);
    static std::mutex lock;
    struct answer { bool inside; bool resolved; };
    static std::unordered_map<void*, answer> known;  // return address -> what dladdr said
    std::lock_guard hold(lock);
    bool any_resolved = false;
    for (int i = 0; i < depth; ++i) {
      void* frame = frames[static_cast<std::size_t>(i)];
      auto cached = known.find(frame);
      if (cached == known.end()) {
        answer fresh{};
        fresh.inside = inside_library_function(frame, fresh.resolved);
        cached = known.emplace(frame, fresh).first;
      }
      any_resolved = any_resolved || cached->second.resolved;
      if (cached->second.inside) {
        ++state.found;
        if (learned_index >= 0) state.found_sizes |= 1u << learned_index;
        if (recording != nullptr) recording->push_back(size);
        return torch_request::library;
      }
    }
    // A stack of no frame any symbol covers says nothing about who asked.
    return any_resolved ? torch_request::tensor : torch_request::unproven;
  } catch (...) {
    // Out of host memory for the caches: who asked is not known.
    return torch_request::unproven;
  }
}

bool prepare_torch_library_memory(int device, std::uint64_t stream) noexcept {
  using getter = void* (*)();
  auto blas_handle = reinterpret_cast<getter>(find_torch_symbol("_ZN2at4cuda24getCurrentCUDABlasHandleEv"));
  auto lt_workspace = reinterpret_cast<getter>(find_torch_symbol("_ZN2at4cuda22getCUDABlasLtWorkspaceEv"));
  if (blas_handle == nullptr || lt_workspace == nullptr) return false;
  try {
    stream_state& state = state_of(device, stream);
    if (state.prepared) return true;
    std::vector<std::size_t> made;
    made.reserve(most_workspaces);
    bool fresh = state.found == 0;
    // Torch's own getters make what this thread's handle keeps on the stream: the check puts
    // each in the library tag, and records its size.
    recording = &made;
    try {
      blas_handle();
      lt_workspace();
    } catch (...) {
      recording = nullptr;
      throw;
    }
    recording = nullptr;
    state.prepared = true;
    // Made from nothing: every workspace a handle gets on a stream of this device.
    bool learnable = fresh && !made.empty() && made.size() <= most_workspaces && device >= 0 && device < most_devices;
    if (learnable) {
      learned_workspaces& learned = learned_by_device[static_cast<std::size_t>(device)];
      int unset = -1;
      // The first preparation on the device publishes; later ones saw the same torch.
      if (learned.count.compare_exchange_strong(unset, -2, std::memory_order_acq_rel)) {
        for (std::size_t i = 0; i < made.size(); ++i) learned.sizes[i].store(made[i], std::memory_order_relaxed);
        learned.count.store(static_cast<int>(made.size()), std::memory_order_release);
      }
    }
    return true;
  } catch (...) {
    // A getter threw (torch's error, or the map out of memory): the check goes on as before.
    return false;
  }
}

}  // namespace rlmem::capi
