// SPDX-License-Identifier: MIT
// Human sizes, and the JSON report's documented keys on a real snapshot.

#include "fixtures.hpp"

#include <rlmem/report.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace rlmem {

TEST(format, bytes_in_binary_units) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(49'152'000), "46.9 MiB");
  EXPECT_EQ(format_bytes(std::int64_t{5} << 28), "1.25 GiB");
  EXPECT_EQ(format_bytes(-(std::int64_t{3} << 20)), "-3.00 MiB");
  EXPECT_EQ(format_count(188494), "188,494");
  EXPECT_EQ(format_count(7), "7");
}

TEST(json_report, has_the_documented_keys_and_a_bounded_timeline) {
  const snapshot& snap = testing::fixture("grpo_clean.pickle.zst");
  inspection result = inspect(snap);
  auto report = nlohmann::json::parse(render_inspection_json(snap, result, "grpo_clean.pickle.zst"));
  EXPECT_EQ(report["schema_version"], 1);
  EXPECT_EQ(report["summary"]["events"], 188494);
  EXPECT_EQ(report["summary"]["peak_reserved_bytes"], 811'597'824);
  EXPECT_EQ(report["summary"]["peak_allocated_bytes"], result.peak_allocated_bytes);
  ASSERT_FALSE(report["peak"]["by_site"].empty());
  for (const auto& site : report["peak"]["by_site"]) {
    EXPECT_TRUE(site.contains("site") && site.contains("bytes") && site.contains("count") && site.contains("stack")) << site.dump();
  }
  const auto& points = report["timeline"]["points"];
  EXPECT_LE(points.size(), 2000u);
  bool has_peak = false;
  for (const auto& point : points) has_peak = has_peak || point[1] == result.peak_allocated_bytes;
  EXPECT_TRUE(has_peak) << "downsampling must keep the peak";
  EXPECT_EQ(report["allocator_settings"]["expandable_segments"], false);
}

TEST(text_report, fits_in_the_width_and_names_the_peak_site) {
  const snapshot& snap = testing::fixture("grpo_leak_logits.pickle.zst");
  inspection result = inspect(snap);
  std::string text = render_inspection_text(snap, result, "grpo_leak_logits.pickle.zst", {3, 100});
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    EXPECT_LE(line.size(), 100u) << line;
    start = end + 1;
  }
  EXPECT_NE(text.find("rl/record.py:42 logprobs_of"), std::string::npos);
  EXPECT_NE(text.find("peak reserved"), std::string::npos);
}

}  // namespace rlmem
