// SPDX-License-Identifier: MIT
// The entry scanner on real snapshots: it notes the trace entries the read-ahead thread sees
// whole, each note names an entry's first and last byte, and however the stream is cut into
// blocks it keeps to the opcodes' boundaries.

#include "fixtures.hpp"
#include "snapshot/byte_source.hpp"
#include "snapshot/entry_scanner.hpp"

#include <rlmem/snapshot/snapshot_reader.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <vector>

namespace rlmem::detail {
namespace {

std::vector<std::byte> decompressed(const std::string& name) {
  std::ifstream input(testing::testdata("snapshots/" + name), std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(input)), std::istreambuf_iterator<char>());
  auto source = make_zstd_source(
      std::make_unique<memory_source>(std::span<const std::byte>(reinterpret_cast<const std::byte*>(raw.data()), raw.size())),
      1024);
  std::vector<std::byte> out;
  std::vector<std::byte> chunk(1 << 16);
  error failure;
  while (std::size_t got = source->read(chunk, failure)) out.insert(out.end(), chunk.begin(), chunk.begin() + got);
  EXPECT_EQ(failure.code, errc::ok) << name;
  return out;
}

// Every note the scanner leaves when `bytes` come in blocks of the sizes `block_at` gives, by
// the stream offset of the entry it is on, with the entry's length.
template <class BlockSize>
std::map<std::uint64_t, std::size_t> notes_of(const std::vector<std::byte>& bytes, BlockSize block_at) {
  entry_scanner scanner;
  std::map<std::uint64_t, std::size_t> found;
  block_notes notes;
  for (std::size_t offset = 0, index = 0; offset < bytes.size(); ++index) {
    std::size_t size = std::min(block_at(index), bytes.size() - offset);
    notes.clear();
    scanner.scan({bytes.data() + offset, size}, offset, notes);
    std::span<const std::uint64_t> words = notes.words();
    for (std::size_t at = 0; at < words.size(); at += entry_note::words(&words[at])) {
      EXPECT_GE(words[at], offset) << "a note on an entry outside its block";
      EXPECT_LE(words[at] + entry_note::entry_bytes(&words[at]), offset + size) << "an entry that goes past its block";
      found[words[at]] = entry_note::entry_bytes(&words[at]);
    }
    offset += size;
  }
  return found;
}

TEST(entry_scanner, notes_nearly_every_trace_entry_of_a_real_snapshot_each_from_its_first_byte_to_its_setitems) {
  auto bytes = decompressed("grpo_leak_logits.pickle.zst");
  auto read = read_snapshot_bytes(bytes);
  ASSERT_TRUE(read.ok()) << describe(read.failure());
  std::size_t events = read.value().events.size();
  auto notes = notes_of(bytes, [](std::size_t) { return std::size_t{1} << 20; });
  // Only entries cut by a block's end (one per MiB) and any the shortcut would not read lack one.
  EXPECT_GE(notes.size(), events - events / 100) << "of " << events << " trace entries";
  // Other dicts of scalars (frames, blocks) look the same to the scanner; the machine tells.
  const snapshot& snap = read.value();
  EXPECT_LE(notes.size(), events + snap.frames.size() + snap.blocks.size()) << "notes on things that are no dicts of scalars";
  for (auto [offset, length] : notes) {
    ASSERT_EQ(bytes[offset], std::byte{'}'}) << "a note at " << offset << " on no EMPTY_DICT";
    ASSERT_EQ(bytes[offset + length - 1], std::byte{'u'}) << "a note at " << offset << " not ending at a SETITEMS";
  }
}

TEST(entry_scanner, keeps_to_the_opcodes_however_the_stream_is_cut) {
  // Blocks of 1 to 13 bytes cut every header somewhere; after them, one large block must get
  // exactly the notes a single pass gives for the entries inside it.
  auto bytes = decompressed("frag_default.pickle.zst");
  auto whole = notes_of(bytes, [](std::size_t) { return SIZE_MAX; });
  ASSERT_GT(whole.size(), 1000u);
  for (std::size_t small_bytes : {std::size_t{5000}, std::size_t{123457}, bytes.size() / 2}) {
    std::size_t sum = 0;
    std::vector<std::size_t> sizes;
    for (std::size_t i = 0; sum < small_bytes; ++i) {
      sizes.push_back(1 + (i * 7) % 13);
      sum += sizes.back();
    }
    auto cut = notes_of(bytes, [&](std::size_t index) { return index < sizes.size() ? sizes[index] : SIZE_MAX; });
    std::map<std::uint64_t, std::size_t> expected(whole.lower_bound(sum), whole.end());
    std::map<std::uint64_t, std::size_t> seen(cut.lower_bound(sum), cut.end());
    EXPECT_EQ(seen, expected) << "after " << sum << " bytes in small blocks";
    EXPECT_GT(expected.size(), 100u);
  }
}

TEST(entry_scanner, notes_nothing_after_an_opcode_the_machine_refuses) {
  auto bytes = decompressed("frag_default.pickle.zst");
  std::size_t middle = bytes.size() / 2;
  while (bytes[middle] != std::byte{'}'}) ++middle;
  auto whole = notes_of(bytes, [](std::size_t) { return SIZE_MAX; });
  ASSERT_TRUE(whole.count(middle)) << "expected an entry at " << middle;
  bytes[middle] = std::byte{'c'};  // GLOBAL
  auto refused = notes_of(bytes, [](std::size_t) { return SIZE_MAX; });
  EXPECT_EQ(refused.lower_bound(middle), refused.end());
  EXPECT_EQ(refused.size(), std::distance(whole.begin(), whole.lower_bound(middle)));
}

}  // namespace
}  // namespace rlmem::detail
