// SPDX-License-Identifier: MIT
#pragma once
// The check every part's error table gets (include/rlmem/base/error.hpp): each code of `Code` has
// a row, a message and a NAME no other code has, and a value past the codes reads as UNKNOWN.

#include <rlmem/base/error.hpp>

#include <gtest/gtest.h>

#include <set>
#include <string_view>

namespace rlmem::testing {

/// Expects one distinct NAME and a non-empty message for every code of `Code`, found through the
/// part's error_name/error_message overloads, and "UNKNOWN" for Code::count_.
template <class Code>
void expect_every_code_named() {
  std::set<std::string_view> names;
  for (int i = 0; i < static_cast<int>(Code::count_); ++i) {
    auto code = static_cast<Code>(i);
    EXPECT_NE(error_name(code), "UNKNOWN") << "code " << i << " has no row";
    EXPECT_FALSE(error_message(code).empty()) << "code " << i << " has no message";
    EXPECT_TRUE(names.insert(error_name(code)).second) << "code " << i << " repeats the name " << error_name(code);
  }
  EXPECT_EQ(error_name(Code::count_), "UNKNOWN");
}

}  // namespace rlmem::testing
