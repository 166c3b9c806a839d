// SPDX-License-Identifier: MIT
// The data of the page of `rlmem replay --html`: `rlmem replay --json`'s document.

#include "html_page.hpp"
#include "replay_json.hpp"

#include <rlmem/report/report.hpp>

namespace rlmem {

std::string render_replay_html(const replay_report& report) {
  nlohmann::ordered_json data = detail::replay_json(report);
  data["kind"] = "replay";
  return detail::html_page(data);
}

}  // namespace rlmem
