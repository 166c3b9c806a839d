// SPDX-License-Identifier: MIT
#pragma once
// A colocated step's hand-off between the trainer and its rollout engine, as phases: the trainer's
// state leaving, the engine's wake-ups, the weight sync, the rollout, the engine's sleep and the
// trainer's return (docs/plan.md, "Colocated hand-offs").

#include "memory_terms.hpp"

#include <rlmem/plan/plan.hpp>

#include <string>
#include <utility>
#include <vector>

namespace rlmem::plan_detail {

/// What the trainer holds on one GPU between its phases of a colocated step.
struct trainer_resident {
  bytes policy_weights = 0;
  bytes rotary_tables = 0;
  bytes reference_weights = 0;
  bytes optimizer = 0;
  bytes ddp_buckets = 0;
  std::vector<std::pair<std::string, bytes>> buffers;  ///< the job's --buffer tensors of the rollout (they stay)
  bytes sequences = 0;                                   ///< the rollout's token ids, once generated
};

/// The trainer's bytes that leave the GPU while the engine is awake under `mode`.
bytes moved_by_handoff(handoff_kind mode, const trainer_resident& trainer);

/// What the trainer holds when the engine starts: its weights and DDP's buckets (the optimizer
/// state comes at the first step), less what the hand-off moves (verl offloads the actor's
/// parameters before it builds the rollout; a paused tag is off the GPU).
bytes trainer_at_engine_init(handoff_kind mode, const trainer_resident& trainer);

/// The weights the sync reads beside the engine's copy: one bucket (--sync-bucket), none when
/// they are the trainer's own bf16 tensors resident through the sync (read in place), else the
/// full bf16 weights gathered at once.
bytes sync_source_bytes(const plan_knobs& knobs, const engine_budget& engine);

struct colocated_step {
  /// In step order: hand-off, the wake-ups and the sync in the order asked for, rollout, sleep,
  /// resume (each only where the mode and the sleep level have it).
  std::vector<phase_estimate> phases;
  std::vector<phase_estimate> staged;    ///< the order-dependent transitions, weights -> sync -> KV
  std::vector<phase_estimate> together;  ///< the same, weights and KV woken together before the sync
  handoff_plan summary;                  ///< without the step peaks (they need the training phases)
};

colocated_step plan_colocated_step(const plan_knobs& knobs, const trainer_resident& trainer, const engine_budget& engine);

/// Fills summary's step peaks from the finished phases: the step's peak under each wake-up order.
void compare_wake_orders(plan_result& result, const colocated_step& step);

}  // namespace rlmem::plan_detail
