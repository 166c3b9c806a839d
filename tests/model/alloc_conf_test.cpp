// SPDX-License-Identifier: MIT
// Allocator settings: the PYTORCH_CUDA_ALLOC_CONF parser, and which of a snapshot's recorded
// settings decide.

#include "inspect/crafted.hpp"

#include <rlmem/model/allocator_settings.hpp>

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <tuple>
#include <utility>

namespace rlmem {

TEST(alloc_conf, parses_the_settings_that_change_decisions) {
  auto parsed = parse_alloc_conf("expandable_segments:True, max_split_size_mb:128,roundup_power2_divisions:[256:1,512:2,>:8]");
  ASSERT_TRUE(parsed.ok()) << parsed.failure().detail;
  EXPECT_EQ(parsed.code(), model_errc::ok);
  const allocator_settings& settings = parsed.value();
  EXPECT_TRUE(settings.expandable_segments);
  EXPECT_EQ(settings.max_split_size, std::uint64_t{128} << 20);
  EXPECT_EQ(settings.roundup_power2_divisions[8], 1u);   // 256 MiB bucket
  EXPECT_EQ(settings.roundup_power2_divisions[9], 2u);   // 512 MiB
  EXPECT_EQ(settings.roundup_power2_divisions[10], 8u);  // > fills after the last one
  EXPECT_EQ(settings.roundup_power2_divisions[0], 1u);   // the first value fills below it
  EXPECT_EQ(to_alloc_conf(allocator_settings{}), "");
  auto again = parse_alloc_conf(to_alloc_conf(settings));
  ASSERT_TRUE(again.ok()) << again.failure().detail;
  EXPECT_EQ(again.value(), settings);
}

// The code a refusal of `conf` carries, and its line.
std::pair<model_errc, std::string> refusal_of(std::string_view conf, const alloc_conf_limits& limits = {}) {
  auto parsed = parse_alloc_conf(conf, limits);
  return {parsed.code(), parsed.failure().detail};
}

TEST(alloc_conf, refuses_what_it_cannot_model_with_a_code_and_a_reason) {
  auto [code, line] = refusal_of("backend:cudaMallocAsync");
  EXPECT_EQ(code, model_errc::unsupported_backend) << line;
  EXPECT_EQ(line, "backend:cudaMallocAsync is not the caching allocator rlmem models");
  EXPECT_EQ(refusal_of("max_split_size_mb:10").first, model_errc::size_out_of_range);
  EXPECT_EQ(refusal_of("expandable_segments:yes").first, model_errc::not_true_or_false);
  EXPECT_EQ(refusal_of("expandable_segments").first, model_errc::missing_value);
  std::tie(code, line) = refusal_of("frobnicate:1");
  EXPECT_EQ(code, model_errc::unknown_key) << line;
  EXPECT_EQ(line, "unknown allocator setting 'frobnicate'");
  EXPECT_EQ(refusal_of("roundup_power2_divisions:[3:1]").first, model_errc::divisions_key_not_power_of_two);
  EXPECT_EQ(refusal_of("roundup_power2_divisions:[256]").first, model_errc::malformed_divisions);
  EXPECT_EQ(refusal_of("roundup_power2_divisions:four").first, model_errc::malformed_divisions);
}

TEST(alloc_conf, refuses_numbers_out_of_range_instead_of_wrapping) {
  auto [code, line] = refusal_of("max_split_size_mb:17592186044416");
  EXPECT_EQ(code, model_errc::size_out_of_range) << "2^44 MB wraps to 0 bytes";
  EXPECT_NE(line.find("from 20 to 8796093022207"), std::string::npos) << line;
  EXPECT_EQ(refusal_of("max_non_split_rounding_mb:99999999999999999999").first, model_errc::size_out_of_range);
  std::tie(code, line) = refusal_of("roundup_power2_divisions:4294967296");
  EXPECT_EQ(code, model_errc::divisions_out_of_range) << "truncated to 0, the defaults";
  EXPECT_NE(line.find("from 0 to 4294967295"), std::string::npos) << line;
  EXPECT_EQ(refusal_of("roundup_power2_divisions:[256:4294967296]").first, model_errc::divisions_out_of_range);
  EXPECT_EQ(refusal_of("garbage_collection_threshold:0.5x").first, model_errc::threshold_out_of_range) << "trailing text";
  EXPECT_EQ(refusal_of("garbage_collection_threshold:nan").first, model_errc::threshold_out_of_range);
  auto largest = parse_alloc_conf("max_split_size_mb:8796093022207,roundup_power2_divisions:4294967295");
  ASSERT_TRUE(largest.ok()) << largest.failure().detail;
  EXPECT_EQ(largest.value().max_split_size, std::uint64_t{8796093022207} << 20);
}

TEST(alloc_conf, limits_are_parameters_and_never_above_what_the_settings_hold) {
  alloc_conf_limits tight;
  tight.max_megabytes = 1024;
  tight.max_divisions = 8;
  auto [code, line] = refusal_of("max_split_size_mb:2048", tight);
  EXPECT_EQ(code, model_errc::size_out_of_range);
  EXPECT_EQ(line, "max_split_size_mb '2048' is not a whole number from 20 to 1024");
  EXPECT_EQ(refusal_of("roundup_power2_divisions:16", tight).first, model_errc::divisions_out_of_range);
  EXPECT_TRUE(parse_alloc_conf("max_split_size_mb:1024,roundup_power2_divisions:8", tight).ok());
  alloc_conf_limits loose;
  loose.max_megabytes = UINT64_MAX;
  loose.max_divisions = UINT64_MAX;
  EXPECT_EQ(refusal_of("max_split_size_mb:17592186044416", loose).first, model_errc::size_out_of_range)
      << "expected a limit above the default read as the default, so 2^44 MB still does not wrap";
  EXPECT_EQ(refusal_of("roundup_power2_divisions:4294967296", loose).first, model_errc::divisions_out_of_range);
}

TEST(settings_of, the_recorded_alloc_conf_string_decides_over_the_separate_keys) {
  snapshot snap = testing::crafted_snapshot{}.build();
  plain_value conf;
  conf.type = plain_value::kind::text;
  conf.text = "max_split_size_mb:128,roundup_power2_divisions:4";
  plain_value split;
  split.type = plain_value::kind::integer;
  split.integer = std::int64_t{64} << 20;
  snap.allocator_settings = {{"PYTORCH_CUDA_ALLOC_CONF", conf}, {"max_split_size", split}};
  allocator_settings settings = settings_of(snap);
  EXPECT_EQ(settings.max_split_size, std::uint64_t{128} << 20) << "expected the string's 128 MiB, saw " << (settings.max_split_size >> 20);
  EXPECT_EQ(settings.roundup_power2_divisions[3], 4u);

  snap.allocator_settings[0].second.text = "max_split_size_mb:nonsense";
  settings = settings_of(snap);
  EXPECT_EQ(settings.max_split_size, std::uint64_t{64} << 20) << "a string that does not parse leaves the separate keys";
  EXPECT_EQ(settings.roundup_power2_divisions[3], 0u);
}

}  // namespace rlmem
