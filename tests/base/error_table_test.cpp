// SPDX-License-Identifier: MIT
// The error table has one row per code, names are distinct, and describe() says where.

#include "error_table_checks.hpp"

#include <rlmem/base/error.hpp>

#include <gtest/gtest.h>

#include <string>

namespace rlmem {

TEST(error_table, every_code_has_a_distinct_name_and_message) {
  testing::expect_every_code_named<errc>();
}

TEST(error_table, describe_names_the_code_offset_and_detail) {
  std::string line = describe({errc::forbidden_opcode, 2, "GLOBAL would import or call code; refused"});
  EXPECT_EQ(line.rfind("FORBIDDEN_OPCODE at byte 2: ", 0), 0u) << line;
  EXPECT_NE(line.find("GLOBAL"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos) << "one line: " << line;
}

}  // namespace rlmem
