// SPDX-License-Identifier: MIT
// The watch part's error table: one distinct NAME and a message per code.

#include <rlmem/watch/watch_errors.hpp>

#include <gtest/gtest.h>

#include <set>
#include <string_view>

namespace rlmem {

TEST(watch_error_table, every_code_has_a_distinct_name_and_message) {
  std::set<std::string_view> names;
  for (int i = 0; i < static_cast<int>(watch_errc::count_); ++i) {
    auto code = static_cast<watch_errc>(i);
    EXPECT_NE(error_name(code), "UNKNOWN") << "code " << i << " has no row";
    EXPECT_FALSE(error_message(code).empty()) << "code " << i;
    EXPECT_TRUE(names.insert(error_name(code)).second) << "duplicate name " << error_name(code);
  }
  EXPECT_EQ(error_name(watch_errc::count_), "UNKNOWN");
}

}  // namespace rlmem
