// SPDX-License-Identifier: MIT
// The debug builds' stop at a broken assertion or invariant: the only place a library prints.

#include <rlmem/base/invariants.hpp>

#if RLMEM_DEBUG >= 1

#include <cstdio>
#include <cstdlib>

namespace rlmem {

void abort_in_debug(const std::string& broken, const char* checked, const char* file, int line) noexcept {
  std::fprintf(stderr, "%s:%d: %s: %s\n", file, line, checked, broken.c_str());
  std::abort();
}

}  // namespace rlmem

#endif
