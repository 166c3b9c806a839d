// SPDX-License-Identifier: MIT
// The data of the page of `rlmem plan --html`: `rlmem plan --json`'s document, with the first
// thousand fitting configurations (a search with --vary can fit a hundred thousand).

#include "html_page.hpp"
#include "plan_json.hpp"

#include <rlmem/report/report.hpp>

#include <nlohmann/json.hpp>

namespace rlmem {

std::string render_plan_html(const plan_report& report) {
  constexpr std::size_t every_fitting_on_the_page = 1000;
  nlohmann::ordered_json data = detail::plan_json(report, every_fitting_on_the_page);
  data["kind"] = "plan";
  return detail::html_page(data);
}

}  // namespace rlmem
