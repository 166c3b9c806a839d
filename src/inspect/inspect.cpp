// SPDX-License-Identifier: MIT
// `inspect`: the timeline, the summary and the peak breakdown of one device.

#include "live_set.hpp"

#include <rlmem/inspect.hpp>

#include <algorithm>
#include <unordered_map>

namespace rlmem {

namespace {

std::int64_t pick_device(const snapshot& snap, std::int64_t requested) {
  if (requested >= 0) return requested;
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

std::string human_count(std::uint64_t count, std::string_view noun) {
  return std::to_string(count) + " " + std::string(noun) + (count == 1 ? "" : "s");
}

}  // namespace

timeline build_timeline(const snapshot& snap, std::int64_t device) {
  timeline line;
  line.device = device;
  const device_trace* trace = snap.trace_for(device);
  std::span<const trace_event> events = trace ? snap.events_of(*trace) : std::span<const trace_event>{};
  detail::live_set state = detail::live_set::at_trace_start(snap, device, events);
  line.allocated_at_start = state.allocated_bytes();
  line.blocks_live_at_start = state.blocks().size();
  line.reserved_at_start = detail::reserved_at_trace_start(snap, device, events);
  line.allocated.reserve(events.size());
  line.reserved.reserve(events.size());
  std::int64_t reserved = line.reserved_at_start;
  for (const trace_event& event : events) {
    state.apply(event);
    reserved += detail::reserved_delta(event);
    line.allocated.push_back(state.allocated_bytes());
    line.reserved.push_back(reserved);
  }
  line.frees_of_earlier_blocks = state.frees_of_earlier_blocks();
  line.inconsistencies = state.inconsistencies();
  return line;
}

inspection inspect(const snapshot& snap, const inspect_options& options) {
  inspection result;
  result.device = pick_device(snap, options.device);
  for (const segment& seg : snap.segments) {
    if (std::find(result.devices.begin(), result.devices.end(), seg.device) == result.devices.end()) result.devices.push_back(seg.device);
  }
  for (const device_trace& trace : snap.device_traces) {
    if (trace.event_count > 0 && std::find(result.devices.begin(), result.devices.end(), trace.device) == result.devices.end()) {
      result.devices.push_back(trace.device);
    }
  }
  std::sort(result.devices.begin(), result.devices.end());

  const device_trace* trace = snap.trace_for(result.device);
  std::span<const trace_event> events = trace ? snap.events_of(*trace) : std::span<const trace_event>{};
  result.events = events.size();
  std::vector<std::uint32_t> stream_seen;
  for (const trace_event& event : events) {
    ++result.events_by_action[static_cast<std::size_t>(event.action)];
    if (std::find(stream_seen.begin(), stream_seen.end(), event.stream) == stream_seen.end()) stream_seen.push_back(event.stream);
  }
  for (std::uint32_t stream : stream_seen) result.streams.push_back(snap.streams[stream]);
  if (!events.empty()) {
    result.first_time_us = events.front().time_us;
    result.last_time_us = events.back().time_us;
  }

  for (const segment& seg : snap.segments) {
    if (seg.device != result.device) continue;
    ++result.segment_count;
    result.final_reserved_bytes += static_cast<std::int64_t>(seg.total_size);
    result.final_allocated_bytes += static_cast<std::int64_t>(seg.allocated_size);
    result.final_active_bytes += static_cast<std::int64_t>(seg.active_size);
    result.largest_segment_bytes = std::max(result.largest_segment_bytes, seg.total_size);
    if (seg.is_expandable) ++result.expandable_segment_count;
    if (std::find(result.streams.begin(), result.streams.end(), seg.stream) == result.streams.end()) result.streams.push_back(seg.stream);
  }
  std::sort(result.streams.begin(), result.streams.end());

  result.memory = build_timeline(snap, result.device);
  const timeline& line = result.memory;
  result.peak_allocated_bytes = line.allocated_at_start;
  result.peak_reserved_bytes = line.reserved_at_start;
  for (std::size_t i = 0; i < line.allocated.size(); ++i) {
    if (line.allocated[i] > result.peak_allocated_bytes) {
      result.peak_allocated_bytes = line.allocated[i];
      result.peak_allocated_event = static_cast<std::int64_t>(i);
    }
    if (line.reserved[i] > result.peak_reserved_bytes) {
      result.peak_reserved_bytes = line.reserved[i];
      result.peak_reserved_event = static_cast<std::int64_t>(i);
    }
  }
  if (result.peak_allocated_event >= 0) result.peak_allocated_time_us = events[static_cast<std::size_t>(result.peak_allocated_event)].time_us;
  if (result.peak_reserved_event >= 0) result.peak_reserved_time_us = events[static_cast<std::size_t>(result.peak_reserved_event)].time_us;

  // Replay again up to the peak to see what was live there, grouped by site.
  detail::live_set state = detail::live_set::at_trace_start(snap, result.device, events);
  for (std::int64_t i = 0; i <= result.peak_allocated_event; ++i) state.apply(events[static_cast<std::size_t>(i)]);
  std::unordered_map<stack_id, std::size_t> site_of_stack;
  std::unordered_map<std::string, std::size_t> site_index;
  std::vector<std::uint64_t> largest_in_site;
  std::vector<site_usage> sites;
  for (const auto& [address, held] : state.blocks()) {
    if (held.pending_free) continue;
    // Stack 0 means two things: made before recording began, or made where torch saw no
    // Python frames (the autograd engine's backward threads); keep them apart.
    stack_id cache_key = held.stack == 0 && held.before_trace ? UINT32_MAX : held.stack;
    auto cached = site_of_stack.find(cache_key);
    std::size_t index;
    if (cached != site_of_stack.end()) {
      index = cached->second;
    } else {
      allocation_site resolved = resolve_site(snap, held.stack);
      if (held.stack == 0) {
        resolved.label = held.before_trace ? "<allocated before recording began>" : "<no Python stack: autograd backward or a C++ thread>";
      }
      auto [found, inserted] = site_index.try_emplace(resolved.label, sites.size());
      if (inserted) {
        sites.push_back({std::move(resolved), 0, 0});
        largest_in_site.push_back(0);
      }
      index = found->second;
      site_of_stack.emplace(cache_key, index);
    }
    site_usage& usage = sites[index];
    usage.bytes += held.bytes;
    ++usage.count;
    if (held.bytes > largest_in_site[index]) {
      largest_in_site[index] = held.bytes;
      usage.site.stack = held.stack;
      usage.site.user_frame = resolve_site(snap, held.stack).user_frame;
    }
  }
  std::sort(sites.begin(), sites.end(), [](const site_usage& a, const site_usage& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.site.label < b.site.label;
  });
  result.peak_site_count = sites.size();
  if (sites.size() > options.top) sites.resize(options.top);
  result.peak_by_site = std::move(sites);

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
  result.notes.push_back("allocated bytes follow the allocator: requests rounded to 512, and whole free blocks where "
                         "splitting would leave too little (roundup_power2_divisions is not modelled)");
  return result;
}

}  // namespace rlmem
