// SPDX-License-Identifier: MIT
// The hand-off of a colocated step, transition by transition. Each transition is an instant: what
// the trainer keeps then, what the engine has allocated then, and what the transition itself
// adds. The order is the frameworks' (docs/plan.md cites each): verl's rollout_mode
// (verl/workers/fsdp_workers.py: the actor's parameters offloaded, rollout.resume(tags=["weights"]),
// update_weights, empty_cache, resume(tags=["kv_cache"]); after generation rollout.release()),
// SGLang's resume_memory_occupation(tags) / release_memory_occupation, vLLM's wake_up(tags) and
// sleep(level) (vllm/device_allocator/cumem.py: level 1 backs the "weights" pool up to host, level
// 2 and the KV pool are discarded).

#include "handoff.hpp"
#include "plan_refusal.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace rlmem::plan_detail {

namespace {

// One instant of a transition: named parts that add up to its peak.
class moment {
 public:
  explicit moment(std::string at) : at_(std::move(at)) {}
  moment& add(std::string name, bytes amount) {
    if (amount > 0) parts_.push_back({std::move(name), static_cast<std::uint64_t>(std::llround(std::min(amount, beyond_any_gpu)))});
    return *this;
  }
  moment& add_all(const std::vector<std::pair<std::string, bytes>>& parts) {
    for (const auto& [name, amount] : parts) add(name, amount);
    return *this;
  }
  phase_estimate to_phase(std::string name, std::vector<std::string> resident) const {
    phase_estimate phase;
    phase.name = std::move(name);
    phase.peak_at = at_;
    phase.components = parts_;
    phase.resident = std::move(resident);
    for (const memory_component& part : parts_) phase.peak_bytes += part.bytes;
    return phase;
  }

 private:
  static constexpr bytes beyond_any_gpu = 9007199254740992.0;  // 2^53, as phases.cpp clamps
  std::string at_;
  std::vector<memory_component> parts_;
};

bool leaves(handoff_kind mode) { return mode == handoff_kind::offload || mode == handoff_kind::rlmem_pause; }

// The trainer's state as parts, with or without what the hand-off moves.
std::vector<std::pair<std::string, bytes>> trainer_parts(handoff_kind mode, const trainer_resident& trainer, bool moved_away) {
  const bool off = moved_away && leaves(mode);
  std::vector<std::pair<std::string, bytes>> parts;
  if (!off) {
    parts.emplace_back("policy weights", trainer.policy_weights);
    parts.emplace_back("rotary tables (buffers)", trainer.rotary_tables);
    parts.emplace_back("reference weights", trainer.reference_weights);
    parts.emplace_back("optimizer state", trainer.optimizer);
  }
  // DDP's flat buckets are not module state a .to("cpu") moves; a paused tag takes them too.
  if (!(moved_away && mode == handoff_kind::rlmem_pause)) parts.emplace_back("DDP gradient buckets", trainer.ddp_buckets);
  std::erase_if(parts, [](const auto& part) { return part.second <= 0; });
  return parts;
}

std::vector<std::string> names_of(const std::vector<std::pair<std::string, bytes>>& parts) {
  std::vector<std::string> names;
  for (const auto& part : parts) names.push_back(part.first);
  return names;
}

constexpr const char* engine_weights = "engine weights (its bf16 copy)";
constexpr const char* engine_kv = "engine KV cache pool";
constexpr const char* engine_graphs = "engine CUDA graph pool (as given)";

struct engine_terms {
  bytes weights = 0;
  bytes kv = 0;
  bytes activation = 0;
  bytes graphs = 0;
};

}  // namespace

bytes moved_by_handoff(handoff_kind mode, const trainer_resident& trainer) {
  if (!leaves(mode)) return 0;
  bytes moved = trainer.policy_weights + trainer.rotary_tables + trainer.reference_weights + trainer.optimizer;
  if (mode == handoff_kind::rlmem_pause) moved += trainer.ddp_buckets;
  return moved;
}

bytes trainer_at_engine_init(handoff_kind mode, const trainer_resident& trainer) {
  const bytes at_init = trainer.policy_weights + trainer.reference_weights + trainer.ddp_buckets;
  if (!leaves(mode)) return at_init;
  return mode == handoff_kind::rlmem_pause ? 0 : trainer.ddp_buckets;
}

bytes sync_source_bytes(const plan_knobs& knobs, const engine_budget& engine) {
  const auto full = static_cast<bytes>(engine.weights_bytes);
  if (knobs.sync_bucket_bytes != 0) return std::min(static_cast<bytes>(knobs.sync_bucket_bytes), full);
  // The engine takes bf16 tensors of the full model: a trainer that keeps exactly those on the GPU
  // through the sync hands them over in place (TRL's named_parameters(); peft merges in place).
  const bool in_place = knobs.handoff == handoff_kind::keep && knobs.precision == precision_kind::bf16 &&
                        knobs.shard != shard_kind::fsdp && !knobs.offload_weights;
  return in_place ? 0 : full;
}

colocated_step plan_colocated_step(const plan_knobs& knobs, const trainer_resident& trainer, const engine_budget& engine) {
  colocated_step step;
  const handoff_kind mode = knobs.handoff;
  const std::uint32_t level = knobs.engine.sleep_level;
  const engine_terms e{static_cast<bytes>(engine.weights_bytes), static_cast<bytes>(std::max<std::int64_t>(engine.kv_bytes, 0)),
                       static_cast<bytes>(engine.activation_bytes), static_cast<bytes>(engine.graph_bytes)};
  const bytes source = sync_source_bytes(knobs, engine);
  // The engine's own call: vLLM's LLM.wake_up(tags), SGLang's Engine.resume_memory_occupation(tags).
  auto wake_call = [&](const std::string& tags) {
    const char* call = engine.rollout == rollout_kind::vllm ? "wake_up" : "resume_memory_occupation";
    return tags.empty() ? fmt::format("{}()", call) : fmt::format("{}(tags={})", call, tags);
  };
  step.summary.mode = mode;
  step.summary.order = knobs.wake_order;
  step.summary.sync_source_bytes = static_cast<std::uint64_t>(std::llround(source));
  step.summary.moved_bytes = static_cast<std::uint64_t>(std::llround(moved_by_handoff(mode, trainer)));

  const auto whole = trainer_parts(mode, trainer, false);
  const auto residue = trainer_parts(mode, trainer, true);
  std::vector<std::string> residue_names = names_of(residue);
  for (const auto& buffer : trainer.buffers) residue_names.push_back("buffer " + buffer.first);
  // The job's buffers stay through every transition; phases.cpp names them "buffer NAME".
  std::vector<std::pair<std::string, bytes>> buffers;
  for (const auto& [name, amount] : trainer.buffers) buffers.emplace_back("buffer " + name, amount);
  auto trainer_now = [&](std::string at) {
    moment now(std::move(at));
    now.add_all(residue).add_all(buffers);
    return now;
  };
  // What the engine keeps asleep: everything at level 0, else the graph pool (and NCCL, the context).
  auto engine_asleep = [&](moment& now) {
    if (level == 0) now.add(engine_weights, e.weights).add(engine_kv, e.kv);
    now.add(engine_graphs, e.graphs);
  };

  if (leaves(mode)) {
    moment before(mode == handoff_kind::offload ? "before the trainer's state is offloaded to host"
                                                : "before pause(\"train\", keep=\"host\")");
    before.add_all(whole).add_all(buffers);
    engine_asleep(before);
    step.phases.push_back(before.to_phase("hand-off", names_of(whole)));
  }

  // The order-dependent transitions, both ways; level 0 never sleeps, so nothing wakes.
  const char* sync_at = "weight sync: the engine's copy beside the weights it reads";
  auto sync = [&](bool with_kv) {
    moment now = trainer_now(sync_at);
    now.add(engine_weights, e.weights);
    if (with_kv) now.add(engine_kv, e.kv);
    now.add(engine_graphs, e.graphs)
        .add(knobs.sync_bucket_bytes != 0 ? "weight sync bucket in flight" : "weights gathered for the sync (bf16, full)", source);
    return now.to_phase("weight-sync", residue_names);
  };
  if (level == 0) {
    step.staged.push_back(sync(true));
    step.together.push_back(sync(true));
  } else {
    moment weights = trainer_now(fmt::format("weights {}: {}", level == 1 ? "from host" : "allocated", wake_call("[\"weights\"]")));
    weights.add(engine_weights, e.weights).add(engine_graphs, e.graphs);
    step.staged.push_back(weights.to_phase("wake-weights", residue_names));
    step.staged.push_back(sync(false));
    moment kv = trainer_now("KV pool after the sync: " + wake_call("[\"kv_cache\"]"));
    kv.add(engine_weights, e.weights).add(engine_kv, e.kv).add(engine_graphs, e.graphs);
    step.staged.push_back(kv.to_phase("wake-kv", residue_names));

    moment all = trainer_now("weights and KV woken together: " + wake_call(""));
    all.add(engine_weights, e.weights).add(engine_kv, e.kv).add(engine_graphs, e.graphs);
    step.together.push_back(all.to_phase("wake-all", residue_names));
    step.together.push_back(sync(true));
  }
  const auto& chosen = knobs.wake_order == wake_order_kind::staged ? step.staged : step.together;
  step.phases.insert(step.phases.end(), chosen.begin(), chosen.end());

  moment rollout = trainer_now(engine.rollout == rollout_kind::vllm ? "vLLM's reservation (gpu_memory_utilization x card)"
                                                                    : "SGLang's reservation (mem_fraction_static x free at init)");
  rollout.add(engine_weights, e.weights)
      .add(engine_kv, e.kv)
      .add("engine activation workspace (estimated)", e.activation)
      .add(engine_graphs, e.graphs);
  step.phases.push_back(rollout.to_phase("rollout", residue_names));

  if (level > 0) {
    // Sleeping copies the weights out (level 1) before it unmaps them: all of it is still there,
    // and the rollout's sequences now too.
    moment sleep = trainer_now(level == 1 ? "engine going to sleep: weights copied to host, KV dropped"
                                          : "engine going to sleep: weights and KV dropped");
    sleep.add(engine_weights, e.weights).add(engine_kv, e.kv).add(engine_graphs, e.graphs).add("rollout sequences", trainer.sequences);
    step.phases.push_back(sleep.to_phase("sleep", residue_names));
  }
  if (leaves(mode)) {
    moment back(mode == handoff_kind::offload ? "the trainer's state back from host" : "resume(\"train\")");
    back.add_all(whole).add_all(buffers).add("rollout sequences", trainer.sequences);
    engine_asleep(back);
    step.phases.push_back(back.to_phase("resume", names_of(whole)));
  }
  for (const phase_estimate& phase : step.phases) step.summary.transitions.push_back(phase.name);
  return step;
}

void compare_wake_orders(plan_result& result, const colocated_step& step) {
  const auto& chosen = result.handoff.order == wake_order_kind::staged ? step.staged : step.together;
  auto order_dependent = [&](const phase_estimate& phase) {
    return std::any_of(chosen.begin(), chosen.end(), [&](const phase_estimate& p) { return p.name == phase.name; });
  };
  // The rest of the step is the same in either order.
  std::uint64_t rest = 0;
  std::string rest_phase;
  for (const phase_estimate& phase : result.phases) {
    if (!order_dependent(phase) && phase.peak_bytes >= rest) {
      rest = phase.peak_bytes;
      rest_phase = phase.name;
    }
  }
  auto step_peak = [&](const std::vector<phase_estimate>& transitions, std::uint64_t& peak, std::string& at, std::uint64_t& wake_peak) {
    peak = rest;
    at = rest_phase;
    for (const phase_estimate& phase : transitions) {
      wake_peak = std::max(wake_peak, phase.peak_bytes);
      if (phase.peak_bytes > peak) {
        peak = phase.peak_bytes;
        at = phase.name;
      }
    }
  };
  handoff_plan& plan = result.handoff;
  step_peak(step.staged, plan.step_peak_staged, plan.peak_transition_staged, plan.wake_peak_staged);
  step_peak(step.together, plan.step_peak_together, plan.peak_transition_together, plan.wake_peak_together);
}

}  // namespace rlmem::plan_detail

namespace rlmem {

result<void, plan_errc> validate_handoff_knobs(const plan_knobs& knobs) {
  using detail::refuse;
  if (knobs.handoff == handoff_kind::unmodelled) return {};
  if (knobs.phase != plan_phase::grpo_step) {
    return refuse(plan_errc::knob_conflict, "--handoff plans the transitions of a colocated step: it needs --phase grpo-step");
  }
  if (knobs.engine.rollout == rollout_kind::hf) {
    return refuse(plan_errc::missing_knob, "--handoff hands the GPU between the trainer and a rollout engine: give --rollout vllm or sglang");
  }
  if (knobs.wake_order == wake_order_kind::together && knobs.engine.sleep_level == 0) {
    return refuse(plan_errc::knob_conflict,
                  "--wake-order orders the engine's wake-ups, and at --sleep-level 0 it never sleeps: give --sleep-level 1 or 2");
  }
  return {};
}

}  // namespace rlmem
