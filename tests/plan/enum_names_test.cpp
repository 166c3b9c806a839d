// SPDX-License-Identifier: MIT
// Each knob's table of names reads both ways: every value has a printed name, the name parses
// back to it, and no name stands for two values (the offload was once spelled in four places).
#include <rlmem/plan/plan.hpp>

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace rlmem {

namespace {

template <class Enum, std::size_t N>
void expect_round_trip(const enum_names<Enum, N>& table, std::size_t values, const char* what) {
  std::set<std::string_view> names;
  for (const enum_name<Enum>& entry : table) {
    EXPECT_TRUE(names.insert(entry.name).second) << what << ": '" << entry.name << "' is listed twice";
    EXPECT_LT(static_cast<std::size_t>(entry.value), values) << what << ": '" << entry.name << "' names no value";
  }
  for (std::size_t k = 0; k < values; ++k) {
    auto value = static_cast<Enum>(k);
    std::string_view printed = name_of(table, value);
    EXPECT_NE(printed, "?") << what << ": value " << k << " has no name";
    EXPECT_EQ(value_named(table, printed), value) << what << ": '" << printed << "' does not parse back to value " << k;
  }
}

}  // namespace

TEST(enum_names, every_knob_prints_and_parses_through_one_table) {
  expect_round_trip(plan_phase_names, 3, "plan_phase");
  expect_round_trip(optimizer_kind_names, 3, "optimizer_kind");
  expect_round_trip(precision_kind_names, 3, "precision_kind");
  expect_round_trip(logprob_impl_names, 5, "logprob_impl");
  expect_round_trip(kv_cache_kind_names, 2, "kv_cache_kind");
  expect_round_trip(shard_kind_names, 4, "shard_kind");
  expect_round_trip(offload_level_names, 3, "offload_level");
  expect_round_trip(reference_kind_names, 3, "reference_kind");
  expect_round_trip(rollout_kind_names, 3, "rollout_kind");
}

TEST(enum_names, an_alias_parses_but_the_first_name_prints) {
  EXPECT_EQ(value_named(shard_kind_names, "zero3"), shard_kind::fsdp);
  EXPECT_EQ(to_string(shard_kind::fsdp), "fsdp");
  EXPECT_EQ(value_named(shard_kind_names, "zero4"), std::nullopt);
  EXPECT_EQ(names_list(offload_level_names), "none, optimizer, all");
}

TEST(enum_names, the_offload_of_the_knobs_is_its_two_switches) {
  for (offload_level level : {offload_level::none, offload_level::optimizer, offload_level::all}) {
    plan_knobs knobs;
    set_offload(knobs, level);
    EXPECT_EQ(offload_of(knobs), level) << to_string(level);
  }
  plan_knobs both;
  set_offload(both, offload_level::all);
  EXPECT_TRUE(both.offload_optimizer && both.offload_weights) << "all moves the optimizer state with the weights";
}

}  // namespace rlmem
