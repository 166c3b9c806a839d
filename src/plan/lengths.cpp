// SPDX-License-Identifier: MIT
// Response lengths as a distribution: a padded pass is as long as its longest sample, so the
// step's peak follows the longest response a step draws; the run overflows the card in the first
// step that draws one longer than the longest that fits.

#include <rlmem/plan/plan.hpp>

#include "plan_refusal.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <optional>

namespace rlmem {

namespace {

// "p99.9" -> 0.999; nullopt unless a p and a number in (0, 100).
std::optional<double> percentile_fraction(std::string_view label) {
  if (label.size() < 2 || label.front() != 'p') return std::nullopt;
  double percent = 0;
  const char* first = label.data() + 1;
  const char* last = label.data() + label.size();
  const auto [end, ec] = std::from_chars(first, last, percent);
  if (ec != std::errc() || end != last || !(percent > 0 && percent < 100)) return std::nullopt;
  return percent / 100;
}

// The step's peak with every response `length` tokens long; nullopt when the knobs are invalid
// at that length or the engine would refuse to start.
struct length_planner {
  const model_architecture& model;
  plan_knobs knobs;
  std::uint64_t evaluated = 0;

  std::optional<plan_result> at(std::uint64_t length) {
    plan_knobs changed = knobs;
    changed.new_tokens = length;
    ++evaluated;
    if (!validate_knobs(model, changed).ok()) return std::nullopt;
    plan_result plan = plan_memory(model, changed);
    if (!plan.engine.refusal.empty() || plan.out_of_range) return std::nullopt;
    return plan;
  }
  bool fits(std::uint64_t length, std::uint64_t usable) {
    const auto plan = at(length);
    return plan && plan->peak_bytes <= usable;
  }
};

// 1 - cdf^samples without the cancellation of 1 - (1 - 1e-9)^64.
double draws_longer(double cdf, std::uint64_t samples) {
  if (cdf >= 1) return 0;
  if (cdf <= 0) return 1;
  return -std::expm1(static_cast<double>(samples) * std::log1p(-(1 - cdf)));
}

}  // namespace

result<std::vector<length_quantile>, plan_errc> parse_length_quantiles(std::string_view text) {
  using detail::refuse;
  std::vector<length_quantile> quantiles;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    start = comma + 1;
    const std::size_t equals = item.find('=');
    const std::string_view label = item.substr(0, equals);
    const auto fraction = percentile_fraction(label);
    std::uint64_t length = 0;
    if (equals != std::string_view::npos) {
      const std::string_view number = item.substr(equals + 1);
      const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), length);
      if (ec != std::errc() || end != number.data() + number.size()) length = 0;
    }
    if (!fraction || length == 0) {
      return refuse(plan_errc::invalid_quantiles,
                    fmt::format("'{}': expected pNN=TOKENS (a percentile between 0 and 100 and a length of at least 1), e.g. p50=300",
                                item.substr(0, 40)));
    }
    if (!quantiles.empty() && *fraction <= quantiles.back().fraction) {
      return refuse(plan_errc::invalid_quantiles, fmt::format("'{}' comes after {}: give the percentiles in increasing order, each once",
                                                              item.substr(0, 40), quantiles.back().label));
    }
    if (!quantiles.empty() && length < quantiles.back().length) {
      return refuse(plan_errc::invalid_quantiles, fmt::format("{}={} is shorter than {}={}: a higher percentile cannot be a shorter length",
                                                              label, length, quantiles.back().label, quantiles.back().length));
    }
    quantiles.push_back({std::string(label), *fraction, length});
    if (comma == text.size()) break;
  }
  return quantiles;
}

double length_cdf(const std::vector<length_quantile>& quantiles, std::uint64_t max_length, std::uint64_t length) {
  if (length >= max_length) return 1;
  double below_fraction = 0;
  double below_length = 0;
  for (const length_quantile& quantile : quantiles) {
    if (static_cast<double>(length) < static_cast<double>(quantile.length)) {
      const double span = static_cast<double>(quantile.length) - below_length;
      return below_fraction + (quantile.fraction - below_fraction) * (static_cast<double>(length) - below_length) / span;
    }
    below_fraction = quantile.fraction;
    below_length = static_cast<double>(quantile.length);
  }
  const double span = static_cast<double>(max_length) - below_length;
  return below_fraction + (1 - below_fraction) * (static_cast<double>(length) - below_length) / span;
}

length_view plan_response_lengths(const model_architecture& model, const plan_knobs& knobs, const length_view_options& options) {
  length_view view;
  view.max_length = options.max_length;
  view.has_card = options.usable_bytes > 0;
  view.has_quantiles = !options.quantiles.empty();
  view.usable_bytes = options.usable_bytes;
  view.samples_per_step = knobs.phase == plan_phase::grpo_step ? knobs.prompts * knobs.group : knobs.batch * knobs.gpus;
  length_planner planner{model, knobs};
  // Sized before the run for the longest response, whatever a step draws.
  if (planner.knobs.engine.max_model_len == 0) planner.knobs.engine.max_model_len = knobs.prompt_len + options.max_length;
  if (planner.knobs.kv_cache == kv_cache_kind::prealloc && planner.knobs.kv_len == 0) planner.knobs.kv_len = knobs.prompt_len + options.max_length;

  std::vector<length_quantile> points = options.quantiles;
  points.push_back({"max", 1.0, options.max_length});
  for (const length_quantile& quantile : points) {
    length_point point;
    point.label = quantile.label;
    point.fraction = quantile.fraction;
    point.length = quantile.length;
    if (const auto plan = planner.at(quantile.length)) {
      point.peak_bytes = plan->peak_bytes;
      point.peak_phase = plan->peak_phase;
    }
    point.fits = view.has_card && !point.peak_phase.empty() && point.peak_bytes <= options.usable_bytes;
    if (view.has_quantiles) {
      point.step_draws_longer = draws_longer(length_cdf(options.quantiles, options.max_length, quantile.length), view.samples_per_step);
    }
    view.points.push_back(std::move(point));
  }
  if (!view.has_card) return view;
  const std::uint64_t evaluated_before = planner.evaluated;
  const std::uint64_t usable = options.usable_bytes;
  if (planner.fits(options.max_length, usable)) {
    view.fitting_length = options.max_length;
  } else if (planner.fits(1, usable)) {
    std::uint64_t fits = 1;
    std::uint64_t overflows = options.max_length;  // invariant: fits(fits), !fits(overflows)
    while (overflows - fits > 1) {
      const std::uint64_t middle = fits + (overflows - fits) / 2;
      (planner.fits(middle, usable) ? fits : overflows) = middle;
    }
    view.fitting_length = fits;
  }
  if (view.fitting_length < options.max_length) {
    if (const auto after = planner.at(view.fitting_length + 1)) view.peak_after_fitting_bytes = after->peak_bytes;
  }
  view.plans_evaluated = planner.evaluated - evaluated_before;
  if (view.has_quantiles) {
    view.step_draws_longer_than_fitting =
        draws_longer(length_cdf(options.quantiles, options.max_length, view.fitting_length), view.samples_per_step);
  }
  return view;
}

}  // namespace rlmem
