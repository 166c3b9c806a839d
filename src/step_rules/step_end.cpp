// SPDX-License-Identifier: MIT
// The rules of one step end over a job's recent step ends: leak (the growth rule on allocated),
// fragmentation, alloc retries, OOMs, headroom with its forecast, and imbalance across ranks.

#include <rlmem/base/saturating.hpp>
#include <rlmem/step_rules/step_rules.hpp>

#include <algorithm>
#include <vector>

namespace rlmem {

namespace {

std::int64_t peak_of(const step_sample& sample) { return std::max(sample.step_peak_allocated, sample.allocated); }

}  // namespace

step_judgment judge_step(std::span<const step_sample> history, std::int64_t peak_allocated_before, const step_rules& rules) {
  step_judgment judged;
  if (history.empty()) return judged;
  const std::size_t n = history.size();
  const step_sample& last = history.back();

  // The largest allocated peak seen up to each step end: what the cache had to serve by then.
  std::vector<std::int64_t> peak_seen(n);
  std::int64_t running = std::max<std::int64_t>(peak_allocated_before, 0);
  for (std::size_t i = 0; i < n; ++i) {
    running = std::max(running, peak_of(history[i]));
    peak_seen[i] = running;
  }
  auto unused_at = [&](std::size_t i) { return std::max<std::int64_t>(0, saturating_subtract(history[i].reserved, peak_seen[i])); };
  judged.peak_allocated_seen = running;
  judged.unused_reserved = unused_at(n - 1);

  // Leak: the growth rule over the newest `leak_window` step ends' allocated bytes.
  const std::size_t window = std::min(n, std::max<std::size_t>(rules.leak_window, 3));
  const std::size_t offset = n - window;
  std::vector<std::int64_t> allocated(window);
  for (std::size_t i = 0; i < window; ++i) allocated[i] = history[offset + i].allocated;
  judged.leak = judge_growth(allocated, rules.leak);
  judged.leak.first += offset;
  if (judged.leak.events > 0) judged.leak.last_event += offset;
  if (judged.leak.first >= 1) judged.leak_count_before = history[judged.leak.first - 1].allocations;

  // Fragmentation: reserved beyond every peak seen, large, and grown with reserved over the window.
  judged.fragmented = judged.unused_reserved >= rules.fragmentation_bytes &&
                      static_cast<double>(judged.unused_reserved) >= rules.fragmentation_fraction * static_cast<double>(last.reserved);
  if (n > rules.fragmentation_window) {
    const std::size_t old = n - 1 - rules.fragmentation_window;
    judged.fragmentation_steps = rules.fragmentation_window;
    judged.fragmentation_growth = saturating_subtract(judged.unused_reserved, unused_at(old));
    judged.fragmentation = judged.fragmented && last.reserved > history[old].reserved && judged.fragmentation_growth > 0;
  }

  // Retries and OOMs: the cumulative counters rose since the step end before.
  if (n >= 2) {
    const step_sample& before = history[n - 2];
    judged.new_alloc_retries = std::max<std::int64_t>(0, saturating_subtract(last.num_alloc_retries, before.num_alloc_retries));
    judged.alloc_retries = judged.new_alloc_retries > 0;
    judged.new_ooms = std::max<std::int64_t>(0, saturating_subtract(last.num_ooms, before.num_ooms));
    judged.oom = judged.new_ooms > 0;
  }

  // Headroom at the step's peak, and how many steps the leak leaves before the peak passes it.
  const std::int64_t peak_reserved = last.step_peak_reserved >= 0 ? std::max(last.step_peak_reserved, last.reserved)
                                                                   : std::max(last.reserved, last.step_peak_allocated);
  judged.outside_bytes = std::max<std::int64_t>(
      0, saturating_subtract(saturating_subtract(last.device_total, last.device_free), last.reserved));
  if (last.limit > 0) {
    // A process cap (set_per_process_memory_fraction) counts PyTorch's reserved memory alone.
    judged.limit_bytes = last.limit;
    judged.free_at_peak = saturating_subtract(last.limit, peak_reserved);
  } else {
    judged.limit_bytes = last.device_total;
    judged.free_at_peak = saturating_subtract(saturating_subtract(last.device_total, judged.outside_bytes), peak_reserved);
  }
  if (judged.leak.growing && judged.leak.bytes_per_step > 0) {
    // What the step's allocated peak may still grow by: the cache reserved beyond it is reused
    // (or given back and mapped again on a retry), so the limit is passed when the allocated
    // peak, grown by the leak, no longer fits beside what others hold.
    const std::int64_t peak_allocated = std::max(last.step_peak_allocated, last.allocated);
    const std::int64_t room = last.limit > 0 ? saturating_subtract(last.limit, peak_allocated)
                                             : saturating_subtract(saturating_subtract(last.device_total, judged.outside_bytes), peak_allocated);
    const std::int64_t rate = judged.leak.bytes_per_step;
    judged.steps_to_limit = room <= 0 ? 0 : room / rate + (room % rate != 0);
  }
  if (judged.limit_bytes > 0) {
    const bool thin = static_cast<double>(judged.free_at_peak) < rules.headroom_fraction * static_cast<double>(judged.limit_bytes);
    const bool soon = rules.headroom_steps > 0 && judged.steps_to_limit && *judged.steps_to_limit < rules.headroom_steps;
    judged.headroom = thin || soon;
  }
  return judged;
}

imbalance_verdict judge_imbalance(std::span<const std::int64_t> figures, double fraction, std::int64_t min_bytes) {
  imbalance_verdict verdict;
  for (std::size_t i = 0; i < figures.size(); ++i) {
    if (figures[i] > figures[verdict.high]) verdict.high = i;
    if (figures[i] < figures[verdict.low]) verdict.low = i;
  }
  if (figures.empty()) return verdict;
  const std::int64_t high = figures[verdict.high];
  verdict.spread_bytes = saturating_subtract(high, figures[verdict.low]);
  verdict.imbalanced = high > 0 && verdict.spread_bytes >= min_bytes &&
                       static_cast<double>(verdict.spread_bytes) >= fraction * static_cast<double>(high);
  return verdict;
}

}  // namespace rlmem
