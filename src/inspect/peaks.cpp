// SPDX-License-Identifier: MIT
// The peaks of the timeline, the fragmentation figures at them and at the end, and the live
// blocks at the peaks: replayed again from the trace start to the later peak.

#include "stages.hpp"

#include <rlmem/base/saturating.hpp>

#include <algorithm>

namespace rlmem::detail {

void find_peaks(std::span<const trace_event> events, const live_set& start, stack_index& stacks, inspection& result) {
  const timeline& line = result.memory;
  fragmentation_report& frag = result.fragmentation;
  std::int64_t last_event = static_cast<std::int64_t>(events.size()) - 1;
  result.peak_allocated_bytes = line.allocated_at_start;
  result.peak_reserved_bytes = line.reserved_at_start;
  frag.max_unallocated_bytes = saturating_add(line.reserved_at_start, -line.allocated_at_start);
  for (std::size_t i = 0; i < line.allocated.size(); ++i) {
    if (line.allocated[i] > result.peak_allocated_bytes) {
      result.peak_allocated_bytes = line.allocated[i];
      result.peak_allocated_event = static_cast<std::int64_t>(i);
    }
    if (line.reserved[i] > result.peak_reserved_bytes) {
      result.peak_reserved_bytes = line.reserved[i];
      result.peak_reserved_event = static_cast<std::int64_t>(i);
    }
    if (std::int64_t unallocated = saturating_add(line.reserved[i], -line.allocated[i]); unallocated > frag.max_unallocated_bytes) {
      frag.max_unallocated_bytes = unallocated;
      frag.max_unallocated_event = static_cast<std::int64_t>(i);
    }
  }
  if (result.peak_allocated_event >= 0) result.peak_allocated_time_us = events[static_cast<std::size_t>(result.peak_allocated_event)].time_us;
  if (result.peak_reserved_event >= 0) result.peak_reserved_time_us = events[static_cast<std::size_t>(result.peak_reserved_event)].time_us;
  frag.unallocated_at_peak_reserved_bytes = saturating_add(result.peak_reserved_bytes, -allocated_after(line, result.peak_reserved_event));
  frag.unallocated_at_end_bytes = saturating_add(reserved_after(line, last_event), -allocated_after(line, last_event));

  // The live blocks at the peaks: replayed again from the trace start to the later peak. No
  // site is new there (every live block's site was named when it was counted), so reading them
  // now names the sites in the same order as reading them during the pass would.
  {
    live_set at_peak = start;
    std::int64_t until = std::max(result.peak_allocated_event, result.peak_reserved_event);
    for (std::int64_t position = -1;; ++position) {
      if (position >= 0) at_peak.apply(events[static_cast<std::size_t>(position)]);
      if (position == result.peak_allocated_event) {
        result.peak_by_site = usage_by_site(totals_by_site(live_blocks_of(at_peak), stacks), stacks);
      }
      if (position == result.peak_reserved_event) {
        std::uint64_t largest = 0;
        for (const auto& space : at_peak.free_spaces()) largest = std::max(largest, space.largest_free_bytes);
        frag.largest_free_block_at_peak_reserved_bytes = largest;
      }
      if (position >= until) break;
    }
  }
}

}  // namespace rlmem::detail
