// SPDX-License-Identifier: MIT
// Diffs of two real snapshots and the per-rank view of a folder.

#include "fixtures.hpp"

#include <rlmem/inspect/compare.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

namespace rlmem {

using testing::fixture;

namespace {

// A fresh folder under the temporary directory, removed when the test ends.
class scratch_folder {
 public:
  explicit scratch_folder(const std::string& name) : path_(std::filesystem::temp_directory_path() / name) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~scratch_folder() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  void add(const std::string& name, const std::string& from_testdata = "snapshots/tiny_oom_cpp_stacks.pickle") const {
    std::filesystem::copy_file(testing::testdata(from_testdata), path_ / name);
  }

 private:
  std::filesystem::path path_;
};

// The line a refused folder is printed with, after checking the refusal's code.
std::string refusal_of(const scratch_folder& folder, inspect_errc expected) {
  auto files = ranked_snapshot_files_in(folder.path());
  EXPECT_FALSE(files.ok()) << "expected the folder to be refused";
  EXPECT_EQ(files.code(), expected) << "expected " << error_name(expected) << ", saw " << error_name(files.code());
  return files.failure().detail;
}

rank_result read_rank(std::int64_t rank, std::int64_t peak_allocated) {
  rank_result one;
  one.rank = rank;
  one.ok = true;
  one.result.peak_allocated_bytes = peak_allocated;
  one.result.peak_reserved_bytes = peak_allocated;
  return one;
}

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

// Issue 27 item 4: the same models on both sides; the blocks from before recording changed by
// 32.1 MiB, and that change is before_recording's, not weights'.
TEST(diff, blocks_from_before_recording_are_not_weights) {
  inspection_diff diff = diff_inspections(everything("grpo_clean.pickle.zst"), everything("grpo_leak_logits.pickle.zst"));
  for (const auto* moment : {&diff.categories_at_peak, &diff.categories_at_end}) {
    const std::vector<diff_row>& sites = moment == &diff.categories_at_peak ? diff.sites_at_peak : diff.sites_at_end;
    auto find = [](const std::vector<diff_row>& rows, const std::string& key) -> const diff_row* {
      for (const diff_row& row : rows) {
        if (row.key == key) return &row;
      }
      return nullptr;
    };
    const diff_row* site = find(sites, "<allocated before recording began>");
    const diff_row* before = find(*moment, "before_recording");
    const diff_row* weights = find(*moment, "weights");
    ASSERT_NE(site, nullptr);
    ASSERT_NE(before, nullptr) << "expected a before_recording row";
    ASSERT_NE(weights, nullptr);
    EXPECT_EQ(site->delta(), 33'685'504) << "expected +32.1 MiB of blocks from before recording";
    EXPECT_EQ(before->a_bytes, site->a_bytes);
    EXPECT_EQ(before->b_bytes, site->b_bytes);
    EXPECT_EQ(weights->a_bytes, 0) << "expected no weights: seen " << weights->a_bytes;
    EXPECT_EQ(weights->b_bytes, 0) << "expected no weights: seen " << weights->b_bytes;
  }
}

TEST(diff, a_snapshot_against_itself_changes_nothing) {
  inspection same = everything("frag_default_oom.pickle.zst");
  inspection_diff diff = diff_inspections(same, same);
  for (const diff_row& row : diff.sites_at_peak) EXPECT_EQ(row.delta(), 0) << row.key;
  for (const diff_row& row : diff.categories_at_end) EXPECT_EQ(row.delta(), 0) << row.key;
}

// Issue 28 item 10: byte figures near 2^63 wrapped (a negative change printed for growth, UB
// under UBSan); a change holds at the ends of int64 instead, and a site of 2^64-1 bytes comes in
// as INT64_MAX, never negative.
TEST(diff, changes_near_int64_max_saturate_instead_of_wrapping) {
  constexpr std::int64_t most = std::numeric_limits<std::int64_t>::max();
  diff_row grew{"grew", -2, most, 0, 0};
  diff_row shrank{"shrank", most, -2, 0, 0};
  EXPECT_EQ(grew.delta(), most) << "expected INT64_MAX, saw " << grew.delta();
  EXPECT_EQ(shrank.delta(), std::numeric_limits<std::int64_t>::min()) << "expected INT64_MIN, saw " << shrank.delta();

  inspection a;
  inspection b;
  site_usage huge;
  huge.site.label = "huge.py:1 f";
  huge.bytes = std::numeric_limits<std::uint64_t>::max();
  site_usage small = huge;
  small.site.label = "small.py:1 g";
  small.bytes = 1;
  b.end_by_site = {small, huge};
  inspection_diff diff = diff_inspections(a, b);
  ASSERT_EQ(diff.sites_at_end.size(), 2u);
  EXPECT_EQ(diff.sites_at_end[0].key, "huge.py:1 f") << "expected the largest change first";
  EXPECT_EQ(diff.sites_at_end[0].b_bytes, most) << "expected 2^64-1 bytes held at INT64_MAX, saw " << diff.sites_at_end[0].b_bytes;
  EXPECT_EQ(diff.sites_at_end[0].delta(), most);
}

TEST(ranks, torchrun_style_names_carry_a_rank) {
  const std::vector<std::pair<std::string, std::int64_t>> ranked = {
      {"snapshot_rank3.pickle", 3},      {"rank_3.pickle", 3},           {"oom_rank-12.pickle.zst", 12},
      {"RANK7.pkl", 7},                  {"rank_0_pid4242.pkl", 0},      {"trace-r7.pickle", 7},
      {"step_100_r5.pickle.gz", 5},      {"r2.pickle", 2},               {"memory_rank03.pickle.zstd", 3},
      {"epoch_3_rank_1.pickle", 1},      {"a.rank2.pickle", 2},          {"rank9999999.pickle", 9'999'999},
      {"rank1_rank1.pickle", 1}};
  for (const auto& [name, rank] : ranked) {
    EXPECT_EQ(rank_in_file_name(name), std::optional<std::int64_t>(rank)) << name << ": expected rank " << rank;
  }
  const std::vector<std::string> unranked = {
      "snapshot_3.pickle",  "snapshot_47727.pickle", "frank3.pickle", "rank3x.pickle",      "rank.pickle",
      "r.pickle",           "rr3.pickle",            "r2d2.pickle",   "rank10000000.pickle", "rank1_r2.pickle",
      "2024-05-01.pickle",  "snapshotrank3.pickle"};
  for (const std::string& name : unranked) {
    EXPECT_EQ(rank_in_file_name(name), std::nullopt) << name << ": expected no rank, saw " << rank_in_file_name(name).value_or(-1);
  }
}

TEST(ranks, a_folder_is_read_in_parallel_and_ordered_by_rank) {
  scratch_folder folder("rlmem_ranks_test");
  folder.add("snapshot_rank10.pickle.zst", "snapshots/grpo_leak_logits.pickle.zst");
  folder.add("snapshot_rank2.pickle.zst", "snapshots/grpo_clean.pickle.zst");
  folder.add("snapshot_rank3.pickle");
  folder.add("notes.md", "README.md");  // not a snapshot: skipped
  auto listed = ranked_snapshot_files_in(folder.path());
  ASSERT_TRUE(listed.ok()) << listed.failure().detail;
  const std::vector<std::filesystem::path>& files = listed.value();
  ASSERT_EQ(files.size(), 3u);
  auto ranks = inspect_ranks(files, {}, 3);
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_EQ(ranks[0].rank, 2);
  EXPECT_EQ(ranks[1].rank, 3);
  EXPECT_EQ(ranks[2].rank, 10);
  for (const auto& one : ranks) EXPECT_TRUE(one.ok) << one.file << ": " << one.failure;
  EXPECT_EQ(ranks[2].result.leaks.size(), 1u);
  EXPECT_EQ(ranks[1].result.ooms.size(), 1u);
  rank_imbalance imbalance = measure_imbalance(ranks);
  EXPECT_EQ(imbalance.max_rank, 10);
  EXPECT_EQ(imbalance.max_peak_allocated, ranks[2].result.peak_allocated_bytes);
  EXPECT_EQ(imbalance.min_rank, 3);
  ASSERT_TRUE(imbalance.max_over_min.has_value());
  EXPECT_GT(*imbalance.max_over_min, 1.0);
}

TEST(ranks, a_file_that_cannot_be_read_is_that_ranks_failure_only) {
  scratch_folder folder("rlmem_ranks_bad_file");
  folder.add("snapshot_rank0.pickle");
  std::ofstream(folder.path() / "snapshot_rank1.pickle") << "not a pickle\n";
  auto listed = ranked_snapshot_files_in(folder.path());
  ASSERT_TRUE(listed.ok()) << listed.failure().detail;
  const std::vector<std::filesystem::path>& files = listed.value();
  auto ranks = inspect_ranks(files, {}, 2);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_TRUE(ranks[0].ok) << ranks[0].failure;
  EXPECT_FALSE(ranks[1].ok) << "expected rank 1 (not a pickle) to fail";
  EXPECT_NE(ranks[1].failure.find("UNKNOWN_FORMAT"), std::string::npos) << "saw: " << ranks[1].failure;
  EXPECT_EQ(measure_imbalance(ranks).max_rank, 0) << "only the rank that was read counts";
}

TEST(ranks, a_folder_whose_names_carry_no_rank_is_refused_with_the_forms_accepted) {
  scratch_folder folder("rlmem_ranks_none");
  folder.add("snapshot_1.pickle");
  folder.add("snapshot_2.pickle");
  std::string problem = refusal_of(folder, inspect_errc::file_without_rank);
  EXPECT_NE(problem.find("no snapshot file name carries a rank"), std::string::npos) << "saw: " << problem;
  EXPECT_NE(problem.find(rank_name_forms), std::string::npos) << "saw: " << problem;
}

TEST(ranks, one_name_without_a_rank_among_ranked_ones_is_named) {
  scratch_folder folder("rlmem_ranks_one_unranked");
  folder.add("snapshot_rank0.pickle");
  folder.add("snapshot_rank1.pickle");
  folder.add("combined.pickle");
  std::string problem = refusal_of(folder, inspect_errc::file_without_rank);
  EXPECT_NE(problem.find("combined.pickle carries no rank"), std::string::npos) << "saw: " << problem;
}

TEST(ranks, two_files_of_one_rank_are_refused_naming_both) {
  scratch_folder folder("rlmem_ranks_duplicate");
  folder.add("snapshot_rank0.pickle");
  folder.add("snapshot_rank3.pickle");
  folder.add("oom_rank_03.pickle");
  std::string problem = refusal_of(folder, inspect_errc::duplicate_rank);
  EXPECT_NE(problem.find("rank 3 twice"), std::string::npos) << "saw: " << problem;
  EXPECT_NE(problem.find("snapshot_rank3.pickle"), std::string::npos) << "saw: " << problem;
  EXPECT_NE(problem.find("oom_rank_03.pickle"), std::string::npos) << "saw: " << problem;
}

TEST(ranks, a_name_with_two_ranks_is_refused) {
  scratch_folder folder("rlmem_ranks_two_in_one");
  folder.add("rank1_r2.pickle");
  std::string problem = refusal_of(folder, inspect_errc::two_ranks_in_name);
  EXPECT_NE(problem.find("rank1_r2.pickle names two different ranks (1 and 2)"), std::string::npos) << "saw: " << problem;
}

TEST(ranks, a_folder_without_snapshots_is_refused) {
  scratch_folder folder("rlmem_ranks_empty");
  folder.add("notes.md", "README.md");
  EXPECT_NE(refusal_of(folder, inspect_errc::no_snapshot_files).find("holds no snapshot files"), std::string::npos);
}

TEST(ranks, a_folder_that_cannot_be_listed_is_refused_with_the_reason) {
  auto files = ranked_snapshot_files_in("/nonexistent/rlmem_ranks");
  EXPECT_EQ(files.code(), inspect_errc::folder_unreadable) << error_name(files.code());
  EXPECT_EQ(files.failure().detail, "cannot be read: No such file or directory");
}

TEST(ranks, no_ratio_when_the_smallest_peak_is_zero) {
  rank_imbalance imbalance = measure_imbalance({read_rank(0, 0), read_rank(1, 4096)});
  EXPECT_EQ(imbalance.min_rank, 0);
  EXPECT_EQ(imbalance.max_rank, 1);
  EXPECT_FALSE(imbalance.max_over_min.has_value()) << "expected no ratio, saw " << imbalance.max_over_min.value_or(0);
  EXPECT_FALSE(measure_imbalance({read_rank(0, 0), read_rank(1, 0)}).max_over_min.has_value());
  rank_imbalance none_read = measure_imbalance({});
  EXPECT_EQ(none_read.max_rank, -1);
  EXPECT_FALSE(none_read.max_over_min.has_value());
  rank_imbalance even = measure_imbalance({read_rank(0, 512), read_rank(1, 1024)});
  EXPECT_DOUBLE_EQ(even.max_over_min.value_or(0), 2.0);
}

}  // namespace rlmem
