// SPDX-License-Identifier: MIT
// Lookups on the snapshot model.

#include <rlmem/snapshot/snapshot.hpp>

#include <array>
#include <map>

namespace rlmem {

std::string_view trace_action_name(trace_action action) noexcept {
  auto index = static_cast<std::size_t>(action);
  return index < trace_action_names.size() ? trace_action_names[index] : "unknown";
}

const device_trace* snapshot::trace_for(std::int64_t device) const {
  for (const auto& trace : device_traces) {
    if (trace.device == device) return &trace;
  }
  return nullptr;
}

const plain_value* snapshot::setting(std::string_view key) const {
  for (const auto& [name, item] : allocator_settings) {
    if (name == key) return &item;
  }
  return nullptr;
}

std::int64_t default_device(const snapshot& snap) {
  struct device_data {
    std::uint64_t events = 0;
    std::uint64_t segments = 0;
  };
  std::map<std::int64_t, device_data> data;  // by ordinal: ties go to the lowest
  for (const device_trace& trace : snap.device_traces) data[trace.device].events += trace.event_count;
  for (const segment& seg : snap.segments) ++data[seg.device].segments;
  std::int64_t best = 0;
  const device_data* most = nullptr;
  for (const auto& [device, one] : data) {
    if (most == nullptr || one.events > most->events || (one.events == most->events && one.segments > most->segments)) {
      best = device;
      most = &one;
    }
  }
  return best;
}

}  // namespace rlmem
