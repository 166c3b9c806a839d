// SPDX-License-Identifier: MIT
// Leaks: sites whose live memory keeps growing from one step end to the next.

#include "analysis.hpp"

#include <algorithm>
#include <cstdlib>

namespace rlmem::detail {

namespace {

// A site leaks when, in at least two consecutive steps up to the last, every step end holds
// more of it than the one before, and the growth is new allocations kept alive (the live count
// grows too) or, over four or more steps, steady. Growth in step 1 alone is no leak: optimizer
// state and caches that fill once grow in the first step and then stay flat.
// `bytes` and `counts` hold the trace start, then each step end.
bool grows_like_a_leak(const site_series& series, std::size_t& first_growing_step) {
  if (series.bytes.size() < 3) return false;
  std::size_t last_step = series.bytes.size() - 1;
  auto grew = [&](std::size_t step) { return series.bytes[step] > series.bytes[step - 1]; };
  if (!grew(last_step)) return false;
  std::size_t first = last_step;
  while (first > 1 && grew(first - 1)) --first;
  std::size_t growing_steps = last_step - first + 1;
  if (growing_steps < 2) return false;
  bool count_grows = true;
  std::int64_t smallest = INT64_MAX;
  std::int64_t largest = 0;
  for (std::size_t step = first; step <= last_step; ++step) {
    count_grows = count_grows && series.counts[step] > series.counts[step - 1];
    std::int64_t delta = series.bytes[step] - series.bytes[step - 1];
    smallest = std::min(smallest, delta);
    largest = std::max(largest, delta);
  }
  bool steady = growing_steps >= 4 && smallest * 2 >= largest;
  first_growing_step = first;
  return count_grows || steady;
}

}  // namespace

std::vector<leak> detect_leaks(const std::vector<site_series>& series) {
  std::vector<leak> leaks;
  for (const site_series& one : series) {
    std::size_t first = 0;
    if (!grows_like_a_leak(one, first)) continue;
    std::size_t last = one.bytes.size() - 1;
    leak found;
    found.site = one.site;
    found.first_step = first;
    found.steps = last - first + 1;
    found.bytes_per_step = (one.bytes[last] - one.bytes[first - 1]) / static_cast<std::int64_t>(found.steps);
    found.live_bytes_at_end = one.bytes[last];
    found.live_count_at_end = one.counts[last];
    found.bytes_at_step_end = one.bytes;
    leaks.push_back(std::move(found));
  }
  std::sort(leaks.begin(), leaks.end(), [](const leak& a, const leak& b) {
    return a.bytes_per_step != b.bytes_per_step ? a.bytes_per_step > b.bytes_per_step : a.site.label < b.site.label;
  });
  return leaks;
}

}  // namespace rlmem::detail
