// SPDX-License-Identifier: MIT
#pragma once
// What the process-wide torch allocator entry point throws when a request cannot be served.
#include <string>

namespace rlmem::capi {

/// Throws the exception torch's own allocator throws on an OOM, c10::OutOfMemoryError, so that
/// the user's code sees `torch.OutOfMemoryError` (torch's bindings translate that type, and any
/// other becomes a RuntimeError). librlmem does not link torch: the type is found in the process
/// at run time, and where it is not (no torch loaded, a torch whose c10::Error has another
/// constructor), a std::bad_alloc carrying `message` is thrown instead.
[[noreturn]] void throw_out_of_memory(const std::string& message);

}  // namespace rlmem::capi
