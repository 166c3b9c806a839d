// SPDX-License-Identifier: MIT
#pragma once
// The comparisons as JSON documents: what `rlmem diff --json` and `rlmem inspect DIR --json`
// print, and what the pages of `rlmem report A B` and `rlmem report DIR` draw.

#include <rlmem/inspect/compare.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace rlmem::detail {

/// docs/schema/diff.schema.json.
nlohmann::ordered_json diff_json(const inspection_diff& diff, const std::string& a_name, const std::string& b_name);

/// One row per rank and the imbalance across ranks.
nlohmann::ordered_json ranks_json(const std::vector<rank_result>& ranks, const rank_imbalance& imbalance, const std::string& folder);

}  // namespace rlmem::detail
