// SPDX-License-Identifier: MIT
// Leaks: sites whose live memory keeps growing from one step end to the next.

#include "analysis.hpp"

#include <algorithm>
#include <cstdint>

namespace rlmem {

leak_trend leak_trend_of(std::span<const std::int64_t> bytes, std::span<const std::uint64_t> counts,
                         std::size_t min_steady_steps) noexcept {
  leak_trend trend;
  if (bytes.size() < 3) return trend;
  std::size_t last_step = bytes.size() - 1;
  auto grew = [&](std::size_t step) { return bytes[step] > bytes[step - 1]; };
  if (!grew(last_step)) return trend;
  std::size_t first = last_step;
  while (first > 1 && grew(first - 1)) --first;
  std::size_t growing_steps = last_step - first + 1;
  if (growing_steps < 2) return trend;
  // Growth is measured in unsigned arithmetic: each delta of the growing run is positive, so its
  // true value fits in 64 unsigned bits even when the figures span the whole int64 range.
  auto growth = [&](std::size_t step) { return static_cast<std::uint64_t>(bytes[step]) - static_cast<std::uint64_t>(bytes[step - 1]); };
  bool count_grows = counts.size() == bytes.size();
  std::uint64_t smallest = UINT64_MAX;
  std::uint64_t largest = 0;
  for (std::size_t step = first; step <= last_step; ++step) {
    count_grows = count_grows && counts[step] > counts[step - 1];
    smallest = std::min(smallest, growth(step));
    largest = std::max(largest, growth(step));
  }
  bool steady = growing_steps >= min_steady_steps && smallest >= largest - smallest;  // smallest * 2 >= largest
  if (!count_grows && !steady) return trend;
  trend.leaking = true;
  trend.first_step = first;
  trend.steps = growing_steps;
  std::uint64_t total = static_cast<std::uint64_t>(bytes[last_step]) - static_cast<std::uint64_t>(bytes[first - 1]);
  trend.bytes_per_step = static_cast<std::int64_t>(std::min<std::uint64_t>(total / growing_steps, INT64_MAX));
  return trend;
}

namespace detail {

std::vector<leak> detect_leaks(const std::vector<site_series>& series) {
  std::vector<leak> leaks;
  for (const site_series& one : series) {
    leak_trend trend = leak_trend_of(one.bytes, one.counts);
    if (!trend.leaking) continue;
    std::size_t last = one.bytes.size() - 1;
    leak found;
    found.site = one.site;
    found.first_step = trend.first_step;
    found.steps = trend.steps;
    found.bytes_per_step = trend.bytes_per_step;
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

}  // namespace detail

}  // namespace rlmem
