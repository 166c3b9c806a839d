// SPDX-License-Identifier: MIT
// Runs recorded after inspect was written (tools/record_validation_snapshots.py), with torch's
// own counters beside them: every figure must match to the byte.

#include "fixtures.hpp"

#include <rlmem/inspect.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace rlmem {

using testing::fixture;

namespace {

nlohmann::json facts_of(const std::string& name) {
  std::ifstream input(testing::testdata("snapshots/validation_" + name + ".json"));
  return nlohmann::json::parse(input);
}

}  // namespace

class validation : public ::testing::TestWithParam<const char*> {};

TEST_P(validation, peaks_and_every_step_end_equal_torchs_counters) {
  std::string name = GetParam();
  nlohmann::json facts = facts_of(name);
  inspection result = inspect(fixture("validation_" + name + ".pickle.zst"));
  EXPECT_EQ(result.peak_allocated_bytes, facts["peak_allocated"].get<std::int64_t>());
  EXPECT_EQ(result.peak_reserved_bytes, facts["peak_reserved"].get<std::int64_t>());
  const auto& ends = facts["allocated_at_step_ends"];
  ASSERT_EQ(result.steps.size(), ends.size()) << result.step_method;
  for (std::size_t k = 0; k < ends.size(); ++k) {
    EXPECT_EQ(result.steps[k].allocated_bytes, ends[k].get<std::int64_t>()) << "step " << k + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(recorded, validation, ::testing::Values("kv_leak", "clean_varlen"));

TEST(validation, generation_lengths_that_vary_are_not_a_leak) {
  EXPECT_TRUE(inspect(fixture("validation_clean_varlen.pickle.zst")).leaks.empty());
}

TEST(validation, kv_caches_kept_in_a_list_leak_from_cache_utils) {
  inspection result = inspect(fixture("validation_kv_leak.pickle.zst"));
  ASSERT_FALSE(result.leaks.empty());
  std::int64_t per_step = 0;
  for (const leak& found : result.leaks) {
    EXPECT_NE(found.site.label.find("transformers/cache_utils.py"), std::string::npos) << found.site.label;
    EXPECT_EQ(found.first_step, 1u);
    per_step += found.bytes_per_step;
  }
  // Torch saw 15,335,424 bytes of growth over steps 2 to 5; the first step kept one cache too.
  nlohmann::json facts = facts_of("kv_leak");
  double torch_growth = static_cast<double>(facts["allocated_at_step_ends"][4].get<std::int64_t>() -
                                            facts["allocated_at_step_ends"][0].get<std::int64_t>()) / 4.0;
  EXPECT_NEAR(static_cast<double>(per_step), torch_growth, 0.15 * torch_growth);
  EXPECT_GT(result.categories_at_end[static_cast<std::size_t>(memory_category::kv_cache)], 0);
}

}  // namespace rlmem
