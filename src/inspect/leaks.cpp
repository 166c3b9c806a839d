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

std::vector<leak> detect_leaks(const std::vector<site_series>& series, std::size_t step_ends, std::size_t max_leaks,
                               std::size_t& growing) {
  struct candidate {
    const site_series* one;
    leak_trend trend;
  };
  std::vector<candidate> found;
  std::vector<std::int64_t> bytes;
  std::vector<std::uint64_t> counts;
  for (const site_series& one : series) {
    // A leak grows at the last step end, and at every step end of its growing run: the run is
    // within the last stretch of consecutive step ends at which the series changed.
    if (one.steps.empty() || one.steps.back() + std::size_t{1} != step_ends) continue;
    std::size_t run = one.steps.size() - 1;
    while (run > 0 && one.steps[run - 1] + 1 == one.steps[run]) --run;
    bytes.clear();
    counts.clear();
    std::size_t offset = 0;  // step end of bytes[0]
    if (one.steps[run] > 0) {
      // The figures held at the step end before the run: the previous change's, or none yet.
      offset = one.steps[run] - 1;
      bytes.push_back(run > 0 ? one.bytes[run - 1] : 0);
      counts.push_back(run > 0 ? one.counts[run - 1] : 0);
    }
    bytes.insert(bytes.end(), one.bytes.begin() + static_cast<std::ptrdiff_t>(run), one.bytes.end());
    counts.insert(counts.end(), one.counts.begin() + static_cast<std::ptrdiff_t>(run), one.counts.end());
    leak_trend trend = leak_trend_of(bytes, counts);
    if (!trend.leaking) continue;
    trend.first_step += offset;
    found.push_back({&one, trend});
  }
  growing = found.size();
  auto faster = [](const candidate& a, const candidate& b) {
    return a.trend.bytes_per_step != b.trend.bytes_per_step ? a.trend.bytes_per_step > b.trend.bytes_per_step
                                                            : a.one->site.label < b.one->site.label;
  };
  std::size_t kept = std::min(max_leaks, found.size());
  std::partial_sort(found.begin(), found.begin() + static_cast<std::ptrdiff_t>(kept), found.end(), faster);
  found.resize(kept);
  std::vector<leak> leaks;
  for (const candidate& chosen : found) {
    const site_series& one = *chosen.one;
    leak made;
    made.site = one.site;
    made.first_step = chosen.trend.first_step;
    made.steps = chosen.trend.steps;
    made.bytes_per_step = chosen.trend.bytes_per_step;
    made.live_bytes_at_end = one.bytes.back();
    made.live_count_at_end = one.counts.back();
    made.bytes_at_step_end.assign(step_ends, 0);
    for (std::size_t change = 0; change < one.steps.size(); ++change) {
      std::size_t until = change + 1 < one.steps.size() ? one.steps[change + 1] : step_ends;
      std::fill(made.bytes_at_step_end.begin() + one.steps[change], made.bytes_at_step_end.begin() + static_cast<std::ptrdiff_t>(until),
                one.bytes[change]);
    }
    leaks.push_back(std::move(made));
  }
  return leaks;
}

}  // namespace detail

}  // namespace rlmem
