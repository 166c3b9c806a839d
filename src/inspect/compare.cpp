// SPDX-License-Identifier: MIT
// Diffs of two inspections, and the per-rank view of a folder of snapshots.

#include <rlmem/compare.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <regex>
#include <thread>

namespace rlmem {

namespace {

std::vector<diff_row> diff_sites(const std::vector<site_usage>& a, const std::vector<site_usage>& b) {
  std::map<std::string, diff_row> rows;
  for (const site_usage& usage : a) {
    diff_row& row = rows[usage.site.label];
    row.key = usage.site.label;
    row.a_bytes = static_cast<std::int64_t>(usage.bytes);
    row.a_count = usage.count;
  }
  for (const site_usage& usage : b) {
    diff_row& row = rows[usage.site.label];
    row.key = usage.site.label;
    row.b_bytes = static_cast<std::int64_t>(usage.bytes);
    row.b_count = usage.count;
  }
  std::vector<diff_row> sorted;
  for (auto& [key, row] : rows) sorted.push_back(std::move(row));
  std::stable_sort(sorted.begin(), sorted.end(), [](const diff_row& x, const diff_row& y) {
    return std::llabs(x.delta()) > std::llabs(y.delta());
  });
  return sorted;
}

std::vector<diff_row> diff_categories(const category_bytes& a, const category_bytes& b) {
  std::vector<diff_row> rows;
  for (std::size_t c = 0; c < memory_category_count; ++c) {
    rows.push_back({std::string(memory_category_name(static_cast<memory_category>(c))), a[c], b[c], 0, 0});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const diff_row& x, const diff_row& y) { return std::llabs(x.delta()) > std::llabs(y.delta()); });
  return rows;
}

std::int64_t end_allocated(const inspection& result) {
  return result.memory.allocated.empty() ? result.final_allocated_bytes : result.memory.allocated.back();
}

std::int64_t rank_from_name(const std::string& name) {
  static const std::regex ranked(R"(rank[_-]?(\d+))", std::regex::icase);
  static const std::regex last_number(R"((\d+)(?!.*\d))");
  std::smatch match;
  if (std::regex_search(name, match, ranked) || std::regex_search(name, match, last_number)) {
    return std::strtoll(match[1].str().c_str(), nullptr, 10);
  }
  return -1;
}

bool is_snapshot_name(const std::string& name) {
  for (const char* ending : {".pickle", ".pkl", ".pickle.gz", ".pkl.gz", ".pickle.zst", ".pkl.zst", ".pickle.zstd"}) {
    std::string_view tail(ending);
    if (name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0) return true;
  }
  return false;
}

}  // namespace

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

std::vector<std::filesystem::path> snapshot_files_in(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> files;
  std::error_code status;
  for (const auto& entry : std::filesystem::directory_iterator(folder, status)) {
    if (entry.is_regular_file(status) && is_snapshot_name(entry.path().filename().string())) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end(), [](const auto& x, const auto& y) {
    std::int64_t rx = rank_from_name(x.filename().string());
    std::int64_t ry = rank_from_name(y.filename().string());
    return rx != ry ? rx < ry : x < y;
  });
  return files;
}

std::vector<rank_result> inspect_ranks(const std::vector<std::filesystem::path>& files, const inspect_options& options,
                                       unsigned threads) {
  std::vector<rank_result> results(files.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < files.size(); i = next++) {
      rank_result& one = results[i];
      one.file = files[i].string();
      one.rank = rank_from_name(files[i].filename().string());
      if (one.rank < 0) one.rank = static_cast<std::int64_t>(i);
      auto read = read_snapshot_file(files[i]);
      if (!read.ok()) {
        one.failure = read.failure();
        continue;
      }
      one.result = inspect(read.value(), options);
      one.ok = true;
    }
  };
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, files.size()));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
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
  made.max_over_min = made.min_peak_allocated > 0 ? static_cast<double>(made.max_peak_allocated) / static_cast<double>(made.min_peak_allocated) : 0.0;
  return made;
}

}  // namespace rlmem
