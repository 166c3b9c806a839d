// SPDX-License-Identifier: MIT
#pragma once
// The one page of every `rlmem report`: web/report.html with its data as one JSON block, uPlot
// and the page script inlined, under a Content-Security-Policy that allows no request.

#include <nlohmann/json.hpp>

#include <string>

namespace rlmem::detail {

/// The page drawing `data`, whose "kind" ("inspection", "diff" or "ranks") picks the views.
/// Strings in `data` reach the page as JSON, never as markup. Precondition: html_report_available().
std::string html_page(const nlohmann::ordered_json& data);

}  // namespace rlmem::detail
