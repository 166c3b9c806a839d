// SPDX-License-Identifier: MIT
// Host memory of a GPU's process and of a node: offloaded state and the pinned backups a
// colocated step keeps (docs/plan.md, "Host memory").

#include "host_memory.hpp"

#include <cmath>

namespace rlmem::plan_detail {

host_memory host_memory_of(const plan_knobs& knobs, const state_terms& state, const engine_budget& engine, bytes handoff_backup) {
  host_memory host;
  auto add = [&](const char* name, bytes amount) {
    if (amount > 0) host.parts.push_back({name, static_cast<std::uint64_t>(std::llround(amount))});
  };
  add(knobs.offload_weights ? "weights, gradients and optimizer state (--offload all: FSDP's CPU offload)"
                            : "optimizer state (--offload optimizer)",
      state.host);
  add("engine weights while it sleeps (sleep level 1's backup)", static_cast<bytes>(engine.host_bytes));
  add(knobs.handoff == handoff_kind::rlmem_pause ? "trainer state paused while the engine is awake (keep=\"host\")"
                                                 : "trainer state offloaded while the engine is awake (--handoff offload)",
      handoff_backup);
  for (const memory_component& part : host.parts) host.per_gpu_bytes += part.bytes;
  host.gpus_per_node = knobs.gpus_per_node;
  host.per_node_bytes = host.per_gpu_bytes * knobs.gpus_per_node;
  return host;
}

}  // namespace rlmem::plan_detail

namespace rlmem {

bool host_fits(const plan_result& plan, std::uint64_t host_memory_bytes) noexcept {
  return host_memory_bytes == 0 || plan.host.per_node_bytes <= host_memory_bytes;
}

}  // namespace rlmem
