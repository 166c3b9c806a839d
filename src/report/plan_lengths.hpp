// SPDX-License-Identifier: MIT
#pragma once
// `rlmem plan --response-len-max / --response-len-percentiles`: the step's peak along the
// responses' lengths, the longest that fits the card and the chance per step of drawing longer.

#include <rlmem/report/report.hpp>

#include <nlohmann/json.hpp>

#include <string>

namespace rlmem::detail {

/// The "Response lengths" section, wrapped to the report's width; nothing without the options.
void append_length_view(std::string& out, const plan_report& report);
/// The "response_lengths" object of the JSON (docs/schema/plan.schema.json).
nlohmann::ordered_json length_view_json(const plan_report& report);

}  // namespace rlmem::detail
