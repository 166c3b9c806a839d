// SPDX-License-Identifier: MIT
// Renders `rlmem plan`: the model, each phase's peak with its parts, and the --fit search.

#include "plan_handoff.hpp"
#include "plan_json.hpp"
#include "plan_lengths.hpp"
#include "plan_source.hpp"
#include "prose.hpp"

#include <rlmem/report/report.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace rlmem {

namespace {

using json = nlohmann::ordered_json;

std::string bytes_text(std::uint64_t bytes) { return format_bytes(static_cast<std::int64_t>(bytes)); }

std::string billions(std::uint64_t count) { return fmt::format("{:.2f} B", static_cast<double>(count) / 1e9); }

std::string offload_text(const plan_knobs& knobs) { return std::string(to_string(offload_of(knobs))); }

std::string model_line(const model_architecture& model, const parameter_count& params) {
  if (model.opaque_params > 0) {
    return fmt::format("{}  {} parameters (no architecture: its tensors are the --buffer ones)", printable_text(model.name),
                       format_count(params.total));
  }
  std::string line = fmt::format("{}  {} parameters ({} outside embeddings), {} layers, hidden {}, {}/{} heads of {}, vocab {}",
                                 printable_text(model.name), billions(params.total), billions(params.non_embedding()), model.num_layers,
                                 model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim,
                                 format_count(model.vocab_size));
  if (model.tied_embeddings) line += ", tied head";
  if (model.mlp != mlp_kind::gated) line += model.mlp == mlp_kind::relu2 ? ", ReLU^2 MLP (no gate)" : ", GELU MLP (no gate)";
  if (!model.norm_weights) line += ", norms without weights";
  if (model.num_experts > 0) {
    line += fmt::format(", {} experts ({} per token, {} active)", model.num_experts, model.experts_per_token,
                        billions(params.active_per_token));
  }
  return line;
}

std::string training_text(const plan_knobs& knobs, const plan_result& plan) {
  std::string text = fmt::format("{} {}", knobs.optimizer == optimizer_kind::adamw ? "AdamW" : knobs.optimizer == optimizer_kind::muon ? "Muon + AdamW" : "SGD", to_string(knobs.precision));
  if (knobs.lora_rank > 0) {
    text += fmt::format(", LoRA r={} ({} trainable)", knobs.lora_rank, format_count(plan.trainable_params));
  }
  if (knobs.grad_ckpt) text += ", gradient checkpointing";
  if (chunked_logprobs(knobs)) {
    text += fmt::format(", {} log-probs (chunk {})", to_string(knobs.logprob), knobs.logprob_chunk);
  } else if (knobs.logprob != logprob_impl::full) {
    text += fmt::format(", {} loss over every position", to_string(knobs.logprob));
  }
  return text;
}

std::string_view reference_text(reference_kind kind) {
  switch (kind) {
    case reference_kind::none: return "";
    case reference_kind::copy: return ", reference model (a copy)";
    case reference_kind::adapter_disabled: return ", reference model (the base with the adapter disabled)";
  }
  return "";
}

std::string knobs_line(const plan_knobs& knobs, const plan_result& plan) {
  std::string line;
  switch (knobs.phase) {
    case plan_phase::generate:
      line = fmt::format("generate: {} rows, prompt {} + {} new tokens, KV cache {}", knobs.batch, knobs.prompt_len,
                         knobs.new_tokens, to_string(knobs.kv_cache));
      break;
    case plan_phase::train:
      line = fmt::format("train: micro-batch {} x {} tokens ({} scored), {} per step, {}", knobs.micro_batch, knobs.seq_len,
                         knobs.logprob_tokens, knobs.grad_accum, training_text(knobs, plan));
      break;
    case plan_phase::grpo_step: {
      const std::uint64_t rows = knobs.prompts * knobs.group / knobs.gpus;
      if (plan.params.per_layer == 0 && plan.params.embedding == 0) {  // a policy given as --params: rows, no tokens
        line = fmt::format("grpo-step: {} prompts x {} samples ({} rows), micro-batch {}, {}", knobs.prompts, knobs.group, rows,
                           knobs.micro_batch, training_text(knobs, plan));
        if (knobs.epochs > 1) line += fmt::format(", {} epochs of updates", knobs.epochs);
        break;
      }
      line = fmt::format("grpo-step: {} prompts x {} samples, prompt {} + {} new tokens, micro-batch {} ({} per step{}), {}{}",
                         knobs.prompts, knobs.group, knobs.prompt_len, knobs.new_tokens, knobs.micro_batch,
                         rows / knobs.micro_batch, knobs.gpus > 1 ? " on each GPU" : "", training_text(knobs, plan),
                         reference_text(knobs.reference));
      if (knobs.batch != 0 && knobs.batch < rows) line += fmt::format(", generated {} rows at a time", knobs.batch);
      if (knobs.old_logprobs) line += ", old log-probs";
      if (knobs.epochs > 1) line += fmt::format(", {} epochs of updates", knobs.epochs);
      if (knobs.kv_cache == kv_cache_kind::prealloc) line += fmt::format(", KV cache preallocated for {} rows", kv_cache_rows(knobs));
      break;
    }
  }
  if (knobs.gpus > 1 || knobs.shard != shard_kind::none) line += fmt::format(", {} GPUs sharded {}", knobs.gpus, to_string(knobs.shard));
  if (knobs.offload_optimizer || knobs.offload_weights) line += fmt::format(", offload {}", offload_text(knobs));
  return line;
}

void append_phases(std::string& out, const plan_result& plan) {
  // The hand-off's transitions have longer names (wake-weights).
  const std::size_t name_width = plan.handoff.mode == handoff_kind::unmodelled ? 10 : 12;
  out += fmt::format("\n  {:<{}}peak        at\n", "phase", name_width + 3);
  for (const phase_estimate& phase : plan.phases) {
    out += fmt::format("  {:<{}} {:>10}   {}{}\n", phase.name, name_width, bytes_text(phase.peak_bytes), phase.peak_at,
                       phase.name == plan.peak_phase && plan.phases.size() > 1 ? "   <- peak" : "");
  }
  for (const phase_estimate& phase : plan.phases) {
    out += fmt::format("\n{} at its peak ({}, {})\n", phase.name, bytes_text(phase.peak_bytes), phase.peak_at);
    std::vector<memory_component> parts = phase.components;
    std::stable_sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
    for (const memory_component& part : parts) {
      const double share = phase.peak_bytes == 0 ? 0 : 100.0 * static_cast<double>(part.bytes) / static_cast<double>(phase.peak_bytes);
      out += fmt::format("  {:>10} {:>4.0f}%  {}\n", bytes_text(part.bytes), share, printable_text(part.name));
    }
  }
}

void append_overhead(std::string& out, const plan_result& plan, std::size_t width) {
  const runtime_overhead& overhead = plan.overhead;
  out += "\n" + detail::wrap(fmt::format("Outside these peaks (not counted in them): the CUDA context and kernels, about {} "
                                         "(torch 2.11 on an H200), and cuBLAS workspaces, {} (32 MiB per thread that runs "
                                         "matmuls; backward has its own). Reserved memory exceeds allocated by the allocator's "
                                         "fragmentation, 3% to 100% in the rows measured on the H200: `rlmem replay` measures yours.",
                                         bytes_text(overhead.cuda_context_bytes), bytes_text(overhead.cublas_workspace_bytes)),
                             0, width);
  // With --gpus-per-node, --host-memory or --handoff the host has its own section.
  if (plan.host_bytes > 0 && plan.host.gpus_per_node == 0) out += fmt::format("Host memory for offloaded state: {} per GPU\n", bytes_text(plan.host_bytes));
}

// The engine's budget, pool and sleep: what vLLM's or SGLang's start-up log would say, modelled.
void append_rollout_engine(std::string& out, const model_architecture& model, const plan_knobs& knobs, const engine_budget& engine,
                           std::size_t width) {
  const bool vllm = engine.rollout == rollout_kind::vllm;
  const std::string trainer = engine.trainer_at_init_bytes > 0 ? " and the trainer's " + bytes_text(engine.trainer_at_init_bytes) : "";
  out += fmt::format("\nRollout engine: {} (modelled from its sizing code, not measured)\n", vllm ? "vLLM" : "SGLang");
  if (vllm) {
    out += detail::wrap(fmt::format("Budget {} = gpu_memory_utilization {} x the card's {}; {} is free at init (the card less the "
                                    "CUDA context{}), so it starts.",
                                    bytes_text(engine.requested_bytes), knobs.engine.gpu_memory_utilization, bytes_text(engine.device_bytes),
                                    bytes_text(engine.free_at_init_bytes), trainer),
                        0, width);
    out += detail::wrap(fmt::format("KV pool {} = the budget less its weights {} and the profile run's peak {} (estimated: a "
                                    "forward of {} tokens and the sampler over {} rows); CUDA graphs are captured outside the budget{}.",
                                    bytes_text(static_cast<std::uint64_t>(engine.kv_bytes)), bytes_text(engine.weights_bytes),
                                    bytes_text(engine.activation_bytes), knobs.engine.max_num_batched_tokens,
                                    std::min(knobs.engine.max_num_seqs, knobs.engine.max_num_batched_tokens),
                                    engine.graph_bytes > 0 ? fmt::format(" ({} as given)", bytes_text(engine.graph_bytes)) : " (not estimated: give --engine-graph-memory)"),
                        0, width);
    out += detail::wrap(fmt::format("{} blocks of {} tokens ({} per block: {} layers x 2 x {} KV heads x {} x {} tokens x 2 bytes): "
                                    "GPU KV cache size {} tokens; maximum concurrency for {} tokens per request {:.2f}x.",
                                    format_count(engine.blocks), knobs.engine.block_size, bytes_text(engine.block_bytes), model.num_layers,
                                    model.num_kv_heads, model.head_dim, knobs.engine.block_size, format_count(engine.kv_tokens),
                                    format_count(engine.max_model_len), engine.max_concurrency),
                        0, width);
  } else {
    out += detail::wrap(fmt::format("Budget {} = mem_fraction_static {} x the {} free at init (the card's {} less the CUDA context{}).",
                                    bytes_text(engine.requested_bytes), knobs.engine.mem_fraction_static,
                                    bytes_text(engine.free_at_init_bytes), bytes_text(engine.device_bytes), trainer),
                        0, width);
    out += detail::wrap(fmt::format("KV pool {} = the budget less its weights {}: {} tokens of {} ({} layers x 2 x {} KV heads x {} "
                                    "x 2 bytes). A prefill chunk of {} tokens takes about {} (estimated) outside the budget.",
                                    bytes_text(static_cast<std::uint64_t>(engine.kv_bytes)), bytes_text(engine.weights_bytes),
                                    format_count(engine.kv_tokens), bytes_text(engine.bytes_per_token), model.num_layers,
                                    model.num_kv_heads, model.head_dim, knobs.engine.chunked_prefill_size, bytes_text(engine.activation_bytes)),
                        0, width);
  }
  out += detail::wrap(fmt::format("It holds {} sequences of this run's {} tokens at once{}; the rollout has {} rows{}.",
                                  format_count(engine.concurrent_sequences), format_count(engine.sequence_tokens),
                                  vllm ? fmt::format(" (max_num_seqs {})", knobs.engine.max_num_seqs) : "",
                                  format_count(engine.rollout_rows),
                                  engine.rollout_rows > engine.concurrent_sequences ? ", so it runs them in waves" : ""),
                      0, width);
  const std::uint32_t level = knobs.engine.sleep_level;
  if (knobs.phase != plan_phase::grpo_step && level == 0) {
    if (!engine.warning.empty()) out += detail::wrap("Warning: " + engine.warning, 0, width);
    return;
  }
  out += detail::wrap(
      level == 0 ? fmt::format("Sleep level 0: the engine stays awake, {} allocated through the trainer's phases.", bytes_text(engine.asleep_bytes))
                 : fmt::format("Asleep (level {}) it keeps {} allocated (its CUDA graph pool{}); {}; NCCL and the CUDA context stay too.",
                               level, bytes_text(engine.asleep_bytes), engine.graph_bytes > 0 ? ", as given" : ", not estimated",
                               level == 1 ? fmt::format("its weights wait in host memory ({}), its KV is dropped", bytes_text(engine.host_bytes))
                                          : "its weights and KV are dropped (reloaded or re-synced on wake-up)"),
      0, width);
  if (!engine.warning.empty()) out += detail::wrap("Warning: " + engine.warning, 0, width);
}

std::string percent_of(std::uint64_t part, std::uint64_t whole) {
  return fmt::format("{:.0f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

// "h100-80g (79.6 GiB)", or how a size was read: "32GB, read as 32,000,000,000 bytes (29.8 GiB)".
std::string card_text(const plan_report& report) {
  const std::string card = printable_text(report.fit_card);
  if (gpu_memory_bytes(report.fit_card) != 0) return fmt::format("{} ({})", card, bytes_text(report.fit_budget_bytes));
  return fmt::format("{}, read as {} bytes ({})", card, format_count(report.fit_budget_bytes), bytes_text(report.fit_budget_bytes));
}

std::string searched_knobs_text(const plan_report& report) {
  const plan_knobs& knobs = report.knobs;
  std::vector<std::string> searched;
  switch (knobs.phase) {
    case plan_phase::generate: searched = {"rows generated together (up to yours)"}; break;
    case plan_phase::train: searched = {"micro-batch (accumulating to your effective batch)"}; break;
    case plan_phase::grpo_step:
      searched = {"micro-batch", "generation batch"};
      break;
  }
  if (knobs.phase != plan_phase::generate) {
    searched.insert(searched.end(), {"grad checkpointing", "offload"});
    if (knobs.logprob == logprob_impl::full) searched.emplace_back("chunked log-probs");
  }
  std::vector<std::string> opened;
  for (search_knob knob : {search_knob::group, search_knob::new_tokens, search_knob::prompt_len, search_knob::lora_rank, search_knob::batch}) {
    if ((report.fit_vary & search_bit(knob)) != 0) opened.emplace_back(to_string(knob));
  }
  std::string text = fmt::format("Searched {}", fmt::join(searched, ", "));
  if (!opened.empty()) text += fmt::format(", and varied {}", fmt::join(opened, ", "));
  return text;
}

// The algorithm's knobs of this phase that --vary did not open: --fit kept them as given.
std::string kept_knobs_text(const plan_report& report) {
  std::vector<std::string> kept;
  for (search_knob knob : {search_knob::group, search_knob::new_tokens, search_knob::prompt_len, search_knob::lora_rank, search_knob::batch}) {
    if ((report.fit_vary & search_bit(knob)) == 0 && why_not_varied(knob, report.knobs).empty()) kept.emplace_back(to_string(knob));
  }
  if (kept.empty()) return {};
  return fmt::format("Kept as given: {}. --vary {} opens {}, down to a quarter of your value.", fmt::join(kept, ", "),
                     fmt::join(kept, ","), kept.size() == 1 ? "it" : "them");
}

std::string changes_text(const std::vector<knob_change>& changes) {
  std::vector<std::string> parts;
  for (const knob_change& change : changes) parts.push_back(fmt::format("{} {} -> {}", change.knob, change.from, change.to));
  return parts.empty() ? "your config as it is" : fmt::format("{}", fmt::join(parts, ", "));
}

// A command line broken at spaces into lines of `width`, each continued with a backslash.
std::string command_lines(const std::string& command, std::size_t indent, std::size_t width) {
  std::string out(indent, ' ');
  std::size_t column = indent;
  std::size_t start = 0;
  while (start < command.size()) {
    // Break before an option, so a flag stays with its value.
    std::size_t next = command.find(" --", start + 1);
    if (next == std::string::npos) next = command.size();
    const std::string piece = command.substr(start, next - start);
    if (column > indent && column + piece.size() + 2 > width) {
      out += " \\\n" + std::string(indent + 2, ' ');
      column = indent + 2;
      out += piece.substr(1);
      column += piece.size() - 1;
    } else {
      out += piece;
      column += piece.size();
    }
    start = next;
  }
  return out + "\n";
}

void append_fit(std::string& out, const plan_report& report) {
  const fit_result& fit = *report.fit;
  const std::size_t width = report.width;
  out += "\n" + detail::wrap(fmt::format("Fit on {}: {} usable after the CUDA context and workspaces and a {:.0f}% fragmentation margin.",
                                         card_text(report), bytes_text(fit.usable_bytes), 100 * report.fit_margin),
                             0, width);
  if (fit.your_peak_bytes <= fit.usable_bytes) {
    out += detail::wrap(fmt::format("Your config needs {}; {} usable: it fits{}, with {} to spare.", bytes_text(fit.your_peak_bytes),
                                    bytes_text(fit.usable_bytes), fit.host_memory_bytes != 0 ? " the card" : "",
                                    bytes_text(fit.usable_bytes - fit.your_peak_bytes)),
                        0, width);
  } else {
    out += detail::wrap(fmt::format("Your config needs {}; {} usable: it does not fit.", bytes_text(fit.your_peak_bytes),
                                    bytes_text(fit.usable_bytes)),
                        0, width);
  }
  if (const std::string host = detail::host_fit_text(report); !host.empty()) out += detail::wrap(host, 0, width);
  if (!fit.what_if.empty()) {
    out += "\nEach knob changed alone from your config:\n";
    std::size_t knob_width = 4;
    std::size_t change_width = 6;
    for (const what_if_row& row : fit.what_if) {
      knob_width = std::max(knob_width, row.knob.size());
      change_width = std::max(change_width, row.from.size() + 4 + row.to.size());
    }
    out += fmt::format("  {:<{}} {:>{}} {:>10} {:>10}  {}\n", "knob", knob_width, "change", change_width, "peak", "saves", "fits");
    bool any_limit = false;
    for (const what_if_row& row : fit.what_if) {
      std::string line = fmt::format("  {:<{}} {:>{}} {:>10} {:>10}  {}{}", row.knob, knob_width, row.from + " -> " + row.to, change_width,
                                     bytes_text(row.peak_bytes), format_bytes(row.saved_bytes), row.fits ? "yes" : "no",
                                     row.limit ? "*" : "");
      any_limit = any_limit || row.limit;
      out += line + "\n";
    }
    if (any_limit) {
      out += fit.yours_fits ? "  * the most of that knob alone that fits\n" : "  * the least change of that knob alone that fits\n";
    }
  }
  if (const std::string kept = kept_knobs_text(report); !kept.empty()) out += detail::wrap(kept, 2, width);
  out += "\n" + detail::wrap(fmt::format("Combinations that fit. {}: {} configurations in {:.0f} ms, {} fit.",
                                         searched_knobs_text(report), format_count(fit.configurations), 1000 * report.fit_seconds,
                                         format_count(fit.fitting)),
                             0, width);
  if (!fit.found && fit.host_memory_bytes != 0 && fit.smallest_peak_bytes <= fit.usable_bytes) {
    out += detail::wrap("none fits the host: " + fit.reason + ". The host's parts follow --sleep-level and --handoff, which the search "
                        "keeps as given (each alone is in the table above).",
                        2, width);
    return;
  }
  if (!fit.found) {
    out += detail::wrap(fmt::format("none: the smallest needs {} ({}).", bytes_text(fit.smallest_peak_bytes),
                                    printable_text(knobs_command_line(fit.smallest))),
                        2, width);
    return;
  }
  out += detail::wrap(fit_ranking_rule(), 0, width);
  const bool all = report.fit_all;
  if (!all) {
    out += detail::wrap(fmt::format("Shown: {} of {}, the best for each set of knobs changed, leaving out any that changes more "
                                    "knobs for no gain (--all lists every one).",
                                    fit.combinations.size(), format_count(fit.every_fitting.size())),
                        0, width);
  }
  const std::vector<fit_candidate>& listed = all ? fit.every_fitting : fit.combinations;
  const std::size_t number_width = fmt::format("{}", listed.size()).size();
  for (std::size_t i = 0; i < listed.size(); ++i) {
    const fit_candidate& candidate = listed[i];
    const std::string head = fmt::format("  {:>{}}. {:>10}  ", i + 1, number_width, bytes_text(candidate.peak_bytes));
    std::string body = detail::wrap(changes_text(candidate.changes), head.size(), width);
    out += head + body.substr(head.size());
  }
  const auto peak = std::find_if(fit.best_plan.phases.begin(), fit.best_plan.phases.end(),
                                 [&](const phase_estimate& p) { return p.name == fit.best_plan.peak_phase; });
  out += "\n" + detail::wrap(fmt::format("Best: {} tokens per step, peak {} in {} ({}), {} of the usable {}:",
                                         format_count(work_per_step(fit.best)), bytes_text(fit.best_plan.peak_bytes),
                                         fit.best_plan.peak_phase, peak->peak_at, percent_of(fit.best_plan.peak_bytes, fit.usable_bytes),
                                         bytes_text(fit.usable_bytes)),
                             0, width);
  out += command_lines(printable_text(knobs_command_line(fit.best)), 2, width);
}

json knobs_json(const plan_knobs& knobs) {
  json out;
  out["phase"] = to_string(knobs.phase);
  switch (knobs.phase) {
    case plan_phase::generate:
      out["batch"] = knobs.batch;
      break;
    case plan_phase::train:
      out["micro_batch"] = knobs.micro_batch;
      out["seq_len"] = knobs.seq_len;
      out["logprob_tokens"] = knobs.logprob_tokens;
      out["grad_accum"] = knobs.grad_accum;
      break;
    case plan_phase::grpo_step:
      out["prompts"] = knobs.prompts;
      out["group"] = knobs.group;
      out["micro_batch"] = knobs.micro_batch;
      out["reference"] = to_string(knobs.reference);
      out["old_logprobs"] = knobs.old_logprobs;
      out["epochs"] = knobs.epochs;
      if (knobs.batch != 0) out["batch"] = knobs.batch;
      out["gen_batch"] = generation_rows(knobs);
      break;
  }
  if (knobs.phase != plan_phase::train) {
    out["prompt_len"] = knobs.prompt_len;
    out["new_tokens"] = knobs.new_tokens;
    out["kv_cache"] = to_string(knobs.kv_cache);
    if (knobs.kv_cache == kv_cache_kind::prealloc) {
      out["kv_rows"] = kv_cache_rows(knobs);
      out["kv_rows_follow"] = knobs.kv_rows_follow == kv_rows_kind::group              ? "group"
                              : knobs.kv_rows_follow == kv_rows_kind::generation_batch ? "gen-batch"
                              : knobs.kv_rows != 0                                     ? "fixed"
                                                                                       : "gen-batch";
      out["kv_len"] = knobs.kv_len;
    }
  }
  if (knobs.phase != plan_phase::generate) {
    out["grad_ckpt"] = knobs.grad_ckpt;
    out["optimizer"] = to_string(knobs.optimizer);
    out["precision"] = to_string(knobs.precision);
    out["lora_rank"] = knobs.lora_rank;
    out["logprob_impl"] = to_string(knobs.logprob);
  }
  out["gpus"] = knobs.gpus;
  out["shard"] = to_string(knobs.shard);
  out["offload"] = offload_text(knobs);
  json buffers = json::array();
  for (const resident_buffer& buffer : knobs.buffers) buffers.push_back({{"name", buffer.name}, {"shape", buffer.shape}, {"bytes", buffer_bytes(buffer, knobs)}});
  out["buffers"] = buffers;
  if (knobs.engine.rollout != rollout_kind::hf) {
    const rollout_engine_knobs& engine = knobs.engine;
    json rollout = {{"engine", to_string(engine.rollout)}, {"sleep_level", engine.sleep_level}};
    if (engine.rollout == rollout_kind::vllm) {
      rollout["gpu_memory_utilization"] = engine.gpu_memory_utilization;
      rollout["max_model_len"] = engine.max_model_len;
      rollout["max_num_seqs"] = engine.max_num_seqs;
      rollout["max_num_batched_tokens"] = engine.max_num_batched_tokens;
      rollout["block_size"] = engine.block_size;
    } else {
      rollout["mem_fraction_static"] = engine.mem_fraction_static;
      rollout["chunked_prefill_size"] = engine.chunked_prefill_size;
    }
    out["rollout"] = rollout;
  }
  if (knobs.handoff != handoff_kind::unmodelled) out["handoff"] = detail::handoff_knobs_json(knobs);
  if (knobs.gpus_per_node != 0) out["gpus_per_node"] = knobs.gpus_per_node;
  return out;
}

// Present only with --rollout vllm or sglang, so the hf report stays as it was.
json engine_json(const engine_budget& engine) {
  json out;
  out["engine"] = to_string(engine.rollout);
  out["modelled"] = true;
  out["device_bytes"] = engine.device_bytes;
  out["trainer_at_init_bytes"] = engine.trainer_at_init_bytes;
  out["free_at_init_bytes"] = engine.free_at_init_bytes;
  out["budget_bytes"] = engine.requested_bytes;
  out["weights_bytes"] = engine.weights_bytes;
  out["activation_bytes"] = engine.activation_bytes;
  out["activation_estimated"] = true;
  out["graph_bytes"] = engine.graph_bytes;
  out["kv_bytes"] = engine.kv_bytes;
  out["kv_bytes_per_token"] = engine.bytes_per_token;
  out["kv_tokens"] = engine.kv_tokens;
  if (engine.rollout == rollout_kind::vllm) {
    out["block_bytes"] = engine.block_bytes;
    out["blocks"] = engine.blocks;
    out["max_model_len"] = engine.max_model_len;
    out["max_concurrency"] = engine.max_concurrency;
  }
  out["sequence_tokens"] = engine.sequence_tokens;
  out["concurrent_sequences"] = engine.concurrent_sequences;
  out["rollout_rows"] = engine.rollout_rows;
  out["reserved_bytes"] = engine.reserved_bytes;
  out["asleep_bytes"] = engine.asleep_bytes;
  out["sleep_host_bytes"] = engine.host_bytes;
  if (!engine.warning.empty()) out["warning"] = engine.warning;
  return out;
}

json estimate_json(const plan_result& plan) {
  json out;
  out["peak_bytes"] = plan.peak_bytes;
  out["peak_phase"] = plan.peak_phase;
  json phases = json::array();
  for (const phase_estimate& phase : plan.phases) {
    json components = json::object();
    for (const memory_component& part : phase.components) components[part.name] = part.bytes;
    phases.push_back({{"name", phase.name}, {"peak_bytes", phase.peak_bytes}, {"peak_at", phase.peak_at},
                      {"components", components}, {"resident", phase.resident}});
  }
  out["phases"] = phases;
  out["outside_allocator"] = {{"cuda_context_bytes", plan.overhead.cuda_context_bytes},
                              {"cublas_workspace_bytes", plan.overhead.cublas_workspace_bytes}};
  out["host_bytes"] = plan.host_bytes;
  out["trainable_params"] = plan.trainable_params;
  if (plan.engine.rollout != rollout_kind::hf) out["rollout_engine"] = engine_json(plan.engine);
  if (plan.handoff.mode != handoff_kind::unmodelled) out["handoff"] = detail::handoff_json(plan.handoff);
  if (plan.host.gpus_per_node != 0) out["host"] = detail::host_json(plan.host, 0);
  return out;
}

// The --buffer argument that gives `buffer` back.
std::string buffer_spec(const resident_buffer& buffer) {
  std::string spec = buffer.name + "=" + buffer.shape;
  if (buffer.phases == all_phases) return spec;
  const std::pair<unsigned, const char*> names[] = {{phase_rollout, "rollout"},
                                                    {phase_old_logprobs, "old-logprobs"},
                                                    {phase_reference, "reference"},
                                                    {phase_update, "update"},
                                                    {phase_optimizer, "optimizer"}};
  char separator = '@';
  for (const auto& [bit, name] : names) {
    if ((buffer.phases & bit) == 0) continue;
    spec += separator;
    spec += name;
    separator = ',';
  }
  return spec;
}

json changes_json(const std::vector<knob_change>& changes) {
  json out = json::array();
  for (const knob_change& change : changes) out.push_back({{"knob", change.knob}, {"from", change.from}, {"to", change.to}});
  return out;
}

}  // namespace

std::string knobs_command_line(const plan_knobs& knobs) {
  std::string line = fmt::format("--phase {}", to_string(knobs.phase));
  switch (knobs.phase) {
    case plan_phase::generate:
      line += fmt::format(" --batch {} --prompt-len {} --new-tokens {}", knobs.batch, knobs.prompt_len, knobs.new_tokens);
      break;
    case plan_phase::train:
      line += fmt::format(" --micro-batch {} --grad-accum {} --seq-len {} --logprob-tokens {}", knobs.micro_batch, knobs.grad_accum,
                          knobs.seq_len, knobs.logprob_tokens);
      break;
    case plan_phase::grpo_step:
      line += fmt::format(" --prompts {} --group {} --prompt-len {} --new-tokens {} --micro-batch {}", knobs.prompts, knobs.group,
                          knobs.prompt_len, knobs.new_tokens, knobs.micro_batch);
      if (knobs.batch != 0) line += fmt::format(" --gen-batch {}", knobs.batch);
      if (knobs.epochs > 1) line += fmt::format(" --epochs {}", knobs.epochs);
      if (knobs.reference != reference_kind::none) line += fmt::format(" --ref-model {}", to_string(knobs.reference));
      if (knobs.old_logprobs) line += " --old-logprobs";
      break;
  }
  if (knobs.phase != plan_phase::train && knobs.kv_cache == kv_cache_kind::prealloc) {
    line += " --kv-cache prealloc";
    if (knobs.kv_rows_follow == kv_rows_kind::group) line += " --kv-rows group";
    if (knobs.kv_rows_follow == kv_rows_kind::generation_batch) line += " --kv-rows gen-batch";
    if (knobs.kv_rows_follow == kv_rows_kind::fixed && knobs.kv_rows != 0) line += fmt::format(" --kv-rows {}", knobs.kv_rows);
    if (knobs.kv_len != 0) line += fmt::format(" --kv-len {}", knobs.kv_len);
  }
  if (knobs.phase != plan_phase::generate) {
    if (knobs.grad_ckpt) line += " --grad-ckpt";
    if (knobs.optimizer != optimizer_kind::adamw) line += fmt::format(" --optimizer {}", to_string(knobs.optimizer));
    if (knobs.precision != precision_kind::bf16) line += fmt::format(" --precision {}", to_string(knobs.precision));
    if (knobs.lora_rank > 0) line += fmt::format(" --lora-r {}", knobs.lora_rank);
    if (knobs.lora_rank > 0 && !knobs.lora_targets.empty()) line += fmt::format(" --lora-targets {}", fmt::join(knobs.lora_targets, ","));
    if (chunked_logprobs(knobs)) {
      line += fmt::format(" --logprob-impl {} --logprob-chunk {}", to_string(knobs.logprob), knobs.logprob_chunk);
    } else if (knobs.logprob != logprob_impl::full) {
      line += fmt::format(" --logprob-impl {}", to_string(knobs.logprob));
    }
  }
  if (knobs.gpus > 1) line += fmt::format(" --gpus {}", knobs.gpus);
  if (knobs.shard != shard_kind::none) line += fmt::format(" --shard {}", to_string(knobs.shard));
  if (knobs.offload_optimizer || knobs.offload_weights) line += " --offload " + offload_text(knobs);
  for (const resident_buffer& buffer : knobs.buffers) line += " --buffer " + buffer_spec(buffer);
  const rollout_engine_knobs& engine = knobs.engine;
  if (engine.rollout == rollout_kind::vllm) {
    line += fmt::format(" --rollout vllm --gpu-memory-utilization {} --max-num-seqs {} --block-size {}", engine.gpu_memory_utilization,
                        engine.max_num_seqs, engine.block_size);
    if (engine.max_model_len != 0) line += fmt::format(" --max-model-len {}", engine.max_model_len);
  } else if (engine.rollout == rollout_kind::sglang) {
    line += fmt::format(" --rollout sglang --mem-fraction-static {} --chunked-prefill-size {}", engine.mem_fraction_static,
                        engine.chunked_prefill_size);
  }
  if (engine.rollout != rollout_kind::hf && engine.sleep_level != 0) line += fmt::format(" --sleep-level {}", engine.sleep_level);
  if (knobs.handoff != handoff_kind::unmodelled) {
    line += fmt::format(" --handoff {}", to_string(knobs.handoff));
    if (knobs.wake_order != wake_order_kind::staged) line += fmt::format(" --wake-order {}", to_string(knobs.wake_order));
    if (knobs.sync_bucket_bytes != 0) line += fmt::format(" --sync-bucket {}", knobs.sync_bucket_bytes);
  }
  if (knobs.gpus_per_node != 0) line += fmt::format(" --gpus-per-node {}", knobs.gpus_per_node);
  return line;
}

std::string render_plan_text(const plan_report& report) {
  const plan_result& plan = report.plan;
  const std::size_t width = report.width;
  // The model's name is set off by two spaces, which wrapping would fold: wrapped only when too long.
  const std::string model = model_line(report.model, plan.params);
  std::string out = model.size() <= width ? model + "\n" : detail::wrap(model, 0, width);
  out += detail::wrap(knobs_line(report.knobs, plan), 0, width);
  for (const resident_buffer& buffer : report.knobs.buffers) {
    out += detail::wrap(fmt::format("buffer {} {} = {}", printable_text(buffer.name), printable_text(buffer.shape), bytes_text(buffer_bytes(buffer, report.knobs))),
                        0, width);
  }
  detail::append_config_source(out, report);
  out += "\n" + detail::wrap(fmt::format("Peak {} per GPU in {}: bytes allocated through PyTorch's caching allocator",
                                         bytes_text(plan.peak_bytes), plan.peak_phase),
                             0, width);
  append_phases(out, plan);
  if (plan.engine.rollout != rollout_kind::hf) append_rollout_engine(out, report.model, report.knobs, plan.engine, width);
  detail::append_handoff(out, report, width);
  append_overhead(out, plan, width);
  detail::append_host_memory(out, report, width);
  if (report.fit) append_fit(out, report);
  detail::append_length_view(out, report);
  return out;
}

namespace {

json fit_json(const plan_report& report, std::size_t every_fitting_kept) {
  const fit_result& fit = *report.fit;
  json search;
  search["card"] = report.fit_card;
  search["budget_bytes"] = report.fit_budget_bytes;
  search["margin"] = report.fit_margin;
  search["usable_bytes"] = fit.usable_bytes;
  json vary = json::array();
  for (search_knob knob : {search_knob::group, search_knob::new_tokens, search_knob::prompt_len, search_knob::lora_rank, search_knob::batch}) {
    if ((report.fit_vary & search_bit(knob)) != 0) vary.push_back(to_string(knob));
  }
  search["vary"] = vary;
  search["yours"] = {{"peak_bytes", fit.your_peak_bytes}, {"usable_bytes", fit.usable_bytes}, {"fits", fit.yours_fits}};
  if (fit.host_memory_bytes != 0) search["yours"]["host"] = detail::host_fit_json(fit);
  json rows = json::array();
  for (const what_if_row& row : fit.what_if) {
    rows.push_back({{"knob", row.knob}, {"from", row.from}, {"to", row.to}, {"peak_bytes", row.peak_bytes},
                    {"saved_bytes", row.saved_bytes}, {"fits", row.fits}, {"limit", row.limit}});
  }
  search["what_if"] = rows;
  search["configurations"] = fit.configurations;
  search["fitting"] = fit.fitting;
  search["seconds"] = report.fit_seconds;
  search["found"] = fit.found;
  if (!fit.found) {
    search["reason"] = fit.reason;
    return search;
  }
  search["best"] = knobs_json(fit.best);
  search["best"]["work_per_step"] = work_per_step(fit.best);
  search["best"]["command_line"] = knobs_command_line(fit.best);
  search["best"]["changes"] = changes_json(fit.combinations.front().changes);
  search["best_plan"] = estimate_json(fit.best_plan);
  json combinations = json::array();
  for (const fit_candidate& candidate : fit.combinations) {
    combinations.push_back({{"peak_bytes", candidate.peak_bytes}, {"work_per_step", work_per_step(candidate.knobs)},
                            {"command_line", knobs_command_line(candidate.knobs)}, {"changes", changes_json(candidate.changes)}});
  }
  search["combinations"] = combinations;
  search["ranking"] = fit_ranking_rule();
  // A search with --vary can fit a hundred thousand: the command line alone says each one.
  json every = json::array();
  const std::size_t kept = std::min(every_fitting_kept, fit.every_fitting.size());
  for (std::size_t i = 0; i < kept; ++i) {
    const fit_candidate& candidate = fit.every_fitting[i];
    every.push_back({{"peak_bytes", candidate.peak_bytes}, {"work_per_step", work_per_step(candidate.knobs)},
                     {"command_line", knobs_command_line(candidate.knobs)}});
  }
  search["every_fitting"] = every;
  search["every_fitting_left_out"] = fit.every_fitting.size() - kept;
  return search;
}

}  // namespace

json detail::plan_json(const plan_report& report, std::size_t every_fitting_kept) {
  const parameter_count& params = report.plan.params;
  json out;
  out["schema_version"] = 3;
  out["command"] = "plan";
  out["model"] = {{"name", report.model.name},
                  {"model_type", report.model.model_type},
                  {"parameters", params.total},
                  {"non_embedding_parameters", params.non_embedding()},
                  {"active_parameters_per_token", params.active_per_token}};
  out["knobs"] = knobs_json(report.knobs);
  if (report.from_config) out["from"] = detail::config_source_json(report);
  const json estimate = estimate_json(report.plan);
  for (const auto& [key, value] : estimate.items()) out[key] = value;
  if (report.plan.host.gpus_per_node != 0) out["host"] = detail::host_json(report.plan.host, report.host_memory_bytes);
  if (report.fit) out["fit"] = fit_json(report, every_fitting_kept);
  if (report.response_lengths) out["response_lengths"] = detail::length_view_json(report);
  return out;
}

std::string render_plan_json(const plan_report& report) {
  return detail::plan_json(report).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace rlmem
