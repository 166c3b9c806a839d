// SPDX-License-Identifier: MIT
#pragma once
// The one page of every `rlmem report`: web/report.html with its data as JSON blocks, uPlot and
// the page's scripts inlined, under a Content-Security-Policy that allows no request.

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace rlmem::detail {

/// The page drawing `data`, whose "kind" ("inspection", "diff", "ranks", "replay" or "plan")
/// picks the views, and `document`, a command's JSON output carried as it was printed (the
/// inspection's page: `rlmem inspect --json`'s; "null" where the views need none). Strings in
/// both reach the page as JSON, never as markup. Precondition: html_report_available().
std::string html_page(const nlohmann::ordered_json& data, std::string_view document = "null");

}  // namespace rlmem::detail
