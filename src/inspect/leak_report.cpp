// SPDX-License-Identifier: MIT
// Leaks over the forward pass's site series: the sites named, the leaks found and summed up,
// and the blocks each leak holds at the dump.

#include "stages.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>

namespace rlmem::detail {

std::size_t report_leaks(const snapshot& snap, const inspect_options& options, forward_pass_result& pass,
                         stack_index& stacks, inspection& result) {
  site_tracker& sites = pass.sites;
  const std::vector<site_total>& at_last_step_end = pass.at_last_step_end;
  std::vector<site_series>& series = sites.series();
  for (std::uint32_t id = 0; id < series.size(); ++id) {
    if (series[id].steps.empty()) continue;
    series[id].site = stacks.site_info(id);
    series[id].site.stack = id < at_last_step_end.size() && at_last_step_end[id].count > 0 ? at_last_step_end[id].largest_stack
                                                                                          : sites.representative_stack(id);
  }
  std::size_t leaks_found = 0;
  result.leaks = detect_leaks(stacks.frames(), series, sites.step_ends(), options.max_leaks, leaks_found);
  result.summary_of_leaks = summarize_leaks(result.steps, result.leaks);
  // The blocks each leak holds at dump time: the segments' live blocks whose site is one of its
  // lines. O(blocks + leak lines).
  if (!result.leaks.empty()) {
    std::unordered_map<std::uint32_t, std::size_t> leak_of_site;
    for (std::size_t index = 0; index < result.leaks.size(); ++index) {
      for (const leak_line& covered : result.leaks[index].lines) {
        if (std::optional<std::uint32_t> id = stacks.site_named(covered.site.label)) leak_of_site.emplace(*id, index);
      }
    }
    for (const segment& held : snap.segments) {
      if (held.device != result.device) continue;
      for (const block& one : std::span(snap.blocks).subspan(held.first_block, held.block_count)) {
        if (one.state != block_state::active_allocated || one.stack == 0) continue;
        auto owner = leak_of_site.find(stacks.site(one.stack, false));
        if (owner != leak_of_site.end()) result.leaks[owner->second].live_blocks.emplace_back(one.address, one.size);
      }
    }
    for (leak& found : result.leaks) {
      std::sort(found.live_blocks.begin(), found.live_blocks.end(),
                [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
      if (found.live_blocks.size() > max_leak_blocks) {
        found.live_blocks_left_out = found.live_blocks.size() - max_leak_blocks;
        found.live_blocks.resize(max_leak_blocks);
      }
    }
  }
  return leaks_found;
}

}  // namespace rlmem::detail
