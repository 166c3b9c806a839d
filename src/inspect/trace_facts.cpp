// SPDX-License-Identifier: MIT
// What the trace and the dump say before any replay: the device reported, the events by action
// and their streams and times, the dump's segments.

#include "stages.hpp"

#include <rlmem/base/saturating.hpp>

#include <algorithm>
#include <map>
#include <string>

namespace rlmem::detail {

namespace {

// Events and segments of each device in the snapshot, by device ordinal.
struct device_data {
  std::uint64_t events = 0;
  std::uint64_t segments = 0;
};
std::map<std::int64_t, device_data> data_by_device(const snapshot& snap) {
  std::map<std::int64_t, device_data> data;
  for (const device_trace& trace : snap.device_traces) data[trace.device].events += trace.event_count;
  for (const segment& seg : snap.segments) ++data[seg.device].segments;
  return data;
}

// "device 1 (most data: 10,432 events, 12 segments); also in the file: device 0 (1 event, 0 segments)".
std::string device_choice_note(std::int64_t chosen, const std::map<std::int64_t, device_data>& data) {
  auto describe = [](const device_data& one) {
    return human_count(one.events, "event") + ", " + human_count(one.segments, "segment");
  };
  std::string others;
  for (const auto& [device, one] : data) {
    if (device == chosen) continue;
    others += (others.empty() ? "" : "; ") + ("device " + std::to_string(device) + " (" + describe(one) + ")");
  }
  auto found = data.find(chosen);
  return "reporting device " + std::to_string(chosen) + ", the one with the most data (" +
         (found == data.end() ? std::string("none") : describe(found->second)) + "); also in the file: " + others +
         ": choose with --device N";
}

}  // namespace

void choose_device(const snapshot& snap, const inspect_options& options, inspection& result) {
  result.device = options.device >= 0 ? options.device : default_device(snap);
  const std::map<std::int64_t, device_data> data = data_by_device(snap);
  for (const auto& [device, one] : data) {
    if (one.events > 0 || one.segments > 0) result.devices.push_back(device);
  }
  if (options.device < 0 && result.devices.size() > 1) result.notes.push_back(device_choice_note(result.device, data));
}

void count_events(const snapshot& snap, std::span<const trace_event> events, inspection& result) {
  std::vector<bool> stream_used(snap.streams.size(), false);
  for (const trace_event& event : events) {
    ++result.events_by_action[static_cast<std::size_t>(event.action)];
    stream_used[snap.tag_of(event).stream] = true;
    result.times_known = result.times_known || event.time_us != 0;
  }
  for (std::size_t i = 0; i < stream_used.size(); ++i) {
    if (stream_used[i]) result.streams.push_back(snap.streams[i]);
  }
  if (!events.empty()) {
    result.first_time_us = events.front().time_us;
    result.last_time_us = events.back().time_us;
  }
}

bool summarize_segments(const snapshot& snap, inspection& result) {
  bool expandable = false;
  for (const segment& seg : snap.segments) {
    if (seg.device != result.device) continue;
    ++result.segment_count;
    result.final_reserved_bytes = saturating_add(result.final_reserved_bytes, signed_bytes(seg.total_size));
    result.final_allocated_bytes = saturating_add(result.final_allocated_bytes, signed_bytes(seg.allocated_size));
    result.final_active_bytes = saturating_add(result.final_active_bytes, signed_bytes(seg.active_size));
    result.largest_segment_bytes = std::max(result.largest_segment_bytes, seg.total_size);
    expandable = expandable || seg.is_expandable;
    if (seg.is_expandable) ++result.expandable_segment_count;
    // allocated * 10 < total, without the product (sizes go up to 2^63).
    if (seg.allocated_size < seg.total_size / 10 + (seg.total_size % 10 != 0 ? 1 : 0)) {
      ++result.fragmentation.mostly_empty_segments;
      result.fragmentation.mostly_empty_segment_bytes = saturating_add(result.fragmentation.mostly_empty_segment_bytes, seg.total_size);
    }
    result.streams.push_back(seg.stream);
  }
  std::sort(result.streams.begin(), result.streams.end());
  result.streams.erase(std::unique(result.streams.begin(), result.streams.end()), result.streams.end());
  return expandable;
}

}  // namespace rlmem::detail
