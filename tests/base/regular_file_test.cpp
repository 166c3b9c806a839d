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

std::string refusal_of(const std::string& path) {
  std::string text;
  std::string message;
  EXPECT_FALSE(read_option_file(path, text, message)) << "expected " << path << " refused";
  return message;
}

}  // namespace

TEST(read_option_file, a_fifo_without_a_writer_is_refused_at_once) {
  std::string pattern = (std::filesystem::temp_directory_path() / "rlmem-fifo-XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  std::string fifo = pattern + "/rules";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(refusal_of(fifo), fifo + ": not a regular file (a FIFO, a device or a folder)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "expected a refusal, not a wait for a writer";
  std::filesystem::remove_all(pattern);
}

TEST(read_option_file, dev_zero_is_refused_not_read) {
  EXPECT_EQ(refusal_of("/dev/zero"), "/dev/zero: not a regular file (a FIFO, a device or a folder)");
}

TEST(read_option_file, a_missing_file_names_the_reason) {
  EXPECT_EQ(refusal_of("/nonexistent/rules.txt"), "/nonexistent/rules.txt: cannot be read (No such file or directory)");
}

TEST(read_option_file, a_regular_file_is_read_whole_nul_bytes_included) {
  std::string path = (std::filesystem::temp_directory_path() / ("rlmem-rules-" + std::to_string(::getpid()))).string();
  std::string written("weights a\0b", 11);
  std::ofstream(path, std::ios::binary) << written;
  std::string text;
  std::string message;
  EXPECT_TRUE(read_option_file(path, text, message)) << message;
  EXPECT_EQ(text, written);
  std::filesystem::remove(path);
}

}  // namespace rlmem
