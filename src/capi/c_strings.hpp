// SPDX-License-Identifier: MIT
#pragma once
// Strings the C ABI hands its callers: malloc'd copies, NUL-terminated, that the caller frees with
// rlmem_string_free (rlmem.h), so that a caller in any language can free them.

#include <cstdlib>
#include <cstring>
#include <string>

namespace rlmem::capi {

/// A malloc'd copy of `text` with its NUL, or nullptr when the host has no memory for it.
inline char* copy_out(const std::string& text) noexcept {
  auto* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (copy != nullptr) std::memcpy(copy, text.data(), text.size() + 1);
  return copy;
}

}  // namespace rlmem::capi
