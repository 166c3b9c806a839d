// SPDX-License-Identifier: MIT
#pragma once
// Recognising the memory torch's libraries keep for themselves, as the allocator is asked for it.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rlmem::capi {

/// Who asked the torch entry point for memory.
enum class torch_request {
  tensor,    // the program: the memory belongs to the open region's tag
  library,   // one of torch's library workspaces: the library tag, never paused
  unproven,  // a workspace's size, and the caller's stack could not be read: pause refuses its tag
};

/// Reads up to `capacity` return addresses of the calling thread's stack into `frames`; returns
/// how many (backtrace(3)'s contract). The seam lets tests give a stack that cannot be read.
using stack_reader = int (*)(void** frames, int capacity) noexcept;
int read_caller_stack(void** frames, int capacity) noexcept;

/// Whether the allocation the torch entry point is making now on `device` is a workspace torch
/// keeps for a library: cuBLAS's and cuBLASLt's, made on the first GEMM of each handle (one per
/// thread) and stream and used by every later one, whatever region it runs in (a region paused
/// under it made that GEMM fail). Told by the names of the functions on the caller's stack; every
/// frame's answer is cached, so a request looked at costs one unwind of a few frames (about 3 us
/// in torch). Looked at: before a preparation on the device, requests of a size torch gives a
/// workspace (its defaults, or CUBLAS_WORKSPACE_CONFIG and CUBLASLT_WORKSPACE_SIZE as torch reads
/// them) until two were found on the thread's stream; after one, those of the sizes it saw
/// made, each until found; none on a prepared stream. Never throws.
torch_request classify_torch_request(int device, std::size_t size, std::uint64_t stream, stack_reader read = read_caller_stack) noexcept;

/// Makes now, by calling torch's own getters (at::cuda::getCurrentCUDABlasHandle and
/// getCUDABlasLtWorkspace, found in the process), the workspaces the calling thread's handle
/// keeps on its current stream of `device`, both of which the caller passes: each goes to the
/// library tag. The thread's later requests on `stream` are then never looked at, and the first
/// preparation on a device records the sizes made, to which every other thread's check there
/// narrows. False, nothing changed, where the getters are not in the process or one threw.
/// Never throws.
bool prepare_torch_library_memory(int device, std::uint64_t stream) noexcept;

/// How many requests classify_torch_request() unwound the stack for, every thread together
/// (the statistics report it: each costs a few microseconds).
std::uint64_t library_check_unwinds() noexcept;

/// Whether a symbol (mangled, as the dynamic symbol table holds it) is one of torch's functions
/// that allocate a library's workspace.
bool is_torch_library_function(std::string_view symbol) noexcept;

}  // namespace rlmem::capi
