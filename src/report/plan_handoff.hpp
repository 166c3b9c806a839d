// SPDX-License-Identifier: MIT
#pragma once
// The colocated hand-off and the host memory of `rlmem plan`: text and JSON.

#include <rlmem/report/report.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>

namespace rlmem::detail {

/// The hand-off: what moves, what the sync reads, the transition that sets the step's peak and
/// the wake-up order that lowers it. Nothing when plan.handoff.mode is unmodelled.
void append_handoff(std::string& out, const plan_report& report, std::size_t width);
/// Host memory per GPU by part and per node, against --host-memory. Nothing when
/// plan.host.gpus_per_node is 0.
void append_host_memory(std::string& out, const plan_report& report, std::size_t width);
/// --fit: the host's verdict on the user's configuration (empty when --host-memory is not given).
std::string host_fit_text(const plan_report& report);

nlohmann::ordered_json handoff_knobs_json(const plan_knobs& knobs);
nlohmann::ordered_json handoff_json(const handoff_plan& handoff);
nlohmann::ordered_json host_json(const host_memory& host, std::uint64_t host_memory_bytes);
/// fit_result's host check, for fit.yours (empty when --host-memory is not given).
nlohmann::ordered_json host_fit_json(const fit_result& fit);

}  // namespace rlmem::detail
