// SPDX-License-Identifier: MIT
#pragma once
// Debug levels in mimalloc's manner, chosen by the CMake cache variable RLMEM_DEBUG (passed as a
// compile definition when above 0): 0 checks nothing; 1 cheap asserts (RLMEM_ASSERT); 2 also the
// invariants of the allocator policies and of the live set that counters give, after every event
// of a replay or forward pass (RLMEM_CHECK_INVARIANTS); 3 also walks the whole structures there.
// A structure states its invariants as broken_invariant(scope), which returns the first broken
// one as text, so that tests call it at any level without crashing.

#include <string>

#ifndef RLMEM_DEBUG
#define RLMEM_DEBUG 0
#endif

namespace rlmem {

/// How much of a structure an invariant check reads.
enum class invariant_scope {
  totals,  ///< counters against each other and against per-part counters: O(parts), cheap enough for every event
  whole,   ///< also every element walked: O(size of the structure)
};

/// The scope RLMEM_CHECK_INVARIANTS checks at this debug level.
inline constexpr invariant_scope debug_invariant_scope = RLMEM_DEBUG >= 3 ? invariant_scope::whole : invariant_scope::totals;

#if RLMEM_DEBUG >= 1
/// Writes what broke and where to stderr and aborts. Libraries never print or exit; this, built
/// only at RLMEM_DEBUG >= 1, is the one exception, a debug build's stop at a bug.
[[noreturn]] void abort_in_debug(const std::string& broken, const char* checked, const char* file, int line) noexcept;
#endif

}  // namespace rlmem

#if RLMEM_DEBUG >= 1
/// Aborts (writing the condition) when `condition` is false.
#define RLMEM_ASSERT(condition) \
  ((condition) ? static_cast<void>(0) : ::rlmem::abort_in_debug("assertion failed", #condition, __FILE__, __LINE__))
#else
#define RLMEM_ASSERT(condition) static_cast<void>(0)
#endif

#if RLMEM_DEBUG >= 2
/// Aborts with the first broken invariant of `object` (its broken_invariant(debug_invariant_scope)).
#define RLMEM_CHECK_INVARIANTS(object)                                                                         \
  do {                                                                                                         \
    if (auto rlmem_broken_ = (object).broken_invariant(::rlmem::debug_invariant_scope)) {                      \
      ::rlmem::abort_in_debug(*rlmem_broken_, #object, __FILE__, __LINE__);                                    \
    }                                                                                                          \
  } while (false)
#else
#define RLMEM_CHECK_INVARIANTS(object) static_cast<void>(0)
#endif
