// SPDX-License-Identifier: MIT
// The error table has one row per code, names are distinct, and describe() says where.

#include <rlmem/base/error.hpp>

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace rlmem {

TEST(error_table, every_code_has_a_distinct_name_and_message) {
  std::set<std::string_view> names;
  for (int i = 0; i < static_cast<int>(errc::count_); ++i) {
    auto code = static_cast<errc>(i);
    EXPECT_NE(error_name(code), "UNKNOWN") << "code " << i << " has no row";
    EXPECT_FALSE(error_message(code).empty()) << "code " << i;
    EXPECT_TRUE(names.insert(error_name(code)).second) << "duplicate name " << error_name(code);
  }
  EXPECT_EQ(error_name(errc::count_), "UNKNOWN");
}

TEST(error_table, describe_names_the_code_offset_and_detail) {
  std::string line = describe({errc::forbidden_opcode, 2, "GLOBAL would import or call code; refused"});
  EXPECT_EQ(line.rfind("FORBIDDEN_OPCODE at byte 2: ", 0), 0u) << line;
  EXPECT_NE(line.find("GLOBAL"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos) << "one line: " << line;
}

}  // namespace rlmem
