// SPDX-License-Identifier: MIT
// One check of inspect's options (issue 31, item 3): the same bad value is refused with the same
// line by `rlmem inspect`, by the C ABI's struct, by rlmem_check_inspect_option (what the Python
// package calls before ctypes) and by the library's check_option, which all of them use.
#include <rlmem/inspect/inspect.hpp>
#include <rlmem/rlmem.h>

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

const std::string snapshot_path = RLMEM_TESTDATA_DIR "/snapshots/tiny_oom_cpp_stacks.pickle";

// The line `rlmem inspect` prints for these arguments, less "rlmem: " and its pointer to --help.
std::string cli_refusal(const std::string& arguments) {
  std::string command = std::string(RLMEM_CLI) + " inspect " + snapshot_path + " --quiet " + arguments + " 2>&1 >/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "popen failed";
  std::string out;
  std::array<char, 512> chunk{};
  while (std::fgets(chunk.data(), static_cast<int>(chunk.size()), pipe) != nullptr) out += chunk.data();
  int status = pclose(pipe);
  if (WEXITSTATUS(status) != 2) return "exit " + std::to_string(WEXITSTATUS(status)) + ": " + out;
  if (out.starts_with("rlmem: ")) out.erase(0, 7);
  if (std::size_t help = out.find(" (see rlmem inspect --help)"); help != std::string::npos) out.erase(help);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// The C ABI's line for a struct with `set` applied, or "accepted".
template <class Set>
std::string struct_refusal(Set set) {
  rlmem_inspect_options options;
  rlmem_inspect_options_init(&options);
  set(options);
  char* json = nullptr;
  char* error = nullptr;
  int status = rlmem_inspect_file(snapshot_path.c_str(), &options, &json, &error);
  std::string line = status == RLMEM_OK ? "accepted" : error == nullptr ? "no message" : error;
  rlmem_string_free(json);
  rlmem_string_free(error);
  return line;
}

std::string text_refusal(const char* option, const char* value) {
  char* error = nullptr;
  int status = rlmem_check_inspect_option(option, value, &error);
  std::string line = status == RLMEM_OK ? "accepted" : error == nullptr ? "no message" : error;
  rlmem_string_free(error);
  return line;
}

TEST(inspect_options, a_top_of_two_million_is_refused_alike_everywhere) {
  const std::string expected = "--top: '2000000' is not a whole number from 1 to 1000000";
  EXPECT_EQ(rlmem::check_option(rlmem::top_option, "2000000"), expected);
  EXPECT_EQ(cli_refusal("--top 2000000"), expected) << "the CLI";
  EXPECT_EQ(struct_refusal([](rlmem_inspect_options& o) { o.top = 2'000'000; }), expected) << "the C ABI's struct";
  EXPECT_EQ(text_refusal("--top", "2000000"), expected) << "rlmem_check_inspect_option (Python's path)";
}

TEST(inspect_options, the_ends_of_each_range_are_accepted_and_one_past_refused) {
  for (const rlmem::whole_number_option* option : {&rlmem::device_option, &rlmem::top_option, &rlmem::limit_option}) {
    const std::string flag(option->flag);
    EXPECT_EQ(text_refusal(flag.c_str(), std::to_string(option->min).c_str()), "accepted") << flag;
    EXPECT_EQ(text_refusal(flag.c_str(), std::to_string(option->max).c_str()), "accepted") << flag;
    const std::string past = std::to_string(option->max + 1);
    EXPECT_EQ(text_refusal(flag.c_str(), past.c_str()), rlmem::check_option(*option, past)) << flag;
    EXPECT_NE(rlmem::check_option(*option, past), "") << flag << " " << past;
  }
  EXPECT_EQ(text_refusal("--top", "0"), "--top: '0' is not a whole number from 1 to 1000000");
  EXPECT_EQ(text_refusal("--top", "4294967306"), "--top: '4294967306' is not a whole number from 1 to 1000000")
      << "a value the struct's uint32_t would wrap to 10";
  EXPECT_EQ(text_refusal("--frames", "3"), "'--frames' is not an option of rlmem_inspect_options (--device, --top, --limit)");
}

TEST(inspect_options, a_device_out_of_range_is_refused_alike_everywhere) {
  const std::string expected = "--device: '32768' is not a whole number from 0 to 32767";
  EXPECT_EQ(cli_refusal("--device 32768"), expected) << "the CLI";
  EXPECT_EQ(struct_refusal([](rlmem_inspect_options& o) { o.device = 32768; }), expected) << "the C ABI's struct";
  EXPECT_EQ(text_refusal("--device", "32768"), expected) << "rlmem_check_inspect_option";
  EXPECT_EQ(struct_refusal([](rlmem_inspect_options& o) { o.device = -2; }), "--device: '-2' is not a whole number from 0 to 32767")
      << "-1 is the default, -2 no device";
}

TEST(inspect_options, a_negative_limit_is_refused_by_the_struct_and_the_text_check_alike) {
  const std::string expected = "--limit: '-5' is not a whole number from 0 to 9223372036854775807";
  EXPECT_EQ(struct_refusal([](rlmem_inspect_options& o) { o.limit_bytes = -5; }), expected);
  EXPECT_EQ(text_refusal("--limit", "-5"), expected);
}

}  // namespace
