// SPDX-License-Identifier: MIT
// The page of every `rlmem report`: the template filled with the data, the styles and the scripts.

#include "html_page.hpp"

#include "html_assets.hpp"

#include <string_view>
#include <utility>
#include <vector>

namespace rlmem::detail {

namespace {

using json = nlohmann::ordered_json;

// JSON that can sit inside <script type="application/json">: '<' can only occur inside JSON
// strings, where \u003c means the same, so no "</script" or "<!--" can end or bend the block;
// U+2028 and U+2029 are escaped too, for any reader that takes the text as JavaScript.
std::string script_safe(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 64);
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '\xE2' && i + 2 < text.size() && text[i + 1] == '\x80' && (text[i + 2] == '\xA8' || text[i + 2] == '\xA9')) {
      out += text[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

// The page template with each {{slot}} filled once, in the order the slots appear.
std::string fill_page(std::string_view page, const std::vector<std::pair<std::string_view, std::string_view>>& slots) {
  std::string out;
  std::size_t at = 0;
  for (const auto& [name, value] : slots) {
    std::size_t found = page.find(name, at);
    if (found == std::string_view::npos) continue;
    out.append(page.substr(at, found - at));
    out.append(value);
    at = found + name.size();
  }
  out.append(page.substr(at));
  return out;
}

}  // namespace

std::string html_page(const json& data, std::string_view document) {
  const html_assets& assets = bundled_html_assets();
  // Frame strings come from the file: replace invalid UTF-8 rather than fail on it.
  std::string payload = script_safe(data.dump(-1, ' ', false, json::error_handler_t::replace));
  // The document keeps the bytes its command printed: only '<' and U+2028/9 are escaped, which
  // JSON.parse reads back as the same characters.
  std::string carried = script_safe(document);
  std::string policy = "default-src 'none'; script-src " + std::string(assets.script_hashes) +
                       "; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'";
  std::string styles = "<style>" + std::string(assets.uplot_css) + "</style>\n<style>" + std::string(assets.report_css) + "</style>";
  std::string scripts = "<script>" + std::string(assets.uplot_js) + "</script>\n<script>" + std::string(assets.format_js) +
                        "</script>\n<script>" + std::string(assets.report_js) + "</script>";
  return fill_page(assets.page, {{"{{csp}}", policy},
                                 {"{{styles}}", styles},
                                 {"{{document}}", carried},
                                 {"{{data}}", payload},
                                 {"{{scripts}}", scripts}});
}

}  // namespace rlmem::detail
