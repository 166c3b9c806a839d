// SPDX-License-Identifier: MIT
// Diffs of two real snapshots and the per-rank view of a folder.

#include "fixtures.hpp"

#include <rlmem/compare.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <limits>

namespace rlmem {

using testing::fixture;

namespace {

inspection everything(const std::string& name) {
  inspect_options options;
  options.top = std::numeric_limits<std::size_t>::max();
  return inspect(fixture(name), options);
}

}  // namespace

TEST(diff, the_leaking_site_grew_most_at_the_end) {
  inspection_diff diff = diff_inspections(everything("grpo_clean.pickle.zst"), everything("grpo_leak_logits.pickle.zst"));
  ASSERT_FALSE(diff.sites_at_end.empty());
  const diff_row& top = diff.sites_at_end.front();
  EXPECT_EQ(top.key, "rl/record.py:41 logprobs_of");
  EXPECT_EQ(top.a_bytes, 0);
  EXPECT_EQ(top.b_count, 4u);
  EXPECT_EQ(diff.categories_at_end.front().key, "logits");
  EXPECT_EQ(diff.peak_reserved_a, 811'597'824);
  std::int64_t site_change = 0;
  for (const diff_row& row : diff.sites_at_end) site_change += row.delta();
  EXPECT_EQ(site_change, diff.end_allocated_b - diff.end_allocated_a) << "site changes add up to the total change";
}

TEST(diff, a_snapshot_against_itself_changes_nothing) {
  inspection same = everything("frag_default_oom.pickle.zst");
  inspection_diff diff = diff_inspections(same, same);
  for (const diff_row& row : diff.sites_at_peak) EXPECT_EQ(row.delta(), 0) << row.key;
  for (const diff_row& row : diff.categories_at_end) EXPECT_EQ(row.delta(), 0) << row.key;
}

TEST(ranks, a_folder_is_read_in_parallel_and_ordered_by_rank) {
  auto folder = std::filesystem::temp_directory_path() / "rlmem_ranks_test";
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  std::filesystem::copy_file(testing::testdata("snapshots/grpo_leak_logits.pickle.zst"), folder / "snapshot_rank10.pickle.zst");
  std::filesystem::copy_file(testing::testdata("snapshots/grpo_clean.pickle.zst"), folder / "snapshot_rank2.pickle.zst");
  std::filesystem::copy_file(testing::testdata("snapshots/tiny_oom_cpp_stacks.pickle"), folder / "snapshot_rank3.pickle");
  std::filesystem::copy_file(testing::testdata("README.md"), folder / "notes.md");  // not a snapshot: skipped
  auto files = snapshot_files_in(folder);
  ASSERT_EQ(files.size(), 3u);
  auto ranks = inspect_ranks(files, {}, 3);
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_EQ(ranks[0].rank, 2);
  EXPECT_EQ(ranks[1].rank, 3);
  EXPECT_EQ(ranks[2].rank, 10);
  for (const auto& one : ranks) EXPECT_TRUE(one.ok) << one.file;
  EXPECT_EQ(ranks[2].result.leaks.size(), 1u);
  EXPECT_EQ(ranks[1].result.ooms.size(), 1u);
  rank_imbalance imbalance = measure_imbalance(ranks);
  EXPECT_EQ(imbalance.max_rank, 10);
  EXPECT_EQ(imbalance.max_peak_allocated, ranks[2].result.peak_allocated_bytes);
  EXPECT_EQ(imbalance.min_rank, 3);
  std::filesystem::remove_all(folder);
}

}  // namespace rlmem
