// SPDX-License-Identifier: MIT
#pragma once
// The browser assets inlined into every `rlmem report` page: uPlot from web/node_modules (npm,
// pinned by web/package-lock.json) and the page's own web/report.* files, generated into the
// build tree by web/embed_assets.mjs. A build without node and npm has none (see available).

#include <string_view>

namespace rlmem::detail {

struct html_assets {
  bool available = false;        ///< false: built without node/npm, the page cannot be made
  std::string_view page;         ///< web/report.html, with the {{...}} slots html.cpp fills
  std::string_view uplot_js;     ///< uPlot.iife.min.js
  std::string_view uplot_css;    ///< uPlot.min.css
  std::string_view format_js;    ///< web/format.js: the byte sizes as format_bytes prints them
  std::string_view report_js;    ///< web/report.js
  std::string_view report_css;   ///< web/report.css
  /// The CSP script-src sources of the three scripts: "'sha256-...' 'sha256-...' 'sha256-...'",
  /// so that no other script (one smuggled in by a hostile snapshot included) can run.
  std::string_view script_hashes;
};

/// The assets this build carries.
const html_assets& bundled_html_assets() noexcept;

}  // namespace rlmem::detail
