// SPDX-License-Identifier: MIT
// inspect(): one backward walk to the state at trace start, a forward pass for the timeline,
// and a second forward pass that stops at checkpoints (peaks, step ends, OOMs, samples) to
// see what was live there.

#include "analysis.hpp"
#include "live_set.hpp"
#include "timeline_points.hpp"

#include <rlmem/format.hpp>
#include <rlmem/inspect.hpp>

#include <algorithm>
#include <regex>
#include <unordered_map>

namespace rlmem {

namespace {

}  // namespace

std::int64_t default_device(const snapshot& snap) {
  std::int64_t best = snap.segments.empty() ? 0 : snap.segments.front().device;
  std::uint32_t longest = 0;
  for (const device_trace& trace : snap.device_traces) {
    if (trace.event_count > longest) {
      longest = trace.event_count;
      best = trace.device;
    }
  }
  return best;
}

namespace {

std::string human_count(std::uint64_t count, std::string_view noun) {
  return format_count(count) + " " + std::string(noun) + (count == 1 ? "" : "s");
}

// Sites and categories of stacks, resolved once per stack.
class stack_index {
 public:
  stack_index(const snapshot& snap, const std::vector<category_rule>& rules)
      : snap_(snap), rules_(rules), site_of_stack_(snap.stack_offsets.size(), unknown), category_of_stack_(snap.stack_offsets.size(), unknown) {}

  // Stack 0 means two things: made before recording began, or made where torch saw no Python
  // frames (the autograd engine's backward threads); they get separate sites.
  std::uint32_t site(stack_id stack, bool before_trace) {
    if (stack == 0) return before_trace ? special_site(before_site_, "<allocated before recording began>")
                                        : special_site(no_stack_site_, "<no Python stack: autograd backward or a C++ thread>");
    std::uint32_t& cached = site_of_stack_[stack];
    if (cached == unknown) {
      allocation_site resolved = resolve_site(snap_, stack);
      auto [found, inserted] = site_by_label_.try_emplace(resolved.label, static_cast<std::uint32_t>(sites_.size()));
      if (inserted) sites_.push_back(std::move(resolved));
      cached = found->second;
    }
    return cached;
  }
  const allocation_site& site_info(std::uint32_t id) const { return sites_[id]; }
  std::size_t site_count() const { return sites_.size(); }

  memory_category category(stack_id stack, bool before_trace) {
    if (stack == 0) return before_trace ? memory_category::weights : memory_category::gradients;
    std::uint32_t& cached = category_of_stack_[stack];
    if (cached == unknown) cached = static_cast<std::uint32_t>(detail::categorize(snap_, stack, before_trace, rules_));
    return static_cast<memory_category>(cached);
  }

 private:
  static constexpr std::uint32_t unknown = UINT32_MAX;
  std::uint32_t special_site(std::uint32_t& id, const char* label) {
    if (id == unknown) {
      id = static_cast<std::uint32_t>(sites_.size());
      sites_.push_back({label, "", 0});
    }
    return id;
  }
  const snapshot& snap_;
  const std::vector<category_rule>& rules_;
  std::vector<std::uint32_t> site_of_stack_;
  std::vector<std::uint32_t> category_of_stack_;
  std::vector<allocation_site> sites_;
  std::unordered_map<std::string, std::uint32_t> site_by_label_;
  std::uint32_t before_site_ = unknown;
  std::uint32_t no_stack_site_ = unknown;
};

struct site_total {
  std::uint64_t bytes = 0;
  std::uint64_t count = 0;
  std::uint64_t largest = 0;
  stack_id largest_stack = 0;
};

// Live bytes by site id (indexable by every id known so far).
std::vector<site_total> totals_by_site(const detail::live_set& state, stack_index& stacks) {
  std::vector<site_total> totals;
  for (const auto& [address, held] : state.blocks()) {
    if (held.pending_free) continue;
    std::uint32_t id = stacks.site(held.stack, held.before_trace);
    if (id >= totals.size()) totals.resize(id + 1);
    site_total& total = totals[id];
    total.bytes += held.bytes;
    ++total.count;
    if (held.bytes > total.largest) {
      total.largest = held.bytes;
      total.largest_stack = held.stack;
    }
  }
  return totals;
}

// Site totals as usages, largest first, each with the stack of its largest allocation.
std::vector<site_usage> usage_by_site(const snapshot& snap, const std::vector<site_total>& totals, const stack_index& stacks) {
  std::vector<site_usage> usages;
  for (std::uint32_t id = 0; id < totals.size(); ++id) {
    if (totals[id].count == 0) continue;
    allocation_site site = stacks.site_info(id);
    site.stack = totals[id].largest_stack;
    if (site.stack != 0) site.user_frame = resolve_site(snap, site.stack).user_frame;
    usages.push_back({std::move(site), totals[id].bytes, totals[id].count});
  }
  std::sort(usages.begin(), usages.end(), [](const site_usage& a, const site_usage& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.site.label < b.site.label;
  });
  return usages;
}

enum checkpoint_kind : std::uint8_t {
  at_sample = 1, at_peak_allocated = 2, at_peak_reserved = 4, at_step_end = 8, at_oom = 16, at_end = 32
};

}  // namespace

inspection inspect(const snapshot& snap, const inspect_options& options) {
  inspection result;
  result.device = options.device >= 0 ? options.device : default_device(snap);
  for (const segment& seg : snap.segments) result.devices.push_back(seg.device);
  for (const device_trace& trace : snap.device_traces) {
    if (trace.event_count > 0) result.devices.push_back(trace.device);
  }
  std::sort(result.devices.begin(), result.devices.end());
  result.devices.erase(std::unique(result.devices.begin(), result.devices.end()), result.devices.end());

  const device_trace* trace = snap.trace_for(result.device);
  std::span<const trace_event> events = trace ? snap.events_of(*trace) : std::span<const trace_event>{};
  result.events = events.size();
  std::vector<bool> stream_used(snap.streams.size(), false);
  for (const trace_event& event : events) {
    ++result.events_by_action[static_cast<std::size_t>(event.action)];
    stream_used[snap.tag_of(event).stream] = true;
  }
  for (std::size_t i = 0; i < stream_used.size(); ++i) {
    if (stream_used[i]) result.streams.push_back(snap.streams[i]);
  }
  if (!events.empty()) {
    result.first_time_us = events.front().time_us;
    result.last_time_us = events.back().time_us;
  }
  bool expandable = false;
  for (const segment& seg : snap.segments) {
    if (seg.device != result.device) continue;
    ++result.segment_count;
    result.final_reserved_bytes += static_cast<std::int64_t>(seg.total_size);
    result.final_allocated_bytes += static_cast<std::int64_t>(seg.allocated_size);
    result.final_active_bytes += static_cast<std::int64_t>(seg.active_size);
    result.largest_segment_bytes = std::max(result.largest_segment_bytes, seg.total_size);
    expandable = expandable || seg.is_expandable;
    if (seg.is_expandable) ++result.expandable_segment_count;
    if (seg.allocated_size * 10 < seg.total_size) {
      ++result.fragmentation.mostly_empty_segments;
      result.fragmentation.mostly_empty_segment_bytes += seg.total_size;
    }
    if (std::find(result.streams.begin(), result.streams.end(), seg.stream) == result.streams.end()) result.streams.push_back(seg.stream);
  }
  std::sort(result.streams.begin(), result.streams.end());
  if (const plain_value* setting = snap.setting("expandable_segments"); setting && setting->boolean) expandable = true;

  // Pass 1: the timeline.
  const detail::live_set start = detail::live_set::at_trace_start(snap, result.device, events);
  timeline& line = result.memory;
  line.device = result.device;
  line.allocated_at_start = start.allocated_bytes();
  line.blocks_live_at_start = start.blocks().size();
  line.reserved_at_start = detail::reserved_at_trace_start(snap, result.device, events);
  line.allocated.reserve(events.size());
  line.reserved.reserve(events.size());
  {
    detail::live_set state = start;
    std::int64_t reserved = line.reserved_at_start;
    for (const trace_event& event : events) {
      state.apply(event);
      reserved += detail::reserved_delta(event);
      line.allocated.push_back(state.allocated_bytes());
      line.reserved.push_back(reserved);
    }
    line.frees_of_earlier_blocks = state.frees_of_earlier_blocks();
    line.inconsistencies = state.inconsistencies();
  }
  result.peak_allocated_bytes = line.allocated_at_start;
  result.peak_reserved_bytes = line.reserved_at_start;
  fragmentation_report& frag = result.fragmentation;
  frag.max_unallocated_bytes = line.reserved_at_start - line.allocated_at_start;
  for (std::size_t i = 0; i < line.allocated.size(); ++i) {
    if (line.allocated[i] > result.peak_allocated_bytes) {
      result.peak_allocated_bytes = line.allocated[i];
      result.peak_allocated_event = static_cast<std::int64_t>(i);
    }
    if (line.reserved[i] > result.peak_reserved_bytes) {
      result.peak_reserved_bytes = line.reserved[i];
      result.peak_reserved_event = static_cast<std::int64_t>(i);
    }
    if (line.reserved[i] - line.allocated[i] > frag.max_unallocated_bytes) {
      frag.max_unallocated_bytes = line.reserved[i] - line.allocated[i];
      frag.max_unallocated_event = static_cast<std::int64_t>(i);
    }
  }
  auto allocated_after = [&](std::int64_t event) { return event < 0 ? line.allocated_at_start : line.allocated[static_cast<std::size_t>(event)]; };
  auto reserved_after = [&](std::int64_t event) { return event < 0 ? line.reserved_at_start : line.reserved[static_cast<std::size_t>(event)]; };
  if (result.peak_allocated_event >= 0) result.peak_allocated_time_us = events[static_cast<std::size_t>(result.peak_allocated_event)].time_us;
  if (result.peak_reserved_event >= 0) result.peak_reserved_time_us = events[static_cast<std::size_t>(result.peak_reserved_event)].time_us;
  frag.unallocated_at_peak_reserved_bytes = result.peak_reserved_bytes - allocated_after(result.peak_reserved_event);
  std::int64_t last_event = static_cast<std::int64_t>(events.size()) - 1;
  frag.unallocated_at_end_bytes = reserved_after(last_event) - allocated_after(last_event);

  // Where pass 2 stops. Index -1 is the state before the first event.
  detail::step_search steps = detail::find_step_ends(snap, result.device, events, options.step_marker);
  result.step_method = steps.method;
  std::vector<std::pair<std::int64_t, std::uint8_t>> checkpoints;
  for (std::size_t index : detail::timeline_points(line, 1000)) checkpoints.emplace_back(static_cast<std::int64_t>(index), at_sample);
  checkpoints.emplace_back(result.peak_allocated_event, at_peak_allocated);
  checkpoints.emplace_back(result.peak_reserved_event, at_peak_reserved);
  checkpoints.emplace_back(-1, at_step_end);  // the series of step ends starts at the trace start
  for (std::uint64_t end : steps.ends) checkpoints.emplace_back(static_cast<std::int64_t>(end), at_step_end);
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (events[i].action == trace_action::oom) checkpoints.emplace_back(static_cast<std::int64_t>(i), at_oom);
  }
  checkpoints.emplace_back(last_event, at_end);
  std::sort(checkpoints.begin(), checkpoints.end());

  // Pass 2.
  const std::vector<category_rule>& rules = options.category_rules.empty() ? default_category_rules() : options.category_rules;
  stack_index stacks(snap, rules);
  detail::live_set state = start;
  category_bytes by_category{};
  for (const auto& [address, held] : state.blocks()) {
    if (!held.pending_free) by_category[static_cast<std::size_t>(stacks.category(held.stack, held.before_trace))] += static_cast<std::int64_t>(held.bytes);
  }
  std::vector<std::vector<site_total>> at_step_ends;
  std::int64_t position = -1;
  for (const auto& [index, kind] : checkpoints) {
    while (position < index) {
      ++position;
      detail::allocation_change change = state.apply(events[static_cast<std::size_t>(position)]);
      if (change.bytes != 0) by_category[static_cast<std::size_t>(stacks.category(change.stack, change.before_trace))] += change.bytes;
    }
    if (kind & at_sample) {
      result.categories.events.push_back(static_cast<std::uint64_t>(index));
      result.categories.bytes.push_back(by_category);
    }
    if (kind & at_step_end) at_step_ends.push_back(totals_by_site(state, stacks));
    if (kind & at_peak_allocated) {
      result.categories_at_peak = by_category;
      result.peak_by_site = usage_by_site(snap, totals_by_site(state, stacks), stacks);
    }
    if (kind & at_end) {
      result.categories_at_end = by_category;
      result.end_by_site = usage_by_site(snap, totals_by_site(state, stacks), stacks);
    }
    if (kind & (at_peak_reserved | at_end)) {
      std::uint64_t largest = 0;
      for (const auto& space : state.free_spaces()) largest = std::max(largest, space.largest_free_bytes);
      (kind & at_end ? frag.largest_free_block_at_end_bytes : frag.largest_free_block_at_peak_reserved_bytes) = largest;
    }
    if (kind & at_oom) {
      const trace_event& event = events[static_cast<std::size_t>(index)];
      oom_report report;
      report.event = static_cast<std::uint64_t>(index);
      report.time_us = event.time_us;
      report.requested_bytes = allocator_rounded_size(event.size);
      report.segment_bytes = detail::segment_size_for(report.requested_bytes);
      report.allocated_bytes = state.allocated_bytes();
      report.reserved_bytes = reserved_after(index);
      report.reserved_unallocated_bytes = report.reserved_bytes - report.allocated_bytes;
      report.device_free_bytes = event.addr;
      if (options.limit_bytes > 0) {
        report.limit_given = true;
        report.limit_low_bytes = report.limit_high_bytes = options.limit_bytes;
      } else {
        // The limit is at least what was reserved before, and below what this request needed:
        // the reserved memory now plus a new segment (or plus what CUDA had free, if less).
        std::int64_t reached = line.reserved_at_start;
        for (std::int64_t i = 0; i < index; ++i) reached = std::max(reached, line.reserved[static_cast<std::size_t>(i)]);
        auto device_free = static_cast<std::int64_t>(std::min<std::uint64_t>(event.addr, INT64_MAX / 2));
        report.limit_high_bytes = report.segment_bytes <= event.addr
                                      ? report.reserved_bytes + static_cast<std::int64_t>(report.segment_bytes) - 1
                                      : report.reserved_bytes + device_free;
        report.limit_low_bytes = std::min(reached, report.limit_high_bytes);
      }
      for (const auto& space : state.free_spaces()) {
        report.largest_free_block_bytes = std::max(report.largest_free_block_bytes, space.largest_free_bytes);
        bool small = !expandable && space.segment_bytes == detail::segment_size_for(1);
        auto pool = std::find_if(report.free_by_pool.begin(), report.free_by_pool.end(),
                                 [&](const free_block_summary& s) { return s.small_pool == small && s.stream == space.stream; });
        if (pool == report.free_by_pool.end()) pool = report.free_by_pool.insert(report.free_by_pool.end(), {small, space.stream, 0, 0});
        pool->largest_free_bytes = std::max(pool->largest_free_bytes, space.largest_free_bytes);
        pool->free_bytes += space.free_bytes;
      }
      std::vector<site_total> totals = totals_by_site(state, stacks);
      for (std::uint32_t id = 0; id < totals.size(); ++id) {
        if (totals[id].bytes > report.largest_site_bytes) {
          report.largest_site_bytes = totals[id].bytes;
          report.largest_site = stacks.site_info(id);
          report.largest_site.stack = totals[id].largest_stack;
        }
      }
      detail::judge_oom(report, expandable);
      result.ooms.push_back(std::move(report));
    }
  }

  result.peak_site_count = result.peak_by_site.size();
  if (result.peak_by_site.size() > options.top) result.peak_by_site.resize(options.top);

  for (std::size_t k = 1; k < at_step_ends.size(); ++k) {
    auto end = static_cast<std::int64_t>(steps.ends[k - 1]);
    result.steps.push_back({static_cast<std::uint64_t>(end), events[static_cast<std::size_t>(end)].time_us, allocated_after(end), reserved_after(end)});
  }
  std::vector<detail::site_series> series(stacks.site_count());
  for (std::size_t id = 0; id < series.size(); ++id) {
    series[id].site = stacks.site_info(static_cast<std::uint32_t>(id));
    for (const auto& totals : at_step_ends) {
      series[id].bytes.push_back(id < totals.size() ? static_cast<std::int64_t>(totals[id].bytes) : 0);
      series[id].counts.push_back(id < totals.size() ? totals[id].count : 0);
      if (id < totals.size() && totals[id].largest_stack != 0) series[id].site.stack = totals[id].largest_stack;
    }
    if (series[id].site.stack != 0) series[id].site.user_frame = resolve_site(snap, series[id].site.stack).user_frame;
  }
  result.leaks = detail::detect_leaks(series);

  if (!steps.problem.empty()) result.notes.push_back(steps.problem);
  if (result.steps.size() < 3 && !events.empty()) {
    result.notes.push_back(result.steps.empty()
                               ? "no training steps found (no ProfilerStep or optimizer annotations, no optimizer frames): pass "
                                 "--step-marker REGEX naming a frame that allocates at the start of each step"
                               : "only " + human_count(result.steps.size(), "step") + " found: leaks need 3 or more to be told from one-time growth");
  }
  if (line.blocks_live_at_start > 0) {
    result.notes.push_back("the trace starts with " + human_count(line.blocks_live_at_start, "block") +
                           " already allocated: recording began after they were made, or the ring buffer "
                           "(max_entries) dropped the events that made them");
  }
  if (line.frees_of_earlier_blocks > 0) {
    result.notes.push_back(human_count(line.frees_of_earlier_blocks, "free") + " in the trace release blocks allocated before it began");
  }
  if (const plain_value* overflowed = snap.setting("trace_alloc_overflowed"); overflowed && overflowed->boolean) {
    result.notes.push_back("torch reports the trace ring buffer overflowed: the oldest events are missing");
  }
  if (line.inconsistencies > 0) {
    result.notes.push_back(human_count(line.inconsistencies, "event") + " contradict the dump-time segments (allocated figures may be off)");
  }
  if (!trace || events.empty()) {
    result.notes.push_back("no trace events for this device: record with torch.cuda.memory._record_memory_history() to get a timeline");
  }
  return result;
}

bool inspect_checked(const snapshot& snap, const inspect_options& options, inspection& out, std::string& problem) {
  if (!options.step_marker.empty()) {
    try {
      std::regex marker(options.step_marker, std::regex::ECMAScript);
    } catch (const std::regex_error& failure) {
      problem = "step marker '" + options.step_marker + "' is not a valid regular expression (" + failure.what() + ")";
      return false;
    }
  }
  out = inspect(snap, options);
  if (options.device >= 0 && std::find(out.devices.begin(), out.devices.end(), options.device) == out.devices.end()) {
    std::string known;
    for (std::int64_t device : out.devices) known += (known.empty() ? "" : ", ") + std::to_string(device);
    problem = "has no device " + std::to_string(options.device) + " (devices: " + (known.empty() ? "none" : known) + ")";
    return false;
  }
  return true;
}

}  // namespace rlmem
