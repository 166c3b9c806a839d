// SPDX-License-Identifier: MIT
#pragma once
// Host memory of a GPU's process and of a node (docs/plan.md, "Host memory").

#include "memory_terms.hpp"

namespace rlmem::plan_detail {

/// The parts a GPU's process keeps in host memory: offloaded state (--offload), the engine's
/// weights while it sleeps at level 1, the trainer's state while the engine is awake
/// (`handoff_backup`); summed per GPU and times knobs.gpus_per_node per node.
host_memory host_memory_of(const plan_knobs& knobs, const state_terms& state, const engine_budget& engine, bytes handoff_backup);

}  // namespace rlmem::plan_detail
