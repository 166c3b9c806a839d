// SPDX-License-Identifier: MIT
#pragma once
// Recognising the memory torch's libraries keep for themselves, as the allocator is asked for it.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rlmem::capi {

/// Whether the allocation the torch entry point is making now is a workspace torch keeps for a
/// library: cuBLAS's and cuBLASLt's, made on the first GEMM of each handle and stream and used by
/// every later one, whatever region it runs in (a region paused under it made that GEMM fail).
/// Only requests on `stream` of a size torch gives a workspace (its defaults, or
/// CUBLAS_WORKSPACE_CONFIG and CUBLASLT_WORKSPACE_SIZE as torch reads them), until this thread's
/// two workspaces on that stream were found, are looked at, by the names of the functions on the
/// caller's stack; every frame's answer is cached, so such a request costs one unwind of a few
/// frames (about 3 us in torch). Never throws.
bool allocated_for_torch_library(std::size_t size, std::uint64_t stream) noexcept;

/// How many requests allocated_for_torch_library() unwound the stack for, every thread together
/// (the statistics report it: each costs a few microseconds).
std::uint64_t library_check_unwinds() noexcept;

/// Whether a symbol (mangled, as the dynamic symbol table holds it) is one of torch's functions
/// that allocate a library's workspace.
bool is_torch_library_function(std::string_view symbol) noexcept;

}  // namespace rlmem::capi
