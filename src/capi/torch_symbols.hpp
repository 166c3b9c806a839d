// SPDX-License-Identifier: MIT
#pragma once
// The one place librlmem looks torch up in the process it was loaded into (mimalloc's one seam
// for platform calls): c10's OutOfMemoryError for the allocator's OOM, and the cuBLAS getters
// whose workspaces are made before a region.

namespace rlmem::capi {

/// The address of `name` (a mangled symbol) in the process: in the global scope, else in one of
/// torch's libraries already loaded (libc10, libc10_cuda, libtorch_cuda: torch's extension loads
/// them with RTLD_LOCAL, so they need not be global). Never loads a library; nullptr where none
/// has it. Thread-safe.
void* find_torch_symbol(const char* name) noexcept;

}  // namespace rlmem::capi
