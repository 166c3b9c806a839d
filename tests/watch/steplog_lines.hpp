// SPDX-License-Identifier: MIT
#pragma once
// StepMonitor log lines for the watch tests: a valid record with H100 figures to vary, and a
// temporary log file to append to, truncate and rotate as a job and logrotate would.

#include "byte_units.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>  // mkdtemp
#include <filesystem>
#include <fstream>
#include <string>

namespace rlmem::testing {

using figures::gib;
using figures::mib;
inline constexpr std::int64_t h100_total = 85'520'809'984;  // what an H100 80GB HBM3 reports

/// A valid steplog record at `step`: Qwen-0.5B GRPO figures on an H100; change fields as needed.
inline nlohmann::json steplog_json(std::int64_t step) {
  return {{"schema", "rlmem.steplog/1"},
          {"time", 1717243200.0 + 10.0 * static_cast<double>(step)},
          {"step", step},
          {"step_seconds", 10.0},
          {"rank", 0},
          {"world_size", 1},
          {"device", 0},
          {"allocated", 7 * gib},
          {"reserved", 34 * gib},
          {"active", 7 * gib + 20 * mib},
          {"inactive_split", 600 * mib},
          {"step_peak_allocated", 31 * gib},
          {"step_peak_reserved", 34 * gib},
          {"peak_is_per_step", true},
          {"allocations", 1800},
          {"num_alloc_retries", 0},
          {"num_ooms", 0},
          {"device_free", h100_total - 34 * gib - 537 * mib},
          {"device_total", h100_total},
          {"alerts", nlohmann::json::array()}};
}

/// One log line, newline included.
inline std::string line_of(const nlohmann::json& record) { return record.dump() + "\n"; }

/// A log file in a fresh temporary folder, removed with the object.
class temp_log {
 public:
  temp_log() {
    std::string pattern = (std::filesystem::temp_directory_path() / "rlmem_watch_XXXXXX").string();
    folder_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
    EXPECT_FALSE(folder_.empty()) << "mkdtemp failed";
  }
  ~temp_log() {
    std::error_code ignored;
    std::filesystem::remove_all(folder_, ignored);
  }
  temp_log(const temp_log&) = delete;
  temp_log& operator=(const temp_log&) = delete;

  std::string path() const { return folder_ + "/steps.jsonl"; }
  std::string folder() const { return folder_; }

  /// Appends bytes as a writer would (open, write, close: no buffering left behind).
  void append(const std::string& text) const {
    std::ofstream out(path(), std::ios::binary | std::ios::app);
    out << text;
  }
  /// Empties the file in place, as a new run opening it with "w" does.
  void truncate() const { std::ofstream out(path(), std::ios::binary | std::ios::trunc); }
  /// Renames the file away, as logrotate does; the next append creates a new file.
  void rotate() const { std::filesystem::rename(path(), path() + ".1"); }

 private:
  std::string folder_;
};

}  // namespace rlmem::testing
