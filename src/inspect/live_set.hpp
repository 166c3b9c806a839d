// SPDX-License-Identifier: MIT
#pragma once
// The set of live allocations of one device, replayed event by event. The state at trace start
// is derived by undoing the trace against the final segments, as PyTorch's own viewer does.

#include <rlmem/snapshot.hpp>

#include <cstdint>
#include <map>
#include <span>

namespace rlmem::detail {

/// a + b held at the ends of the int64 range instead of overflowing: each size below 2^63 is
/// data, and a trace can sum such sizes past it.
inline std::int64_t saturating_add(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t sum = 0;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? INT64_MAX : INT64_MIN;
}

inline std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept {
  return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

/// A byte count as a signed figure, held at INT64_MAX.
inline std::int64_t signed_bytes(std::uint64_t bytes) noexcept {
  return bytes > static_cast<std::uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<std::int64_t>(bytes);
}

struct live_block {
  std::uint64_t bytes = 0;   // rounded as the allocator does
  stack_id stack = 0;
  bool pending_free = false; // freed by the user, waiting on another stream
  bool before_trace = false; // allocated before the first event
};

/// What an event did to allocated bytes, and to which allocation.
struct allocation_change {
  std::int64_t bytes = 0;  ///< +size on alloc, -size when the user frees, else 0
  std::int32_t count = 0;  ///< +1 on alloc, -1 when the user frees, else 0
  stack_id stack = 0;
  bool before_trace = false;
  /// An alloc at an address still live (the trace contradicts itself): the live block it
  /// replaced, which is no longer counted (bytes <= 0).
  std::int64_t replaced_bytes = 0;
  stack_id replaced_stack = 0;
  bool replaced_before_trace = false;
};

/// Free space of one reserved range (a segment) at some moment.
struct free_space {
  std::uint64_t segment_bytes = 0;
  std::uint64_t stream = 0;  ///< raw cudaStream_t
  std::uint64_t largest_free_bytes = 0;
  std::uint64_t free_bytes = 0;
};

class live_set {
 public:
  /// The allocations live before the first event of `events` on `device`.
  static live_set at_trace_start(const snapshot& snap, std::int64_t device, std::span<const trace_event> events);

  /// Moves the state past one event.
  allocation_change apply(const trace_event& event);

  /// A reserved range: a segment, or a mapped run of an expandable one.
  struct mapped_range {
    std::uint64_t bytes = 0;
    std::uint64_t stream = 0;  // raw cudaStream_t
  };
  const std::map<std::uint64_t, mapped_range>& mapped() const noexcept { return mapped_; }

  /// The free space of every reserved range now: gaps between live blocks (pending frees
  /// count as live, as the allocator cannot reuse them yet).
  std::vector<free_space> free_spaces() const;

  /// Bytes allocated and not yet freed by the user (torch's allocated_bytes).
  std::int64_t allocated_bytes() const noexcept { return allocated_bytes_; }
  const std::map<std::uint64_t, live_block>& blocks() const noexcept { return blocks_; }
  std::uint64_t frees_of_earlier_blocks() const noexcept { return frees_of_earlier_blocks_; }
  std::uint64_t inconsistencies() const noexcept { return inconsistencies_; }

 private:
  // The size of the block an `alloc` got: the caching allocator hands out a whole free block
  // when splitting it would leave too little (CUDACachingAllocator.cpp should_split), and the
  // free space between two live blocks of a segment is one block, since frees coalesce.
  using block_iterator = std::map<std::uint64_t, live_block>::const_iterator;
  // `next_block`: the first live block above event.addr.
  std::uint64_t block_size_for(const trace_event& event, block_iterator next_block) const;
  void unmap_range(std::uint64_t address, std::uint64_t size);

  std::map<std::uint64_t, live_block> blocks_;
  void map_range(std::uint64_t address, std::uint64_t size, std::uint64_t stream);
  std::map<std::uint64_t, mapped_range> mapped_;  // reserved ranges by address
  const snapshot* snap_ = nullptr;  // for the streams of segment events
  std::uint64_t max_split_bytes_ = UINT64_MAX;
  bool expandable_ = false;  // expandable_segments:True in the allocator settings
  std::int64_t allocated_bytes_ = 0;
  std::uint64_t frees_of_earlier_blocks_ = 0;
  std::uint64_t inconsistencies_ = 0;
};

/// Reserved bytes of `device` before its first event: the final segments minus the trace's
/// net segment growth.
std::int64_t reserved_at_trace_start(const snapshot& snap, std::int64_t device, std::span<const trace_event> events);

/// The change in reserved bytes an event makes (segment events only).
std::int64_t reserved_delta(const trace_event& event) noexcept;

}  // namespace rlmem::detail
