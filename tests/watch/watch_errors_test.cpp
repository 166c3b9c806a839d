// SPDX-License-Identifier: MIT
// The watch part's error table: one distinct NAME and a message per code.

#include "error_table_checks.hpp"

#include <rlmem/watch/watch_errors.hpp>

#include <gtest/gtest.h>

#include <string_view>

namespace rlmem {

TEST(watch_error_table, every_code_has_a_distinct_name_and_message) {
  testing::expect_every_code_named<watch_errc>();
}

}  // namespace rlmem
