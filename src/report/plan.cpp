// SPDX-License-Identifier: MIT
// Renders `rlmem plan`: the model, each phase's peak with its parts, and the --fit search.

#include "prose.hpp"

#include <rlmem/report.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace rlmem {

namespace {

using json = nlohmann::ordered_json;

std::string bytes_text(std::uint64_t bytes) { return format_bytes(static_cast<std::int64_t>(bytes)); }

std::string billions(std::uint64_t count) { return fmt::format("{:.2f} B", static_cast<double>(count) / 1e9); }

std::string offload_text(const plan_knobs& knobs) {
  if (knobs.offload_weights) return "all";
  return knobs.offload_optimizer ? "optimizer" : "none";
}

std::string model_line(const model_architecture& model, const parameter_count& params) {
  std::string line = fmt::format("{}  {} parameters ({} outside embeddings), {} layers, hidden {}, {}/{} heads of {}, vocab {}",
                                 printable_text(model.name), billions(params.total), billions(params.non_embedding()), model.num_layers,
                                 model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim,
                                 format_count(model.vocab_size));
  if (model.tied_embeddings) line += ", tied head";
  if (model.num_experts > 0) {
    line += fmt::format(", {} experts ({} per token, {} active)", model.num_experts, model.experts_per_token,
                        billions(params.active_per_token));
  }
  return line;
}

std::string training_text(const plan_knobs& knobs, const plan_result& plan) {
  std::string text = fmt::format("{} {}", to_string(knobs.optimizer) == "adamw" ? "AdamW" : "SGD", to_string(knobs.precision));
  if (knobs.lora_rank > 0) {
    text += fmt::format(", LoRA r={} ({} trainable)", knobs.lora_rank, format_count(plan.trainable_params));
  }
  if (knobs.grad_ckpt) text += ", gradient checkpointing";
  if (knobs.logprob != logprob_impl::full) text += fmt::format(", {} log-probs (chunk {})", to_string(knobs.logprob), knobs.logprob_chunk);
  return text;
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
      line = fmt::format("grpo-step: {} prompts x {} samples, prompt {} + {} new tokens, micro-batch {} ({} per step{}), {}{}",
                         knobs.prompts, knobs.group, knobs.prompt_len, knobs.new_tokens, knobs.micro_batch,
                         rows / knobs.micro_batch, knobs.gpus > 1 ? " on each GPU" : "", training_text(knobs, plan),
                         knobs.ref_model ? ", reference model" : "");
      if (knobs.old_logprobs) line += ", old log-probs";
      break;
    }
  }
  if (knobs.gpus > 1 || knobs.shard != shard_kind::none) line += fmt::format(", {} GPUs sharded {}", knobs.gpus, to_string(knobs.shard));
  if (knobs.offload_optimizer || knobs.offload_weights) line += fmt::format(", offload {}", offload_text(knobs));
  return line;
}

void append_phases(std::string& out, const plan_result& plan) {
  out += "\n  phase        peak        at\n";
  for (const phase_estimate& phase : plan.phases) {
    out += fmt::format("  {:<10} {:>10}   {}{}\n", phase.name, bytes_text(phase.peak_bytes), phase.peak_at,
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

void append_overhead(std::string& out, const plan_result& plan) {
  const runtime_overhead& overhead = plan.overhead;
  out += "\n" + detail::wrap(fmt::format("Outside these peaks (not counted in them): the CUDA context and kernels, about {} "
                                         "(torch 2.11 on an H200), and cuBLAS workspaces, {} (32 MiB per thread that runs "
                                         "matmuls; backward has its own). Reserved memory exceeds allocated by the allocator's "
                                         "fragmentation, 3% to 100% in the rows measured on the H200: `rlmem replay` measures yours.",
                                         bytes_text(overhead.cuda_context_bytes), bytes_text(overhead.cublas_workspace_bytes)),
                             0, 100) + "\n";
  if (plan.host_bytes > 0) out += fmt::format("Host memory for offloaded state: {} per GPU\n", bytes_text(plan.host_bytes));
}

void append_fit(std::string& out, const plan_report& report) {
  const fit_result& fit = *report.fit;
  out += fmt::format("Fit on {} ({}): {} usable after the CUDA context and workspaces and a {:.0f}% fragmentation margin\n",
                     printable_text(report.fit_card), bytes_text(report.fit_budget_bytes), bytes_text(fit.usable_bytes), 100 * report.fit_margin);
  out += fmt::format("explored {} configurations in {:.0f} ms; {} fit\n", format_count(fit.configurations), 1000 * report.fit_seconds,
                     format_count(fit.fitting));
  if (!fit.found) {
    out += "no configuration fits: " + fit.reason + "\n";
    return;
  }
  out += fmt::format("\nBest by work per step ({} tokens per step):\n  {}\n  {}\n", format_count(work_per_step(fit.best)),
                     printable_text(knobs_command_line(fit.best)), knobs_line(fit.best, fit.best_plan));
  out += fmt::format("  peak {} in {} ({}), {} of the usable {}\n", bytes_text(fit.best_plan.peak_bytes), fit.best_plan.peak_phase,
                     std::find_if(fit.best_plan.phases.begin(), fit.best_plan.phases.end(),
                                  [&](const phase_estimate& p) { return p.name == fit.best_plan.peak_phase; })->peak_at,
                     fmt::format("{:.0f}%", 100.0 * static_cast<double>(fit.best_plan.peak_bytes) / static_cast<double>(fit.usable_bytes)),
                     bytes_text(fit.usable_bytes));
  if (fit.what_if.empty()) return;
  out += "\nWhat if (one knob one notch from the best):\n";
  out += fmt::format("  {:<20} {:>22}  {:>12} {:>8}  {}\n", "knob", "change", "peak change", "", "fits");
  for (const what_if_row& row : fit.what_if) {
    const std::string sign = row.delta_bytes > 0 ? "+" : "";
    out += fmt::format("  {:<20} {:>22}  {:>12} {:>7.1f}%  {}\n", row.knob, row.from + " -> " + row.to,
                       sign + format_bytes(row.delta_bytes), row.delta_percent, row.fits ? "yes" : "no");
  }
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
      out["ref_model"] = knobs.ref_model;
      out["old_logprobs"] = knobs.old_logprobs;
      if (knobs.batch != 0) out["batch"] = knobs.batch;
      break;
  }
  if (knobs.phase != plan_phase::train) {
    out["prompt_len"] = knobs.prompt_len;
    out["new_tokens"] = knobs.new_tokens;
    out["kv_cache"] = to_string(knobs.kv_cache);
    if (knobs.kv_cache == kv_cache_kind::prealloc) {
      out["kv_rows"] = knobs.kv_rows;
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
  for (const resident_buffer& buffer : knobs.buffers) buffers.push_back({{"name", buffer.name}, {"shape", buffer.shape}, {"bytes", buffer.bytes}});
  out["buffers"] = buffers;
  return out;
}

json plan_json(const plan_result& plan) {
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
      if (knobs.batch != 0) line += fmt::format(" --batch {}", knobs.batch);
      if (knobs.ref_model) line += " --ref-model";
      if (knobs.old_logprobs) line += " --old-logprobs";
      break;
  }
  if (knobs.phase != plan_phase::train && knobs.kv_cache == kv_cache_kind::prealloc) {
    line += " --kv-cache prealloc";
    if (knobs.kv_rows != 0) line += fmt::format(" --kv-rows {}", knobs.kv_rows);
    if (knobs.kv_len != 0) line += fmt::format(" --kv-len {}", knobs.kv_len);
  }
  if (knobs.phase != plan_phase::generate) {
    if (knobs.grad_ckpt) line += " --grad-ckpt";
    if (knobs.optimizer != optimizer_kind::adamw) line += " --optimizer sgd";
    if (knobs.precision != precision_kind::bf16) line += fmt::format(" --precision {}", to_string(knobs.precision));
    if (knobs.lora_rank > 0) line += fmt::format(" --lora-r {}", knobs.lora_rank);
    if (knobs.lora_rank > 0 && !knobs.lora_targets.empty()) line += fmt::format(" --lora-targets {}", fmt::join(knobs.lora_targets, ","));
    if (knobs.logprob != logprob_impl::full) {
      line += fmt::format(" --logprob-impl {} --logprob-chunk {}", to_string(knobs.logprob), knobs.logprob_chunk);
    }
  }
  if (knobs.gpus > 1) line += fmt::format(" --gpus {}", knobs.gpus);
  if (knobs.shard != shard_kind::none) line += fmt::format(" --shard {}", to_string(knobs.shard));
  if (knobs.offload_optimizer || knobs.offload_weights) line += " --offload " + offload_text(knobs);
  for (const resident_buffer& buffer : knobs.buffers) line += " --buffer " + buffer_spec(buffer);
  return line;
}

std::string render_plan_text(const plan_report& report) {
  const plan_result& plan = report.plan;
  std::string out = model_line(report.model, plan.params) + "\n";
  out += detail::wrap(knobs_line(report.knobs, plan), 0, 100);
  for (const resident_buffer& buffer : report.knobs.buffers) {
    out += fmt::format("buffer {} {} = {}\n", printable_text(buffer.name), printable_text(buffer.shape), bytes_text(buffer.bytes));
  }
  out += fmt::format("\nPeak {} per GPU in {}: bytes allocated through PyTorch's caching allocator\n",
                     bytes_text(plan.peak_bytes), plan.peak_phase);
  append_phases(out, plan);
  append_overhead(out, plan);
  if (report.fit) append_fit(out, report);
  return out;
}

std::string render_plan_json(const plan_report& report) {
  const parameter_count& params = report.plan.params;
  json out;
  out["schema_version"] = 1;
  out["command"] = "plan";
  out["model"] = {{"name", report.model.name},
                  {"model_type", report.model.model_type},
                  {"parameters", params.total},
                  {"non_embedding_parameters", params.non_embedding()},
                  {"active_parameters_per_token", params.active_per_token}};
  out["knobs"] = knobs_json(report.knobs);
  const json estimate = plan_json(report.plan);
  for (const auto& [key, value] : estimate.items()) out[key] = value;
  if (report.fit) {
    const fit_result& fit = *report.fit;
    json search;
    search["card"] = report.fit_card;
    search["budget_bytes"] = report.fit_budget_bytes;
    search["margin"] = report.fit_margin;
    search["usable_bytes"] = fit.usable_bytes;
    search["configurations"] = fit.configurations;
    search["fitting"] = fit.fitting;
    search["seconds"] = report.fit_seconds;
    search["found"] = fit.found;
    if (fit.found) {
      search["best"] = knobs_json(fit.best);
      search["best"]["work_per_step"] = work_per_step(fit.best);
      search["best"]["command_line"] = knobs_command_line(fit.best);
      search["best_plan"] = plan_json(fit.best_plan);
      json rows = json::array();
      for (const what_if_row& row : fit.what_if) {
        rows.push_back({{"knob", row.knob}, {"from", row.from}, {"to", row.to}, {"delta_bytes", row.delta_bytes},
                        {"delta_percent", row.delta_percent}, {"fits", row.fits}});
      }
      search["what_if"] = rows;
    } else {
      search["reason"] = fit.reason;
    }
    out["fit"] = search;
  }
  return out.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace rlmem
