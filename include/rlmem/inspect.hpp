// SPDX-License-Identifier: MIT
#pragma once
// What `rlmem inspect` computes from a snapshot: the allocated/reserved timeline (including
// memory that existed before recording began), a summary, and what held memory at the peak.

#include <rlmem/snapshot.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace rlmem {

/// Rounds a requested size the way PyTorch's caching allocator does by default
/// (at least 512 bytes, then up to a multiple of 512).
std::uint64_t allocator_rounded_size(std::uint64_t requested_bytes) noexcept;

/// Allocated and reserved bytes after every event of one device's trace.
struct timeline {
  std::int64_t device = 0;
  std::int64_t allocated_at_start = 0;   ///< bytes live before the first event
  std::int64_t reserved_at_start = 0;
  std::uint64_t blocks_live_at_start = 0;
  std::uint64_t frees_of_earlier_blocks = 0;  ///< frees in the trace of blocks allocated before it
  std::uint64_t inconsistencies = 0;     ///< events that contradict the segments (should be 0)
  std::vector<std::int64_t> allocated;   ///< after event i
  std::vector<std::int64_t> reserved;    ///< after event i
};

/// Where an allocation came from, resolved from its stack.
struct allocation_site {
  std::string label;       ///< "transformers/models/qwen2/modeling_qwen2.py:47 forward"
  std::string user_frame;  ///< nearest frame in the user's own code, "" when none
  stack_id stack = 0;      ///< a representative stack (of the largest allocation)
};

/// Bytes live at one moment, grouped by allocation site.
struct site_usage {
  allocation_site site;
  std::uint64_t bytes = 0;
  std::uint64_t count = 0;
};

struct inspect_options {
  std::int64_t device = -1;  ///< -1: the device with the longest trace
  std::size_t top = 10;      ///< sites kept in the peak breakdown
};

/// The whole result of `rlmem inspect` on one device.
struct inspection {
  std::int64_t device = 0;
  std::uint64_t events = 0;
  std::array<std::uint64_t, trace_action_count> events_by_action{};
  std::int64_t first_time_us = 0;
  std::int64_t last_time_us = 0;

  std::int64_t peak_allocated_bytes = 0;
  std::int64_t peak_allocated_event = -1;  ///< -1: already at the peak when the trace began
  std::int64_t peak_allocated_time_us = 0;
  std::int64_t peak_reserved_bytes = 0;
  std::int64_t peak_reserved_event = -1;
  std::int64_t peak_reserved_time_us = 0;

  std::int64_t final_allocated_bytes = 0;  ///< from the segments at dump time
  std::int64_t final_active_bytes = 0;
  std::int64_t final_reserved_bytes = 0;
  std::uint64_t segment_count = 0;
  std::uint64_t largest_segment_bytes = 0;
  std::uint64_t expandable_segment_count = 0;
  std::vector<std::uint64_t> streams;      ///< raw cudaStream_t values seen (0: default)
  std::vector<std::int64_t> devices;       ///< every device in the snapshot

  timeline memory;
  std::vector<site_usage> peak_by_site;    ///< largest first, at most options.top
  std::uint64_t peak_site_count = 0;       ///< sites live at the peak before the cut to top
  std::vector<std::string> notes;          ///< things a reader should know about the trace
};

/// Resolves the site and the nearest user frame of a stack (frames innermost first).
allocation_site resolve_site(const snapshot& snap, stack_id stack);

/// Replays one device's trace against its final segments.
timeline build_timeline(const snapshot& snap, std::int64_t device);

/// Runs every analysis of `rlmem inspect`.
inspection inspect(const snapshot& snap, const inspect_options& options = {});

}  // namespace rlmem
