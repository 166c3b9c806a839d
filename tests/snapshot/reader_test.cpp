// SPDX-License-Identifier: MIT
// The reader against real snapshots: counts, fields and settings as PyTorch wrote them.

#include "fixtures.hpp"

#include <rlmem/snapshot/snapshot_reader.hpp>

#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <string>

namespace rlmem {

using testing::fixture;

namespace {

std::array<std::uint64_t, trace_action_count> count_actions(const snapshot& snap) {
  std::array<std::uint64_t, trace_action_count> counts{};
  for (const trace_event& event : snap.events) ++counts[static_cast<std::size_t>(event.action)];
  return counts;
}

std::string frame_string(const snapshot& snap, frame_id id) {
  const frame& f = snap.frames[id];
  return std::string(snap.str(f.name)) + "@" + std::string(snap.str(f.filename)) + ":" + std::to_string(f.line);
}

}  // namespace

TEST(reader, grpo_clean_has_the_records_torch_wrote) {
  const snapshot& snap = fixture("grpo_clean.pickle.zst");
  EXPECT_EQ(snap.segments.size(), 69u);
  EXPECT_EQ(snap.blocks.size(), 467u);
  ASSERT_EQ(snap.device_traces.size(), 1u);
  EXPECT_EQ(snap.device_traces[0].event_count, 188494u);
  auto counts = count_actions(snap);
  EXPECT_EQ(counts[static_cast<std::size_t>(trace_action::alloc)], 62947u);
  EXPECT_EQ(counts[static_cast<std::size_t>(trace_action::free_requested)], 62748u);
  EXPECT_EQ(counts[static_cast<std::size_t>(trace_action::free_completed)], 62748u);
  EXPECT_EQ(counts[static_cast<std::size_t>(trace_action::segment_alloc)], 51u);
  EXPECT_EQ(snap.frames.size(), 136u) << "distinct (name, filename, line) frames";
  EXPECT_EQ(snap.annotations.size(), 12u);
  EXPECT_EQ(snap.annotations[0].name, "Optimizer.step#AdamW.step");
  EXPECT_EQ(snap.annotations[0].stage, "START");
  EXPECT_EQ(snap.annotations[0].time_us, 1795307816754044);
}

TEST(reader, first_and_last_events_keep_every_field) {
  const snapshot& snap = fixture("grpo_clean.pickle.zst");
  const trace_event& first = snap.events.front();
  EXPECT_EQ(first.action, trace_action::alloc);
  EXPECT_EQ(first.addr, 140066208813568u);
  EXPECT_EQ(first.size, 1024u);
  EXPECT_EQ(first.time_us, 1795307810956326);
  EXPECT_EQ(snap.streams[snap.tag_of(first).stream], 0u);
  EXPECT_EQ(snap.str(snap.tag_of(first).compile_context), "N/A");
  EXPECT_EQ(snap.str(snap.tag_of(first).user_metadata), "");
  auto frames = snap.stack(first.stack);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frame_string(snap, frames[0]), "grpo_steps@/home/user/rl/record.py:52");
  EXPECT_EQ(frame_string(snap, frames[2]), "<module>@/home/user/rl/record.py:197");
  const trace_event& last = snap.events.back();
  EXPECT_EQ(last.action, trace_action::free_completed);
  EXPECT_EQ(last.addr, 140063778274816u);
  EXPECT_EQ(last.size, 4u);
}

TEST(reader, segments_and_blocks_keep_every_field) {
  const snapshot& snap = fixture("grpo_clean.pickle.zst");
  const segment& first = snap.segments.front();
  EXPECT_EQ(first.address, 140063514034176u);
  EXPECT_EQ(first.total_size, 50331648u);
  EXPECT_EQ(snap.str(first.segment_type), "large");
  EXPECT_FALSE(first.is_expandable);
  EXPECT_EQ(first.pool_id_first, 0);
  ASSERT_EQ(first.block_count, 1u);
  const block& only = snap.blocks_of(first)[0];
  EXPECT_EQ(only.address, first.address);
  EXPECT_EQ(only.requested_size, 49152000u);
  EXPECT_EQ(only.state, block_state::inactive);
  // Blocks tile their segment.
  for (const segment& seg : snap.segments) {
    std::uint64_t covered = 0;
    for (const block& held : snap.blocks_of(seg)) covered += held.size;
    EXPECT_EQ(covered, seg.total_size) << "segment at " << seg.address;
  }
}

TEST(reader, allocator_settings_keep_types) {
  const snapshot& snap = fixture("grpo_clean.pickle.zst");
  const plain_value* split = snap.setting("max_split_size");
  ASSERT_NE(split, nullptr);
  EXPECT_EQ(split->integer, -1);
  const plain_value* threshold = snap.setting("garbage_collection_threshold");
  ASSERT_NE(threshold, nullptr);
  EXPECT_EQ(threshold->type, plain_value::kind::real);
  const plain_value* divisions = snap.setting("roundup_power2_divisions");
  ASSERT_NE(divisions, nullptr);
  EXPECT_EQ(divisions->type, plain_value::kind::dict);
  EXPECT_EQ(divisions->keys.size(), 16u);
  EXPECT_EQ(divisions->keys.back(), "32768");
}

TEST(reader, cpp_stacks_oom_entry_and_metadata) {
  const snapshot& snap = fixture("tiny_oom_cpp_stacks.pickle");
  ASSERT_EQ(snap.events.size(), 70u);
  const trace_event* oom = nullptr;
  for (const trace_event& event : snap.events) {
    if (event.action == trace_action::oom) oom = &event;
  }
  ASSERT_NE(oom, nullptr);
  EXPECT_EQ(oom->addr, 149148532736u) << "device_free is kept in addr";
  EXPECT_EQ(oom->size, 40000000000000u);
  EXPECT_EQ(snap.str(snap.tag_of(*oom).user_metadata), "phase=train");
  EXPECT_EQ(snap.frames.size() > 100, true) << "C++ frames are read";
}

TEST(reader, expandable_segments_and_compile_context) {
  const snapshot& snap = fixture("tiny_oom_expandable_compile.pickle");
  auto counts = count_actions(snap);
  EXPECT_EQ(counts[static_cast<std::size_t>(trace_action::segment_map)], 6u);
  EXPECT_EQ(counts[static_cast<std::size_t>(trace_action::segment_unmap)], 1u);
  ASSERT_EQ(snap.segments.size(), 3u);
  EXPECT_TRUE(snap.segments[0].is_expandable);
  std::size_t compiled = 0;
  for (const trace_event& event : snap.events) compiled += snap.str(snap.tag_of(event).compile_context) == "Torch-Compiled Region: 0/0";
  EXPECT_EQ(compiled, 1u);
  // torch writes an unknown line as 2**64 - 1; it must read, not fail.
  bool unknown_line = false;
  for (const frame& f : snap.frames) unknown_line = unknown_line || f.line == -1;
  EXPECT_TRUE(unknown_line);
}

TEST(reader, gzip_and_plain_give_the_same_snapshot) {
  const snapshot& plain = fixture("tiny_oom_expandable_compile.pickle");
  const snapshot& zipped = fixture("tiny_oom_expandable_compile.pickle.gz");
  ASSERT_EQ(plain.events.size(), zipped.events.size());
  for (std::size_t i = 0; i < plain.events.size(); ++i) {
    EXPECT_EQ(plain.events[i].addr, zipped.events[i].addr) << "event " << i;
    EXPECT_EQ(plain.events[i].stack, zipped.events[i].stack) << "event " << i;
  }
  EXPECT_EQ(plain.strings, zipped.strings);
}

class protocols : public ::testing::TestWithParam<int> {};

TEST_P(protocols, every_protocol_gives_the_same_snapshot) {
  const snapshot& reference = fixture("tiny_oom_cpp_stacks.pickle");  // protocol 4, as torch writes
  const snapshot& other = fixture("tiny_oom_cpp_stacks.protocol" + std::to_string(GetParam()) + ".pickle.zst");
  ASSERT_EQ(other.events.size(), reference.events.size());
  ASSERT_EQ(other.segments.size(), reference.segments.size());
  for (std::size_t i = 0; i < reference.events.size(); ++i) {
    const trace_event& a = reference.events[i];
    const trace_event& b = other.events[i];
    EXPECT_EQ(a.action, b.action) << "event " << i;
    EXPECT_EQ(a.addr, b.addr) << "event " << i;
    EXPECT_EQ(a.size, b.size) << "event " << i;
    auto frames_a = reference.stack(a.stack);
    auto frames_b = other.stack(b.stack);
    ASSERT_EQ(frames_a.size(), frames_b.size()) << "event " << i;
    for (std::size_t f = 0; f < frames_a.size(); ++f) {
      EXPECT_EQ(frame_string(reference, frames_a[f]), frame_string(other, frames_b[f])) << "event " << i;
    }
  }
  EXPECT_EQ(other.allocator_settings.size(), reference.allocator_settings.size());
}

INSTANTIATE_TEST_SUITE_P(pickle, protocols, ::testing::Values(2, 3, 5));

namespace {

// The first part where two snapshots differ, or "" when they are equal.
std::string first_difference(const snapshot& a, const snapshot& b) {
  auto compare = [](const auto& left, const auto& right, const char* what) -> std::string {
    if (left.size() != right.size()) {
      return std::string(what) + ": " + std::to_string(left.size()) + " vs " + std::to_string(right.size()) + " entries";
    }
    for (std::size_t i = 0; i < left.size(); ++i) {
      if (!(left[i] == right[i])) return std::string(what) + " " + std::to_string(i) + " differs";
    }
    return {};
  };
  for (std::string found : {compare(a.events, b.events, "event"), compare(a.strings, b.strings, "string"),
                            compare(a.frames, b.frames, "frame"), compare(a.stack_frames, b.stack_frames, "stack frame"),
                            compare(a.stack_offsets, b.stack_offsets, "stack offset"),
                            compare(a.event_tags, b.event_tags, "event tag"), compare(a.streams, b.streams, "stream"),
                            compare(a.segments, b.segments, "segment"), compare(a.blocks, b.blocks, "block"),
                            compare(a.device_traces, b.device_traces, "device trace"),
                            compare(a.annotations, b.annotations, "annotation")}) {
    if (!found.empty()) return found;
  }
  return a == b ? std::string() : std::string("settings or format flag differ");
}

}  // namespace

// Every bundled snapshot read with `a` and with `b` gives the same result, or the same error.
void reads_every_bundled_snapshot_alike(const read_options& a, const read_options& b) {
  int compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing::testdata("snapshots"))) {
    if (entry.path().filename().string().find(".pickle") == std::string::npos) continue;
    auto first = read_snapshot_file(entry.path(), a);
    auto second = read_snapshot_file(entry.path(), b);
    ASSERT_EQ(first.ok(), second.ok()) << entry.path();
    if (!first.ok()) {
      EXPECT_EQ(describe(first.failure()), describe(second.failure())) << entry.path();
      continue;
    }
    EXPECT_EQ(first_difference(first.value(), second.value()), "") << entry.path();
    ++compared;
  }
  EXPECT_GE(compared, 10) << "expected the bundled snapshots in testdata/snapshots";
}

TEST(reader, the_trace_entry_shortcut_reads_every_bundled_snapshot_as_the_general_path_does) {
  read_options general;
  general.trace_entry_shortcut = false;
  reads_every_bundled_snapshot_alike(read_options{}, general);
}

TEST(reader, faulting_pages_in_ahead_on_a_second_thread_reads_every_bundled_snapshot_as_without) {
  read_options without;
  without.prefault_from_bytes = UINT64_MAX;
  read_options with;
  with.prefault_from_bytes = 0;  // every input, compressed ones too
  reads_every_bundled_snapshot_alike(with, without);
}

TEST(reader, decoding_trace_entries_on_the_read_ahead_thread_reads_every_bundled_snapshot_as_the_parse_thread_does) {
  // Blocks small enough that every bundled snapshot is read ahead, and many entries are cut.
  for (std::size_t block : {std::size_t{4099}, std::size_t{70001}}) {
    read_options noted;
    noted.read_ahead_block_bytes = block;
    read_options bytes = noted;
    bytes.scan_entries_ahead = false;
    reads_every_bundled_snapshot_alike(noted, bytes);
  }
}

TEST(reader, reading_ahead_on_a_second_thread_reads_every_bundled_snapshot_as_reading_in_line) {
  read_options in_line;
  in_line.read_ahead_block_bytes = 0;
  int compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing::testdata("snapshots"))) {
    if (entry.path().filename().string().find(".pickle") == std::string::npos) continue;
    auto direct = read_snapshot_file(entry.path(), in_line);
    // Blocks smaller and larger than the 64 KiB a block keeps free for the last one's tail.
    for (std::size_t block : {std::size_t{4099}, std::size_t{70001}}) {
      read_options ahead;
      ahead.read_ahead_block_bytes = block;
      auto read = read_snapshot_file(entry.path(), ahead);
      ASSERT_EQ(read.ok(), direct.ok()) << entry.path() << " " << block;
      if (!read.ok()) {
        EXPECT_EQ(describe(read.failure()), describe(direct.failure())) << entry.path() << " " << block;
        continue;
      }
      EXPECT_EQ(first_difference(read.value(), direct.value()), "") << entry.path() << " " << block;
      ++compared;
    }
  }
  EXPECT_GE(compared, 20) << "expected the bundled snapshots in testdata/snapshots";
}

}  // namespace rlmem
