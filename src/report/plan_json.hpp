// SPDX-License-Identifier: MIT
#pragma once
// `rlmem plan --json`'s document (docs/schema/plan.schema.json), which the page of
// `rlmem plan --html` draws.

#include <rlmem/report/report.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>

namespace rlmem::detail {

/// The model, the knobs, each phase's estimate and the --fit search, with at most
/// `every_fitting_kept` of its fitting configurations (the rest counted in every_fitting_left_out).
nlohmann::ordered_json plan_json(const plan_report& report, std::size_t every_fitting_kept = SIZE_MAX);

}  // namespace rlmem::detail
