// SPDX-License-Identifier: MIT
// The data of the pages of `rlmem report A B` (a diff) and `rlmem report DIR` (ranks side by side):
// the JSON of `rlmem diff --json` and `rlmem inspect DIR --json`, cut and completed for drawing.

#include "compare_json.hpp"
#include "html_page.hpp"

#include <rlmem/report/report.hpp>

namespace rlmem {

namespace {

using json = nlohmann::ordered_json;

// Rows that changed, at most `keep` (they come largest change first); the count of the others.
void keep_changed_rows(json& rows, std::size_t keep, json& left_out) {
  json kept = json::array();
  std::uint64_t others = 0;
  for (const json& row : rows) {
    if (row["delta_bytes"].get<std::int64_t>() == 0) continue;
    if (kept.size() < keep) {
      kept.push_back(row);
    } else {
      ++others;
    }
  }
  rows = std::move(kept);
  left_out = others;
}

}  // namespace

std::string render_diff_html(const inspection_diff& diff, const std::string& a_name, const std::string& b_name) {
  json data = detail::diff_json(diff, a_name, b_name);
  data["kind"] = "diff";
  for (const char* moment : {"at_peak", "at_end"}) {
    for (const char* table : {"categories", "sites"}) keep_changed_rows(data[moment][table], max_html_diff_rows, data[moment][std::string(table) + "_left_out"]);
  }
  return detail::html_page(data);
}

std::string render_ranks_html(const std::vector<rank_result>& ranks, const rank_imbalance& imbalance, const std::string& folder) {
  json data = detail::ranks_json(ranks, imbalance, folder);
  data["kind"] = "ranks";
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    if (!ranks[k].ok) continue;
    // Each rank's timeline in the same number of slices, so ranks of different lengths line up
    // as shares of their traces.
    json allocated = json::array(), reserved = json::array();
    for (const column_peak& column : timeline_columns(ranks[k].result.memory, html_rank_columns)) {
      allocated.push_back(column.allocated);
      reserved.push_back(column.reserved);
    }
    data["ranks"][k]["timeline"] = {{"allocated_max", allocated}, {"reserved_max", reserved}};
  }
  return detail::html_page(data);
}

}  // namespace rlmem
