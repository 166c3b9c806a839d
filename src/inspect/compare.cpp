// SPDX-License-Identifier: MIT
// Diffs of two inspections, and the per-rank view of a folder of snapshots.

#include <rlmem/inspect/compare.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <new>
#include <system_error>
#include <thread>

namespace rlmem {

namespace {

// The size of a change, for any delta: std::llabs(INT64_MIN) is undefined, this is 2^63.
std::uint64_t magnitude(std::int64_t delta) {
  return delta < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(delta) : static_cast<std::uint64_t>(delta);
}

bool larger_change(const diff_row& x, const diff_row& y) { return magnitude(x.delta()) > magnitude(y.delta()); }

std::vector<diff_row> diff_sites(const std::vector<site_usage>& a, const std::vector<site_usage>& b) {
  std::map<std::string, diff_row> rows;
  for (const site_usage& usage : a) {
    diff_row& row = rows[usage.site.label];
    row.key = usage.site.label;
    row.a_bytes = signed_bytes(usage.bytes);
    row.a_count = usage.count;
  }
  for (const site_usage& usage : b) {
    diff_row& row = rows[usage.site.label];
    row.key = usage.site.label;
    row.b_bytes = signed_bytes(usage.bytes);
    row.b_count = usage.count;
  }
  std::vector<diff_row> sorted;
  for (auto& [key, row] : rows) sorted.push_back(std::move(row));
  std::stable_sort(sorted.begin(), sorted.end(), larger_change);
  return sorted;
}

std::vector<diff_row> diff_categories(const category_bytes& a, const category_bytes& b) {
  std::vector<diff_row> rows;
  for (std::size_t c = 0; c < memory_category_count; ++c) {
    rows.push_back({std::string(memory_category_name(static_cast<memory_category>(c))), a[c], b[c], 0, 0});
  }
  std::stable_sort(rows.begin(), rows.end(), larger_change);
  return rows;
}

std::int64_t end_allocated(const inspection& result) {
  return result.memory.allocated.empty() ? result.final_allocated_bytes : result.memory.allocated.back();
}

// The name less its snapshot extension: `.pickle` or `.pkl`, optionally compressed; nullopt when
// it has none.
std::optional<std::string_view> snapshot_stem(std::string_view name) {
  for (std::string_view compression : {".gz", ".zst", ".zstd", ""}) {
    if (!name.ends_with(compression)) continue;
    std::string_view uncompressed = name.substr(0, name.size() - compression.size());
    for (std::string_view pickle : {".pickle", ".pkl"}) {
      if (uncompressed.size() > pickle.size() && uncompressed.ends_with(pickle)) {
        return uncompressed.substr(0, uncompressed.size() - pickle.size());
      }
    }
  }
  return std::nullopt;
}

bool is_separator(char c) { return c == '_' || c == '-' || c == '.' || c == ' '; }

std::string lower(std::string_view text) {
  std::string made(text);
  for (char& c : made) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return made;
}

// 1 to 7 decimal digits and nothing else: at most 9,999,999, far from overflow.
std::optional<std::int64_t> rank_digits(std::string_view piece) {
  constexpr std::size_t most_digits = 7;
  if (piece.empty() || piece.size() > most_digits) return std::nullopt;
  std::int64_t value = 0;
  for (char c : piece) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

// Every rank mark of a stem, in order (see rank_in_file_name for the grammar).
std::vector<std::int64_t> rank_marks(std::string_view stem) {
  std::vector<std::string> pieces;
  std::size_t begin = 0;
  for (std::size_t i = 0; i <= stem.size(); ++i) {
    if (i == stem.size() || is_separator(stem[i])) {
      if (i > begin) pieces.push_back(lower(stem.substr(begin, i - begin)));
      begin = i + 1;
    }
  }
  std::vector<std::int64_t> marks;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const std::string& piece = pieces[i];
    std::optional<std::int64_t> rank;
    if (piece == "rank" && i + 1 < pieces.size()) {
      rank = rank_digits(pieces[i + 1]);
      if (rank) ++i;
    } else if (piece.starts_with("rank")) {
      rank = rank_digits(std::string_view(piece).substr(4));
    } else if (piece.starts_with("r")) {
      rank = rank_digits(std::string_view(piece).substr(1));
    }
    if (rank) marks.push_back(*rank);
  }
  return marks;
}

// The one rank of a list of marks; nullopt when there is none, or two different ones.
std::optional<std::int64_t> single_rank(const std::vector<std::int64_t>& marks) {
  if (marks.empty()) return std::nullopt;
  for (std::int64_t mark : marks) {
    if (mark != marks.front()) return std::nullopt;
  }
  return marks.front();
}

// Reads and inspects one file; whatever is thrown becomes its failure, for a worker thread must
// not let an exception escape (std::terminate).
void inspect_one(const std::filesystem::path& file, const inspect_options& options, rank_result& one) noexcept {
  try {
    one.file = file.string();
    one.rank = rank_in_file_name(file.filename().string()).value_or(-1);
    auto read = read_snapshot_file(file);
    if (!read.ok()) {
      one.failure = describe(read.failure());
      return;
    }
    one.result = inspect(read.value(), options);
    one.ok = true;
  } catch (const std::bad_alloc&) {
    one.failure = "out of memory while reading or inspecting this snapshot";
  } catch (const std::exception& failure) {
    one.failure = fmt::format("could not be inspected: {}", failure.what());
  } catch (...) {
    one.failure = "could not be inspected: an unknown exception";
  }
}

}  // namespace

const std::string_view rank_name_forms =
    "rank3, rank_3, rank-3 or r3 between separators (snapshot_rank3.pickle, oom_rank-3.pickle.zst, trace-r3.pkl)";

inspection_diff diff_inspections(const inspection& a, const inspection& b) {
  inspection_diff made;
  made.peak_allocated_a = a.peak_allocated_bytes;
  made.peak_allocated_b = b.peak_allocated_bytes;
  made.peak_reserved_a = a.peak_reserved_bytes;
  made.peak_reserved_b = b.peak_reserved_bytes;
  made.end_allocated_a = end_allocated(a);
  made.end_allocated_b = end_allocated(b);
  made.end_reserved_a = a.final_reserved_bytes;
  made.end_reserved_b = b.final_reserved_bytes;
  made.sites_at_end = diff_sites(a.end_by_site, b.end_by_site);
  made.sites_at_peak = diff_sites(a.peak_by_site, b.peak_by_site);
  made.categories_at_end = diff_categories(a.categories_at_end, b.categories_at_end);
  made.categories_at_peak = diff_categories(a.categories_at_peak, b.categories_at_peak);
  return made;
}

std::optional<std::int64_t> rank_in_file_name(std::string_view name) {
  std::optional<std::string_view> stem = snapshot_stem(name);
  return single_rank(rank_marks(stem.value_or(name)));
}

result<std::vector<std::filesystem::path>, inspect_errc> ranked_snapshot_files_in(const std::filesystem::path& folder) {
  using failure = basic_error<inspect_errc>;
  std::error_code status;
  std::filesystem::directory_iterator entries(folder, status);
  if (status) return failure{inspect_errc::folder_unreadable, 0, fmt::format("cannot be read: {}", status.message())};
  std::vector<std::pair<std::int64_t, std::filesystem::path>> ranked;
  std::vector<std::string> unranked;
  for (; entries != std::filesystem::directory_iterator(); entries.increment(status)) {
    std::string name = entries->path().filename().string();
    std::error_code kind_status;
    if (!entries->is_regular_file(kind_status) || !snapshot_stem(name)) continue;
    std::vector<std::int64_t> marks = rank_marks(*snapshot_stem(name));
    std::optional<std::int64_t> rank = single_rank(marks);
    if (!rank && !marks.empty()) {
      return failure{inspect_errc::two_ranks_in_name, 0,
                     fmt::format("{} names two different ranks ({} and {}): rename it with one", name, marks.front(),
                                 *std::find_if(marks.begin(), marks.end(), [&](std::int64_t m) { return m != marks.front(); }))};
    }
    if (rank) {
      ranked.emplace_back(*rank, entries->path());
    } else {
      unranked.push_back(name);
    }
  }
  if (status) return failure{inspect_errc::folder_unreadable, 0, fmt::format("cannot be read: {}", status.message())};
  if (ranked.empty() && unranked.empty()) {
    return failure{inspect_errc::no_snapshot_files, 0, "holds no snapshot files (.pickle or .pkl, optionally .gz, .zst or .zstd)"};
  }
  if (!unranked.empty()) {
    std::sort(unranked.begin(), unranked.end());
    return failure{inspect_errc::file_without_rank, 0,
                   ranked.empty() ? fmt::format("no snapshot file name carries a rank ({} of them, e.g. {}): name them {}",
                                                unranked.size(), unranked.front(), rank_name_forms)
                                  : fmt::format("{} carries no rank, unlike the {} others: name it {}", unranked.front(),
                                                ranked.size(), rank_name_forms)};
  }
  std::sort(ranked.begin(), ranked.end());
  for (std::size_t i = 1; i < ranked.size(); ++i) {
    if (ranked[i].first == ranked[i - 1].first) {
      return failure{inspect_errc::duplicate_rank, 0,
                     fmt::format("rank {} twice: {} and {}", ranked[i].first, ranked[i - 1].second.filename().string(),
                                 ranked[i].second.filename().string())};
    }
  }
  std::vector<std::filesystem::path> files;
  files.reserve(ranked.size());
  for (auto& [rank, path] : ranked) files.push_back(std::move(path));
  return files;
}

std::vector<rank_result> inspect_ranks(const std::vector<std::filesystem::path>& files, const inspect_options& options,
                                       unsigned threads) {
  std::vector<rank_result> results(files.size());
  std::atomic<std::size_t> next{0};
  auto work = [&]() noexcept {
    for (std::size_t i = next++; i < files.size(); i = next++) inspect_one(files[i], options, results[i]);
  };
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, files.size()));
  std::vector<std::thread> pool;
  pool.reserve(threads);  // so that emplace_back can fail only to start a thread
  for (unsigned t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads to be had: those started and this one share the files
    }
  }
  work();
  for (auto& thread : pool) thread.join();
  return results;
}

rank_imbalance measure_imbalance(const std::vector<rank_result>& ranks) {
  rank_imbalance made;
  bool first = true;
  for (const rank_result& one : ranks) {
    if (!one.ok) continue;
    std::int64_t peak = one.result.peak_allocated_bytes;
    if (first || peak > made.max_peak_allocated) {
      made.max_peak_allocated = peak;
      made.max_rank = one.rank;
    }
    if (first || peak < made.min_peak_allocated) {
      made.min_peak_allocated = peak;
      made.min_rank = one.rank;
    }
    made.max_peak_reserved = first ? one.result.peak_reserved_bytes : std::max(made.max_peak_reserved, one.result.peak_reserved_bytes);
    made.min_peak_reserved = first ? one.result.peak_reserved_bytes : std::min(made.min_peak_reserved, one.result.peak_reserved_bytes);
    first = false;
  }
  if (!first && made.min_peak_allocated > 0) {
    made.max_over_min = static_cast<double>(made.max_peak_allocated) / static_cast<double>(made.min_peak_allocated);
  }
  return made;
}

}  // namespace rlmem
