// SPDX-License-Identifier: MIT
// The model part's error table: one distinct NAME and a message per code.

#include "error_table_checks.hpp"

#include <rlmem/model/model_errors.hpp>

#include <gtest/gtest.h>

#include <string_view>

namespace rlmem {

TEST(model_error_table, every_code_has_a_distinct_name_and_message) {
  testing::expect_every_code_named<model_errc>();
}

}  // namespace rlmem
