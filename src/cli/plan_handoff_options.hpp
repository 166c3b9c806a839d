// SPDX-License-Identifier: MIT
#pragma once
// `rlmem plan`'s options of a colocated hand-off and of host memory (docs/plan.md, "Colocated
// hand-offs" and "Host memory").

#include <rlmem/plan/plan.hpp>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace rlmem::cli {

struct handoff_arguments {
  std::string handoff;      ///< --handoff keep|offload|rlmem-pause
  std::string wake_order;   ///< --wake-order staged|together
  std::string sync_bucket;  ///< --sync-bucket SIZE
  std::string host_memory;  ///< --host-memory SIZE: a node's host memory
  std::uint64_t gpus_per_node = 0;
};

void add_handoff_options(CLI::App* command, handoff_arguments& handoff);

/// Sets the knobs from the options (after the engine's); `host_memory_bytes` is --host-memory's
/// size (0 when not given). On a bad value prints one line and returns false.
bool build_handoff_knobs(const handoff_arguments& args, const CLI::App& command, plan_knobs& knobs, std::uint64_t& host_memory_bytes);

}  // namespace rlmem::cli
