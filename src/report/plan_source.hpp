// SPDX-License-Identifier: MIT
#pragma once
// `rlmem plan --from FILE`'s account of the config: which knob each setting set, and which
// settings that shape memory it ignored and why, in the text report and the JSON.

#include <rlmem/report/report.hpp>

#include <nlohmann/json.hpp>

#include <string>

namespace rlmem::detail {

/// The "from FILE" lines, wrapped to the report's width; nothing without --from.
void append_config_source(std::string& out, const plan_report& report);
/// The "from" object of the JSON (docs/schema/plan.schema.json).
nlohmann::json config_source_json(const plan_report& report);

}  // namespace rlmem::detail
