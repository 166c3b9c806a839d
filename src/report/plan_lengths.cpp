// SPDX-License-Identifier: MIT
// The responses' lengths in `rlmem plan`: each percentile's peak, the longest response that fits,
// and how likely a step is to draw a longer one.

#include "plan_lengths.hpp"

#include "prose.hpp"

#include <rlmem/base/format.hpp>

#include <fmt/format.h>

#include <cmath>

namespace rlmem::detail {

namespace {

std::string bytes_text(std::uint64_t bytes) { return format_bytes(static_cast<std::int64_t>(bytes)); }

std::string chance_text(double probability) {
  if (probability > 0 && probability < 0.0005) return "<0.1%";
  if (probability < 1 && probability > 0.9995) return ">99.9%";
  return fmt::format("{:.1f}%", 100 * probability);
}

std::string plans_text(std::uint64_t plans) { return fmt::format("{} plan{}", plans, plans == 1 ? "" : "s"); }

constexpr const char* assumption =
    "samples independent, the share at most L tokens linear between the percentiles given, from 0 at 0 tokens to 1 at the max";

// What the view means for the run: where it stops fitting and how soon a step gets there.
std::string verdict(const length_view& view, const std::string& card) {
  const std::string usable = fmt::format("the {} usable on {}", bytes_text(view.usable_bytes), card);
  if (view.fitting_length >= view.max_length) {
    return fmt::format("Every response up to the longest the data allows ({} tokens) fits {}: no sample can push the step over "
                       "the card ({}, bisection on the response length).",
                       format_count(view.max_length), usable, plans_text(view.plans_evaluated));
  }
  if (view.fitting_length == 0) {
    return fmt::format("Even 1-token responses do not fit {} (the step needs {}): the lengths are not what overflows.", usable,
                       bytes_text(view.peak_after_fitting_bytes));
  }
  std::string text = fmt::format(
      "The step fits up to {} tokens of response: at {} it needs {}, over {} (bisection on the response length to the token, "
      "{}). The run overflows the card in the first step that draws a response longer than {} tokens.",
      format_count(view.fitting_length), format_count(view.fitting_length + 1), bytes_text(view.peak_after_fitting_bytes), usable,
      plans_text(view.plans_evaluated), format_count(view.fitting_length));
  if (!view.has_quantiles) {
    return text + " Give --response-len-percentiles (e.g. p50=300,p90=800,p99=1500) for the chance per step.";
  }
  const double chance = view.step_draws_longer_than_fitting;
  text += fmt::format(" With {} samples per step ({}), P(a step draws one) = 1 - F({})^{} = {}", format_count(view.samples_per_step),
                      assumption, format_count(view.fitting_length), view.samples_per_step, chance_text(chance));
  const double steps = chance > 0 ? 1 / chance : 0;
  if (steps >= 1.5) text += fmt::format(": the first overflow comes after about {} steps on average (1/P).", format_count(static_cast<std::uint64_t>(std::llround(steps))));
  else if (chance > 0) text += ": nearly every step overflows.";
  else text += ".";
  return text;
}

}  // namespace

void append_length_view(std::string& out, const plan_report& report) {
  if (!report.response_lengths) return;
  const length_view& view = *report.response_lengths;
  const std::size_t width = report.width;
  out += "\n" + wrap(fmt::format("Response lengths: a padded pass is as long as its longest sample, so the step's peak follows "
                                 "the longest response a step draws, up to {} tokens ({}the phases above are planned at "
                                 "--new-tokens {}).",
                                 format_count(view.max_length), view.max_length < report.knobs.new_tokens ? "--response-len-max; " : "",
                                 format_count(report.knobs.new_tokens)),
                     0, width);
  std::string header = fmt::format("  {:<10} {:>9} {:>10}  {:<13}{}{}", "response", "tokens", "peak", "phase", view.has_card ? " fits" : "",
                                   view.has_quantiles ? "  P(a step draws longer)" : "");
  while (!header.empty() && header.back() == ' ') header.pop_back();
  out += header + "\n";
  for (const length_point& point : view.points) {
    std::string line = fmt::format("  {:<10} {:>9} {:>10}  {:<13}", printable_text(point.label), format_count(point.length),
                                   point.peak_phase.empty() ? "-" : bytes_text(point.peak_bytes), point.peak_phase);
    if (view.has_card) line += fmt::format(" {:<4}", point.fits ? "yes" : "no");
    if (view.has_quantiles) line += fmt::format("  {}", chance_text(point.step_draws_longer));
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  if (view.has_card) {
    out += wrap(verdict(view, printable_text(report.response_lengths_card)), 0, width);
  } else {
    out += wrap("Give --fit CARD (or --card with an engine) for the length at which the step stops fitting.", 0, width);
  }
}

nlohmann::ordered_json length_view_json(const plan_report& report) {
  const length_view& view = *report.response_lengths;
  nlohmann::ordered_json out;
  out["max_length"] = view.max_length;
  out["planned_new_tokens"] = report.knobs.new_tokens;
  out["samples_per_step"] = view.samples_per_step;
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const length_point& point : view.points) {
    nlohmann::ordered_json item = {{"label", point.label}, {"fraction", point.fraction}, {"length", point.length}};
    item["peak_bytes"] = point.peak_bytes;
    item["peak_phase"] = point.peak_phase;
    if (view.has_card) item["fits"] = point.fits;
    if (view.has_quantiles) item["step_draws_longer"] = point.step_draws_longer;
    points.push_back(std::move(item));
  }
  out["points"] = points;
  if (view.has_quantiles) out["assumption"] = assumption;
  if (view.has_card) {
    out["card"] = report.response_lengths_card;
    out["usable_bytes"] = view.usable_bytes;
    out["fitting_length"] = view.fitting_length;
    out["fits_at_max"] = view.fitting_length >= view.max_length;
    if (view.fitting_length < view.max_length) out["peak_after_fitting_bytes"] = view.peak_after_fitting_bytes;
    out["search_granularity_tokens"] = 1;
    out["plans_evaluated"] = view.plans_evaluated;
    if (view.has_quantiles) out["step_draws_longer_than_fitting"] = view.step_draws_longer_than_fitting;
  }
  return out;
}

}  // namespace rlmem::detail
