// SPDX-License-Identifier: MIT
// Lookups on the snapshot model.

#include <rlmem/snapshot.hpp>

#include <array>

namespace rlmem {

std::string_view trace_action_name(trace_action action) noexcept {
  static constexpr std::array<std::string_view, trace_action_count> names = {
      "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
      "segment_unmap", "snapshot", "oom", "annotate", "unknown"};
  auto index = static_cast<std::size_t>(action);
  return index < names.size() ? names[index] : "unknown";
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

}  // namespace rlmem
