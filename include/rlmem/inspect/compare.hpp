// SPDX-License-Identifier: MIT
#pragma once
// Comparing inspections: two snapshots (`rlmem diff A B`: before and after a change, rank 0
// against rank 7) and a folder of per-rank snapshots (`rlmem inspect DIR`).

#include <rlmem/base/error.hpp>
#include <rlmem/inspect/inspect.hpp>
#include <rlmem/base/saturating.hpp>
#include <rlmem/snapshot/snapshot_reader.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rlmem {

/// One site or category in both snapshots.
struct diff_row {
  std::string key;          ///< site label or category name
  std::int64_t a_bytes = 0;  ///< live bytes in A; 0 when A has no such site
  std::int64_t b_bytes = 0;  ///< live bytes in B; 0 when B has no such site
  std::uint64_t a_count = 0; ///< live blocks in A (0 for categories)
  std::uint64_t b_count = 0; ///< live blocks in B (0 for categories)
  /// b_bytes - a_bytes, held at INT64_MIN or INT64_MAX where the difference overflows.
  std::int64_t delta() const { return saturating_subtract(b_bytes, a_bytes); }
};

/// What grew and shrank from A to B, largest change first.
struct inspection_diff {
  std::int64_t peak_allocated_a = 0;  ///< inspection::peak_allocated_bytes of A
  std::int64_t peak_allocated_b = 0;  ///< and of B
  std::int64_t peak_reserved_a = 0;   ///< inspection::peak_reserved_bytes of A
  std::int64_t peak_reserved_b = 0;   ///< and of B
  std::int64_t end_allocated_a = 0;   ///< allocated after A's last event (without events: from its dump)
  std::int64_t end_allocated_b = 0;   ///< and after B's
  std::int64_t end_reserved_a = 0;    ///< inspection::final_reserved_bytes of A
  std::int64_t end_reserved_b = 0;    ///< and of B
  std::vector<diff_row> sites_at_end;        ///< from inspection::end_by_site
  std::vector<diff_row> sites_at_peak;       ///< from inspection::peak_by_site
  std::vector<diff_row> categories_at_end;   ///< every category, from inspection::categories_at_end
  std::vector<diff_row> categories_at_peak;  ///< every category, from inspection::categories_at_peak
};

/// Compares two inspections made with options.top large enough to keep every site.
inspection_diff diff_inspections(const inspection& a, const inspection& b);

/// The rank a snapshot's file name carries, torchrun style. The stem (the name less `.pickle` or
/// `.pkl` and an optional `.gz`, `.zst` or `.zstd`) is cut at separators (`_`, `-`, `.`, space);
/// a rank mark is a piece `rank<digits>` or `r<digits>` (any case), or a piece `rank` followed by
/// a piece of digits (`rank_3`, `rank-3`), with 1 to 7 digits (leading zeros allowed). A name with
/// no mark, or with marks of two different ranks, carries none. Examples: snapshot_rank3.pickle,
/// oom_rank-12.pickle.zst, rank_0_pid4242.pkl, trace-r7.pickle; not: snapshot_3.pickle, frank3.pickle.
std::optional<std::int64_t> rank_in_file_name(std::string_view name);

/// The accepted rank names, for messages: "rank3, rank_3, rank-3 or r3 between separators (...)".
extern const std::string_view rank_name_forms;

/// The snapshot files of a folder of per-rank snapshots (.pickle or .pkl, optionally .gz, .zst or
/// .zstd), sorted by rank. Fails, with one line in `detail`, when the folder cannot be read
/// (folder_unreadable), holds no snapshot (no_snapshot_files), holds one whose name carries no
/// rank (rank_in_file_name: file_without_rank) or two (two_ranks_in_name), or two files of the
/// same rank (duplicate_rank).
result<std::vector<std::filesystem::path>, inspect_errc> ranked_snapshot_files_in(const std::filesystem::path& folder);

/// One inspected snapshot of a folder of per-rank snapshots, or of `rlmem diff`.
struct rank_result {
  std::string file;        ///< the path as given
  std::int64_t rank = -1;  ///< rank_in_file_name, else -1
  bool ok = false;         ///< read and inspected: `result` holds the inspection
  std::string failure;     ///< when !ok: why, one line (a reader error, or out of memory reading it)
  inspection result;       ///< when ok
};

/// Reads and inspects `files` on up to `threads` threads (0: one per core). Nothing thrown while
/// reading or inspecting one file escapes: it becomes that file's failure.
std::vector<rank_result> inspect_ranks(const std::vector<std::filesystem::path>& files, const inspect_options& options,
                                       unsigned threads = 0);

/// How unequal the ranks are (those that were read).
struct rank_imbalance {
  std::int64_t min_peak_allocated = 0;  ///< the smallest inspection::peak_allocated_bytes
  std::int64_t max_peak_allocated = 0;  ///< the largest
  std::int64_t max_rank = -1;           ///< rank_result::rank of the largest peak allocated; -1: none read
  std::int64_t min_rank = -1;           ///< rank_result::rank of the smallest; -1: none read
  std::int64_t min_peak_reserved = 0;   ///< the smallest inspection::peak_reserved_bytes
  std::int64_t max_peak_reserved = 0;   ///< the largest
  std::optional<double> max_over_min;   ///< largest peak allocated over smallest; none when the smallest is 0
};
/// The spread of peaks over the ranks that were read (`ok`); all zeros and -1 when none was.
rank_imbalance measure_imbalance(const std::vector<rank_result>& ranks);

}  // namespace rlmem
