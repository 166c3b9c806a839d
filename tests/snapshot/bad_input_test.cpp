// SPDX-License-Identifier: MIT
// Hostile, truncated and malformed input: always an error with a code and an offset, never a
// crash, a hang or an allocation the input did not pay for.

#include "fixtures.hpp"

#include <rlmem/snapshot_reader.hpp>

#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace rlmem {

using namespace std::string_view_literals;  // "..."sv keeps embedded NUL bytes

namespace {

std::vector<std::byte> bytes_of(std::string_view text) {
  std::vector<std::byte> out(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) out[i] = static_cast<std::byte>(text[i]);
  return out;
}

std::vector<std::byte> file_bytes(const std::string& path) {
  std::ifstream input(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(input)), std::istreambuf_iterator<char>());
  return bytes_of(text);
}

error read_error(std::string_view pickle, const read_options& options = {}) {
  auto bytes = bytes_of(pickle);
  auto read = read_snapshot_bytes(bytes, options);
  EXPECT_FALSE(read.ok()) << "input was accepted";
  return read.failure();
}

}  // namespace

TEST(bad_input, empty_input) { EXPECT_EQ(read_error("").code, errc::empty_input); }

TEST(bad_input, wrong_magic) {
  EXPECT_EQ(read_error("hello, world").code, errc::unknown_format);
  error json = read_error("{\"segments\": []}");
  EXPECT_EQ(json.code, errc::unknown_format);
  EXPECT_NE(json.detail.find("JSON"), std::string::npos) << json.detail;
}

TEST(bad_input, hostile_global_reduce_is_refused_at_its_offset) {
  // pickle.dumps of a class whose __reduce__ returns (os.system, ("echo pwned",)), protocol 2.
  error failure = read_error("\x80\x02" "cposix\nsystem\nq\x00X\x0a\x00\x00\x00" "echo pwnedq\x01\x85q\x02Rq\x03."sv);
  EXPECT_EQ(failure.code, errc::forbidden_opcode);
  EXPECT_EQ(failure.offset, 2u);
  EXPECT_NE(failure.detail.find("GLOBAL"), std::string::npos) << failure.detail;
}

TEST(bad_input, every_code_executing_opcode_is_refused_by_name) {
  const std::pair<char, std::string_view> opcodes[] = {
      {'c', "GLOBAL"}, {'\x93', "STACK_GLOBAL"}, {'R', "REDUCE"}, {'b', "BUILD"}, {'i', "INST"},
      {'o', "OBJ"}, {'\x81', "NEWOBJ"}, {'\x92', "NEWOBJ_EX"}, {'\x82', "EXT1"}, {'\x83', "EXT2"},
      {'\x84', "EXT4"}, {'P', "PERSID"}, {'Q', "BINPERSID"}};
  for (auto [code, name] : opcodes) {
    std::string pickle = std::string("\x80\x04N") + code + ".";
    error failure = read_error(pickle);
    EXPECT_EQ(failure.code, errc::forbidden_opcode) << name;
    EXPECT_EQ(failure.offset, 3u) << name;
    EXPECT_NE(failure.detail.find(name), std::string::npos) << failure.detail;
  }
}

TEST(bad_input, truncated_at_every_offset_of_a_real_snapshot) {
  auto whole = file_bytes(testing::testdata("snapshots/tiny_oom_expandable_compile.pickle"));
  ASSERT_GT(whole.size(), 10000u);
  ASSERT_TRUE(read_snapshot_bytes(whole).ok());
  for (std::size_t cut = 1; cut < whole.size(); ++cut) {
    auto read = read_snapshot_bytes(std::span<const std::byte>(whole.data(), cut));
    ASSERT_FALSE(read.ok()) << "a prefix of " << cut << " bytes was accepted as whole";
    EXPECT_EQ(read.code(), errc::truncated) << "cut at " << cut << ": " << describe(read.failure());
    EXPECT_LE(read.failure().offset, cut);
  }
}

TEST(bad_input, truncated_compressed_input) {
  auto whole = file_bytes(testing::testdata("snapshots/grpo_clean.pickle.zst"));
  auto cut = read_snapshot_bytes(std::span<const std::byte>(whole.data(), whole.size() / 2));
  EXPECT_EQ(cut.code(), errc::decompress_error) << describe(cut.failure());
  auto gz = file_bytes(testing::testdata("snapshots/tiny_oom_expandable_compile.pickle.gz"));
  auto gz_cut = read_snapshot_bytes(std::span<const std::byte>(gz.data(), gz.size() - 9));
  EXPECT_EQ(gz_cut.code(), errc::decompress_error) << describe(gz_cut.failure());
  gz[gz.size() / 2] ^= std::byte{0xff};
  EXPECT_FALSE(read_snapshot_bytes(gz).ok());
}

TEST(bad_input, not_a_snapshot) {
  EXPECT_EQ(read_error("\x80\x04K\x05.").code, errc::not_a_snapshot);                 // the int 5
  EXPECT_EQ(read_error("\x80\x04}\x94(\x8c\x01" "a\x94K\x01u.").code, errc::not_a_snapshot);  // {'a': 1}
  EXPECT_EQ(read_error("\x80\x04]\x94(K\x01K\x02e.").code, errc::not_a_snapshot);         // [1, 2]
  error wrong_type = read_error("\x80\x04}(\x8c\x0d" "device_traces]]}(\x8c\x06" "action\x8c\x05" "alloc\x8c\x04" "size\x8c\x01" "xuaau."sv);
  EXPECT_EQ(wrong_type.code, errc::not_a_snapshot);
  EXPECT_NE(wrong_type.detail.find("size"), std::string::npos) << wrong_type.detail;
}

TEST(bad_input, absurd_length_prefixes_allocate_nothing_they_cannot_read) {
  // BINUNICODE8 claiming 2**62 bytes: refused by the limit before any read.
  error huge = read_error("\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x40"sv);
  EXPECT_EQ(huge.code, errc::limit_string_bytes);
  // BINUNICODE claiming 4 GiB - 1 in a tiny file: above the default limit.
  EXPECT_EQ(read_error("\x80\x04X\xff\xff\xff\xff" "abc"sv).code, errc::limit_string_bytes);
  // Within the limit but past the end: truncated, and the window never grew for it.
  EXPECT_EQ(read_error("\x80\x04X\x00\x00\x00\x01" "abc"sv).code, errc::truncated);
  // LONG4 of 2**31 - 1 bytes.
  EXPECT_EQ(read_error("\x80\x04\x8b\xff\xff\xff\x7f"sv).code, errc::limit_integer_width);
  EXPECT_EQ(read_error("\x80\x04\x8b\xff\xff\xff\xff"sv).code, errc::invalid_value);
  // A memo index far beyond anything stored.
  EXPECT_EQ(read_error("\x80\x04j\xff\xff\xff\x7f."sv).code, errc::bad_memo_reference);
}

TEST(bad_input, a_trace_entry_is_read_once) {
  // {"device_traces": [[{"action": "alloc"}]]}, then the same entry appended again through the
  // memo once it became a record: refused, so a few bytes cannot list one entry many times.
  EXPECT_EQ(read_error("\x80\x04}\x94\x8c\x0d" "device_traces\x94]\x94]\x94(}\x94\x8c\x06" "action\x94\x8c\x05"
                       "alloc\x94se(h\x04" "e\x85s."sv).code,
            errc::container_reused);
}

TEST(bad_input, limits_are_parameters_with_their_own_codes) {
  read_options tight;
  tight.limits.max_depth = 4;
  EXPECT_EQ(read_error("\x80\x04(((((((N.", tight).code, errc::limit_depth);
  tight = {};
  tight.limits.max_memo_entries = 2;
  EXPECT_EQ(read_error("\x80\x04N\x94\x94\x94.", tight).code, errc::limit_memo_entries);
  tight = {};
  tight.limits.max_input_bytes = 100;
  auto whole = file_bytes(testing::testdata("snapshots/tiny_oom_expandable_compile.pickle"));
  EXPECT_EQ(read_snapshot_bytes(whole, tight).code(), errc::limit_input_bytes);
  tight = {};
  tight.limits.max_string_bytes = 3;
  EXPECT_EQ(read_error("\x80\x04\x8c\x04" "abcd.", tight).code, errc::limit_string_bytes);
}

TEST(bad_input, malformed_structure) {
  EXPECT_EQ(read_error("\x80\x01N.").code, errc::unsupported_protocol);
  EXPECT_EQ(read_error("\x80\x06N.").code, errc::unsupported_protocol);
  EXPECT_EQ(read_error("\x80\x04" "a.").code, errc::stack_underflow);      // APPEND on nothing
  EXPECT_EQ(read_error("\x80\x04]e.").code, errc::missing_mark);           // APPENDS without MARK
  EXPECT_EQ(read_error("\x80\x04" "K\x01(K\x02u.").code, errc::type_mismatch);  // SETITEMS odd
  EXPECT_EQ(read_error("\x80\x04I1\n.").code, errc::unsupported_opcode);   // protocol 0 INT
  EXPECT_EQ(read_error("\x80\x04\xff.").code, errc::invalid_opcode);
  EXPECT_EQ(read_error("\x80\x04N.N").code, errc::trailing_data);
  EXPECT_EQ(read_error("\x80\x04\x97.").code, errc::unsupported_opcode);   // NEXT_BUFFER
  // A list that changes after it became a stack: refused, not silently wrong.
  error reused = read_error("\x80\x04]\x94(}(\x8c\x04name\x8c\x01" "f\x8c\x08" "filename\x8c\x01g\x8c\x04lineK\x01ue]h\x00" "ah\x00" "Na."sv);
  EXPECT_EQ(reused.code, errc::type_mismatch);
  EXPECT_NE(reused.detail.find("list of frames"), std::string::npos) << reused.detail;
}

}  // namespace rlmem
