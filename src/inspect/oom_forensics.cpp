// SPDX-License-Identifier: MIT
// OOM forensics: which oom events get them, what the state was at each (the forward pass asks),
// the limit the OOMs prove, and each reported OOM's proofs and verdict under it.

#include "stages.hpp"

#include <rlmem/base/format.hpp>
#include <rlmem/base/saturating.hpp>
#include <rlmem/model/trace_simulation.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

namespace rlmem::detail {

namespace {

// The most the limit can have been at an oom event: the request needed the reserved memory then
// plus a new segment, one byte more than that (or plus what CUDA had free, if less).
std::int64_t limit_high_at(const trace_event& oom, std::int64_t reserved, const allocator_settings& recorded) {
  std::uint64_t segment = segment_size_for(round_request(oom.size, recorded));
  return segment <= oom.addr ? saturating_add(reserved, signed_bytes(segment) - 1) : saturating_add(reserved, signed_bytes(oom.addr));
}

}  // namespace

oom_selection select_oom_reports(std::span<const trace_event> events, std::uint64_t oom_count,
                                 std::size_t max_oom_reports, oom_simulation_plan& plan) {
  oom_selection selected;
  selected.count = oom_count;
  selected.first = std::min<std::uint64_t>(oom_count, max_oom_reports / 2 + max_oom_reports % 2);
  selected.last = std::min<std::uint64_t>(oom_count - selected.first, max_oom_reports / 2);
  for (std::size_t i = 0, seen = 0; i < events.size(); ++i) {
    if (events[i].action != trace_action::oom) continue;
    plan.oom_events.push_back(i);
    plan.reported.push_back(seen < selected.first || seen >= oom_count - selected.last);
    ++seen;
  }
  return selected;
}

oom_report report_oom(std::size_t index, const trace_event& event, const timeline& line, const allocator_settings& recorded,
                      bool limit_given, bool expandable, std::span<const free_space> spaces, const site_tracker& sites,
                      stack_index& stacks) {
  oom_report report;
  report.event = static_cast<std::uint64_t>(index);
  report.time_us = event.time_us;
  report.requested_bytes = round_request(event.size, recorded);
  report.segment_bytes = segment_size_for(report.requested_bytes);
  report.allocated_bytes = line.allocated[index];
  report.reserved_bytes = line.reserved[index];
  report.reserved_unallocated_bytes = saturating_add(report.reserved_bytes, -report.allocated_bytes);
  report.device_free_bytes = event.addr;
  report.limit_given = limit_given;
  std::map<std::pair<bool, std::uint64_t>, std::size_t> pool_index;  // (small, stream) -> free_by_pool
  for (const auto& space : spaces) {
    report.largest_free_block_bytes = std::max(report.largest_free_block_bytes, space.largest_free_bytes);
    bool small = !expandable && small_pool_segment(space.segment_bytes);
    auto [slot, added] = pool_index.try_emplace({small, space.stream}, report.free_by_pool.size());
    if (added) report.free_by_pool.push_back({small, space.stream, 0, 0});
    free_block_summary* pool = &report.free_by_pool[slot->second];
    pool->largest_free_bytes = std::max(pool->largest_free_bytes, space.largest_free_bytes);
    pool->free_bytes = saturating_add(pool->free_bytes, space.free_bytes);
  }
  std::uint32_t largest_site = 0;
  if (sites.largest(largest_site, report.largest_site_bytes)) {
    report.largest_site = stacks.site_info(largest_site);
    report.largest_site.stack = sites.representative_stack(largest_site);
  }
  if (event.stack != 0) report.request_site = stacks.describe(stacks.site(event.stack, false), event.stack);
  return report;
}

void judge_ooms(const snapshot& snap, std::span<const trace_event> events, const inspect_options& options,
                const std::vector<std::uint64_t>& step_ends, bool expandable, const allocator_settings& recorded,
                const std::vector<std::size_t>& reports_of_oom, oom_simulation_plan& plan, inspection& result) {
  const timeline& line = result.memory;
  // The limit the OOMs prove, and the verdicts' simulations under it.
  oom_limit& limit = result.limit;
  limit.proven_low_bytes = result.peak_reserved_bytes;
  for (std::uint64_t event : plan.oom_events) {
    std::int64_t high = limit_high_at(events[event], reserved_after(line, static_cast<std::int64_t>(event)), recorded);
    if (high < limit.proven_high_bytes) {
      limit.proven_high_bytes = high;
      limit.proven_high_event = event;
    }
  }
  // The OOMs' own bounds, narrowed by every other refusal the recording shows (a cache flushed
  // before a segment grew): the one range inspect and replay both state.
  if (!plan.oom_events.empty()) {
    if (std::optional<recorded_limit> shown = infer_recorded_limit(snap, result.device)) {
      limit.proven_low_bytes = std::max(limit.proven_low_bytes, static_cast<std::int64_t>(std::min<std::uint64_t>(shown->low_bytes, INT64_MAX)));
      auto below = static_cast<std::int64_t>(std::min<std::uint64_t>(shown->high_bytes - 1, INT64_MAX));
      if (below < limit.proven_high_bytes && below >= limit.proven_low_bytes) {
        limit.proven_high_bytes = below;
        limit.proven_high_event = shown->high_event;
      }
    }
  }
  limit.given = options.limit_bytes > 0;
  limit.judged_bytes = limit.given ? options.limit_bytes : limit.proven_low_bytes;
  if (!plan.oom_events.empty()) {
    plan.step_ends = step_ends;
    plan.limit_bytes = limit.judged_bytes;
    plan.search_high_bytes =
        limit.given || limit.proven_high_bytes == INT64_MAX || options.limit_search_passes == 0 ? 0 : limit.proven_high_bytes;
    plan.search_passes = options.limit_search_passes;
    plan.expandable_trace = expandable;
    std::vector<std::vector<oom_proof>> proofs = detail::prove_ooms(snap, result.device, events, plan);
    for (std::size_t report = 0; report < result.ooms.size(); ++report) {
      oom_report& judged = result.ooms[report];
      judged.proofs = std::move(proofs[reports_of_oom[report]]);
      std::size_t k = reports_of_oom[report];
      std::size_t window_end = k + 1 < plan.oom_events.size() ? plan.oom_events[k + 1] : events.size();
      judged.last_request_recorded = std::none_of(events.begin() + static_cast<std::ptrdiff_t>(judged.event) + 1,
                                                  events.begin() + static_cast<std::ptrdiff_t>(window_end),
                                                  [](const trace_event& e) { return e.action == trace_action::alloc; });
      // Every OOM states the one range the whole recording shows.
      judged.limit_low_bytes = limit.given ? options.limit_bytes : limit.proven_low_bytes;
      judged.limit_high_bytes = limit.given ? options.limit_bytes : limit.proven_high_bytes;
      detail::judge_oom(judged, limit);
      if (!judged.request_larger_than_any_gpu && judged.device_free_bytes >= judged.segment_bytes) {
        judged.explanation += "; CUDA had " + format_bytes(judged.device_free_bytes) +
                              " free, room for the request: a memory fraction (set_per_process_memory_fraction) capped this process, "
                              "not the card";
      }
    }
  }
}

}  // namespace rlmem::detail
