// SPDX-License-Identifier: MIT
#pragma once
// How the runtime's tests check a call's result: a failing check prints the code's NAME and the
// failure's reason, not a byte.

#include <rlmem/runtime/runtime.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace rlmem {

/// gtest prints a runtime code by its NAME ("expected OK, seen PAUSED").
inline void PrintTo(runtime_errc code, std::ostream* out) { *out << error_name(code); }

/// Success, or a failure that says the code's NAME and the reason.
template <class T>
::testing::AssertionResult succeeded(const result<T, runtime_errc>& outcome) {
  if (outcome.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << error_name(outcome.code()) << ": " << outcome.failure().detail;
}

/// The same for a call that makes an address (allocate, reserve_growable): on success it is put
/// in `address`.
inline ::testing::AssertionResult succeeded(const result<std::uint64_t, runtime_errc>& outcome, std::uint64_t& address) {
  if (outcome.ok()) address = outcome.value();
  return succeeded(outcome);
}

/// A failure with `code` whose reason holds `part`; else the check says what was expected and
/// what was seen.
template <class T>
::testing::AssertionResult refused(const result<T, runtime_errc>& outcome, runtime_errc code, std::string_view part = {}) {
  if (outcome.code() == code && outcome.failure().detail.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected " << error_name(code) << " with \"" << part << "\" in its reason, seen "
                                       << error_name(outcome.code()) << ": \"" << outcome.failure().detail << "\"";
}

}  // namespace rlmem
