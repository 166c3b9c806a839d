// SPDX-License-Identifier: MIT
#pragma once
// Comparing inspections: two snapshots (`rlmem diff A B`: before and after a change, rank 0
// against rank 7) and a folder of per-rank snapshots (`rlmem inspect DIR`).

#include <rlmem/error.hpp>
#include <rlmem/inspect.hpp>
#include <rlmem/snapshot_reader.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace rlmem {

/// One site or category in both snapshots.
struct diff_row {
  std::string key;          ///< site label or category name
  std::int64_t a_bytes = 0;
  std::int64_t b_bytes = 0;
  std::uint64_t a_count = 0;
  std::uint64_t b_count = 0;
  std::int64_t delta() const { return b_bytes - a_bytes; }
};

/// What grew and shrank from A to B, largest change first.
struct inspection_diff {
  std::int64_t peak_allocated_a = 0, peak_allocated_b = 0;
  std::int64_t peak_reserved_a = 0, peak_reserved_b = 0;
  std::int64_t end_allocated_a = 0, end_allocated_b = 0;
  std::int64_t end_reserved_a = 0, end_reserved_b = 0;
  std::vector<diff_row> sites_at_end;
  std::vector<diff_row> sites_at_peak;
  std::vector<diff_row> categories_at_end;
  std::vector<diff_row> categories_at_peak;
};

/// Compares two inspections made with options.top large enough to keep every site.
inspection_diff diff_inspections(const inspection& a, const inspection& b);

/// One snapshot of a folder of per-rank snapshots.
struct rank_result {
  std::string file;
  std::int64_t rank = -1;  ///< from the file name (rank3, _rank_3, snapshot_3), else its order
  bool ok = false;
  error failure;           ///< when !ok
  inspection result;
};

/// Snapshot files in `folder` (.pickle, .pkl, .pickle.gz, .pickle.zst, ...), sorted by rank.
std::vector<std::filesystem::path> snapshot_files_in(const std::filesystem::path& folder);

/// Reads and inspects `files` on up to `threads` threads (0: one per core).
std::vector<rank_result> inspect_ranks(const std::vector<std::filesystem::path>& files, const inspect_options& options,
                                       unsigned threads = 0);

/// How unequal the ranks are.
struct rank_imbalance {
  std::int64_t min_peak_allocated = 0, max_peak_allocated = 0;
  std::int64_t max_rank = -1, min_rank = -1;  ///< ranks with the largest and smallest peak allocated
  std::int64_t min_peak_reserved = 0, max_peak_reserved = 0;
  double max_over_min = 0;                    ///< largest peak allocated over smallest
};
rank_imbalance measure_imbalance(const std::vector<rank_result>& ranks);

}  // namespace rlmem
