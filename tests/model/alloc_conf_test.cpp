// SPDX-License-Identifier: MIT
// Allocator settings: the PYTORCH_CUDA_ALLOC_CONF parser, and which of a snapshot's recorded
// settings decide.

#include "inspect/crafted.hpp"

#include <rlmem/model/allocator_settings.hpp>

#include <gtest/gtest.h>

#include <string>

namespace rlmem {

TEST(alloc_conf, parses_the_settings_that_change_decisions) {
  allocator_settings settings;
  std::string message;
  ASSERT_TRUE(parse_alloc_conf("expandable_segments:True, max_split_size_mb:128,roundup_power2_divisions:[256:1,512:2,>:8]",
                               settings, message)) << message;
  EXPECT_TRUE(settings.expandable_segments);
  EXPECT_EQ(settings.max_split_size, std::uint64_t{128} << 20);
  EXPECT_EQ(settings.roundup_power2_divisions[8], 1u);   // 256 MiB bucket
  EXPECT_EQ(settings.roundup_power2_divisions[9], 2u);   // 512 MiB
  EXPECT_EQ(settings.roundup_power2_divisions[10], 8u);  // > fills after the last one
  EXPECT_EQ(settings.roundup_power2_divisions[0], 1u);   // the first value fills below it
  EXPECT_EQ(to_alloc_conf(allocator_settings{}), "");
  ASSERT_TRUE(parse_alloc_conf(to_alloc_conf(settings), settings, message)) << message;
}

TEST(alloc_conf, refuses_what_it_cannot_model_with_a_reason) {
  allocator_settings settings;
  std::string message;
  EXPECT_FALSE(parse_alloc_conf("backend:cudaMallocAsync", settings, message));
  EXPECT_NE(message.find("cudaMallocAsync"), std::string::npos);
  EXPECT_FALSE(parse_alloc_conf("max_split_size_mb:10", settings, message));
  EXPECT_FALSE(parse_alloc_conf("expandable_segments:yes", settings, message));
  EXPECT_FALSE(parse_alloc_conf("frobnicate:1", settings, message));
  EXPECT_NE(message.find("frobnicate"), std::string::npos);
}

TEST(alloc_conf, refuses_numbers_out_of_range_instead_of_wrapping) {
  allocator_settings settings;
  std::string message;
  EXPECT_FALSE(parse_alloc_conf("max_split_size_mb:17592186044416", settings, message)) << "2^44 MB wraps to 0 bytes";
  EXPECT_NE(message.find("from 20 to 8796093022207"), std::string::npos) << message;
  EXPECT_FALSE(parse_alloc_conf("max_non_split_rounding_mb:99999999999999999999", settings, message));
  EXPECT_FALSE(parse_alloc_conf("roundup_power2_divisions:4294967296", settings, message)) << "truncated to 0, the defaults";
  EXPECT_NE(message.find("from 0 to 4294967295"), std::string::npos) << message;
  EXPECT_FALSE(parse_alloc_conf("roundup_power2_divisions:[256:4294967296]", settings, message));
  EXPECT_FALSE(parse_alloc_conf("garbage_collection_threshold:0.5x", settings, message)) << "trailing text";
  EXPECT_FALSE(parse_alloc_conf("garbage_collection_threshold:nan", settings, message));
  EXPECT_TRUE(parse_alloc_conf("max_split_size_mb:8796093022207,roundup_power2_divisions:4294967295", settings, message)) << message;
  EXPECT_EQ(settings.max_split_size, std::uint64_t{8796093022207} << 20);
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
