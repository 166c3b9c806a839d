// SPDX-License-Identifier: MIT
// Renders comparisons: the diff of two snapshots and the per-rank table of a folder.

#include "compare_json.hpp"

#include <rlmem/report/report.hpp>
#include <rlmem/base/saturating.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace rlmem {

namespace {

using json = nlohmann::ordered_json;

std::string signed_change_text(std::int64_t bytes) { return (bytes > 0 ? "+" : "") + format_bytes(bytes); }

// `text` cut to `width` bytes, "..." marking the cut (watch.cpp's fit counts terminal columns).
std::string fit_bytes(const std::string& text, std::size_t width) {
  return text.size() <= width ? text : text.substr(0, width > 3 ? width - 3 : 0) + "...";
}

void append_rows(std::string& out, std::string_view title, const std::vector<diff_row>& rows, std::size_t top, std::size_t width) {
  std::size_t changed = 0;
  for (const diff_row& row : rows) changed += row.delta() != 0;
  out += fmt::format("\n{} ({} changed)\n", title, changed);
  if (changed == 0) return;
  std::size_t key_width = width > 50 ? width - 39 : 20;
  out += fmt::format("  {:>11} {:>11} {:>11}  {}\n", "A", "B", "change", "");
  std::size_t shown = 0;
  for (const diff_row& row : rows) {
    if (shown == top) break;
    if (row.delta() == 0) continue;
    ++shown;
    out += fmt::format("  {:>11} {:>11} {:>11}  {}\n", format_bytes(row.a_bytes), format_bytes(row.b_bytes), signed_change_text(row.delta()),
                       fit_bytes(printable_text(row.key), key_width));
  }
  if (changed > shown) out += fmt::format("  ({} more; --top N shows more)\n", changed - shown);
}

json rows_json(const std::vector<diff_row>& rows, bool with_counts) {
  json list = json::array();
  for (const diff_row& row : rows) {
    json item = {{"key", row.key}, {"a_bytes", row.a_bytes}, {"b_bytes", row.b_bytes}, {"delta_bytes", row.delta()}};
    if (with_counts) {
      item["a_count"] = row.a_count;
      item["b_count"] = row.b_count;
    }
    list.push_back(std::move(item));
  }
  return list;
}

std::string oom_summary(const inspection& result) {
  if (result.ooms.empty()) return "-";
  bool same = std::all_of(result.ooms.begin(), result.ooms.end(), [&](const oom_report& oom) { return oom.verdict == result.ooms.front().verdict; });
  return fmt::format("{} ({})", result.ooms.size(), same ? oom_verdict_name(result.ooms.front().verdict) : "mixed");
}

}  // namespace

std::string render_diff_text(const inspection_diff& diff, const std::string& a_name, const std::string& b_name,
                             std::size_t top, const text_options& options) {
  std::string out = fmt::format("A: {}\nB: {}\n\n", printable_text(a_name), printable_text(b_name));
  out += fmt::format("  {:<16} {:>11} {:>11} {:>11}\n", "", "A", "B", "change");
  auto total = [&](std::string_view name, std::int64_t a, std::int64_t b) {
    out += fmt::format("  {:<16} {:>11} {:>11} {:>11}\n", name, format_bytes(a), format_bytes(b), signed_change_text(saturating_subtract(b, a)));
  };
  total("peak allocated", diff.peak_allocated_a, diff.peak_allocated_b);
  total("peak reserved", diff.peak_reserved_a, diff.peak_reserved_b);
  total("allocated at end", diff.end_allocated_a, diff.end_allocated_b);
  total("reserved at end", diff.end_reserved_a, diff.end_reserved_b);
  append_rows(out, "Categories live at peak", diff.categories_at_peak, top, options.width);
  append_rows(out, "Sites live at peak", diff.sites_at_peak, top, options.width);
  append_rows(out, "Categories live at end", diff.categories_at_end, top, options.width);
  append_rows(out, "Sites live at end", diff.sites_at_end, top, options.width);
  return out;
}

json detail::diff_json(const inspection_diff& diff, const std::string& a_name, const std::string& b_name) {
  json out;
  out["schema_version"] = 1;
  out["command"] = "diff";
  out["a"] = a_name;
  out["b"] = b_name;
  out["totals"] = {{"peak_allocated_bytes", {diff.peak_allocated_a, diff.peak_allocated_b}},
                   {"peak_reserved_bytes", {diff.peak_reserved_a, diff.peak_reserved_b}},
                   {"end_allocated_bytes", {diff.end_allocated_a, diff.end_allocated_b}},
                   {"end_reserved_bytes", {diff.end_reserved_a, diff.end_reserved_b}}};
  out["at_peak"] = {{"categories", rows_json(diff.categories_at_peak, false)}, {"sites", rows_json(diff.sites_at_peak, true)}};
  out["at_end"] = {{"categories", rows_json(diff.categories_at_end, false)}, {"sites", rows_json(diff.sites_at_end, true)}};
  return out;
}

std::string render_diff_json(const inspection_diff& diff, const std::string& a_name, const std::string& b_name) {
  return detail::diff_json(diff, a_name, b_name).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string render_ranks_text(const std::vector<rank_result>& ranks, const rank_imbalance& imbalance,
                              const std::string& folder, const text_options& options) {
  std::string out = fmt::format("{}: {} snapshots\n\n", printable_text(folder), ranks.size());
  out += fmt::format("  {:>5} {:>11} {:>11} {:>6} {:>18}  {}\n", "rank", "peak alloc", "peak resv", "leaks", "OOMs", "file");
  std::size_t file_width = options.width > 60 ? options.width - 60 : 20;
  for (const rank_result& one : ranks) {
    std::string name = printable_text(std::filesystem::path(one.file).filename().string());
    if (!one.ok) {
      out += fmt::format("  {:>5} {:>11} {:>11} {:>6} {:>18}  {}\n", one.rank, "ERROR", "", "", "", fit_bytes(name, file_width));
      out += fmt::format("        {}\n", fit_bytes(printable_text(one.failure), options.width - 8));
      continue;
    }
    const inspection& result = one.result;
    out += fmt::format("  {:>5} {:>11} {:>11} {:>6} {:>18}  {}\n", one.rank, format_bytes(result.peak_allocated_bytes),
                       format_bytes(result.peak_reserved_bytes), result.leaks.size(), oom_summary(result), fit_bytes(name, file_width));
  }
  if (imbalance.max_rank >= 0) {
    std::string ratio = imbalance.max_over_min ? fmt::format("{:.2f}x", *imbalance.max_over_min) : "no ratio to 0 B";
    out += fmt::format("\nImbalance: peak allocated from {} (rank {}) to {} (rank {}), {}; peak reserved {} to {}\n",
                       format_bytes(imbalance.min_peak_allocated), imbalance.min_rank, format_bytes(imbalance.max_peak_allocated),
                       imbalance.max_rank, ratio, format_bytes(imbalance.min_peak_reserved),
                       format_bytes(imbalance.max_peak_reserved));
  }
  for (const rank_result& one : ranks) {
    if (!one.ok) continue;
    for (const leak& found : one.result.leaks) {
      out += fmt::format("  rank {}: LEAK {} +{} per step\n", one.rank, fit_bytes(printable_text(found.site.label), options.width - 40),
                         format_bytes(found.bytes_per_step));
    }
  }
  return out;
}

json detail::ranks_json(const std::vector<rank_result>& ranks, const rank_imbalance& imbalance, const std::string& folder) {
  json out;
  out["schema_version"] = 1;
  out["command"] = "inspect";
  out["directory"] = folder;
  json rows = json::array();
  for (const rank_result& one : ranks) {
    json row = {{"rank", one.rank}, {"file", one.file}, {"ok", one.ok}};
    if (!one.ok) {
      row["error"] = one.failure;
    } else {
      const inspection& result = one.result;
      json leaks = json::array();
      for (const leak& found : result.leaks) leaks.push_back({{"site", found.site.label}, {"bytes_per_step", found.bytes_per_step}});
      json ooms = json::array();
      for (const oom_report& oom : result.ooms) {
        ooms.push_back({{"event_index", oom.event}, {"requested_bytes", oom.requested_bytes},
                        {"verdict", oom_verdict_name(oom.verdict)}});
      }
      row["events"] = result.events;
      row["steps"] = result.steps.size();
      row["peak_allocated_bytes"] = result.peak_allocated_bytes;
      row["peak_reserved_bytes"] = result.peak_reserved_bytes;
      row["leaks"] = leaks;
      row["oom"] = ooms;
    }
    rows.push_back(std::move(row));
  }
  out["ranks"] = rows;
  out["imbalance"] = {{"min_peak_allocated_bytes", imbalance.min_peak_allocated}, {"min_rank", imbalance.min_rank},
                      {"max_peak_allocated_bytes", imbalance.max_peak_allocated}, {"max_rank", imbalance.max_rank},
                      {"max_over_min", imbalance.max_over_min ? json(*imbalance.max_over_min) : json(nullptr)},
                      {"min_peak_reserved_bytes", imbalance.min_peak_reserved},
                      {"max_peak_reserved_bytes", imbalance.max_peak_reserved}};
  return out;
}

std::string render_ranks_json(const std::vector<rank_result>& ranks, const rank_imbalance& imbalance, const std::string& folder) {
  return detail::ranks_json(ranks, imbalance, folder).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace rlmem
