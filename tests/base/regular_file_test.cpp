// SPDX-License-Identifier: MIT
// read_option_file: the one reader of option files, for the CLI and the C ABI (issue 28 item 3).

#include <rlmem/base/regular_file.hpp>

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace rlmem {

namespace {

// The line a refusal of `path` prints, after checking its code.
std::string refusal_of(const std::string& path, errc expected, const option_file_limits& limits = {}) {
  auto read = read_option_file(path, limits);
  EXPECT_FALSE(read.ok()) << "expected " << path << " refused";
  EXPECT_EQ(read.code(), expected) << "expected " << error_name(expected) << ", saw " << error_name(read.code());
  return read.failure().detail;
}

std::string temporary_file_with(const std::string& text) {
  std::string path = (std::filesystem::temp_directory_path() / ("rlmem-rules-" + std::to_string(::getpid()))).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace

TEST(read_option_file, a_fifo_without_a_writer_is_refused_at_once) {
  std::string pattern = (std::filesystem::temp_directory_path() / "rlmem-fifo-XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  std::string fifo = pattern + "/rules";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(refusal_of(fifo, errc::not_a_regular_file), fifo + ": not a regular file (a FIFO, a device or a folder)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "expected a refusal, not a wait for a writer";
  std::filesystem::remove_all(pattern);
}

TEST(read_option_file, dev_zero_is_refused_not_read) {
  EXPECT_EQ(refusal_of("/dev/zero", errc::not_a_regular_file), "/dev/zero: not a regular file (a FIFO, a device or a folder)");
}

TEST(read_option_file, a_missing_file_names_the_reason) {
  EXPECT_EQ(refusal_of("/nonexistent/rules.txt", errc::io_error), "/nonexistent/rules.txt: cannot be read (No such file or directory)");
}

TEST(read_option_file, a_regular_file_is_read_whole_nul_bytes_included) {
  std::string written("weights a\0b", 11);
  std::string path = temporary_file_with(written);
  auto read = read_option_file(path);
  ASSERT_TRUE(read.ok()) << read.failure().detail;
  EXPECT_EQ(read.code(), errc::ok);
  EXPECT_EQ(read.value(), written);
  std::filesystem::remove(path);
}

TEST(read_option_file, the_size_limit_is_a_parameter_and_its_refusal_names_it) {
  std::string path = temporary_file_with("weights a\n");
  option_file_limits small;
  small.max_bytes = 4;
  EXPECT_EQ(refusal_of(path, errc::limit_input_bytes, small), path + ": larger than 4 bytes; not an option file");
  small.max_bytes = 10;
  EXPECT_TRUE(read_option_file(path, small).ok()) << "expected a file of exactly the limit read";
  std::filesystem::remove(path);
}

}  // namespace rlmem
