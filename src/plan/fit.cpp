// SPDX-License-Identifier: MIT
// --fit: starting from the user's configuration, what each knob changed alone does to the peak,
// and the configurations that fit, the one doing the most work per step first.

#include <rlmem/plan/plan.hpp>

#include "plan_refusal.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <tuple>

namespace rlmem {

std::uint64_t least_proposed(std::uint64_t value) noexcept { return value / 4 + (value % 4 != 0 ? 1 : 0) + (value == 0 ? 1 : 0); }

std::string_view fit_ranking_rule() noexcept {
  return "Ranked by tokens per step (most first), then speed (no offload, no recomputation, the log-probs as given, "
         "more rows per pass and per generation), then the algorithm's settings nearest yours, then the smaller peak.";
}

std::uint64_t work_per_step(const plan_knobs& knobs) {
  switch (knobs.phase) {
    case plan_phase::generate: return knobs.batch * knobs.new_tokens;
    case plan_phase::train: return knobs.micro_batch * knobs.grad_accum * knobs.seq_len;
    case plan_phase::grpo_step: return knobs.prompts * knobs.group * knobs.new_tokens;
  }
  return 0;
}

namespace {

constexpr std::array<std::pair<std::string_view, search_knob>, 5> search_knob_names = {{{"group", search_knob::group},
                                                                                         {"new-tokens", search_knob::new_tokens},
                                                                                         {"prompt-len", search_knob::prompt_len},
                                                                                         {"lora-r", search_knob::lora_rank},
                                                                                         {"batch", search_knob::batch}}};

}  // namespace

result<search_knob, plan_errc> parse_search_knob(std::string_view name) {
  for (const auto& [known, value] : search_knob_names) {
    if (name == known) return value;
  }
  return detail::refuse(plan_errc::unknown_search_knob,
                        fmt::format("--vary '{}': expected a comma list of group, new-tokens, prompt-len, lora-r, batch", name.substr(0, 40)));
}

std::string_view to_string(search_knob knob) noexcept {
  for (const auto& [name, value] : search_knob_names) {
    if (value == knob) return name;
  }
  return "?";
}

std::string why_not_varied(search_knob knob, const plan_knobs& knobs) {
  switch (knob) {
    case search_knob::group:
      if (knobs.phase != plan_phase::grpo_step) return "--vary group: only --phase grpo-step samples a group per prompt";
      break;
    case search_knob::new_tokens:
    case search_knob::prompt_len:
      if (knobs.phase == plan_phase::train) {
        return fmt::format("--vary {}: --phase train has no generation (its rows are --seq-len long)", to_string(knob));
      }
      break;
    case search_knob::lora_rank:
      if (knobs.phase == plan_phase::generate) return "--vary lora-r: --phase generate trains nothing";
      if (knobs.lora_rank == 0) return "--vary lora-r: full fine-tuning has no rank to vary; give --lora-r to start from";
      break;
    case search_knob::batch:
      if (knobs.phase == plan_phase::grpo_step) {
        return "--vary batch: grpo-step's batch is --prompts x --group (--vary group), trained in micro-batches the search "
               "already moves";
      }
      break;
  }
  return {};
}

namespace {

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

std::uint64_t rows_per_gpu(const plan_knobs& knobs) { return knobs.prompts * knobs.group / knobs.gpus; }

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

// Rows generated together in a grpo-step rollout (the generation batch): powers of two below a
// GPU's rows, and all of them (0). It changes how the rollout runs, not what it generates, so
// the default search moves it both ways.
std::vector<std::uint64_t> generation_batches(std::uint64_t rows) {
  std::vector<std::uint64_t> values = powers_of_two(1, rows > 1 ? rows - 1 : 0);
  values.push_back(0);
  return values;
}

std::uint64_t generated_together(const plan_knobs& knobs) { return generation_rows(knobs); }

// A group size for grpo-step, with the micro-batch kept when it stays valid, else the largest
// valid one below it.
void set_group(plan_knobs& knobs, std::uint64_t group, std::uint64_t micro_batch) {
  knobs.group = group;
  knobs.micro_batch = at_most(valid_micro_batches(group, knobs.prompts * group / knobs.gpus), micro_batch);
}

// train: the effective batch with the micro-batch kept where it divides it, else the largest divisor below.
void set_effective_batch(plan_knobs& knobs, std::uint64_t effective, std::uint64_t micro_batch) {
  knobs.micro_batch = at_most(divisors(effective), micro_batch);
  knobs.grad_accum = effective / knobs.micro_batch;
}

// The candidate values of each knob the search moves.
struct search_space {
  std::vector<std::uint64_t> groups;
  std::vector<std::uint64_t> new_tokens;
  std::vector<std::uint64_t> prompt_lens;
  std::vector<std::uint64_t> effective_batches;  ///< train: micro-batch x accumulation
  std::vector<std::uint64_t> batches;            ///< generate
  std::vector<bool> checkpointing;
  std::vector<std::uint64_t> lora_ranks;
  std::vector<offload_level> offloads;
  std::vector<logprob_impl> logprobs;
  bool opaque = false;  ///< rows per pass and per generation change nothing a --params policy holds
};

// Multiples of an eighth of `value`, `value` itself, none under least_proposed(value).
std::vector<std::uint64_t> eighths_of(std::uint64_t value, std::initializer_list<std::uint64_t> eighths) {
  std::vector<std::uint64_t> values;
  for (std::uint64_t eighth : eighths) values.push_back(std::max<std::uint64_t>(value * eighth / 8, least_proposed(value)));
  return with_value(values, value);
}

// The least group --vary proposes: a quarter of the user's, and at least 2 (a group of one has
// no advantage to compute), unless the user's is smaller.
std::uint64_t least_group(std::uint64_t group) { return std::min(group, std::max<std::uint64_t>(2, least_proposed(group))); }

std::vector<std::uint64_t> at_least(std::vector<std::uint64_t> values, std::uint64_t floor) {
  std::erase_if(values, [floor](std::uint64_t value) { return value < floor; });
  return values;
}

search_space space_for(const model_architecture& model, const plan_knobs& base, const fit_options& options) {
  const auto opened = [&](search_knob knob) { return (options.vary & search_bit(knob)) != 0; };
  search_space space;
  // From a quarter to four times the group and the length asked for: how far the card can go.
  space.groups = opened(search_knob::group)
                     ? with_value(powers_of_two(least_group(base.group), std::max<std::uint64_t>(4 * base.group, 2)), base.group)
                     : std::vector<std::uint64_t>{base.group};
  space.new_tokens = opened(search_knob::new_tokens) ? eighths_of(base.new_tokens, {2, 4, 6, 8, 12, 16, 24, 32})
                                                     : std::vector<std::uint64_t>{base.new_tokens};
  // A longer prompt adds no work: only shorter ones are tried, down to a quarter.
  space.prompt_lens = opened(search_knob::prompt_len) ? eighths_of(base.prompt_len, {2, 4, 6, 8})
                                                      : std::vector<std::uint64_t>{base.prompt_len};
  const std::uint64_t effective = base.micro_batch * base.grad_accum;
  if (opened(search_knob::batch)) {
    for (std::uint64_t scale : {1, 2, 4, 8, 16, 32}) space.effective_batches.push_back(std::max<std::uint64_t>(effective * scale / 4, 1));
    space.effective_batches = with_value(space.effective_batches, effective);
    space.batches = with_value(powers_of_two(1, std::max<std::uint64_t>(16 * base.batch, 1024)), base.batch);
  } else {
    space.effective_batches = {effective};
    // Generating the same rows in fewer at a time keeps the work of a generate call's rows.
    space.batches = with_value(powers_of_two(1, base.batch), base.batch);
  }
  // A policy given only as --params has no passes to checkpoint or score: its buffers and state alone.
  const bool opaque = model.opaque_params > 0;
  space.checkpointing = base.phase == plan_phase::generate || opaque ? std::vector<bool>{base.grad_ckpt} : std::vector<bool>{false, true};
  if (opened(search_knob::lora_rank) && base.phase != plan_phase::generate) {
    for (std::uint64_t rank : with_value(at_least(powers_of_two(8, 256), least_proposed(base.lora_rank)), base.lora_rank)) {
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
  space.logprobs = {base.logprob};
  // Chunked log-probs compute the same values without the full fp32 logits.
  if (base.phase != plan_phase::generate && base.logprob == logprob_impl::full && !opaque) space.logprobs.push_back(logprob_impl::chunked);
  space.opaque = opaque;
  return space;
}

// The knobs a configuration can differ from the user's in, as bits: a combination's identity.
enum change_bit : unsigned {
  changes_micro_batch = 1u << 0,
  changes_generation_batch = 1u << 1,
  changes_checkpointing = 1u << 2,
  changes_offload = 1u << 3,
  changes_logprob = 1u << 4,
  changes_group = 1u << 5,
  changes_new_tokens = 1u << 6,
  changes_prompt_len = 1u << 7,
  changes_lora_rank = 1u << 8,
  changes_batch = 1u << 9,
};

std::string on_off(bool on) { return on ? "on" : "off"; }
std::string number(std::uint64_t value) { return fmt::format("{}", value); }
std::string generation_batch_text(const plan_knobs& knobs) {
  return knobs.batch == 0 ? fmt::format("all {}", rows_per_gpu(knobs)) : number(knobs.batch);
}

std::vector<knob_change> changes_between(const plan_knobs& from, const plan_knobs& to, unsigned* bits = nullptr) {
  std::vector<knob_change> changes;
  unsigned mask = 0;
  auto note = [&](unsigned bit, const char* knob, std::string before, std::string after) {
    if (before == after) return;
    mask |= bit;
    changes.push_back({knob, std::move(before), std::move(after)});
  };
  if (from.phase == plan_phase::generate) {
    note(changes_batch, "batch", number(from.batch), number(to.batch));
  } else if (from.phase == plan_phase::train) {
    note(changes_batch, "effective batch", number(from.micro_batch * from.grad_accum), number(to.micro_batch * to.grad_accum));
    note(changes_micro_batch, "micro-batch", fmt::format("{} x {}", from.micro_batch, from.grad_accum),
         fmt::format("{} x {}", to.micro_batch, to.grad_accum));
  } else {
    note(changes_group, "group", number(from.group), number(to.group));
    note(changes_micro_batch, "micro-batch", number(from.micro_batch), number(to.micro_batch));
    // Rows generated together, as many or as few: "all 128" and "128 of 256" generate alike.
    if (generation_rows(from) != generation_rows(to)) {
      note(changes_generation_batch, "generation batch", generation_batch_text(from), generation_batch_text(to));
    }
  }
  if (from.phase != plan_phase::train) {
    note(changes_new_tokens, "new tokens", number(from.new_tokens), number(to.new_tokens));
    note(changes_prompt_len, "prompt length", number(from.prompt_len), number(to.prompt_len));
  }
  note(changes_lora_rank, "LoRA rank", number(from.lora_rank), number(to.lora_rank));
  note(changes_checkpointing, "grad checkpointing", on_off(from.grad_ckpt), on_off(to.grad_ckpt));
  note(changes_offload, "offload", std::string(to_string(offload_of(from))), std::string(to_string(offload_of(to))));
  note(changes_logprob, "log-probs", std::string(to_string(from.logprob)), std::string(to_string(to.logprob)));
  if (bits != nullptr) *bits = mask;
  return changes;
}

// Bigger is better: work, then speed (no offload, no recomputation, the log-probs as given,
// larger passes), then the algorithm knobs closest to the ones asked for, then the smaller peak.
using score = std::tuple<std::uint64_t, int, int, int, std::uint64_t, std::uint64_t, double, double>;

score score_of(const plan_knobs& knobs, const plan_knobs& base, std::uint64_t peak) {
  auto log_distance = [](std::uint64_t a, std::uint64_t b) {
    return std::abs(std::log2(static_cast<double>(std::max<std::uint64_t>(a, 1)) / static_cast<double>(std::max<std::uint64_t>(b, 1))));
  };
  const double distance = log_distance(knobs.group, base.group) + log_distance(knobs.new_tokens, base.new_tokens) +
                          log_distance(knobs.prompt_len, base.prompt_len) + log_distance(knobs.lora_rank, base.lora_rank);
  const std::uint64_t rows_per_pass = knobs.phase == plan_phase::generate ? knobs.batch : knobs.micro_batch;
  const std::uint64_t generated = knobs.phase == plan_phase::grpo_step ? generated_together(knobs) : 0;
  return {work_per_step(knobs), -static_cast<int>(offload_of(knobs)), knobs.grad_ckpt ? -1 : 0, knobs.logprob == base.logprob ? 0 : -1,
          rows_per_pass, generated, -distance, -static_cast<double>(peak)};
}

class searcher {
 public:
  searcher(const model_architecture& model, const plan_knobs& base, std::uint64_t usable, std::uint64_t host_memory)
      : model_(model), base_(base), usable_(usable), host_memory_(host_memory) {}

  void consider(const plan_knobs& knobs) {
    if (!validate_knobs(model_, knobs).ok()) return;
    ++explored_;
    const plan_result plan = plan_memory(model_, knobs);
    // A rollout engine that would refuse to start (the trainer now holds more at its init) runs nothing.
    if (!plan.engine.refusal.empty()) return;
    const std::uint64_t peak = plan.peak_bytes;
    if (!smallest_ || peak < smallest_peak_) {
      smallest_ = knobs;
      smallest_peak_ = peak;
    }
    if (peak > usable_ || !host_fits(plan, host_memory_)) return;
    ++fitting_;
    unsigned bits = 0;
    changes_between(base_, knobs, &bits);
    const score candidate = score_of(knobs, base_, peak);
    every_.push_back(found{candidate, knobs, peak});
    auto [it, inserted] = best_by_changes_.try_emplace(bits, found{candidate, knobs, peak});
    if (!inserted && candidate > it->second.rank) it->second = found{candidate, knobs, peak};
  }

  // Every configuration that fits, best first.
  std::vector<fit_candidate> every_fitting() {
    std::stable_sort(every_.begin(), every_.end(), [](const found& a, const found& b) { return a.rank > b.rank; });
    std::vector<fit_candidate> result;
    result.reserve(every_.size());
    for (const found& candidate : every_) result.push_back({candidate.knobs, candidate.peak, changes_between(base_, candidate.knobs)});
    return result;
  }

  // The best configuration of each set of changed knobs, best first, less those that change
  // more knobs than another that fits and does as well: every extra change has to buy something.
  std::vector<fit_candidate> combinations(std::size_t count) const {
    std::vector<std::pair<unsigned, const found*>> kept;
    for (const auto& [bits, candidate] : best_by_changes_) {
      bool needless = false;
      for (const auto& [other_bits, other] : best_by_changes_) {
        const bool fewer_changes = other_bits != bits && (other_bits & bits) == other_bits;
        if (fewer_changes && other.rank >= candidate.rank) needless = true;
      }
      if (!needless) kept.emplace_back(bits, &candidate);
    }
    std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a.second->rank > b.second->rank; });
    std::vector<fit_candidate> result;
    for (const auto& [bits, candidate] : kept) {
      if (result.size() == count) break;
      result.push_back({candidate->knobs, candidate->peak, changes_between(base_, candidate->knobs)});
    }
    return result;
  }

  std::uint64_t explored() const { return explored_; }
  std::uint64_t fitting() const { return fitting_; }
  const std::optional<plan_knobs>& smallest() const { return smallest_; }
  std::uint64_t smallest_peak() const { return smallest_peak_; }

 private:
  struct found {
    score rank;
    plan_knobs knobs;
    std::uint64_t peak = 0;
  };
  const model_architecture& model_;
  const plan_knobs& base_;
  std::uint64_t usable_;
  std::uint64_t host_memory_;  ///< a node's host memory (0: not checked)
  std::uint64_t explored_ = 0;
  std::uint64_t fitting_ = 0;
  std::map<unsigned, found> best_by_changes_;
  std::vector<found> every_;
  std::optional<plan_knobs> smallest_;
  std::uint64_t smallest_peak_ = 0;
};

void search(const plan_knobs& base, const search_space& space, searcher& out) {
  plan_knobs knobs = base;
  for (std::uint64_t rank : space.lora_ranks) {
    knobs.lora_rank = rank;
    for (offload_level offload : space.offloads) {
      set_offload(knobs, offload);
      for (logprob_impl logprob : space.logprobs) {
        knobs.logprob = logprob;
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
                const std::uint64_t rows = base.prompts * group / base.gpus;
                for (std::uint64_t prompt_len : space.prompt_lens) {
                  knobs.prompt_len = prompt_len;
                  for (std::uint64_t new_tokens : space.new_tokens) {
                    knobs.new_tokens = new_tokens;
                    for (std::uint64_t generation_batch : space.opaque ? std::vector<std::uint64_t>{base.batch} : generation_batches(rows)) {
                      knobs.batch = generation_batch;
                      for (std::uint64_t micro_batch :
                           space.opaque ? std::vector<std::uint64_t>{at_most(valid_micro_batches(group, rows), base.micro_batch)}
                                        : valid_micro_batches(group, rows)) {
                        knobs.micro_batch = micro_batch;
                        out.consider(knobs);
                      }
                    }
                  }
                }
              }
              break;
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------- what each knob alone does

using setter = std::function<void(plan_knobs&, std::uint64_t)>;

class what_if_table {
 public:
  what_if_table(const model_architecture& model, const plan_knobs& base, std::uint64_t base_peak, std::uint64_t usable,
                std::uint64_t host_memory, bool base_fits)
      : model_(model), base_(base), base_peak_(base_peak), usable_(usable), host_memory_(host_memory), base_fits_(base_fits) {}

  /// A change's peak and whether it fits the card (and the host), or nothing when the change
  /// makes the configuration invalid.
  struct outcome {
    std::uint64_t peak = 0;
    bool fits = false;
  };
  std::optional<outcome> outcome_of(const plan_knobs& changed) const {
    if (!validate_knobs(model_, changed).ok()) return std::nullopt;
    const plan_result plan = plan_memory(model_, changed);
    if (!plan.engine.refusal.empty()) return std::nullopt;  // the engine would not start
    return outcome{plan.peak_bytes, plan.peak_bytes <= usable_ && host_fits(plan, host_memory_)};
  }

  void add(const char* knob, std::string from, std::string to, const plan_knobs& changed, bool limit = false) {
    const auto result = outcome_of(changed);
    if (!result) return;
    for (what_if_row& row : rows_) {
      if (row.knob == knob && row.to == to) {  // a notch that is also the limit: one row
        row.limit = row.limit || limit;
        return;
      }
    }
    what_if_row row;
    row.knob = knob;
    row.from = std::move(from);
    row.to = std::move(to);
    row.peak_bytes = result->peak;
    row.saved_bytes = static_cast<std::int64_t>(base_peak_) - static_cast<std::int64_t>(result->peak);
    row.fits = result->fits;
    row.limit = limit;
    rows_.push_back(std::move(row));
  }

  /// A knob with ordered values: one notch down and up from the user's, and the limit: when the
  /// user's does not fit, the value nearest it (below) that fits; when it does, the furthest
  /// value above that still fits.
  void ordered(const char* knob, const std::vector<std::uint64_t>& values, std::uint64_t current, const setter& apply,
               const std::function<std::string(std::uint64_t)>& text) {
    const auto it = std::lower_bound(values.begin(), values.end(), current);
    auto above = it;
    if (above != values.end() && *above == current) ++above;
    std::optional<std::uint64_t> limit;
    if (!base_fits_) {
      for (auto below = it; below != values.begin();) {
        --below;
        if (fits(apply, *below)) {
          limit = *below;
          break;
        }
      }
    } else {
      for (auto up = above; up != values.end() && fits(apply, *up); ++up) limit = *up;
    }
    notches_and_limit(knob, values, current, apply, text, limit);
  }

  /// A length or count where every whole value from `lowest` to `highest` is valid: the limit is
  /// found by bisection (the peak grows with the value), the notches are `notches` within them.
  void whole(const char* knob, const std::vector<std::uint64_t>& notches, std::uint64_t current, std::uint64_t lowest,
             std::uint64_t highest, const setter& apply, const std::function<std::string(std::uint64_t)>& text = number) {
    // The largest value in [low, high] that fits, when `low` fits.
    auto bisect = [&](std::uint64_t low, std::uint64_t high) {
      while (low < high) {
        const std::uint64_t middle = low + (high - low + 1) / 2;
        if (fits(apply, middle)) {
          low = middle;
        } else {
          high = middle - 1;
        }
      }
      return low;
    };
    std::optional<std::uint64_t> limit;
    if (!base_fits_ && current > lowest && fits(apply, lowest)) limit = bisect(lowest, current - 1);
    if (base_fits_ && current < highest && fits(apply, current + 1)) limit = bisect(current + 1, highest);
    // At the end of the range the most that fits is not known: the notches show that it fits.
    if (limit == highest && base_fits_) limit.reset();
    notches_and_limit(knob, with_value(at_least(notches, lowest), current), current, apply, text, limit);
  }

  std::vector<what_if_row> take() { return std::move(rows_); }

 private:
  plan_knobs changed_to(const setter& apply, std::uint64_t value) const {
    plan_knobs changed = base_;
    apply(changed, value);
    return changed;
  }

  bool fits(const setter& apply, std::uint64_t value) const {
    const auto result = outcome_of(changed_to(apply, value));
    return result && result->fits;
  }

  void notches_and_limit(const char* knob, const std::vector<std::uint64_t>& values, std::uint64_t current, const setter& apply,
                         const std::function<std::string(std::uint64_t)>& text, std::optional<std::uint64_t> limit) {
    const auto it = std::lower_bound(values.begin(), values.end(), current);
    if (it != values.begin()) add(knob, text(current), text(*std::prev(it)), changed_to(apply, *std::prev(it)), limit == *std::prev(it));
    auto above = it;
    if (above != values.end() && *above == current) ++above;
    if (above != values.end()) add(knob, text(current), text(*above), changed_to(apply, *above), limit == *above);
    if (limit) add(knob, text(current), text(*limit), changed_to(apply, *limit), true);
  }

  const model_architecture& model_;
  const plan_knobs& base_;
  std::uint64_t base_peak_;
  std::uint64_t usable_;
  std::uint64_t host_memory_;
  bool base_fits_;
  std::vector<what_if_row> rows_;
};

// The largest a length or count may grow to in the what-if table: four times the user's.
std::uint64_t four_times(std::uint64_t value) { return value > (std::uint64_t{1} << 40) ? value : 4 * value; }

// Each knob alone. The algorithm's knobs (group, lengths, LoRA rank, effective batch) only where
// `vary` opens them, and never below a quarter of the user's value.
std::vector<what_if_row> each_knob_alone(const model_architecture& model, const plan_knobs& base, std::uint64_t base_peak,
                                         std::uint64_t usable, const fit_options& options, bool base_fits) {
  const unsigned vary = options.vary;
  what_if_table table(model, base, base_peak, usable, options.host_memory_bytes, base_fits);
  const auto as_number = [](std::uint64_t value) { return number(value); };
  const auto opened = [vary](search_knob knob) { return (vary & search_bit(knob)) != 0; };
  if (model.opaque_params > 0) {
    // Its buffers scale with the rows (the group) and the epochs; its state with offload.
    if (base.phase == plan_phase::grpo_step) {
      if (opened(search_knob::group)) {
        table.whole("group", with_value(powers_of_two(1, four_times(base.group)), base.group), base.group, least_group(base.group),
                    four_times(base.group), [&base](plan_knobs& k, std::uint64_t v) { set_group(k, v, base.micro_batch); });
      }
      table.whole("epochs", with_value(powers_of_two(1, four_times(base.epochs)), base.epochs), base.epochs, least_proposed(base.epochs),
                  four_times(base.epochs), [](plan_knobs& k, std::uint64_t v) { k.epochs = v; });
    }
    if (base.phase != plan_phase::generate && offload_of(base) != offload_level::optimizer) {
      plan_knobs changed = base;
      set_offload(changed, offload_level::optimizer);
      table.add("offload", std::string(to_string(offload_of(base))), std::string(to_string(offload_level::optimizer)), changed);
    }
    return table.take();
  }
  switch (base.phase) {
    case plan_phase::generate:
      table.whole("batch", powers_of_two(1, four_times(base.batch)), base.batch, 1, four_times(base.batch),
                  [](plan_knobs& k, std::uint64_t v) { k.batch = v; });
      break;
    case plan_phase::train: {
      const std::uint64_t effective = base.micro_batch * base.grad_accum;
      table.ordered("micro-batch", divisors(effective), base.micro_batch,
                    [effective](plan_knobs& k, std::uint64_t v) {
                      k.micro_batch = v;
                      k.grad_accum = effective / v;
                    },
                    [effective](std::uint64_t v) { return fmt::format("{} x {}", v, effective / v); });
      if (!opened(search_knob::batch)) break;
      std::vector<std::uint64_t> effective_batches;
      for (std::uint64_t scale : {1, 2, 4, 8, 16, 32}) effective_batches.push_back(std::max<std::uint64_t>(effective * scale / 4, 1));
      table.ordered("effective batch", with_value(at_least(effective_batches, least_proposed(effective)), effective), effective,
                    [&base](plan_knobs& k, std::uint64_t v) { set_effective_batch(k, v, base.micro_batch); }, as_number);
      break;
    }
    case plan_phase::grpo_step: {
      const std::uint64_t rows = rows_per_gpu(base);
      table.ordered("micro-batch", valid_micro_batches(base.group, rows), base.micro_batch,
                    [](plan_knobs& k, std::uint64_t v) { k.micro_batch = v; }, as_number);
      std::vector<std::uint64_t> batches = powers_of_two(1, rows);
      batches.push_back(rows);
      table.ordered("generation batch", with_value(batches, generated_together(base)), generated_together(base),
                    [rows](plan_knobs& k, std::uint64_t v) { k.batch = v >= rows ? 0 : v; }, as_number);
      const setter group_of = [&base](plan_knobs& k, std::uint64_t v) { set_group(k, v, base.micro_batch); };
      // A group that leaves the micro-batch invalid names the one it takes.
      const auto group_text = [&base, &group_of](std::uint64_t v) {
        plan_knobs changed = base;
        group_of(changed, v);
        return changed.micro_batch == base.micro_batch ? number(v) : fmt::format("{} (micro-batch {})", v, changed.micro_batch);
      };
      if (opened(search_knob::group)) {
        table.whole("group", with_value(powers_of_two(1, four_times(base.group)), base.group), base.group, least_group(base.group),
                    four_times(base.group), group_of, group_text);
      }
      break;
    }
  }
  if (base.phase != plan_phase::train && opened(search_knob::new_tokens)) {
    table.whole("new tokens", eighths_of(base.new_tokens, {2, 4, 6, 8, 12, 16}), base.new_tokens, least_proposed(base.new_tokens),
                four_times(base.new_tokens), [](plan_knobs& k, std::uint64_t v) { k.new_tokens = v; });
  }
  if (base.phase != plan_phase::train && opened(search_knob::prompt_len)) {
    // Only shorter prompts: a longer one adds no work.
    table.whole("prompt length", eighths_of(base.prompt_len, {2, 4, 6, 8}), base.prompt_len, least_proposed(base.prompt_len),
                base.prompt_len, [](plan_knobs& k, std::uint64_t v) { k.prompt_len = v; });
  }
  if (base.phase == plan_phase::generate) return table.take();
  if (base.lora_rank > 0 && opened(search_knob::lora_rank)) {
    table.ordered("LoRA rank", with_value(at_least(powers_of_two(1, 512), least_proposed(base.lora_rank)), base.lora_rank), base.lora_rank,
                  [](plan_knobs& k, std::uint64_t v) { k.lora_rank = v; }, as_number);
  }
  plan_knobs toggled = base;
  toggled.grad_ckpt = !base.grad_ckpt;
  table.add("grad checkpointing", on_off(base.grad_ckpt), on_off(toggled.grad_ckpt), toggled);
  const offload_level current = offload_of(base);
  for (offload_level level : {offload_level::none, offload_level::optimizer, offload_level::all}) {
    if (level == current || (level == offload_level::all && base.shard != shard_kind::fsdp)) continue;
    plan_knobs changed = base;
    set_offload(changed, level);
    table.add("offload", std::string(to_string(current)), std::string(to_string(level)), changed);
  }
  for (logprob_impl impl : {logprob_impl::full, logprob_impl::chunked, logprob_impl::fused}) {
    if (impl == base.logprob) continue;
    plan_knobs changed = base;
    changed.logprob = impl;
    table.add("log-probs", std::string(to_string(base.logprob)), std::string(to_string(impl)), changed);
  }
  if (base.phase == plan_phase::grpo_step) {
    for (reference_kind kind : {reference_kind::none, reference_kind::copy, reference_kind::adapter_disabled}) {
      if (kind == base.reference || (kind == reference_kind::adapter_disabled && base.lora_rank == 0)) continue;
      plan_knobs changed = base;
      changed.reference = kind;
      table.add("reference", std::string(to_string(base.reference)), std::string(to_string(kind)), changed);
    }
    if (base.old_logprobs) {
      plan_knobs changed = base;
      changed.old_logprobs = false;
      table.add("old log-probs", "on", "off", changed);
    }
  }
  // The hand-off and the engine's sleep level decide the host's parts: shown where the hand-off
  // is planned or the host checked (the search keeps them as given).
  if (base.engine.rollout != rollout_kind::hf && (base.handoff != handoff_kind::unmodelled || options.host_memory_bytes != 0)) {
    for (const handoff_kind mode : {handoff_kind::keep, handoff_kind::offload, handoff_kind::rlmem_pause}) {
      if (base.handoff == handoff_kind::unmodelled || mode == base.handoff) continue;
      plan_knobs changed = base;
      changed.handoff = mode;
      table.add("hand-off", std::string(to_string(base.handoff)), std::string(to_string(mode)), changed);
    }
    for (const std::uint32_t level : {0u, 1u, 2u}) {
      plan_knobs changed = base;
      changed.engine.sleep_level = level;
      if (level == base.engine.sleep_level || !validate_handoff_knobs(changed).ok()) continue;
      table.add("sleep level", std::to_string(base.engine.sleep_level), std::to_string(level), changed);
    }
  }
  return table.take();
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
  fit.your_peak_bytes = base_plan.peak_bytes;
  fit.yours_fits_card = base_plan.peak_bytes <= fit.usable_bytes;
  fit.host_memory_bytes = options.host_memory_bytes;
  fit.your_host_bytes = base_plan.host.per_node_bytes;
  fit.yours_fits = fit.yours_fits_card && host_fits(base_plan, options.host_memory_bytes);
  fit.what_if = each_knob_alone(model, base, base_plan.peak_bytes, fit.usable_bytes, options, fit.yours_fits);
  const search_space space = space_for(model, base, options);
  searcher out(model, base, fit.usable_bytes, options.host_memory_bytes);
  search(base, space, out);
  fit.configurations = out.explored();
  fit.fitting = out.fitting();
  fit.combinations = out.combinations(options.combinations);
  fit.every_fitting = out.every_fitting();
  if (fit.combinations.empty()) {
    if (out.smallest()) {
      fit.smallest = *out.smallest();
      fit.smallest_peak_bytes = out.smallest_peak();
      fit.reason = out.smallest_peak() <= fit.usable_bytes
                       ? fmt::format("the configurations that fit the card need more host memory than the {} bytes of --host-memory",
                                     options.host_memory_bytes)
                       : fmt::format("the smallest configuration searched needs {} bytes, {} are usable", out.smallest_peak(), fit.usable_bytes);
    } else {
      fit.reason = "no valid configuration in the search space";
    }
    return fit;
  }
  fit.found = true;
  fit.best = fit.combinations.front().knobs;
  fit.best_plan = plan_memory(model, fit.best);
  return fit;
}

}  // namespace rlmem
