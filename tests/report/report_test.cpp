// SPDX-License-Identifier: MIT
// Human sizes, and the JSON report's documented keys on a real snapshot.

#include "fixtures.hpp"

#include <rlmem/inspect/compare.hpp>
#include <rlmem/report/report.hpp>

#include <gtest/gtest.h>
#include <algorithm>
#include <limits>
#include <string>
#include <vector>
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

TEST(format, bytes_are_defined_for_every_integer) {
  EXPECT_EQ(format_bytes(std::numeric_limits<std::int64_t>::min()), "-8.00 EiB");
  EXPECT_EQ(format_bytes(std::numeric_limits<std::int64_t>::max()), "8.00 EiB");
  EXPECT_EQ(format_bytes(std::uint64_t{1} << 63), "8.00 EiB");
  EXPECT_EQ(format_bytes(std::numeric_limits<std::uint64_t>::max()), "16.0 EiB");
  EXPECT_EQ(format_bytes(-(std::int64_t{1} << 62)), "-4.00 EiB") << "not -4096.0 PiB";
  EXPECT_EQ(format_bytes(-1), "-1 B");
}

TEST(printable_text, escapes_every_control_and_every_byte_that_is_not_utf8) {
  EXPECT_EQ(printable_text("model.py:12 forward"), "model.py:12 forward");
  EXPECT_EQ(printable_text("caf\xc3\xa9 \xe6\x97\xa5"), "caf\xc3\xa9 \xe6\x97\xa5") << "valid UTF-8 stays";
  EXPECT_EQ(printable_text(std::string_view("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(printable_text("\x1b]0;title\x07\r  LEAK\x08\n\t\x7f"), "\\x1b]0;title\\x07\\x0d  LEAK\\x08\\x0a\\x09\\x7f");
  EXPECT_EQ(printable_text("\xc2\x9b" "31m"), "\\x9b31m") << "C1 control CSI";
  EXPECT_EQ(printable_text("\xff\xc0\xaf\xed\xb3\xbf"), "\\xff\\xc0\\xaf\\xed\\xb3\\xbf") << "invalid, overlong, surrogate";
  EXPECT_EQ(printable_text("\xe2\x80\xae"), "\\u202e") << "bidirectional override";
}

TEST(json_report, has_the_documented_keys_and_a_bounded_timeline) {
  const snapshot& snap = testing::fixture("grpo_clean.pickle.zst");
  inspection result = inspect(snap);
  auto report = nlohmann::json::parse(render_inspection_json(snap, result, "grpo_clean.pickle.zst"));
  EXPECT_EQ(report["schema_version"], 3);
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

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

}  // namespace

// Issue 27 item 5: --frames prints the user's code first, from the frame resolve_site() and the
// page's "your code" name outwards; the frames inside it (torch's optimizer and its wrappers)
// fold into one line that names the innermost.
TEST(text_report, frames_show_the_users_code_first_and_fold_the_frames_inside_it) {
  const snapshot& snap = testing::fixture("grpo_leak_logits.pickle.zst");
  inspection result = inspect(snap);
  const site_usage* optimizer = nullptr;
  for (const site_usage& usage : result.peak_by_site) {
    if (usage.site.label == "rl/record.py:70 grpo_steps") optimizer = &usage;
  }
  ASSERT_NE(optimizer, nullptr) << "expected the optimizer state's site at the peak";
  std::size_t user = user_frame_position(snap, optimizer->site.stack);
  ASSERT_EQ(user, 4u) << "expected _init_group, step, _use_grad and wrapper inside the user's frame";
  EXPECT_EQ(resolve_site(snap, optimizer->site.stack).user_frame, "rl/record.py:70 grpo_steps") << "one rule for both";
  EXPECT_EQ(user_frame_position(snap, 0), 0u) << "a stack with no frames has no user frame";

  std::vector<std::string> lines = lines_of(render_inspection_text(snap, result, "grpo_leak_logits.pickle.zst", {3, 100}));
  std::size_t row = 0;
  while (row < lines.size() && lines[row].find("rl/record.py:70 grpo_steps") == std::string::npos) ++row;
  ASSERT_LT(row + 4, lines.size()) << "expected the site's row and four lines under it";
  const std::string pad(28, ' ');
  const std::vector<std::string> expected = {pad + "grpo_steps (/home/user/rl/record.py:70)",
                                             pad + "record_grpo (/home/user/rl/record.py:101)",
                                             pad + "<module> (/home/user/rl/record.py:199)"};
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(lines[row + 1 + i], expected[i]) << "frame line " << i;
  EXPECT_EQ(lines[row + 4].rfind(pad + "[+4 frames inside (torch, libraries), innermost _init_group (", 0), 0u)
      << "expected the folded frames, seen: " << lines[row + 4];
  for (const std::string& line : lines) EXPECT_LE(line.size(), 100u) << line;
}

// Issue 11: keys and values of the kept KV caches are one leak, with its lines and the share of
// the step-end growth it explains.
TEST(text_report, a_leak_of_two_lines_is_one_entry_that_explains_the_growth) {
  const snapshot& snap = testing::fixture("validation_kv_leak.pickle.zst");
  std::string text = render_inspection_text(snap, inspect(snap), "validation_kv_leak.pickle.zst", {0, 100});
  for (const std::string& line : lines_of(text)) EXPECT_LE(line.size(), 100u) << line;
  EXPECT_NE(text.find("Leaks: 1, explaining 100% of the 3.66 MiB/step growth of allocated memory at step ends"), std::string::npos)
      << text;
  EXPECT_NE(text.find("  LEAK transformers/cache_utils.py:146,147 update  +3.62 MiB per step over 5 steps (from step 1)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("       lines 146 (+1.81 MiB/step, 9.05 MiB in 40), 147 (+1.81 MiB/step, 9.05 MiB in 40)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("       user code: tools/record_validation_snapshots.py:43 main\n"), std::string::npos) << text;
}

// Issue 11: with a loose marker no site grows at the last step end, yet memory grew: the report
// says so instead of "No leaks".
TEST(text_report, growth_without_a_named_leak_is_not_called_no_leaks) {
  const snapshot& snap = testing::fixture("grpo_leak_logits.pickle.zst");
  inspect_options loose;
  loose.step_marker = "grpo_steps";
  std::string text = render_inspection_text(snap, inspect(snap, loose), "grpo_leak_logits.pickle.zst", {0, 100});
  for (const std::string& line : lines_of(text)) EXPECT_LE(line.size(), 100u) << line;
  EXPECT_EQ(text.find("No leaks"), std::string::npos) << text;
  EXPECT_NE(text.find("No leak named, yet allocated memory at step ends grew at 3 of the 4 step ends after step 1:"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(+53.0 MiB per step)"), std::string::npos) << text;
}

// Issue 27 item 3: the comparison's floor is the program's demand, never above a setting's peak
// reserved or smallest capacity; torch's peak allocated (what `inspect` prints) is stated beside
// it, at or above it; no row reserves less than it allocates; a run cut by an OOM says so.
TEST(replay_report, the_floor_is_the_demand_and_torchs_peak_allocated_is_stated_beside_it) {
  const snapshot& snap = testing::fixture("frag_default.pickle.zst");
  replay_options options;
  options.capacity_bytes = 2'805'590'497;
  replay_report report;
  report.file = "frag_default.pickle.zst";
  report.settings = settings_of(snap);
  report.capacity_bytes = options.capacity_bytes;
  report.result = replay(snap, options);
  report.comparison = compare_settings(snap, options);
  const std::int64_t inspected_peak = inspect(snap).peak_allocated_bytes;
  ASSERT_EQ(inspected_peak, 2'646'783'488);

  nlohmann::json json = nlohmann::json::parse(render_replay_json(report));
  EXPECT_EQ(json["floor_bytes"], 2'615'606'784) << "expected the live requests (2,536,141,824) plus the blocks from before recording";
  EXPECT_EQ(json["torch_peak_allocated_bytes"], inspected_peak) << "expected inspect's peak allocated";
  const std::int64_t floor = json["floor_bytes"];
  for (const auto& row : json["compare"]) {
    std::string label = row["label"];
    EXPECT_GE(row["peak_reserved_bytes"].get<std::int64_t>(), row["peak_allocated_bytes"].get<std::int64_t>()) << label;
    EXPECT_GE(row["peak_reserved_bytes"].get<std::int64_t>(), floor) << label << ": reserved under the floor";
    EXPECT_GE(row["min_capacity_bytes"].get<std::int64_t>(), floor) << label << ": completes under the floor";
  }

  std::string text = render_replay_text(report);
  for (const std::string& line : lines_of(text)) EXPECT_LE(line.size(), 100u) << line;
  EXPECT_NE(text.find("  peak allocated   2.29 GiB (up to its OOM)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("floor (peak of the requests)                         2.44 GiB\n"), std::string::npos) << text;
  EXPECT_NE(text.find("torch's peak allocated, 2.47 GiB,"), std::string::npos) << text;
}

TEST(json_report, leaks_carry_their_lines_and_the_summary_their_share_of_the_growth) {
  const snapshot& snap = testing::fixture("validation_kv_leak.pickle.zst");
  auto report = nlohmann::json::parse(render_inspection_json(snap, inspect(snap), "validation_kv_leak.pickle.zst"));
  ASSERT_EQ(report["leaks"].size(), 1u) << report["leaks"].dump();
  const auto& cache = report["leaks"][0];
  EXPECT_EQ(cache["site"], "transformers/cache_utils.py:146,147 update");
  EXPECT_EQ(cache["bytes_per_step"], 3'794'534);
  ASSERT_EQ(cache["lines"].size(), 2u);
  EXPECT_EQ(cache["lines"][0]["line"], 146);
  EXPECT_EQ(cache["lines"][1]["line"], 147);
  EXPECT_EQ(cache["lines"][0]["bytes_per_step"], 1'897'267);
  const auto& growth = report["leak_summary"];
  EXPECT_EQ(growth["growth_per_step_bytes"], 3'833'856);
  EXPECT_EQ(growth["explained_per_step_bytes"], 3'833'856);
  EXPECT_DOUBLE_EQ(growth["explained_fraction"].get<double>(), 1.0);
  EXPECT_EQ(growth["growth_without_named_leak"], false);
}

TEST(json_report, the_leak_summary_is_null_with_fewer_than_3_steps) {
  const snapshot& snap = testing::fixture("tiny_oom_cpp_stacks.pickle");
  auto report = nlohmann::json::parse(render_inspection_json(snap, inspect(snap), "tiny_oom_cpp_stacks.pickle"));
  ASSERT_LT(report["steps"]["count"].get<std::size_t>(), 3u);
  EXPECT_TRUE(report["leak_summary"].is_null()) << report["leak_summary"].dump();
}

// Issue 28 item 10: the chart's row thresholds were top * 8 / 8, which overflowed for a peak near
// 2^63 and drew every row full.
TEST(text_report, the_chart_holds_a_peak_near_int64_max) {
  const snapshot& snap = testing::fixture("grpo_clean.pickle.zst");
  inspection result = inspect(snap);
  constexpr std::int64_t most = std::numeric_limits<std::int64_t>::max();
  result.peak_allocated_bytes = most;
  result.peak_reserved_bytes = most;
  for (std::int64_t& bytes : result.memory.allocated) bytes = most / 2;
  for (std::int64_t& bytes : result.memory.reserved) bytes = most / 2;
  std::vector<std::string> lines = lines_of(render_inspection_text(snap, result, "huge", {0, 100}));
  std::size_t first_row = 0;
  while (first_row < lines.size() && lines[first_row].find("8.00 EiB |") == std::string::npos) ++first_row;
  ASSERT_LT(first_row + 7, lines.size()) << "expected the chart's 8 rows under a top label of 8.00 EiB";
  for (std::size_t row = 0; row < 8; ++row) {
    std::string cells = lines[first_row + row].substr(lines[first_row + row].find('|') + 1);
    // Columns at half the peak fill the rows at or below half (rows 4 to 7) and none above.
    bool full = row >= 4;
    EXPECT_EQ(cells.find_first_not_of(full ? '#' : ' '), std::string::npos)
        << "row " << row << ": expected " << (full ? "all '#'" : "blank") << ", saw '" << cells << "'";
  }
}

// Issue 28 item 14: `diff --top 2` printed every changed row but the third largest. Each section
// shows exactly the N largest changes, then how many more changed.
TEST(diff_text, top_n_shows_exactly_the_n_largest_changes_and_counts_the_rest) {
  inspect_options everything;
  everything.top = std::numeric_limits<std::size_t>::max();
  inspection_diff diff = diff_inspections(inspect(testing::fixture("grpo_clean.pickle.zst"), everything),
                                          inspect(testing::fixture("grpo_leak_logits.pickle.zst"), everything));
  constexpr std::size_t top = 2;
  std::vector<std::string> lines = lines_of(render_diff_text(diff, "a", "b", top, {0, 200}));
  auto section_rows = [&](const std::string& header) {
    std::vector<std::string> rows;
    std::size_t at = 0;
    while (at < lines.size() && lines[at] != header) ++at;
    EXPECT_LT(at, lines.size()) << "expected a section '" << header << "'";
    for (at += 2; at < lines.size() && !lines[at].empty(); ++at) rows.push_back(lines[at]);
    return rows;
  };
  std::size_t sections_with_more = 0;
  for (const auto& [title, all] : {std::pair{"Categories live at peak", &diff.categories_at_peak},
                                   std::pair{"Sites live at peak", &diff.sites_at_peak},
                                   std::pair{"Categories live at end", &diff.categories_at_end},
                                   std::pair{"Sites live at end", &diff.sites_at_end}}) {
    std::vector<const diff_row*> changed;
    for (const diff_row& row : *all) {
      if (row.delta() != 0) changed.push_back(&row);
    }
    if (changed.empty()) continue;
    std::vector<std::string> rows = section_rows(std::string(title) + " (" + std::to_string(changed.size()) + " changed)");
    std::size_t shown = std::min(top, changed.size());
    std::size_t more = changed.size() - shown;
    ASSERT_EQ(rows.size(), shown + (more > 0 ? 1 : 0)) << title << ": expected " << shown << " rows and " << (more > 0 ? "a 'more' line" : "none");
    for (std::size_t i = 0; i < shown; ++i) {
      EXPECT_NE(rows[i].find(changed[i]->key.substr(0, 100)), std::string::npos)
          << title << ": expected row " << i << " to be " << changed[i]->key << ", saw " << rows[i];
    }
    if (more > 0) {
      ++sections_with_more;
      EXPECT_EQ(rows.back(), "  (" + std::to_string(more) + " more; --top N shows more)") << title;
    }
  }
  EXPECT_GT(sections_with_more, 0u) << "expected a section with more than " << top << " changes, so the test bites";
}

}  // namespace rlmem
