// SPDX-License-Identifier: MIT
#pragma once
// `rlmem replay --json`'s document (docs/schema/replay.schema.json), which the page of
// `rlmem replay --html` draws.

#include <rlmem/report/report.hpp>

#include <nlohmann/json.hpp>

namespace rlmem::detail {

/// The run, its fidelity, and with --compare the settings table.
nlohmann::ordered_json replay_json(const replay_report& report);

}  // namespace rlmem::detail
