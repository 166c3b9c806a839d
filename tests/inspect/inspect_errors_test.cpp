// SPDX-License-Identifier: MIT
// The inspect part's error table: one distinct NAME and a message per code; the built-in category
// rules, parsed by the same parser as a user's, all parse.

#include "error_table_checks.hpp"

#include <rlmem/inspect/inspect.hpp>
#include <rlmem/inspect/inspect_errors.hpp>

#include <gtest/gtest.h>

#include <string_view>

namespace rlmem {

TEST(inspect_error_table, every_code_has_a_distinct_name_and_message) {
  testing::expect_every_code_named<inspect_errc>();
}

TEST(inspect_error_table, the_built_in_category_rules_parse) {
  EXPECT_GT(default_category_rules().size(), 20u) << "expected the built-in table parsed whole";
}

TEST(inspect_error_table, an_option_out_of_range_is_refused_before_the_snapshot_is_read) {
  inspect_options options;
  options.top = 0;
  auto checked = inspect_checked(snapshot{}, options);
  EXPECT_EQ(checked.code(), inspect_errc::option_out_of_range) << error_name(checked.code());
  EXPECT_EQ(checked.failure().detail, "--top: '0' is not a whole number from 1 to 1000000");
}

TEST(inspect_error_table, a_device_the_snapshot_lacks_is_named) {
  inspect_options options;
  options.device = 3;
  auto checked = inspect_checked(snapshot{}, options);
  EXPECT_EQ(checked.code(), inspect_errc::no_such_device) << error_name(checked.code());
  EXPECT_EQ(checked.failure().detail, "has no device 3 (devices: none)");
}

}  // namespace rlmem
