// SPDX-License-Identifier: MIT
// `rlmem plan --response-len-max N --response-len-percentiles p50=..,p90=.. | --response-lens FILE`.

#include "plan_lengths.hpp"

#include "arguments.hpp"
#include "output.hpp"

#include <rlmem/base/regular_file.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

namespace rlmem::cli {

namespace {

// A file of observed response lengths (one whole number of tokens per line; blank lines and
// lines starting with # are skipped) into its p50, p90, p99 (and p99.9 from 1,000 samples on),
// each the nearest-rank percentile.
bool quantiles_of_file(const std::string& path, std::uint64_t max_length, std::vector<length_quantile>& quantiles) {
  auto read = read_option_file(path);
  if (!read.ok()) return refuse(read.failure().detail);
  const std::string& text = read.value();
  std::vector<std::uint64_t> lengths;
  std::istringstream lines(text);
  std::size_t number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    const std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    std::uint64_t length = 0;
    const auto [end, ec] = std::from_chars(line.data() + first, line.data() + line.size(), length);
    if (ec != std::errc() || end != line.data() + line.size() || length == 0) {
      return refuse(fmt::format("--response-lens {}: line {} is '{}', not a length in tokens (one whole number of at least 1 per line)", path,
                              number, printable_text(line.substr(0, 40))));
    }
    if (length > max_length) {
      return refuse(fmt::format("--response-lens {}: line {} is {} tokens, beyond the longest response, {} (--response-len-max, else "
                              "--new-tokens)",
                              path, number, length, max_length));
    }
    lengths.push_back(length);
  }
  if (lengths.size() < 100) {
    return refuse(fmt::format("--response-lens {}: {} lengths; a p99 needs at least 100 (give --response-len-percentiles instead)", path,
                            lengths.size()));
  }
  std::sort(lengths.begin(), lengths.end());
  std::vector<std::pair<const char*, double>> wanted = {{"p50", 0.50}, {"p90", 0.90}, {"p99", 0.99}};
  if (lengths.size() >= 1000) wanted.emplace_back("p99.9", 0.999);
  for (const auto& [label, fraction] : wanted) {
    // Nearest rank: the smallest length with at least `fraction` of the samples at or below it.
    const auto rank = static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(lengths.size()) - 1e-9));
    quantiles.push_back({label, fraction, lengths[std::max<std::size_t>(rank, 1) - 1]});
  }
  return true;
}

}  // namespace

void add_length_options(CLI::App* command, length_arguments& lengths) {
  auto* group = "Response lengths";
  command->add_option("--response-len-max", lengths.max_length,
                      "generate, grpo-step: the longest response the data allows (default\n"
                      "--new-tokens, the generation's cap): the step's peak along the lengths")
      ->check(whole_number_in(1, std::numeric_limits<std::uint64_t>::max()))
      ->group(group);
  command->add_option("--response-len-percentiles", lengths.percentiles,
                      "the responses' length percentiles, e.g. p50=300,p90=800,p99=1500:\n"
                      "each one's peak and the chance a step draws a longer response")
      ->group(group);
  command->add_option("--response-lens", lengths.lengths_file,
                      "a file of observed response lengths in tokens, one per line (at\n"
                      "least 100): their p50, p90, p99 (p99.9 from 1,000) as percentiles")
      ->group(group);
}

bool length_view_asked(const CLI::App& command) {
  return command.count("--response-len-max") > 0 || command.count("--response-len-percentiles") > 0 || command.count("--response-lens") > 0;
}

bool plan_length_view(const length_arguments& lengths, plan_report& report, std::uint64_t usable_bytes, const std::string& card) {
  const plan_knobs& knobs = report.knobs;
  if (knobs.phase == plan_phase::train) {
    return refuse("--response-len-* apply to --phase generate and grpo-step, whose responses are --new-tokens long; train's rows are --seq-len");
  }
  if (report.model.opaque_params > 0) return refuse("--response-len-* need the policy's architecture (--model), not --params");
  if (!lengths.percentiles.empty() && !lengths.lengths_file.empty()) {
    return refuse("--response-len-percentiles and --response-lens both give the lengths' distribution; give one");
  }
  length_view_options options;
  options.max_length = lengths.max_length != 0 ? lengths.max_length : knobs.new_tokens;
  if (options.max_length > knobs.new_tokens) {
    return refuse(fmt::format("--response-len-max {} is beyond --new-tokens {}, the generation's cap: no response is longer (raise --new-tokens)",
                            options.max_length, knobs.new_tokens));
  }
  if (!lengths.percentiles.empty()) {
    auto quantiles = parse_length_quantiles(lengths.percentiles);
    if (!quantiles.ok()) return refuse("--response-len-percentiles " + quantiles.failure().detail);
    options.quantiles = std::move(quantiles).value();
    for (const length_quantile& quantile : options.quantiles) {
      if (quantile.length > options.max_length) {
        return refuse(fmt::format("--response-len-percentiles {}={} is beyond the longest response, {} (--response-len-max, else --new-tokens)",
                                quantile.label, quantile.length, options.max_length));
      }
    }
  }
  if (!lengths.lengths_file.empty() && !quantiles_of_file(lengths.lengths_file, options.max_length, options.quantiles)) return false;
  options.usable_bytes = usable_bytes;
  report.response_lengths = plan_response_lengths(report.model, knobs, options);
  report.response_lengths_card = card;
  return true;
}

}  // namespace rlmem::cli
