// SPDX-License-Identifier: MIT
// The data of the page of `rlmem plan --html`: `rlmem plan --json`'s document.

#include "html_page.hpp"

#include <rlmem/report.hpp>

#include <nlohmann/json.hpp>

namespace rlmem {

std::string render_plan_html(const plan_report& report) {
  auto data = nlohmann::ordered_json::parse(render_plan_json(report));
  data["kind"] = "plan";
  return detail::html_page(data);
}

}  // namespace rlmem
