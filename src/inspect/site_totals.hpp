// SPDX-License-Identifier: MIT
#pragma once
// Live bytes by allocation site at one moment (the peak, the last step end, the end), from the
// live blocks then, and as the report's usages.

#include "stack_index.hpp"

#include <rlmem/inspect/inspect.hpp>
#include <rlmem/model/live_set.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace rlmem::detail {

struct site_total {
  std::uint64_t bytes = 0;
  std::uint64_t count = 0;
  std::uint64_t largest = 0;
  stack_id largest_stack = 0;
};

// Live bytes by site id, from a walk of the live blocks in address order (for the peak, the
// last step end and the end only).
std::vector<site_total> totals_by_site(std::span<const live_block> blocks, stack_index& stacks);
// Site totals as usages, largest first, each with the stack of its largest allocation.
std::vector<site_usage> usage_by_site(const std::vector<site_total>& totals, stack_index& stacks);

}  // namespace rlmem::detail
