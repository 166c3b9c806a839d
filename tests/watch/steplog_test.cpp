// SPDX-License-Identifier: MIT
// The StepMonitor log: parsing one line against the schema's contract, and following a file as
// a job writes it (appends, a half-written last line, truncation, rotation, garbage, bounds).

#include "fixtures.hpp"
#include "json_schema.hpp"
#include "watch/steplog_lines.hpp"

#include <rlmem/watch/watch.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <limits>

namespace rlmem {

namespace {

using testing::gib;
using testing::line_of;
using testing::mib;
using testing::steplog_json;
using testing::temp_log;

// The reason a refused line is shown with, after checking the refusal's code.
std::string parse_failure(const std::string& line, watch_errc expected) {
  auto parsed = parse_steplog_line(line);
  EXPECT_FALSE(parsed.ok()) << "expected refused: " << line.substr(0, 200);
  EXPECT_EQ(parsed.code(), expected) << "expected " << error_name(expected) << ", saw " << error_name(parsed.code()) << " for "
                                     << line.substr(0, 200);
  return parsed.failure().detail;
}

}  // namespace

TEST(watch_steplog_line, parses_the_figures_and_the_alerts) {
  nlohmann::json line = steplog_json(42);
  line["alerts"] = {{{"kind", "leak"}, {"rank", 0}, {"message", "grows 48.0 MiB/step"}, {"bytes_per_step", 48 * mib},
                     {"since_step", 37}, {"site", "rl/grpo.py:212 compute_logprobs"}, {"snapshot", "runs/leak.pickle"}}};
  line["step_seconds"] = nullptr;
  auto parsed = parse_steplog_line(line.dump());
  ASSERT_TRUE(parsed.ok()) << parsed.failure().detail;
  const steplog_record& record = parsed.value();
  EXPECT_EQ(record.step, 42);
  EXPECT_EQ(record.reserved, 34 * gib);
  EXPECT_EQ(record.step_peak_reserved, 34 * gib);
  EXPECT_TRUE(record.peak_is_per_step);
  EXPECT_FALSE(record.step_seconds);
  EXPECT_EQ(record.device_total, testing::h100_total);
  ASSERT_EQ(record.alerts.size(), 1u);
  EXPECT_EQ(record.alerts[0].kind, "leak");
  EXPECT_EQ(record.alerts[0].bytes_per_step, 48 * mib);
  EXPECT_EQ(record.alerts[0].since_step, 37);
  EXPECT_EQ(record.alerts[0].site, "rl/grpo.py:212 compute_logprobs");
}

TEST(watch_steplog_line, reads_the_runtimes_tags_and_refuses_malformed_ones) {
  nlohmann::json line = steplog_json(7);
  nlohmann::json train = {{"name", "train"}, {"paused", true}, {"allocated_bytes", {{"current", 3 * gib}, {"peak", 4 * gib}, {"total", 9 * gib}}},
                          {"mapped_bytes", {{"current", 0}, {"peak", 4 * gib}, {"total", 8 * gib}}}, {"pauses", 2},
                          {"last_pause", {{"copied_bytes", 3 * gib}, {"seconds", 0.25}}}, {"last_resume", {{"copied_bytes", 0}, {"seconds", 0.5}}}};
  line["runtime_tags"] = {train};
  auto parsed = parse_steplog_line(line.dump());
  ASSERT_TRUE(parsed.ok()) << parsed.failure().detail;
  const steplog_record& record = parsed.value();
  ASSERT_EQ(record.runtime_tags.size(), 1u);
  EXPECT_EQ(record.runtime_tags[0].name, "train");
  EXPECT_TRUE(record.runtime_tags[0].paused);
  EXPECT_EQ(record.runtime_tags[0].allocated, 3 * gib);
  EXPECT_EQ(record.runtime_tags[0].mapped, 0);
  EXPECT_EQ(record.runtime_tags[0].last_pause_seconds, 0.25);

  line["runtime_tags"] = nlohmann::json::array();
  for (int i = 0; i < 40; ++i) line["runtime_tags"].push_back(train);
  const std::size_t kept = steplog_line_limits{}.max_runtime_tags;
  auto many = parse_steplog_line(line.dump());
  ASSERT_TRUE(many.ok()) << many.failure().detail;
  EXPECT_EQ(many.value().runtime_tags.size(), kept);
  EXPECT_EQ(many.value().runtime_tags_left_out, 40 - kept);
  steplog_line_limits fewer;
  fewer.max_runtime_tags = 3;
  auto capped = parse_steplog_line(line.dump(), fewer);
  ASSERT_TRUE(capped.ok()) << capped.failure().detail;
  EXPECT_EQ(capped.value().runtime_tags.size(), 3u) << "expected the limit passed, not the default";
  EXPECT_EQ(capped.value().runtime_tags_left_out, 37u);

  train["mapped_bytes"] = -1;
  line["runtime_tags"] = {train};
  EXPECT_EQ(parse_failure(line.dump(), watch_errc::wrong_type), "runtime_tags[0].mapped_bytes missing or not an object");
  train["mapped_bytes"] = {{"current", -1}};
  line["runtime_tags"] = {train};
  EXPECT_EQ(parse_failure(line.dump(), watch_errc::not_a_count), "runtime_tags[0].mapped_bytes: 'current' is not a non-negative integer");
}

TEST(watch_steplog_line, ignores_keys_it_does_not_use_and_optional_ones_absent) {
  nlohmann::json line = steplog_json(1);
  line.erase("step_peak_reserved");
  line.erase("peak_is_per_step");
  line.erase("step_seconds");
  line["ranks"] = {{{"rank", 0}, {"allocated", 1}, {"reserved", 2}, {"step_peak_allocated", 3}, {"device_total", 4}}};
  line["written_by_a_newer_monitor"] = {1, 2, 3};
  auto parsed = parse_steplog_line(line.dump());
  ASSERT_TRUE(parsed.ok()) << parsed.failure().detail;
  EXPECT_FALSE(parsed.value().step_peak_reserved);
  EXPECT_FALSE(parsed.value().peak_is_per_step);
}

TEST(watch_steplog_line, says_why_a_line_is_no_record) {
  EXPECT_EQ(parse_failure("Traceback (most recent call last):", watch_errc::not_json), "not JSON");
  EXPECT_EQ(parse_failure("[1, 2]", watch_errc::not_an_object), "not a JSON object");
  EXPECT_EQ(parse_failure(R"({"step": 1})", watch_errc::not_a_steplog_line), "no 'schema' key: not a StepMonitor line");
  nlohmann::json other = steplog_json(1);
  other["schema"] = "rlmem.steplog/2";
  EXPECT_EQ(parse_failure(other.dump(), watch_errc::unknown_schema), "schema 'rlmem.steplog/2' is not rlmem.steplog/1");
  nlohmann::json missing = steplog_json(1);
  missing.erase("reserved");
  EXPECT_EQ(parse_failure(missing.dump(), watch_errc::missing_key), "'reserved' missing");
  nlohmann::json negative = steplog_json(1);
  negative["allocated"] = -5;
  EXPECT_EQ(parse_failure(negative.dump(), watch_errc::not_a_count), "'allocated' is not a non-negative integer");
  nlohmann::json fractional = steplog_json(1);
  fractional["allocated"] = 1.5e9;
  EXPECT_EQ(parse_failure(fractional.dump(), watch_errc::not_a_count), "'allocated' is not a non-negative integer");
  nlohmann::json bad_alert = steplog_json(1);
  bad_alert["alerts"] = {{{"kind", "leak"}, {"rank", 0}}};
  EXPECT_EQ(parse_failure(bad_alert.dump(), watch_errc::missing_key), "alerts[0]: 'message' missing or not a string");
  nlohmann::json shrinking = steplog_json(1);
  shrinking["alerts"] = {{{"kind", "leak"}, {"rank", 0}, {"message", "m"}, {"bytes_per_step", std::numeric_limits<std::int64_t>::min()}}};
  EXPECT_EQ(parse_failure(shrinking.dump(), watch_errc::not_a_count), "alerts[0]: 'bytes_per_step' is not a non-negative integer");
  nlohmann::json no_world = steplog_json(1);
  no_world["world_size"] = 0;
  EXPECT_EQ(parse_failure(no_world.dump(), watch_errc::invalid_value), "'world_size' is 0");
}

TEST(watch_steplog_line, survives_deep_nesting) {
  // Under the 1 MiB line limit, but deep enough to overflow a recursive parser's stack.
  std::string deep = std::string(400'000, '[') + std::string(400'000, ']');
  EXPECT_EQ(parse_failure(deep, watch_errc::not_an_object), "not a JSON object");
}

struct steplog_sample {
  const char* file;
  std::size_t lines;
  std::size_t alerts;
};

// ctest names a parameterized test by its printed parameter: the file, not the struct's bytes.
void PrintTo(const steplog_sample& sample, std::ostream* out) { *out << sample.file; }

class watch_steplog_samples : public ::testing::TestWithParam<steplog_sample> {};

// The contract with the Python writer: every line of its logs (one recorded by StepMonitor on an
// H100, one written from the schema) follows the schema, and the parser takes every one.
TEST_P(watch_steplog_samples, every_line_follows_the_schema_and_parses) {
  std::ifstream input(testing::testdata(std::string("steplog/") + GetParam().file));
  ASSERT_TRUE(input) << GetParam().file;
  std::string line;
  std::size_t lines = 0;
  std::size_t alerts = 0;
  while (std::getline(input, line)) {
    ++lines;
    auto problems = testing::schema_problems(nlohmann::json::parse(line), "steplog.schema.json");
    for (const std::string& problem : problems) ADD_FAILURE() << "line " << lines << ": " << problem;
    auto parsed = parse_steplog_line(line);
    EXPECT_TRUE(parsed.ok()) << "line " << lines << ": " << parsed.failure().detail;
    if (parsed.ok()) alerts += parsed.value().alerts.size();
  }
  EXPECT_EQ(lines, GetParam().lines);
  EXPECT_EQ(alerts, GetParam().alerts);
}

INSTANTIATE_TEST_SUITE_P(testdata, watch_steplog_samples,
                         ::testing::Values(steplog_sample{"h100_leak_loop.jsonl", 90, 3},
                                           steplog_sample{"grpo_qwen0.5b_h100_leak.jsonl", 120, 2}));

TEST(watch_steplog_follower, reads_lines_as_they_are_appended) {
  temp_log log;
  log.append(line_of(steplog_json(1)) + line_of(steplog_json(2)));
  steplog_follower follower(log.path());
  follower.poll();
  EXPECT_EQ(follower.state(), steplog_file_state::following);
  ASSERT_EQ(follower.records().size(), 2u);
  follower.poll();  // nothing new
  EXPECT_EQ(follower.records().size(), 2u);
  log.append(line_of(steplog_json(3)));
  follower.poll();
  ASSERT_EQ(follower.records().size(), 3u);
  EXPECT_EQ(follower.records().back().step, 3);
  EXPECT_EQ(follower.lines_parsed(), 3u);
  EXPECT_EQ(follower.lines_skipped(), 0u);
}

TEST(watch_steplog_follower, waits_for_the_end_of_a_half_written_line) {
  temp_log log;
  std::string second = line_of(steplog_json(2));
  log.append(line_of(steplog_json(1)) + second.substr(0, 50));
  steplog_follower follower(log.path());
  follower.poll();
  EXPECT_EQ(follower.records().size(), 1u);
  EXPECT_EQ(follower.pending_bytes(), 50u);
  EXPECT_EQ(follower.lines_skipped(), 0u) << "half a line is not a bad line";
  log.append(second.substr(50, 100));
  follower.poll();
  EXPECT_EQ(follower.records().size(), 1u);
  log.append(second.substr(150));
  follower.poll();
  ASSERT_EQ(follower.records().size(), 2u);
  EXPECT_EQ(follower.records().back().step, 2);
  EXPECT_EQ(follower.pending_bytes(), 0u);
}

TEST(watch_steplog_follower, starts_over_when_the_file_is_truncated) {
  temp_log log;
  for (int step = 1; step <= 5; ++step) log.append(line_of(steplog_json(step)));
  steplog_follower follower(log.path());
  follower.poll();
  ASSERT_EQ(follower.records().size(), 5u);
  log.truncate();
  log.append(line_of(steplog_json(1)) + line_of(steplog_json(2)));
  follower.poll();
  ASSERT_EQ(follower.records().size(), 2u) << "a new run: the old series is dropped";
  EXPECT_EQ(follower.records().front().step, 1);
  EXPECT_EQ(follower.reopened(), 1u);
  EXPECT_EQ(follower.series_restarts(), 1u);
}

TEST(watch_steplog_follower, notices_a_truncation_already_written_past) {
  temp_log log;
  for (int step = 1; step <= 3; ++step) log.append(line_of(steplog_json(step)));
  steplog_follower follower(log.path());
  follower.poll();
  log.truncate();
  // Between two polls the new run writes more than the old file held (at later times).
  for (int step = 1; step <= 6; ++step) {
    nlohmann::json again = steplog_json(step);
    again["time"] = 1800000000.0 + step;
    log.append(line_of(again));
  }
  follower.poll();
  ASSERT_EQ(follower.records().size(), 6u);
  EXPECT_EQ(follower.records().front().step, 1);
  EXPECT_EQ(follower.lines_skipped(), 0u) << "no half line read from the middle of the new file";
  EXPECT_EQ(follower.reopened(), 1u);
}

TEST(watch_steplog_follower, reads_a_rotated_file_to_its_end_then_the_new_one) {
  temp_log log;
  log.append(line_of(steplog_json(1)) + line_of(steplog_json(2)));
  steplog_follower follower(log.path());
  follower.poll();
  // The writer keeps its descriptor across the rename and writes once more before reopening.
  std::ofstream writer(log.path(), std::ios::binary | std::ios::app);
  log.rotate();
  writer << line_of(steplog_json(3)) << std::flush;
  log.append(line_of(steplog_json(4)));  // the new file under the old name
  follower.poll();
  ASSERT_EQ(follower.records().size(), 4u);
  EXPECT_EQ(follower.records()[2].step, 3) << "the old file's last line comes first";
  EXPECT_EQ(follower.records()[3].step, 4);
  EXPECT_EQ(follower.reopened(), 1u);
  EXPECT_EQ(follower.series_restarts(), 0u);
}

TEST(watch_steplog_follower, skips_garbage_and_counts_it) {
  temp_log log;
  log.append(line_of(steplog_json(1)));
  log.append("Traceback (most recent call last):\n");
  log.append("{\"schema\": \"rlmem.steplog/1\", \"step\": 2}\n");
  log.append(std::string("\x00\xff\xfe binary\n", 11));
  log.append("\n   \n");  // blank lines are nothing, not garbage
  log.append(line_of(steplog_json(2)));
  steplog_follower follower(log.path());
  follower.poll();
  EXPECT_EQ(follower.records().size(), 2u);
  EXPECT_EQ(follower.lines_skipped(), 3u);
  EXPECT_EQ(follower.last_skip().rfind("at byte ", 0), 0u) << follower.last_skip();
  EXPECT_NE(follower.last_skip().find("not JSON"), std::string::npos) << follower.last_skip();
}

TEST(watch_steplog_follower, keeps_memory_within_its_limits) {
  temp_log log;
  for (int step = 1; step <= 50; ++step) {
    nlohmann::json line = steplog_json(step);
    line["alerts"] = {{{"kind", "headroom"}, {"rank", 0}, {"message", "step " + std::to_string(step)}}};
    log.append(line_of(line));
  }
  steplog_limits limits;
  limits.history_steps = 10;
  limits.alerts_kept = 4;
  steplog_follower follower(log.path(), limits);
  follower.poll();
  ASSERT_EQ(follower.records().size(), 10u);
  EXPECT_EQ(follower.records().front().step, 41);
  ASSERT_EQ(follower.alerts().size(), 4u);
  EXPECT_EQ(follower.alerts().back().alert.message, "step 50");
}

TEST(watch_steplog_follower, skips_a_line_longer_than_the_limit_even_across_polls) {
  temp_log log;
  steplog_limits limits;
  limits.max_line_bytes = 1000;
  steplog_follower follower(log.path(), limits);
  log.append(std::string(700, 'x'));
  follower.poll();
  log.append(std::string(700, 'y'));  // still no newline: over the limit now
  follower.poll();
  EXPECT_EQ(follower.lines_skipped(), 1u);
  EXPECT_NE(follower.last_skip().find("longer than"), std::string::npos) << follower.last_skip();
  EXPECT_LE(follower.pending_bytes(), 1000u);
  log.append(std::string(5000, 'z') + "\n" + line_of(steplog_json(1)));
  follower.poll();
  EXPECT_EQ(follower.lines_skipped(), 1u) << "the rest of the long line is not a second bad line";
  ASSERT_EQ(follower.records().size(), 1u);
}

TEST(watch_steplog_follower, waits_for_a_file_that_does_not_exist_yet) {
  temp_log log;
  steplog_follower follower(log.path());
  follower.poll();
  EXPECT_EQ(follower.state(), steplog_file_state::waiting);
  EXPECT_TRUE(follower.records().empty());
  log.append(line_of(steplog_json(1)));
  follower.poll();
  EXPECT_EQ(follower.state(), steplog_file_state::following);
  EXPECT_EQ(follower.records().size(), 1u);
  std::filesystem::remove(log.path());
  follower.poll();
  EXPECT_EQ(follower.state(), steplog_file_state::waiting);
  EXPECT_EQ(follower.records().size(), 1u) << "what was read stays shown";
}

TEST(watch_steplog_follower, reads_only_the_tail_of_a_large_file) {
  temp_log log;
  std::string all;
  for (int step = 1; step <= 200; ++step) all += line_of(steplog_json(step));
  log.append(all);
  std::size_t line_bytes = line_of(steplog_json(200)).size();
  steplog_limits limits;
  limits.tail_bytes = 3 * line_bytes;  // exactly the last three lines, starting at a line start
  steplog_follower follower(log.path(), limits);
  follower.poll();
  ASSERT_EQ(follower.records().size(), 3u);
  EXPECT_EQ(follower.records().front().step, 198);
  EXPECT_EQ(follower.lines_skipped(), 0u) << "a line cut by the start is dropped, not counted as bad";
  limits.tail_bytes = 3 * line_bytes - 10;  // cuts into the 198th line
  steplog_follower cut(log.path(), limits);
  cut.poll();
  ASSERT_EQ(cut.records().size(), 2u);
  EXPECT_EQ(cut.records().front().step, 199);
  EXPECT_EQ(cut.lines_skipped(), 0u);
}

TEST(watch_steplog_follower, follows_the_first_rank_of_a_shared_log) {
  temp_log log;
  for (int step = 1; step <= 4; ++step) {
    nlohmann::json rank0 = steplog_json(step);
    nlohmann::json rank1 = steplog_json(step);
    rank1["rank"] = 1;
    log.append(line_of(rank0) + line_of(rank1));
  }
  steplog_follower follower(log.path());
  follower.poll();
  EXPECT_EQ(follower.records().size(), 4u);
  EXPECT_EQ(follower.other_rank_lines(), 4u);
  EXPECT_EQ(follower.series_restarts(), 0u);
}

TEST(watch_steplog_follower, reports_a_folder_as_unreadable) {
  temp_log log;
  steplog_follower follower(log.folder());
  follower.poll();
  EXPECT_EQ(follower.state(), steplog_file_state::unreadable);
  EXPECT_EQ(follower.state_message(), "is a directory");
}

TEST(watch_steplog_follower, keeps_hostile_text_as_data) {
  temp_log log;
  nlohmann::json line = steplog_json(1);
  line["alerts"] = {{{"kind", "leak\u001b[2J"}, {"rank", 0}, {"message", "\u001b]0;pwned\u0007\u001b[31mred\u009b"}}};
  log.append(line_of(line));
  steplog_follower follower(log.path());
  follower.poll();
  ASSERT_EQ(follower.alerts().size(), 1u);
  EXPECT_EQ(follower.alerts()[0].alert.message, "\x1b]0;pwned\x07\x1b[31mred\xc2\x9b") << "escaping is the renderer's job";
}

}  // namespace rlmem
