// SPDX-License-Identifier: MIT
// --fit: the configuration that does the most work per step within a card's memory, and what
// each knob one notch up or down would cost.

#include <rlmem/plan.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>

namespace rlmem {

std::uint64_t work_per_step(const plan_knobs& knobs) {
  switch (knobs.phase) {
    case plan_phase::generate: return knobs.batch * knobs.new_tokens;
    case plan_phase::train: return knobs.micro_batch * knobs.grad_accum * knobs.seq_len;
    case plan_phase::grpo_step: return knobs.prompts * knobs.group * knobs.new_tokens;
  }
  return 0;
}

namespace {

enum class offload_level : std::uint8_t { none, optimizer, all };

offload_level offload_of(const plan_knobs& knobs) {
  if (knobs.offload_weights) return offload_level::all;
  return knobs.offload_optimizer ? offload_level::optimizer : offload_level::none;
}

void set_offload(plan_knobs& knobs, offload_level level) {
  knobs.offload_optimizer = level != offload_level::none;
  knobs.offload_weights = level == offload_level::all;
}

std::string_view offload_name(offload_level level) {
  switch (level) {
    case offload_level::none: return "none";
    case offload_level::optimizer: return "optimizer";
    case offload_level::all: return "all";
  }
  return "?";
}

std::vector<std::uint64_t> with_value(std::vector<std::uint64_t> values, std::uint64_t value) {
  if (value != 0) values.push_back(value);
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

std::vector<std::uint64_t> powers_of_two(std::uint64_t low, std::uint64_t high) {
  std::vector<std::uint64_t> values;
  for (std::uint64_t value = 1; value <= high; value *= 2) {
    if (value >= low) values.push_back(value);
    if (value > high / 2) break;
  }
  return values;
}

std::vector<std::uint64_t> divisors(std::uint64_t n) {
  std::vector<std::uint64_t> values;
  for (std::uint64_t d = 1; d * d <= n; ++d) {
    if (n % d == 0) {
      values.push_back(d);
      if (d != n / d) values.push_back(n / d);
    }
  }
  std::sort(values.begin(), values.end());
  return values;
}

// Micro-batches that split a prompt's samples evenly or hold whole groups of a GPU's rows.
std::vector<std::uint64_t> valid_micro_batches(std::uint64_t group, std::uint64_t rows) {
  std::vector<std::uint64_t> values;
  for (std::uint64_t d : divisors(rows)) {
    if (group % d == 0 || d % group == 0) values.push_back(d);
  }
  return values;
}

// The largest value in `values` not above `limit` (the smallest value when all are above).
std::uint64_t at_most(const std::vector<std::uint64_t>& values, std::uint64_t limit) {
  std::uint64_t chosen = values.front();
  for (std::uint64_t value : values) {
    if (value <= limit) chosen = value;
  }
  return chosen;
}

// The candidate values of each knob the search moves.
struct search_space {
  std::vector<std::uint64_t> groups;
  std::vector<std::uint64_t> new_tokens;
  std::vector<std::uint64_t> effective_batches;  ///< train: micro-batch x accumulation
  std::vector<std::uint64_t> batches;            ///< generate
  std::vector<bool> checkpointing;
  std::vector<std::uint64_t> lora_ranks;
  std::vector<offload_level> offloads;
};

search_space space_for(const model_architecture& model, const plan_knobs& base, const fit_options& options) {
  search_space space;
  if (options.keep_shape) {
    space.groups = {base.group};
    space.new_tokens = {base.new_tokens};
  } else {
    // Up to four times the group and the length asked for: how far the card can go.
    space.groups = with_value(powers_of_two(2, std::max<std::uint64_t>(4 * base.group, 2)), base.group);
    for (std::uint64_t eighths : {1, 2, 4, 6, 8, 12, 16, 24, 32}) {
      space.new_tokens.push_back(std::max<std::uint64_t>(base.new_tokens * eighths / 8, 1));
    }
    space.new_tokens = with_value(space.new_tokens, base.new_tokens);
  }
  const std::uint64_t effective = base.micro_batch * base.grad_accum;
  if (options.keep_shape) {
    space.effective_batches = {effective};
    space.batches = with_value(powers_of_two(1, base.batch), base.batch);
  } else {
    for (std::uint64_t scale : {1, 2, 4, 8, 16, 32}) space.effective_batches.push_back(std::max<std::uint64_t>(effective * scale / 4, 1));
    space.effective_batches = with_value(space.effective_batches, effective);
    space.batches = with_value(powers_of_two(1, std::max<std::uint64_t>(16 * base.batch, 1024)), base.batch);
  }
  space.checkpointing = base.phase == plan_phase::generate ? std::vector<bool>{false} : std::vector<bool>{false, true};
  if (options.search_lora && base.phase != plan_phase::generate) {
    for (std::uint64_t rank : with_value(powers_of_two(8, 256), base.lora_rank)) {
      if (rank <= model.hidden_size) space.lora_ranks.push_back(rank);
    }
  } else {
    space.lora_ranks = {base.lora_rank};
  }
  space.offloads = {offload_level::none};
  if (options.search_offload && base.phase != plan_phase::generate) {
    space.offloads.push_back(offload_level::optimizer);
    if (base.shard == shard_kind::fsdp) space.offloads.push_back(offload_level::all);
  } else {
    space.offloads = {offload_of(base)};
  }
  return space;
}

// Bigger is better: work, then speed (no offload, no recomputation, fewer micro-batches), then the
// shape and LoRA rank closest to the ones asked for, then the smaller peak.
using score = std::tuple<std::uint64_t, int, int, std::uint64_t, double, double>;

score score_of(const plan_knobs& knobs, const plan_knobs& base, std::uint64_t peak) {
  auto log_distance = [](std::uint64_t a, std::uint64_t b) {
    return std::abs(std::log2(static_cast<double>(std::max<std::uint64_t>(a, 1)) / static_cast<double>(std::max<std::uint64_t>(b, 1))));
  };
  const double distance = log_distance(knobs.group, base.group) + log_distance(knobs.new_tokens, base.new_tokens) +
                          log_distance(knobs.lora_rank, base.lora_rank);
  const std::uint64_t rows_per_pass = knobs.phase == plan_phase::generate ? knobs.batch : knobs.micro_batch;
  return {work_per_step(knobs), -static_cast<int>(offload_of(knobs)), knobs.grad_ckpt ? -1 : 0, rows_per_pass, -distance,
          -static_cast<double>(peak)};
}

class searcher {
 public:
  searcher(const model_architecture& model, const plan_knobs& base, std::uint64_t usable)
      : model_(model), base_(base), usable_(usable) {}

  void consider(const plan_knobs& knobs) {
    std::string message;
    if (!validate_knobs(model_, knobs, message)) return;
    ++explored_;
    const std::uint64_t peak = plan_memory(model_, knobs).peak_bytes;
    if (!smallest_ || peak < smallest_peak_) {
      smallest_ = knobs;
      smallest_peak_ = peak;
    }
    if (peak > usable_) return;
    ++fitting_;
    const score candidate = score_of(knobs, base_, peak);
    if (!best_ || candidate > best_score_) {
      best_ = knobs;
      best_score_ = candidate;
    }
  }

  std::uint64_t explored() const { return explored_; }
  std::uint64_t fitting() const { return fitting_; }
  const std::optional<plan_knobs>& best() const { return best_; }
  const std::optional<plan_knobs>& smallest() const { return smallest_; }
  std::uint64_t smallest_peak() const { return smallest_peak_; }

 private:
  const model_architecture& model_;
  const plan_knobs& base_;
  std::uint64_t usable_;
  std::uint64_t explored_ = 0;
  std::uint64_t fitting_ = 0;
  std::optional<plan_knobs> best_;
  score best_score_{};
  std::optional<plan_knobs> smallest_;
  std::uint64_t smallest_peak_ = 0;
};

void search(const plan_knobs& base, const search_space& space, searcher& out) {
  plan_knobs knobs = base;
  for (std::uint64_t rank : space.lora_ranks) {
    knobs.lora_rank = rank;
    for (offload_level offload : space.offloads) {
      set_offload(knobs, offload);
      for (bool checkpointing : space.checkpointing) {
        knobs.grad_ckpt = checkpointing;
        switch (base.phase) {
          case plan_phase::generate:
            for (std::uint64_t batch : space.batches) {
              knobs.batch = batch;
              out.consider(knobs);
            }
            break;
          case plan_phase::train:
            for (std::uint64_t effective : space.effective_batches) {
              for (std::uint64_t micro_batch : divisors(effective)) {
                knobs.micro_batch = micro_batch;
                knobs.grad_accum = effective / micro_batch;
                out.consider(knobs);
              }
            }
            break;
          case plan_phase::grpo_step:
            for (std::uint64_t group : space.groups) {
              knobs.group = group;
              for (std::uint64_t new_tokens : space.new_tokens) {
                knobs.new_tokens = new_tokens;
                for (std::uint64_t micro_batch : valid_micro_batches(group, base.prompts * group / base.gpus)) {
                  knobs.micro_batch = micro_batch;
                  out.consider(knobs);
                }
              }
            }
            break;
        }
      }
    }
  }
}

std::string knob_text(std::uint64_t value) { return fmt::format("{}", value); }

// The neighbours of `value` in `values`: one notch down and one up, where they exist.
std::vector<std::uint64_t> neighbours(const std::vector<std::uint64_t>& values, std::uint64_t value) {
  std::vector<std::uint64_t> result;
  auto it = std::lower_bound(values.begin(), values.end(), value);
  if (it != values.begin()) result.push_back(*std::prev(it));
  if (it != values.end() && *it == value) ++it;
  if (it != values.end()) result.push_back(*it);
  return result;
}

void add_what_if(const model_architecture& model, const fit_result& fit, const char* knob, std::string from,
                 std::string to, const plan_knobs& changed, std::vector<what_if_row>& rows) {
  std::string message;
  if (!validate_knobs(model, changed, message)) return;
  const std::uint64_t peak = plan_memory(model, changed).peak_bytes;
  what_if_row row;
  row.knob = knob;
  row.from = std::move(from);
  row.to = std::move(to);
  row.delta_bytes = static_cast<std::int64_t>(peak) - static_cast<std::int64_t>(fit.best_plan.peak_bytes);
  row.delta_percent = 100.0 * static_cast<double>(row.delta_bytes) / static_cast<double>(fit.best_plan.peak_bytes);
  row.fits = peak <= fit.usable_bytes;
  rows.push_back(std::move(row));
}

std::vector<what_if_row> what_if_table(const model_architecture& model, const fit_result& fit, const search_space& space) {
  std::vector<what_if_row> rows;
  const plan_knobs& best = fit.best;
  auto vary = [&](const char* knob, const std::vector<std::uint64_t>& values, std::uint64_t current, auto apply) {
    for (std::uint64_t value : neighbours(values, current)) {
      plan_knobs changed = best;
      apply(changed, value);
      add_what_if(model, fit, knob, knob_text(current), knob_text(value), changed, rows);
    }
  };
  switch (best.phase) {
    case plan_phase::generate:
      vary("batch", space.batches, best.batch, [](plan_knobs& k, std::uint64_t v) { k.batch = v; });
      break;
    case plan_phase::train: {
      const std::uint64_t effective = best.micro_batch * best.grad_accum;
      vary("micro-batch", divisors(effective), best.micro_batch, [effective](plan_knobs& k, std::uint64_t v) {
        k.micro_batch = v;
        k.grad_accum = effective / v;
      });
      vary("effective batch", space.effective_batches, effective, [&best](plan_knobs& k, std::uint64_t v) {
        k.micro_batch = at_most(divisors(v), best.micro_batch);
        k.grad_accum = v / k.micro_batch;
      });
      break;
    }
    case plan_phase::grpo_step: {
      vary("micro-batch", valid_micro_batches(best.group, best.prompts * best.group / best.gpus), best.micro_batch,
           [](plan_knobs& k, std::uint64_t v) { k.micro_batch = v; });
      // A new group size keeps the micro-batch when it stays valid, else the largest valid one below it.
      for (std::uint64_t group : neighbours(space.groups, best.group)) {
        plan_knobs changed = best;
        changed.group = group;
        changed.micro_batch = at_most(valid_micro_batches(group, best.prompts * group / best.gpus), best.micro_batch);
        std::string to = knob_text(group);
        if (changed.micro_batch != best.micro_batch) to += fmt::format(" (micro-batch {})", changed.micro_batch);
        add_what_if(model, fit, "group", knob_text(best.group), to, changed, rows);
      }
      vary("new tokens", space.new_tokens, best.new_tokens, [](plan_knobs& k, std::uint64_t v) { k.new_tokens = v; });
      break;
    }
  }
  if (best.phase != plan_phase::generate) {
    plan_knobs toggled = best;
    toggled.grad_ckpt = !best.grad_ckpt;
    add_what_if(model, fit, "grad checkpointing", best.grad_ckpt ? "on" : "off", best.grad_ckpt ? "off" : "on", toggled, rows);
    if (best.lora_rank > 0) {
      vary("LoRA rank", with_value(powers_of_two(1, 512), best.lora_rank), best.lora_rank,
           [](plan_knobs& k, std::uint64_t v) { k.lora_rank = v; });
    }
    std::vector<offload_level> levels = {offload_level::none, offload_level::optimizer};
    if (best.shard == shard_kind::fsdp) levels.push_back(offload_level::all);
    const auto current = offload_of(best);
    for (offload_level level : levels) {
      if (level == current || std::abs(static_cast<int>(level) - static_cast<int>(current)) != 1) continue;
      plan_knobs changed = best;
      set_offload(changed, level);
      add_what_if(model, fit, "offload", std::string(offload_name(current)), std::string(offload_name(level)), changed, rows);
    }
  }
  return rows;
}

}  // namespace

fit_result fit_configuration(const model_architecture& model, const plan_knobs& base, const fit_options& options) {
  fit_result fit;
  const plan_result base_plan = plan_memory(model, base);
  const std::uint64_t overhead = base_plan.overhead.cuda_context_bytes + base_plan.overhead.cublas_workspace_bytes;
  if (options.budget_bytes <= overhead) {
    fit.reason = fmt::format("the card's memory is less than the CUDA context and workspaces ({} bytes)", overhead);
    return fit;
  }
  fit.usable_bytes = static_cast<std::uint64_t>(static_cast<double>(options.budget_bytes - overhead) / (1.0 + options.fragmentation_margin));
  const search_space space = space_for(model, base, options);
  searcher out(model, base, fit.usable_bytes);
  search(base, space, out);
  fit.configurations = out.explored();
  fit.fitting = out.fitting();
  if (!out.best()) {
    if (out.smallest()) {
      fit.smallest = *out.smallest();
      fit.smallest_peak_bytes = out.smallest_peak();
      fit.reason = fmt::format("the smallest configuration tried needs {} bytes, {} are usable", out.smallest_peak(), fit.usable_bytes);
    } else {
      fit.reason = "no valid configuration in the search space";
    }
    return fit;
  }
  fit.found = true;
  fit.best = *out.best();
  fit.best_plan = plan_memory(model, fit.best);
  fit.what_if = what_if_table(model, fit, space);
  return fit;
}

}  // namespace rlmem
