// SPDX-License-Identifier: MIT
// The NVML seam for real: dlopen of a fake libnvidia-ml (tests/watch/fake_nvml.c) with the
// driver's entry points, failures as codes with the driver's message, and a session over it.

#include "watch/steplog_lines.hpp"

#include <rlmem/watch/watch.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <unistd.h>

namespace rlmem {

namespace {

std::unique_ptr<gpu_source> open_fake() {
  gpu_status status;
  auto source = open_nvml_gpu_source(RLMEM_FAKE_NVML, status);
  EXPECT_TRUE(status.ok()) << status.code << ": " << status.message;
  return source;
}

// Sets an environment variable for one scope.
class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~scoped_env() { ::unsetenv(name_); }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  const char* name_;
};

}  // namespace

TEST(watch_nvml_source, answers_through_dlopen_with_the_drivers_entry_points) {
  auto source = open_fake();
  ASSERT_NE(source, nullptr);
  std::uint32_t count = 0;
  ASSERT_TRUE(source->device_count(count).ok());
  ASSERT_EQ(count, 2u);
  std::string name;
  ASSERT_TRUE(source->device_name(1, name).ok());
  EXPECT_EQ(name, "NVIDIA H100 80GB HBM3");
  gpu_memory memory;
  ASSERT_TRUE(source->device_memory(1, memory).ok());
  EXPECT_EQ(memory.total_bytes, 85'520'809'984u);
  EXPECT_EQ(memory.used_bytes + memory.free_bytes, memory.total_bytes);
  std::optional<std::uint32_t> percent;
  ASSERT_TRUE(source->device_utilisation(0, percent).ok());
  EXPECT_EQ(percent, 91u);
  std::vector<gpu_process> processes;
  ASSERT_TRUE(source->device_processes(0, processes).ok());
  ASSERT_EQ(processes.size(), 2u);
  EXPECT_EQ(processes[0].pid, static_cast<std::uint32_t>(::getpid()));
  EXPECT_EQ(processes[0].used_bytes, std::uint64_t{39} << 30) << "the v3 struct's second field, at offset 8";
  EXPECT_EQ(processes[1].pid, 4194305u);
  ASSERT_TRUE(source->device_processes(1, processes).ok());
  ASSERT_EQ(processes.size(), 1u);
  EXPECT_FALSE(processes[0].used_bytes) << "NVML_VALUE_NOT_AVAILABLE is no number";
}

TEST(watch_nvml_source, asks_again_when_more_processes_run_than_the_first_request_holds) {
  scoped_env extra("RLMEM_FAKE_NVML_PROCESSES", "40");
  auto source = open_fake();
  ASSERT_NE(source, nullptr);
  std::vector<gpu_process> processes;
  ASSERT_TRUE(source->device_processes(1, processes).ok());
  EXPECT_EQ(processes.size(), 41u);
}

TEST(watch_nvml_source, a_missing_library_is_a_code_and_dlerrors_text) {
  gpu_status status;
  auto source = open_nvml_gpu_source("/nonexistent/libnvidia-ml.so.1", status);
  EXPECT_EQ(source, nullptr);
  EXPECT_EQ(status.code, gpu_status::load_failed);
  EXPECT_NE(status.message.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << status.message;
}

TEST(watch_nvml_source, a_library_without_nvml_is_refused_by_symbol) {
  gpu_status status;
  auto source = open_nvml_gpu_source("libm.so.6", status);
  EXPECT_EQ(source, nullptr);
  EXPECT_EQ(status.code, gpu_status::load_failed);
  EXPECT_NE(status.message.find("nvmlInit_v2"), std::string::npos) << status.message;
}

TEST(watch_nvml_source, a_failed_init_is_the_drivers_code_and_message) {
  scoped_env fail("RLMEM_FAKE_NVML_INIT_FAIL", "1");
  gpu_status status;
  auto source = open_nvml_gpu_source(RLMEM_FAKE_NVML, status);
  EXPECT_EQ(source, nullptr);
  EXPECT_EQ(status.code, 9);  // NVML_ERROR_DRIVER_NOT_LOADED
  EXPECT_EQ(status.message, "Driver Not Loaded");
}

TEST(watch_nvml_source, the_library_path_can_be_overridden) {
  {
    scoped_env chosen("RLMEM_NVML_LIBRARY", "/opt/fake/libnvidia-ml.so.1");
    EXPECT_EQ(nvml_library_path(), "/opt/fake/libnvidia-ml.so.1");
  }
  {
    scoped_env empty("RLMEM_NVML_LIBRARY", "");
    EXPECT_EQ(nvml_library_path(), "libnvidia-ml.so.1");
  }
}

TEST(watch_command_line, reads_this_process_and_says_why_not_for_others) {
  process_command_line self = read_command_line(static_cast<std::uint32_t>(::getpid()));
  EXPECT_EQ(self.status, command_line_status::visible);
  EXPECT_NE(self.text.find("watch_tests"), std::string::npos) << self.text;
  EXPECT_EQ(self.text.find('\0'), std::string::npos) << "arguments joined by spaces";
  EXPECT_EQ(read_command_line(4194305).status, command_line_status::no_such_process);
  EXPECT_EQ(command_line_status_name(command_line_status::no_such_process), "no_such_process");
  EXPECT_EQ(read_command_line(2, "/nonexistent-proc").status, command_line_status::no_such_process);
}

TEST(watch_session, refreshes_gpus_with_a_history_and_reads_the_log) {
  testing::temp_log log;
  log.append(testing::line_of(testing::steplog_json(1)));
  watch_options options;
  options.log_path = log.path();
  options.gpu_history = 5;
  watch_session session(open_fake(), "", options);
  watch_frame frame;
  for (int refresh = 0; refresh < 7; ++refresh) frame = session.refresh(1717243300.0 + refresh);
  ASSERT_TRUE(frame.nvml_available);
  ASSERT_EQ(frame.gpus.size(), 2u);
  const gpu_view& first = frame.gpus[0];
  ASSERT_EQ(first.used_history.size(), 5u) << "bounded by gpu_history";
  EXPECT_EQ(first.used_history.back(), first.memory.used_bytes);
  EXPECT_NE(first.used_history.front(), first.used_history.back()) << "the fake's used memory climbs";
  ASSERT_EQ(first.processes.size(), 2u);
  EXPECT_EQ(first.processes[0].command_line.status, command_line_status::visible) << "most memory first: this process";
  EXPECT_EQ(first.processes[1].command_line.status, command_line_status::no_such_process);
  ASSERT_TRUE(frame.log);
  ASSERT_TRUE(frame.log->latest);
  EXPECT_EQ(frame.log->latest->step, 1);
  log.append(testing::line_of(testing::steplog_json(2)));
  frame = session.refresh(1717243310.0);
  EXPECT_EQ(frame.log->latest->step, 2);
  EXPECT_FALSE(frame.advice.empty());
}

TEST(watch_session, shows_the_log_alone_without_nvml) {
  testing::temp_log log;
  log.append(testing::line_of(testing::steplog_json(1)));
  watch_options options;
  options.log_path = log.path();
  watch_session session(nullptr, "libnvidia-ml.so.1: cannot open shared object file", options);
  watch_frame frame = session.refresh(1717243300.0);
  EXPECT_FALSE(frame.nvml_available);
  EXPECT_EQ(frame.nvml_message, "libnvidia-ml.so.1: cannot open shared object file");
  EXPECT_TRUE(frame.gpus.empty());
  ASSERT_TRUE(frame.log && frame.log->latest);
}

}  // namespace rlmem
