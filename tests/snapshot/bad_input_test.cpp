// SPDX-License-Identifier: MIT
// Hostile, truncated and malformed input: always an error with a code and an offset, never a
// crash, a hang or an allocation the input did not pay for.

#include "fixtures.hpp"

#include <rlmem/snapshot/snapshot_reader.hpp>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace rlmem {

using namespace std::string_literals;
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

// Issue 10: inputs whose cost is out of proportion to their size, and values no allocator makes.
namespace rlmem {

namespace {

// Writes a pickle opcode by opcode, numbering memo entries as Python's pickler does.
struct pickle_writer {
  std::string out = "\x80\x04";
  std::uint32_t memo_count = 0;

  pickle_writer& op(std::string_view bytes) {
    out += bytes;
    return *this;
  }
  std::uint32_t memoize() {
    out += '\x94';
    return memo_count++;
  }
  pickle_writer& text(std::string_view value) {  // SHORT_BINUNICODE
    out += '\x8c';
    out += static_cast<char>(value.size());
    out += value;
    return *this;
  }
  pickle_writer& get(std::uint32_t index) {  // LONG_BINGET
    out += 'j';
    for (int i = 0; i < 4; ++i) out += static_cast<char>((index >> (8 * i)) & 0xff);
    return *this;
  }
  pickle_writer& integer(std::int64_t number) {  // LONG1, 8 bytes two's complement
    out += "\x8a\x08"sv;
    for (int i = 0; i < 8; ++i) out += static_cast<char>((static_cast<std::uint64_t>(number) >> (8 * i)) & 0xff);
    return *this;
  }
  pickle_writer& unsigned_integer(std::uint64_t number) {  // LONG1 with a sign byte
    out += "\x8a\x09"sv;
    for (int i = 0; i < 8; ++i) out += static_cast<char>((number >> (8 * i)) & 0xff);
    out += '\0';
    return *this;
  }
  std::string done() { return out + "."; }
};

// {'segments': [], 'device_traces': [[{'action': action, 'addr': 4096, 'size': <size>}]]}
template <class WriteSize>
std::string one_event(std::string_view action, WriteSize write_size) {
  pickle_writer p;
  p.op("}(").text("segments").op("]").text("device_traces").op("](](}(");
  p.text("action").text(action).text("addr").integer(4096).text("size");
  write_size(p);
  return p.op("ueeu").done();
}

std::string one_segment(std::int64_t total_size, std::int64_t block_size) {
  pickle_writer p;
  p.op("}(").text("segments").op("](}(").text("device").integer(0).text("address").integer(std::int64_t{1} << 40);
  p.text("total_size").integer(total_size).text("blocks").op("](}(").text("address").integer(std::int64_t{1} << 40);
  p.text("size").integer(block_size).text("state").text("active_allocated").op("ueue");
  return p.text("device_traces").op("]u").done();
}

bool names(const error& failure, std::string_view text) {
  return describe(failure).find(text) != std::string::npos;
}

}  // namespace

TEST(hostile_expansion, allocator_settings_as_a_shared_dict_dag_hits_the_held_value_budget) {
  // Level i is {'a': level i-1, 'b': level i-1}: 2^30 leaves when copied path by path.
  pickle_writer p;
  p.op("}(").text("segments").op("]").text("device_traces").op("]").text("allocator_settings").op("}");
  std::uint32_t below = p.memoize();
  p.op("(").text("k").op("K\x01u");
  for (int level = 0; level < 30; ++level) {
    p.op("0}");
    std::uint32_t here = p.memoize();
    p.op("(").text("a").get(below).text("b").get(below).op("u");
    below = here;
  }
  std::string pickle = p.op("u").done();
  ASSERT_LT(pickle.size(), 800u);
  error failure = read_error(pickle);
  EXPECT_EQ(failure.code, errc::limit_held_values) << describe(failure);
  EXPECT_TRUE(names(failure, "max_held_values")) << describe(failure);
  EXPECT_TRUE(names(failure, "allocator_settings")) << describe(failure);
}

TEST(bad_input, a_trace_entry_is_sealed_at_its_setitems) {
  // The same entry pushed twice through its memo entry before its keys arrive.
  pickle_writer twice;
  twice.op("}(").text("device_traces").op("](](}");
  std::uint32_t entry = twice.memoize();
  twice.get(entry).op("(").text("action").text("alloc").op("ueeu");
  error listed_twice = read_error(twice.done());
  EXPECT_EQ(listed_twice.code, errc::container_reused) << describe(listed_twice);
  // An entry given more keys after its SETITEMS (torch writes each entry with one).
  pickle_writer changed;
  changed.op("}(").text("device_traces").op("](](}(").text("action").text("alloc").op("u(").text("size");
  error changed_later = read_error(changed.integer(512).op("ueeu").done());
  EXPECT_EQ(changed_later.code, errc::container_reused) << describe(changed_later);
  EXPECT_TRUE(names(changed_later, "changed after it was read")) << describe(changed_later);
}

TEST(hostile_expansion, one_trace_list_repeated_per_device_is_paid_for_before_it_is_walked) {
  // 2,000 entries in one list, that list referenced 50,000 times: 10^8 entries from 350 KB.
  pickle_writer p;
  p.op("}(").text("segments").op("]").text("device_traces").op("](]");
  std::uint32_t trace = p.memoize();
  p.op("(");
  for (int i = 0; i < 2000; ++i) {
    p.op("}(").text("action").text("alloc").text("addr").integer(4096 * (i + 1)).text("size").integer(512).op("u");
  }
  p.op("e");
  for (int i = 1; i < 50000; ++i) p.get(trace);
  error failure = read_error(p.op("eu").done());
  EXPECT_EQ(failure.code, errc::limit_held_values) << describe(failure);
  EXPECT_TRUE(names(failure, "repeated device traces")) << describe(failure);
}

TEST(hostile_expansion, a_block_list_shared_by_segments_gives_each_its_own_copies_within_the_budget) {
  auto shared_blocks = [](int segments, int blocks) {
    pickle_writer p;
    p.op("}(").text("device_traces").op("]").text("segments").op("(}(").text("address").integer(0);
    p.text("size").integer(512).text("state").text("active_allocated").op("u");
    std::uint32_t block = p.memoize();
    p.op("0]");
    std::uint32_t list = p.memoize();
    p.op("(");
    for (int i = 0; i < blocks; ++i) p.get(block);
    p.op("e0");
    for (int i = 0; i < segments; ++i) {
      p.op("}(").text("address").integer(std::int64_t{i} << 30).text("total_size").integer(512 * blocks);
      p.text("blocks").get(list).op("u");
    }
    return p.op("lu").done();
  };
  auto bytes = bytes_of(shared_blocks(3, 4));
  auto read = read_snapshot_bytes(bytes);
  ASSERT_TRUE(read.ok()) << describe(read.failure());
  const snapshot& snap = read.value();
  ASSERT_EQ(snap.segments.size(), 3u);
  for (const segment& seg : snap.segments) {
    auto blocks = snap.blocks_of(seg);
    ASSERT_EQ(blocks.size(), 4u);
    EXPECT_EQ(blocks[0].size, 512u);
  }
  read_options tight;
  tight.limits.max_held_values = 20000;  // the list and segments fit; 200 copies of it do not
  tight.limits.input_bytes_per_held_value = 64;
  error failure = read_error(shared_blocks(200, 400), tight);
  EXPECT_EQ(failure.code, errc::limit_held_values) << describe(failure);
  EXPECT_TRUE(names(failure, "shared block list")) << describe(failure);
}

TEST(hostile_expansion, a_stack_of_values_hits_max_stack_values) {
  read_options tight;
  tight.limits.max_stack_values = 100;
  error failure = read_error("\x80\x04" + std::string(5000, 'N') + ".", tight);
  EXPECT_EQ(failure.code, errc::limit_stack_values) << describe(failure);
  EXPECT_TRUE(names(failure, "max_stack_values")) << describe(failure);
  EXPECT_LE(failure.offset, 200u) << "the limit is seen when the stack grows, not at the end";
  // A run of LONG_BINGET pushes in one opcode loop: still stopped, still named.
  std::string gets = "\x80\x04N\x94";
  for (int i = 0; i < 5000; ++i) gets += "j\x00\x00\x00\x00"sv;
  failure = read_error(gets + ".", tight);
  EXPECT_EQ(failure.code, errc::limit_stack_values) << describe(failure);
}

TEST(hostile_expansion, empty_lists_on_the_stack_or_appended_hit_the_held_value_budget) {
  read_options tight;
  tight.limits.max_held_values = 10000;
  error pushed = read_error("\x80\x04" + std::string(100000, ']') + ".", tight);
  EXPECT_EQ(pushed.code, errc::limit_held_values) << describe(pushed);
  EXPECT_TRUE(names(pushed, "max_held_values")) << describe(pushed);
  std::string appended = "\x80\x04]";
  for (int i = 0; i < 100000; ++i) appended += "]a";
  error held = read_error(appended + ".", tight);
  EXPECT_EQ(held.code, errc::limit_held_values) << describe(held);
  std::string memo = "\x80\x04N" + std::string(100000, '\x94');
  EXPECT_EQ(read_error(memo + ".", tight).code, errc::limit_held_values);
}

TEST(hostile_expansion, a_decompression_bomb_fails_on_its_ratio) {
  // A pickle header, then 80 MiB of zeros: a few KB of zstd, far past 1024 to 1.
  std::vector<char> plain(std::size_t{80} << 20, '\0');
  plain[0] = '\x80';
  plain[1] = '\x04';
  std::vector<std::byte> packed(ZSTD_compressBound(plain.size()));
  std::size_t size = ZSTD_compress(packed.data(), packed.size(), plain.data(), plain.size(), 1);
  ASSERT_FALSE(ZSTD_isError(size));
  packed.resize(size);
  auto read = read_snapshot_bytes(packed);
  // The zeros are no opcode, so without the ratio check this fails as INVALID_OPCODE at byte 2;
  // the ratio is checked as the first 64 MiB window fills.
  EXPECT_TRUE(read.code() == errc::limit_compression_ratio || read.code() == errc::invalid_opcode)
      << describe(read.failure());
  read_options tight;
  tight.limits.max_compression_ratio = 1024;
  std::string header_and_string = "\x80\x04\x8e"s + std::string("\x00\x00\x00\x05\x00\x00\x00\x00", 8);  // 80 MiB bytes
  std::vector<char> bomb(header_and_string.begin(), header_and_string.end());
  bomb.resize(std::size_t{80} << 20, '\0');
  packed.assign(ZSTD_compressBound(bomb.size()), std::byte{0});
  size = ZSTD_compress(packed.data(), packed.size(), bomb.data(), bomb.size(), 1);
  packed.resize(size);
  tight.limits.max_string_bytes = std::uint64_t{1} << 30;
  read = read_snapshot_bytes(packed, tight);
  EXPECT_EQ(read.code(), errc::limit_compression_ratio) << describe(read.failure());
  EXPECT_TRUE(names(read.failure(), "max_compression_ratio")) << describe(read.failure());
}

TEST(hostile_files, fifos_and_devices_are_refused_without_waiting) {
  auto dev_zero = read_snapshot_file("/dev/zero");
  EXPECT_EQ(dev_zero.code(), errc::not_a_regular_file) << describe(dev_zero.failure());
  std::string fifo = ::testing::TempDir() + "rlmem_reader_fifo.pickle";
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto from_fifo = read_snapshot_file(fifo);  // nobody writes: must not block
  EXPECT_EQ(from_fifo.code(), errc::not_a_regular_file) << describe(from_fifo.failure());
  EXPECT_TRUE(names(from_fifo.failure(), "FIFO")) << describe(from_fifo.failure());
  std::remove(fifo.c_str());
}

TEST(hostile_files, a_sparse_100_gb_file_reserves_nothing_from_its_size) {
  std::string path = ::testing::TempDir() + "rlmem_reader_sparse.pickle";
  {
    std::ofstream out(path, std::ios::binary);
    out << "\x80\x04]";
  }
  std::filesystem::resize_file(path, std::uint64_t{100} << 30);
  auto read = read_snapshot_file(path);
  EXPECT_EQ(read.code(), errc::invalid_opcode) << describe(read.failure());
  EXPECT_EQ(read.failure().offset, 3u);
  std::remove(path.c_str());
}

TEST(impossible_sizes, negative_and_2_63_and_above_are_refused_with_the_field_and_record) {
  auto with = [](std::int64_t size) { return one_event("alloc", [&](pickle_writer& p) { p.integer(size); }); };
  error negative = read_error(with(-4096));
  EXPECT_EQ(negative.code, errc::invalid_size) << describe(negative);
  EXPECT_TRUE(names(negative, "trace entry 0 'size' is -4096")) << describe(negative);
  error all_ones = read_error(one_event("oom", [](pickle_writer& p) { p.unsigned_integer(UINT64_MAX); }));
  EXPECT_EQ(all_ones.code, errc::invalid_size) << describe(all_ones);
  EXPECT_TRUE(names(all_ones, "18446744073709551615")) << describe(all_ones);
  error two_63 = read_error(one_event("alloc", [](pickle_writer& p) { p.unsigned_integer(std::uint64_t{1} << 63); }));
  EXPECT_EQ(two_63.code, errc::invalid_size) << describe(two_63);
  error segment_size = read_error(one_segment(-(std::int64_t{1} << 21), 512));
  EXPECT_EQ(segment_size.code, errc::invalid_size) << describe(segment_size);
  EXPECT_TRUE(names(segment_size, "segment 0 'total_size'")) << describe(segment_size);
  error block_size = read_error(one_segment(std::int64_t{1} << 21, -512));
  EXPECT_EQ(block_size.code, errc::invalid_size) << describe(block_size);
  EXPECT_TRUE(names(block_size, "block 0 'size'")) << describe(block_size);
}

TEST(impossible_sizes, a_huge_but_representable_request_is_data) {
  auto bytes = bytes_of(one_event("oom", [](pickle_writer& p) { p.integer(std::int64_t{36} << 40); }));
  auto read = read_snapshot_bytes(bytes);
  ASSERT_TRUE(read.ok()) << describe(read.failure());
  ASSERT_EQ(read.value().events.size(), 1u);
  EXPECT_EQ(read.value().events[0].size, std::uint64_t{36} << 40);
  EXPECT_EQ(read.value().events[0].action, trace_action::oom);
}

TEST(budgets, an_empty_snapshot_reads) {
  pickle_writer p;
  auto bytes = bytes_of(p.op("}(").text("segments").op("]").text("device_traces").op("]u").done());
  auto read = read_snapshot_bytes(bytes);
  ASSERT_TRUE(read.ok()) << describe(read.failure());
  EXPECT_TRUE(read.value().segments.empty());
  EXPECT_TRUE(read.value().events.empty());
}

TEST(budgets, real_snapshots_read_within_a_budget_twice_as_tight_as_the_default) {
  // The default allows 1 unit per 2 input bytes on top of 2^24; real snapshots need under 1 per 4.
  read_options tight;
  tight.limits.max_held_values = 1 << 16;
  tight.limits.input_bytes_per_held_value = 4;
  for (const char* name : {"grpo_leak_logits.pickle.zst", "frag_default.pickle.zst", "tiny_oom_cpp_stacks.pickle",
                           "tiny_oom_expandable_compile.pickle", "validation_kv_leak.pickle.zst"}) {
    auto read = read_snapshot_file(testing::testdata(std::string("snapshots/") + name), tight);
    EXPECT_TRUE(read.ok()) << name << ": " << describe(read.failure());
  }
}

}  // namespace rlmem

namespace rlmem {

TEST(bad_input, a_memo_entry_overwritten_under_known_keys_gives_the_new_key) {
  // The note path keeps the last entry's keys by their memo references; a LONG_BINPUT that
  // replaces the string a key names (Python's pickler never writes one) must be seen: the
  // third entry's second key reads 'size', not 'addr'.
  pickle_writer p;
  p.op("}(").text("segments").op("]").text("device_traces").op("](](");
  std::uint32_t keys[2] = {};
  p.op("}");
  p.memoize();
  p.op("(").text("action");
  keys[0] = p.memoize();
  p.text("alloc").text("addr");
  keys[1] = p.memoize();
  p.integer(4096).op("u");
  for (std::int64_t value : {8192, 512}) {
    if (value == 512) {  // 'size' over the memo entry of 'addr', then POP
      p.text("size").op("r");
      for (int i = 0; i < 4; ++i) p.op(std::string(1, static_cast<char>((keys[1] >> (8 * i)) & 0xff)));
      p.op("0");
    }
    p.op("}");
    p.memoize();
    p.op("(").get(keys[0]).text("alloc").get(keys[1]).integer(value).op("u");
  }
  std::string pickle = p.op("eeu").done();
  auto bytes = bytes_of(pickle);
  for (int path = 0; path < 3; ++path) {  // bytes, notes (one block), the general path
    read_options options;
    options.trace_entry_shortcut = path < 2;
    if (path == 1) options.read_ahead_block_bytes = bytes.size();
    auto read = read_snapshot_bytes(bytes, options);
    ASSERT_TRUE(read.ok()) << describe(read.failure());
    const snapshot& snap = read.value();
    ASSERT_EQ(snap.events.size(), 3u) << path;
    EXPECT_EQ(snap.events[1].addr, 8192u) << path;
    EXPECT_EQ(snap.events[2].addr, 0u) << "path " << path << ": the key was replaced by 'size'";
    EXPECT_EQ(snap.events[2].size, 512u) << path;
  }
}

TEST(bad_input, a_memo_entry_overwritten_under_a_known_run_of_frames_gives_the_new_frames) {
  // The shortcut knows a stack by the bytes of its run of frame references; a LONG_BINPUT that
  // replaces one of those frames (Python's pickler never writes one) must be seen.
  pickle_writer p;
  p.op("}(").text("segments").op("]").text("device_traces").op("](](");
  std::uint32_t frames[3] = {};
  auto entry = [&](std::int64_t addr, auto write_frames) {
    p.op("}");
    p.memoize();
    p.op("(").text("action").text("alloc").text("addr").integer(addr).text("size").integer(512).text("frames").op("]");
    p.memoize();
    p.op("(");
    write_frames();
    p.op("eu");
  };
  entry(4096, [&] {  // defines three frames inline: read by the general path
    for (int i = 0; i < 3; ++i) {
      p.op("}");
      frames[i] = p.memoize();
      p.op("(").text("filename").text("a.py").text("line").op(std::string("K") + static_cast<char>(i + 1));
      p.text("name").text(std::string(1, static_cast<char>('f' + i))).op("u");
    }
  });
  auto run = [&] { p.get(frames[0]).get(frames[1]); };
  entry(8192, run);
  entry(12288, run);  // the same bytes: a known run
  p.get(frames[2]).op("r");  // LONG_BINPUT over frames[1]'s memo entry, then POP
  for (int i = 0; i < 4; ++i) p.op(std::string(1, static_cast<char>((frames[1] >> (8 * i)) & 0xff)));
  p.op("0");
  entry(16384, run);  // the same bytes, now naming frames 0 and 2
  std::string pickle = p.op("eeu").done();
  auto bytes = bytes_of(pickle);
  // The shortcut on bytes, the shortcut on notes left by the read-ahead thread, the general path.
  for (int path = 0; path < 3; ++path) {
    bool shortcut = path < 2;
    read_options options;
    options.trace_entry_shortcut = shortcut;
    if (path == 1) options.read_ahead_block_bytes = bytes.size();  // one block: every entry noted
    auto read = read_snapshot_bytes(bytes, options);
    ASSERT_TRUE(read.ok()) << describe(read.failure());
    const snapshot& snap = read.value();
    ASSERT_EQ(snap.events.size(), 4u);
    auto names_of = [&](const trace_event& event) {
      std::string out;
      for (frame_id id : snap.stack(event.stack)) out += snap.str(snap.frames[id].name);
      return out;
    };
    EXPECT_EQ(names_of(snap.events[0]), "fgh") << path;
    EXPECT_EQ(names_of(snap.events[1]), "fg") << path;
    EXPECT_EQ(names_of(snap.events[2]), "fg") << path;
    EXPECT_EQ(names_of(snap.events[3]), "fh") << path;
  }
}

}  // namespace rlmem

namespace rlmem {

TEST(read_ahead, strings_longer_than_a_block_and_its_headroom_read_as_in_line) {
  // A frame name of 200,000 bytes (BINUNICODE) between ordinary entries: the window gathers
  // blocks by copying for it, then moves on block by block again.
  pickle_writer p;
  p.op("}(").text("segments").op("]").text("device_traces").op("](](");
  for (int i = 0; i < 40; ++i) {
    p.op("}(").text("action").text("alloc").text("addr").integer(4096 * (i + 1)).text("size").integer(512);
    p.text("frames").op("](}(").text("filename").text("a.py").text("line").op("K\x01").text("name");
    std::size_t length = i == 20 ? 200000 : static_cast<std::size_t>(i * 997 % 3000);
    p.op("X");
    for (int b = 0; b < 4; ++b) p.op(std::string(1, static_cast<char>((length >> (8 * b)) & 0xff)));
    p.op(std::string(length, static_cast<char>('a' + i % 26))).op("ueu");
  }
  std::string pickle = p.op("eeu").done();
  auto bytes = bytes_of(pickle);
  read_options in_line;
  in_line.read_ahead_block_bytes = 0;
  auto direct = read_snapshot_bytes(bytes, in_line);
  ASSERT_TRUE(direct.ok()) << describe(direct.failure());
  ASSERT_EQ(direct.value().events.size(), 40u);
  for (std::size_t block : {61, 4096, 65536, 65537, 70000, 300000}) {
    read_options ahead;
    ahead.read_ahead_block_bytes = block;
    auto read = read_snapshot_bytes(bytes, ahead);
    ASSERT_TRUE(read.ok()) << block << ": " << describe(read.failure());
    EXPECT_TRUE(read.value() == direct.value()) << block;
  }
}

TEST(read_ahead, a_truncated_pickle_fails_as_in_line_at_every_block_size) {
  auto whole = file_bytes(testing::testdata("snapshots/tiny_oom_expandable_compile.pickle"));
  read_options in_line;
  in_line.read_ahead_block_bytes = 0;
  for (std::size_t cut = 1; cut < whole.size(); cut += 211) {
    std::span<const std::byte> prefix(whole.data(), cut);
    auto direct = read_snapshot_bytes(prefix, in_line);
    ASSERT_FALSE(direct.ok());
    for (std::size_t block : {3, 512}) {
      read_options ahead;
      ahead.read_ahead_block_bytes = block;
      auto read = read_snapshot_bytes(prefix, ahead);
      ASSERT_FALSE(read.ok()) << cut;
      EXPECT_EQ(describe(read.failure()), describe(direct.failure())) << "cut at " << cut << ", blocks of " << block;
    }
  }
}

}  // namespace rlmem
