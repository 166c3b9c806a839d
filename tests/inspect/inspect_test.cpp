// SPDX-License-Identifier: MIT
// inspect on the real snapshots: peaks equal PyTorch's own counters, the replay agrees with the
// dump-time segments, and the peak breakdown accounts for every byte.

#include "fixtures.hpp"

#include <rlmem/inspect/inspect.hpp>

#include <gtest/gtest.h>

#include <cstdlib>

namespace rlmem {

using testing::fixture;

namespace {

struct known_peaks {
  const char* file;
  std::int64_t torch_peak_reserved;   // torch.cuda.max_memory_reserved() in the recording run
  std::int64_t torch_peak_allocated;  // torch.cuda.max_memory_allocated(), 0 when not given
};

// From testdata/README.md (the fixtures' recording notes) and, for the fragmentation runs,
// testdata/snapshots/frag_capacity.json (the uncapped rows' peak_alloc).
constexpr known_peaks recorded_peaks[] = {
    {"grpo_clean.pickle.zst", 811'597'824, 747'623'936},
    {"frag_default.pickle.zst", 4'190'109'696, 2'646'783'488},
    {"frag_expandable.pickle.zst", 2'931'818'496, 2'614'033'920},
};

class peaks : public ::testing::TestWithParam<known_peaks> {};

// Whole unsplit blocks are modelled, so on these runs both peaks are torch's to the byte.
TEST_P(peaks, peak_reserved_and_peak_allocated_are_torchs_exactly) {
  const known_peaks& expected = GetParam();
  inspection result = inspect(fixture(expected.file));
  EXPECT_EQ(result.peak_reserved_bytes, expected.torch_peak_reserved)
      << expected.file << ": expected torch's peak reserved " << expected.torch_peak_reserved << ", saw " << result.peak_reserved_bytes;
  EXPECT_EQ(result.peak_allocated_bytes, expected.torch_peak_allocated)
      << expected.file << ": expected torch's peak allocated " << expected.torch_peak_allocated << ", saw " << result.peak_allocated_bytes;
}

INSTANTIATE_TEST_SUITE_P(fixtures, peaks, ::testing::ValuesIn(recorded_peaks));

}  // namespace

TEST(inspect, grpo_clean_peak_allocated_matches_torch_to_the_byte) {
  // Whole unsplit blocks are modelled, so the figure is exact on this run, not just close.
  EXPECT_EQ(inspect(fixture("grpo_clean.pickle.zst")).peak_allocated_bytes, 747'623'936);
}


class replay_consistency : public ::testing::TestWithParam<const char*> {};

TEST_P(replay_consistency, replay_ends_where_the_dump_says) {
  const snapshot& snap = fixture(GetParam());
  inspection result = inspect(snap);
  ASSERT_FALSE(result.memory.allocated.empty());
  EXPECT_EQ(result.memory.reserved.back(), result.final_reserved_bytes);
  EXPECT_EQ(result.memory.allocated.back(), result.final_allocated_bytes)
      << "replayed allocated bytes after the last event must equal the dump's active_allocated blocks";
  EXPECT_EQ(result.memory.inconsistencies, 0u);
  EXPECT_GE(result.memory.allocated_at_start, 0);
  EXPECT_GE(result.memory.reserved_at_start, result.memory.allocated_at_start);
}

INSTANTIATE_TEST_SUITE_P(fixtures, replay_consistency,
                         ::testing::Values("grpo_clean.pickle.zst", "grpo_leak_logits.pickle.zst", "frag_default.pickle.zst",
                                           "frag_expandable.pickle.zst", "frag_default_oom.pickle.zst",
                                           "tiny_oom_cpp_stacks.pickle", "tiny_oom_expandable_compile.pickle"));

TEST(inspect, memory_from_before_recording_is_counted_and_noted) {
  inspection result = inspect(fixture("grpo_clean.pickle.zst"));
  EXPECT_GT(result.memory.blocks_live_at_start, 0u) << "history started after the models were created";
  EXPECT_GT(result.memory.allocated_at_start, 100 << 20);
  bool noted = false;
  for (const auto& note : result.notes) noted = noted || note.find("already allocated") != std::string::npos;
  EXPECT_TRUE(noted);
  inspection tiny = inspect(fixture("tiny_oom_cpp_stacks.pickle"));
  EXPECT_EQ(tiny.memory.blocks_live_at_start, 0u) << "this script recorded from its first allocation";
  EXPECT_EQ(tiny.memory.reserved_at_start, 0);
}

TEST(inspect, peak_breakdown_accounts_for_every_byte) {
  inspect_options everything;
  everything.top = 1000;
  inspection result = inspect(fixture("grpo_clean.pickle.zst"), everything);
  std::uint64_t total = 0;
  for (const auto& usage : result.peak_by_site) total += usage.bytes;
  EXPECT_EQ(static_cast<std::int64_t>(total), result.peak_allocated_bytes);
  EXPECT_EQ(result.peak_by_site.size(), result.peak_site_count);
  for (std::size_t i = 1; i < result.peak_by_site.size(); ++i) {
    EXPECT_GE(result.peak_by_site[i - 1].bytes, result.peak_by_site[i].bytes) << "sorted largest first";
  }
}

TEST(inspect, the_leaked_fp32_logits_site_is_among_the_largest_at_peak) {
  // grpo_leak_logits keeps the .float() logits of every step alive (record.py:41).
  inspection result = inspect(fixture("grpo_leak_logits.pickle.zst"));
  bool found = false;
  for (const auto& usage : result.peak_by_site) {
    if (usage.site.label == "rl/record.py:41 logprobs_of") {
      found = true;
      EXPECT_GE(usage.count, 3u) << "one per step so far";
      EXPECT_GE(usage.bytes, std::uint64_t{3} * 49'152'000) << "46.9 MiB of fp32 logits per step";
    }
  }
  EXPECT_TRUE(found);
}

TEST(inspect, summary_counts_and_devices) {
  inspection result = inspect(fixture("frag_default_oom.pickle.zst"));
  EXPECT_EQ(result.device, 0);
  EXPECT_EQ(result.devices, std::vector<std::int64_t>{0});
  EXPECT_EQ(result.events, 7976u);
  EXPECT_EQ(result.events_by_action[static_cast<std::size_t>(trace_action::oom)], 1u);
  EXPECT_EQ(result.events_by_action[static_cast<std::size_t>(trace_action::segment_free)], 9u);
  EXPECT_EQ(result.segment_count, 79u);
  EXPECT_EQ(result.final_reserved_bytes, 2'348'810'240);
  EXPECT_EQ(result.streams, std::vector<std::uint64_t>{0});
  inspection expandable = inspect(fixture("frag_expandable.pickle.zst"));
  EXPECT_EQ(expandable.expandable_segment_count, expandable.segment_count);
}

}  // namespace rlmem
