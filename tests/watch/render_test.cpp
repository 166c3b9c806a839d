// SPDX-License-Identifier: MIT
// Rendering a refresh: text that fits the width with nothing untrusted reaching the terminal raw,
// sparklines that grow with the history, and one JSON line that follows docs/schema/watch.schema.json.

#include "fixtures.hpp"
#include "json_schema.hpp"
#include "watch/steplog_lines.hpp"

#include <rlmem/report/report.hpp>

#include <gtest/gtest.h>

#include <sstream>

namespace rlmem {

namespace {

using testing::gib;
using testing::mib;

const std::string hostile = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\xc2\x9b" "31m \xe2\x80\xae" "evil \xff\xfe end";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream input(text);
  for (std::string line; std::getline(input, line);) lines.push_back(line);
  return lines;
}

std::size_t columns(const std::string& line) {
  std::size_t count = 0;
  for (char c : line) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

// A frame with everything a screen can hold: two GPUs with history, long and hostile command
// lines, a log with alerts and skipped lines, advice.
watch_frame busy_frame(std::size_t history) {
  watch_frame frame;
  frame.time = 1717244401.0 + static_cast<double>(history);  // one second after the last step end
  frame.nvml_available = true;
  for (std::uint32_t index = 0; index < 2; ++index) {
    gpu_view gpu;
    gpu.index = index;
    gpu.name = index == 0 ? "NVIDIA H100 80GB HBM3" : "NVIDIA GeForce RTX 4090 with a very long marketing name " + hostile;
    gpu.memory = {static_cast<std::uint64_t>(testing::h100_total), static_cast<std::uint64_t>(62 * gib),
                  static_cast<std::uint64_t>(testing::h100_total - 62 * gib)};
    gpu.utilisation_percent = 91;
    for (std::size_t i = 0; i < history; ++i) gpu.used_history.push_back(static_cast<std::uint64_t>((10 + 6 * (i % 12)) * gib));
    gpu.processes.push_back({{4242, static_cast<std::uint64_t>(61 * gib)},
                             {command_line_status::visible, "python -m rl.grpo --model Qwen/Qwen2.5-0.5B-Instruct " + std::string(300, 'a')}});
    gpu.processes.push_back({{4243, static_cast<std::uint64_t>(mib)}, {command_line_status::visible, hostile}});
    gpu.processes.push_back({{4194305, std::nullopt}, {command_line_status::no_such_process, ""}});
    frame.gpus.push_back(gpu);
  }
  frame.log.emplace();
  frame.log->path = "/very/long/path/to/the/run/" + std::string(150, 'p') + "/steps.jsonl";
  frame.log->state = steplog_file_state::following;
  frame.log->lines_skipped = 2;
  frame.log->last_skip = "at byte 81,234: schema '" + hostile + "' is not rlmem.steplog/1";
  std::deque<steplog_record> records;
  for (std::int64_t step = 1; step <= static_cast<std::int64_t>(history); ++step) {
    steplog_record r;
    r.time = 1717244400.0 + static_cast<double>(step);
    r.step = step;
    r.allocated = 6 * gib + (step % 7) * 300 * mib;
    r.reserved = 34 * gib;
    r.step_peak_allocated = 30 * gib;
    r.step_peak_reserved = 34 * gib;
    r.device_total = testing::h100_total;
    r.device_free = testing::h100_total - 35 * gib;
    r.runtime_tags = {{"train", true, 3 * gib, 0, 4, 0.42, 0.30}, {"rollout " + hostile, false, 20 * gib, 21 * gib, 0, {}, {}}};
    records.push_back(r);
  }
  steplog_alert alert{"leak", 0, "allocated grows " + hostile, 48 * mib, 3, "rl/" + std::string(200, 's') + ".py:1 f", ""};
  summarise_steps(records, {{3, 0.0, alert}}, 20, 5, *frame.log);
  frame.advice = advise(frame);
  return frame;
}

}  // namespace

TEST(watch_text, fits_the_width_at_every_width) {
  for (std::size_t width : {60u, 80u, 100u, 160u}) {
    std::string text = render_watch_text(busy_frame(300), {width, 4, 2.0});
    for (const std::string& line : lines_of(text)) EXPECT_LE(columns(line), width) << "width " << width << ": " << line;
  }
}

TEST(watch_text, escapes_what_processes_and_logs_wrote) {
  std::string text = render_watch_text(busy_frame(10), {160, 4, 2.0});
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto byte = static_cast<unsigned char>(text[i]);
    ASSERT_TRUE(byte >= 0x20 || byte == '\n') << "control byte " << static_cast<int>(byte) << " at " << i;
    ASSERT_NE(byte, 0x7F);
    ASSERT_NE(byte, 0xFF) << "bytes that are not UTF-8 are escaped";
    if (byte == 0xC2 && i + 1 < text.size()) {
      ASSERT_FALSE(static_cast<unsigned char>(text[i + 1]) >= 0x80 && static_cast<unsigned char>(text[i + 1]) <= 0x9F)
          << "a C1 control (8-bit CSI) at " << i;
    }
    ASSERT_FALSE(byte == 0xE2 && text.compare(i, 3, "\xe2\x80\xae") == 0) << "a bidi override at " << i;
  }
  EXPECT_NE(text.find("\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mred\\x9b31m \\u202eevil \\xff\\xfe end"), std::string::npos) << text;
}

TEST(watch_text, shows_the_figures_and_a_history_that_grows) {
  std::string short_history = render_watch_text(busy_frame(3), {100, 4, 2.0});
  std::string long_history = render_watch_text(busy_frame(30), {100, 4, 2.0});
  auto blocks = [](const std::string& text) {
    std::size_t count = 0;
    for (std::size_t at = text.find("\xe2\x96"); at != std::string::npos; at = text.find("\xe2\x96", at + 1)) ++count;
    return count;
  };
  EXPECT_GT(blocks(long_history), blocks(short_history));
  EXPECT_NE(long_history.find("62.0 GiB / 79.6 GiB"), std::string::npos) << long_history;
  EXPECT_NE(long_history.find("(command line not visible: pid not in this PID namespace"), std::string::npos);
  EXPECT_NE(long_history.find("\n  alloc retries  0, 0 in the last 20 steps\n"), std::string::npos) << long_history;
  EXPECT_NE(long_history.find("written 1.0 s ago"), std::string::npos);
  EXPECT_NE(long_history.find("every 2 s, Ctrl-C quits"), std::string::npos);
  EXPECT_EQ(long_history.find("... and"), std::string::npos) << "three processes fit in four rows: no summary line";
  std::string one_row = render_watch_text(busy_frame(3), {100, 1, 2.0});
  EXPECT_NE(one_row.find("       ... and 2 more holding 1.00 MiB"), std::string::npos) << one_row;
}

TEST(watch_text, shows_the_runtimes_tags_from_the_log) {
  std::string text = render_watch_text(busy_frame(3), {100, 4, 2.0});
  EXPECT_NE(text.find("rlmem tag      train      PAUSED 3.00 GiB allocated, 0 B mapped, 4 pauses, last 0.42 s + 0.30 s\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rlmem tag      rollout... live   20.0 GiB allocated, 21.0 GiB mapped\n"), std::string::npos) << text;
}

TEST(watch_text, says_when_nvml_is_unavailable_and_shows_the_log_alone) {
  watch_frame frame = busy_frame(5);
  frame.gpus.clear();
  frame.nvml_available = false;
  frame.nvml_message = "libnvidia-ml.so.1: cannot open shared object file: No such file or directory";
  std::string text = render_watch_text(frame, {100, 4, 0});
  EXPECT_NE(text.find("NVML unavailable (libnvidia-ml.so.1: cannot open shared object file"), std::string::npos) << text;
  EXPECT_NE(text.find("Log /very/long/path"), std::string::npos);
  EXPECT_EQ(text.find("Ctrl-C"), std::string::npos) << "--once has no interval";
}

TEST(watch_text, a_time_beyond_any_clock_is_no_undefined_cast) {
  // Found by fuzz/fuzz_steplog.cpp: 1e308 seconds does not fit time_t.
  watch_frame frame = busy_frame(3);
  frame.time = 1e308;
  EXPECT_EQ(render_watch_text(frame, {100, 4, 0}).rfind("rlmem watch  -\n", 0), 0u);
}

TEST(watch_json, is_one_line_that_follows_the_schema) {
  std::string line = render_watch_json(busy_frame(30));
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line per refresh";
  for (char c : line.substr(0, line.size() - 1)) {
    ASSERT_TRUE(c >= 0x20 && c < 0x7F) << "not printable ASCII: " << static_cast<int>(static_cast<unsigned char>(c))
                                       << " (controls and non-ASCII are \\u-escaped, so a terminal shows the JSON safely)";
  }
  auto document = nlohmann::json::parse(line);
  for (const std::string& problem : testing::schema_problems(document, "watch.schema.json")) ADD_FAILURE() << problem;
  EXPECT_EQ(document["schema"], "rlmem.watch/1");
  EXPECT_EQ(document["gpus"][0]["total_bytes"], testing::h100_total);
  EXPECT_EQ(document["gpus"][0]["processes"][2]["command_line_status"], "no_such_process");
  EXPECT_TRUE(document["gpus"][0]["processes"][2]["used_bytes"].is_null());
  EXPECT_EQ(document["log"]["latest"]["step"], 30);
  EXPECT_EQ(document["log"]["window"]["steps"], 20);
  EXPECT_EQ(document["log"]["alerts"][0]["kind"], "leak");

  watch_frame bare;
  bare.nvml_message = "no driver";
  for (const std::string& problem : testing::schema_problems(nlohmann::json::parse(render_watch_json(bare)), "watch.schema.json")) {
    ADD_FAILURE() << "without NVML and log: " << problem;
  }
}

TEST(watch_json, the_schema_check_catches_an_undocumented_key) {
  auto document = nlohmann::json::parse(render_watch_json(busy_frame(3)));
  document["gpus"][0]["temperature"] = 40;
  EXPECT_FALSE(testing::schema_problems(document, "watch.schema.json").empty());
}

}  // namespace rlmem
