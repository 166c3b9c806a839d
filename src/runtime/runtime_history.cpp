// SPDX-License-Identifier: MIT
// The runtime's history: a ring of its events, and the snapshot of segments, blocks and events
// that librlmem writes as torch's JSON.
#include <rlmem/runtime/runtime.hpp>

#include "runtime_helpers.hpp"

#include <algorithm>
#include <map>

namespace rlmem {

void runtime::remember(history_event event) {
  if (options_.history_entries == 0) return;
  if (history_.size() < options_.history_entries) {
    history_.push_back(event);
    return;
  }
  history_[history_next_] = event;
  history_next_ = (history_next_ + 1) % history_.size();
  ++history_dropped_;
}

runtime_snapshot runtime::snapshot() const {
  std::lock_guard hold(lock_);
  runtime_snapshot taken;
  std::map<std::uint64_t, const live_block*> blocks;  // by address
  for (const auto& [address, held] : live_) blocks.emplace(address, &held);
  for (const auto& [key, stream] : stream_of_arena_) {
    address_run range;
    if (!policy_.arena_range(key, range)) continue;
    for (address_run run : policy_.mapped_runs(range)) {
      runtime_snapshot::segment& segment = taken.segments.emplace_back();
      segment.address = run.address;
      segment.size = run.bytes;
      segment.stream = stream;
      for (auto at = blocks.lower_bound(run.address); at != blocks.end() && at->first < run.address + run.bytes; ++at) {
        segment.blocks.push_back({at->first, at->second->block->size, at->second->requested});
      }
    }
  }
  // A growable buffer is one block over what it has grown.
  for (const auto& [base, buffer] : growables_) {
    address_run range;
    if (!policy_.arena_range(buffer.key, range)) continue;
    for (address_run run : policy_.mapped_runs(range)) {
      std::uint64_t grown = policy_.grown_bytes(buffer.key);
      taken.segments.push_back({run.address, run.bytes, 0, {{base, grown, grown}}});
    }
  }
  std::sort(taken.segments.begin(), taken.segments.end(), [](const auto& a, const auto& b) { return a.address < b.address; });
  taken.events.reserve(history_.size());
  for (std::size_t i = 0; i < history_.size(); ++i) taken.events.push_back(history_[(history_next_ + i) % history_.size()]);
  taken.events_dropped = history_dropped_;
  return taken;
}

}  // namespace rlmem
