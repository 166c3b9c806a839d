// SPDX-License-Identifier: MIT
#pragma once
// Renders analysis results for people (aligned text) and for programs (JSON, schema in
// docs/schema/inspect.schema.json). Renderers return strings; they never print.

#include <rlmem/compare.hpp>
#include <rlmem/format.hpp>
#include <rlmem/inspect.hpp>
#include <rlmem/snapshot.hpp>

#include <cstdint>
#include <string>

namespace rlmem {

struct text_options {
  std::size_t frames = 0;  ///< stack frames printed under each peak site
  std::size_t width = 100; ///< columns available
};

/// The human report of `rlmem inspect`. `source` names the file in the heading.
std::string render_inspection_text(const snapshot& snap, const inspection& result, const std::string& source,
                                   const text_options& options = {});

/// The JSON report of `rlmem inspect` (schema_version 1), with the timeline cut to at most
/// `max_timeline_points` points that keep every local peak.
std::string render_inspection_json(const snapshot& snap, const inspection& result, const std::string& source,
                                   std::size_t max_timeline_points = 2000);

/// `rlmem diff A B` for people: totals, then sites and categories that changed most.
std::string render_diff_text(const inspection_diff& diff, const std::string& a_name, const std::string& b_name,
                             std::size_t top, const text_options& options = {});
/// `rlmem diff A B --json` (schema in docs/schema/diff.schema.json).
std::string render_diff_json(const inspection_diff& diff, const std::string& a_name, const std::string& b_name);

/// `rlmem inspect DIR`: one row per rank and the imbalance across ranks.
std::string render_ranks_text(const std::vector<rank_result>& ranks, const rank_imbalance& imbalance,
                              const std::string& folder, const text_options& options = {});
/// `rlmem inspect DIR --json`.
std::string render_ranks_json(const std::vector<rank_result>& ranks, const rank_imbalance& imbalance, const std::string& folder);

}  // namespace rlmem
