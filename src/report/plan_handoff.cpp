// SPDX-License-Identifier: MIT
// Renders the colocated hand-off (its transitions and the wake-up order) and the host memory of
// `rlmem plan` (docs/plan.md, "Colocated hand-offs" and "Host memory").

#include "plan_handoff.hpp"

#include "prose.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace rlmem::detail {

namespace {

using json = nlohmann::ordered_json;

std::string bytes_text(std::uint64_t bytes) { return format_bytes(static_cast<std::int64_t>(bytes)); }

const phase_estimate* phase_named(const plan_result& plan, const std::string& name) {
  const auto it = std::find_if(plan.phases.begin(), plan.phases.end(), [&](const phase_estimate& p) { return p.name == name; });
  return it == plan.phases.end() ? nullptr : &*it;
}

std::string moved_text(const plan_report& report) {
  const plan_knobs& knobs = report.knobs;
  const handoff_plan& handoff = report.plan.handoff;
  if (handoff.mode == handoff_kind::keep) return "The trainer keeps its state on the GPU through the rollout.";
  std::vector<std::string> parts = {"policy weights"};
  if (knobs.reference == reference_kind::copy) parts.emplace_back("reference copy");
  if (!knobs.offload_optimizer && knobs.optimizer != optimizer_kind::sgd) parts.emplace_back("optimizer state");
  if (handoff.mode == handoff_kind::rlmem_pause && knobs.gpus > 1 && knobs.shard == shard_kind::none) parts.emplace_back("DDP's buckets");
  return fmt::format("The trainer's {} ({}) {} before the engine wakes and {} after it sleeps; the engine starts with them off the GPU too.",
                     bytes_text(handoff.moved_bytes), fmt::join(parts, ", "),
                     handoff.mode == handoff_kind::offload ? "go to host memory" : "are paused to pinned host memory (keep=\"host\")",
                     handoff.mode == handoff_kind::offload ? "come back" : "resume");
}

std::string sync_text(const plan_report& report) {
  const plan_knobs& knobs = report.knobs;
  const std::uint64_t source = report.plan.handoff.sync_source_bytes;
  if (knobs.sync_bucket_bytes != 0) {
    return fmt::format("The weight sync sends buckets of {} (--sync-bucket) beside the engine's copy.", bytes_text(source));
  }
  if (source == 0) return "The weight sync reads the trainer's bf16 weights in place: no copy beside the engine's.";
  const char* why = knobs.handoff != handoff_kind::keep       ? "the trainer's are off the GPU"
                    : knobs.shard == shard_kind::fsdp          ? "the trainer's are sharded"
                    : knobs.offload_weights                    ? "the trainer's are offloaded"
                                                               : "the trainer's are not the engine's bf16";
  return fmt::format("The weight sync holds the full weights gathered in bf16 ({}: {}) beside the engine's copy; --sync-bucket models a "
                     "bucketed sync.",
                     bytes_text(source), why);
}

std::string order_text(const plan_report& report) {
  const handoff_plan& handoff = report.plan.handoff;
  if (report.knobs.engine.sleep_level == 0) {
    return "At --sleep-level 0 the engine never sleeps: its weights and KV pool are there through the sync, in any order.";
  }
  const std::uint64_t staged = handoff.step_peak_staged;
  const std::uint64_t together = handoff.step_peak_together;
  std::string text = fmt::format("Waking the engine's weights, syncing, then its KV pool (staged), the wake-ups peak at {}; waking weights "
                                 "and KV together before the sync, at {}.",
                                 bytes_text(handoff.wake_peak_staged), bytes_text(handoff.wake_peak_together));
  if (together == staged) {
    return text + fmt::format(" The step's peak is {} either way (set by {}).", bytes_text(staged), handoff.peak_transition_staged);
  }
  if (handoff.order == wake_order_kind::together) {
    return text + fmt::format(" Staged (vLLM's wake_up(tags=[\"weights\"]), the sync, then wake_up(tags=[\"kv_cache\"]); SGLang's "
                              "resume_memory_occupation with the same tags) lowers the step's peak from {} to {}: --wake-order staged.",
                              bytes_text(together), bytes_text(staged));
  }
  return text + fmt::format(" The staged order keeps the step's peak at {}, {} under the {} waking all at once would need.",
                            bytes_text(staged), bytes_text(together - staged), bytes_text(together));
}

}  // namespace

void append_handoff(std::string& out, const plan_report& report, std::size_t width) {
  const plan_result& plan = report.plan;
  const handoff_plan& handoff = plan.handoff;
  if (handoff.mode == handoff_kind::unmodelled) return;
  out += "\n" + wrap(fmt::format("Colocated hand-off: --handoff {}, wake order {} (modelled from the frameworks' code, not measured)",
                                 to_string(handoff.mode), to_string(handoff.order)),
                     0, width);
  out += wrap(fmt::format("Transitions: {}.", fmt::join(handoff.transitions, " -> ")), 0, width);
  out += wrap(moved_text(report) + " " + sync_text(report), 0, width);
  const bool by_transition = std::find(handoff.transitions.begin(), handoff.transitions.end(), plan.peak_phase) != handoff.transitions.end();
  if (by_transition) {
    out += wrap(fmt::format("The transition that sets the step's peak: {} ({}).", plan.peak_phase, bytes_text(plan.peak_bytes)), 0, width);
  } else {
    const phase_estimate* largest = nullptr;
    for (const std::string& name : handoff.transitions) {
      const phase_estimate* phase = phase_named(plan, name);
      if (phase != nullptr && (largest == nullptr || phase->peak_bytes > largest->peak_bytes)) largest = phase;
    }
    if (largest != nullptr) {
      out += wrap(fmt::format("No transition sets the step's peak ({} does, {}); the largest is {} ({}).", plan.peak_phase,
                              bytes_text(plan.peak_bytes), largest->name, bytes_text(largest->peak_bytes)),
                  0, width);
    }
  }
  out += wrap(order_text(report), 0, width);
}

void append_host_memory(std::string& out, const plan_report& report, std::size_t width) {
  const host_memory& host = report.plan.host;
  if (host.gpus_per_node == 0) return;
  out += "\n" + wrap(fmt::format("Host memory: {} per GPU, {} per node of {} GPU{} (--gpus-per-node){}", bytes_text(host.per_gpu_bytes),
                                 bytes_text(host.per_node_bytes), host.gpus_per_node, host.gpus_per_node == 1 ? "" : "s",
                                 host.parts.empty() ? ": nothing offloaded, no pinned backups."
                                                    : ", the parts summed as if each backup's host memory stays allocated between uses:"),
                     0, width);
  for (const memory_component& part : host.parts) out += fmt::format("  {:>10}  {}\n", bytes_text(part.bytes), part.name);
  if (report.host_memory_bytes != 0) {
    const bool fits = host.per_node_bytes <= report.host_memory_bytes;
    out += wrap(fits ? fmt::format("It fits the node's --host-memory {}, with {} to spare.", bytes_text(report.host_memory_bytes),
                                   bytes_text(report.host_memory_bytes - host.per_node_bytes))
                     : fmt::format("It does not fit the node's --host-memory {}: {} short, so the host is the limit.",
                                   bytes_text(report.host_memory_bytes), bytes_text(host.per_node_bytes - report.host_memory_bytes)),
                0, width);
  }
}

std::string host_fit_text(const plan_report& report) {
  const fit_result& fit = *report.fit;
  if (fit.host_memory_bytes == 0) return {};
  if (fit.your_host_bytes <= fit.host_memory_bytes) {
    return fmt::format("Its host memory, {} per node, fits the {} of --host-memory.", bytes_text(fit.your_host_bytes),
                       bytes_text(fit.host_memory_bytes));
  }
  return fmt::format("Its host memory, {} per node, exceeds the {} of --host-memory: {}", bytes_text(fit.your_host_bytes),
                     bytes_text(fit.host_memory_bytes),
                     fit.yours_fits_card ? "the host is the limit, so it does not fit." : "the host is a limit too.");
}

json handoff_knobs_json(const plan_knobs& knobs) {
  return {{"mode", to_string(knobs.handoff)}, {"wake_order", to_string(knobs.wake_order)}, {"sync_bucket_bytes", knobs.sync_bucket_bytes}};
}

json handoff_json(const handoff_plan& handoff) {
  json out;
  out["mode"] = to_string(handoff.mode);
  out["wake_order"] = to_string(handoff.order);
  out["modelled"] = true;
  out["transitions"] = handoff.transitions;
  out["moved_bytes"] = handoff.moved_bytes;
  out["sync_source_bytes"] = handoff.sync_source_bytes;
  out["staged"] = {{"step_peak_bytes", handoff.step_peak_staged},
                   {"peak_phase", handoff.peak_transition_staged},
                   {"wake_peak_bytes", handoff.wake_peak_staged}};
  out["together"] = {{"step_peak_bytes", handoff.step_peak_together},
                     {"peak_phase", handoff.peak_transition_together},
                     {"wake_peak_bytes", handoff.wake_peak_together}};
  return out;
}

json host_json(const host_memory& host, std::uint64_t host_memory_bytes) {
  json parts = json::object();
  for (const memory_component& part : host.parts) parts[part.name] = part.bytes;
  json out = {{"per_gpu_bytes", host.per_gpu_bytes}, {"gpus_per_node", host.gpus_per_node}, {"per_node_bytes", host.per_node_bytes},
              {"parts", parts}};
  if (host_memory_bytes != 0) {
    out["host_memory_bytes"] = host_memory_bytes;
    out["fits"] = host.per_node_bytes <= host_memory_bytes;
  }
  return out;
}

json host_fit_json(const fit_result& fit) {
  const bool card = fit.yours_fits_card;
  const bool host = fit.your_host_bytes <= fit.host_memory_bytes;
  return {{"host_memory_bytes", fit.host_memory_bytes},
          {"host_bytes", fit.your_host_bytes},
          {"fits_card", card},
          {"fits_host", host},
          {"limit", card && host ? "none" : !host && !card ? "card and host" : host ? "card" : "host"}};
}

}  // namespace rlmem::detail
