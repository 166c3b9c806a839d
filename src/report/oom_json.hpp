// SPDX-License-Identifier: MIT
#pragma once
// The OOM verdicts as JSON: the "oom" and "oom_limit" members of `rlmem inspect --json`
// (docs/schema/inspect.schema.json), which the page of `rlmem report` carries as they are.

#include <rlmem/inspect/inspect.hpp>

#include <nlohmann/json.hpp>

namespace rlmem::detail {

/// Each OOM of `result`: its numbers, its verdict and every simulation that proves it. Sites are
/// labels; a renderer that needs their stacks adds them.
nlohmann::ordered_json ooms_json(const inspection& result);

/// The limit the trace's OOMs prove and the one their verdicts are judged under; null without OOMs.
nlohmann::ordered_json oom_limit_json(const inspection& result);

}  // namespace rlmem::detail
