// SPDX-License-Identifier: MIT
#pragma once
// Snapshots written by hand for the analyses' edge cases: a few frames, stacks and events,
// laid out as the reader lays them out (string 0 is "", stack 0 the empty stack).

#include <rlmem/snapshot/snapshot.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace rlmem::testing {

class crafted_snapshot {
 public:
  crafted_snapshot() {
    snap_.strings = {""};
    snap_.stack_offsets = {0, 0};
    snap_.streams = {0};
  }

  frame_id frame(std::string_view name, std::string_view filename = "??", std::int64_t line = 0) {
    snap_.frames.push_back({text(name), text(filename), line});
    return static_cast<frame_id>(snap_.frames.size() - 1);
  }

  /// A stack of `frames`, innermost first.
  stack_id stack(const std::vector<frame_id>& frames) {
    snap_.stack_frames.insert(snap_.stack_frames.end(), frames.begin(), frames.end());
    snap_.stack_offsets.push_back(static_cast<std::uint32_t>(snap_.stack_frames.size()));
    return static_cast<stack_id>(snap_.stack_offsets.size() - 2);
  }

  void event(trace_action action, std::uint64_t addr, std::uint64_t size, stack_id stack = 0, std::int64_t time_us = 0,
             std::int64_t device = 0) {
    trace_event made;
    made.action = action;
    made.addr = addr;
    made.size = size;
    made.stack = stack;
    made.time_us = time_us;
    traces_[device].push_back(made);
  }

  /// A segment of `total` bytes at `address`, with one active block of `held` bytes at its start
  /// when `held` > 0.
  void segment(std::uint64_t address, std::uint64_t total, std::uint64_t held = 0, std::int64_t device = 0) {
    segment_spec spec{address, total, held, device};
    segments_.push_back(spec);
  }

  /// The snapshot, device traces in device order.
  snapshot build() const {
    snapshot out = snap_;
    for (const auto& [device, events] : traces_) {
      out.device_traces.push_back({device, static_cast<std::uint32_t>(out.events.size()), static_cast<std::uint32_t>(events.size())});
      out.events.insert(out.events.end(), events.begin(), events.end());
    }
    for (const segment_spec& spec : segments_) {
      rlmem::segment seg;
      seg.device = spec.device;
      seg.address = spec.address;
      seg.total_size = spec.total;
      seg.allocated_size = seg.active_size = spec.held;
      seg.first_block = static_cast<std::uint32_t>(out.blocks.size());
      if (spec.held > 0) {
        out.blocks.push_back({spec.address, spec.held, spec.held, 0, block_state::active_allocated});
        ++seg.block_count;
      }
      out.blocks.push_back({spec.address + spec.held, spec.total - spec.held, 0, 0, block_state::inactive});
      ++seg.block_count;
      out.segments.push_back(seg);
    }
    return out;
  }

 private:
  struct segment_spec {
    std::uint64_t address;
    std::uint64_t total;
    std::uint64_t held;
    std::int64_t device;
  };
  // Interned as the reader interns them: one id per distinct text.
  string_id text(std::string_view value) {
    auto [at, added] = string_ids_.try_emplace(std::string(value), static_cast<string_id>(snap_.strings.size()));
    if (added) snap_.strings.emplace_back(value);
    return at->second;
  }

  snapshot snap_;
  std::map<std::string, string_id> string_ids_{{"", 0}};
  std::map<std::int64_t, std::vector<trace_event>> traces_;
  std::vector<segment_spec> segments_;
};

}  // namespace rlmem::testing
