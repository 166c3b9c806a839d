// SPDX-License-Identifier: MIT
// Live bytes by allocation site at one moment, and as the report's usages.

#include "site_totals.hpp"

#include <rlmem/base/saturating.hpp>

#include <algorithm>

namespace rlmem::detail {

// Live bytes by site id, from a walk of the live blocks in address order (for the peak, the
// last step end and the end only).
std::vector<site_total> totals_by_site(std::span<const live_block> blocks, stack_index& stacks) {
  std::vector<site_total> totals;
  for (const live_block& held : blocks) {
    if (held.pending_free) continue;
    std::uint32_t id = stacks.site(held.stack, held.before_trace);
    if (id >= totals.size()) totals.resize(id + 1);
    site_total& total = totals[id];
    total.bytes = saturating_add(total.bytes, held.bytes);
    ++total.count;
    if (held.bytes > total.largest) {
      total.largest = held.bytes;
      total.largest_stack = held.stack;
    }
  }
  return totals;
}

// Site totals as usages, largest first, each with the stack of its largest allocation.
std::vector<site_usage> usage_by_site(const std::vector<site_total>& totals, stack_index& stacks) {
  std::vector<site_usage> usages;
  for (std::uint32_t id = 0; id < totals.size(); ++id) {
    if (totals[id].count == 0) continue;
    usages.push_back({stacks.describe(id, totals[id].largest_stack), totals[id].bytes, totals[id].count});
  }
  std::sort(usages.begin(), usages.end(), [](const site_usage& a, const site_usage& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.site.label < b.site.label;
  });
  return usages;
}

}  // namespace rlmem::detail
