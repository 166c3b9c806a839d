// SPDX-License-Identifier: MIT
#pragma once
// The set of live allocations of one device, replayed event by event: inspect's timeline and
// forensics walk it, and replay starts its allocator model from its state at trace start. That
// state is derived by undoing the trace against the dump-time segments, as PyTorch's own viewer
// does. Block sizes follow the allocator's rules (allocator_rules.hpp) under the recorded
// settings.

#include <rlmem/base/invariants.hpp>
#include <rlmem/model/allocator_settings.hpp>
#include <rlmem/model/detail/live_set_hints.hpp>
#include <rlmem/snapshot/snapshot.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace rlmem {

/// One live allocation.
struct live_block {
  std::uint64_t bytes = 0;    ///< the block's size: rounded, or the whole free block it took
  /// The alloc event's stack; for a block from before the trace, its first free's when the
  /// trace frees it, else the dump's. 0: none recorded.
  stack_id stack = 0;
  bool pending_free = false;  ///< freed by the user, waiting on another stream
  bool before_trace = false;  ///< allocated before the first event
};

/// What an event did to allocated bytes, and to which allocation.
struct allocation_change {
  std::int64_t bytes = 0;  ///< +size on alloc, -size when the user frees, else 0
  std::int32_t count = 0;  ///< +1 on alloc, -1 when the user frees, else 0
  stack_id stack = 0;          ///< the allocation's stack; 0 when the event changed no allocation
  bool before_trace = false;   ///< the allocation was live before the first event
  /// An alloc at an address still live (the trace contradicts itself): the live block it
  /// replaced, which is no longer counted (bytes <= 0).
  std::int64_t replaced_bytes = 0;
  stack_id replaced_stack = 0;         ///< the replaced block's stack
  bool replaced_before_trace = false;  ///< the replaced block was live before the first event
};

/// Free space of one reserved range (a segment) at some moment.
struct free_space {
  std::uint64_t segment_bytes = 0;       ///< the range's size
  std::uint64_t stream = 0;              ///< raw cudaStream_t
  std::uint64_t largest_free_bytes = 0;  ///< the longest run of bytes no live block holds; 0 when full
  std::uint64_t free_bytes = 0;          ///< all bytes no live block holds
};

/// The live blocks and reserved ranges of one device at one moment of its trace.
class live_set {
 public:
  /// The allocations live before the first event of `events` on `device`, under the settings
  /// the recording ran with (settings_of(snap)): they round the sizes of blocks first seen freed
  /// and decide the sizes of blocks allocated later. O(events log blocks + blocks in the dump).
  /// IMPORTANT: the live set keeps a pointer to `snap` (the streams of segment events), which
  /// must outlive it.
  static live_set at_trace_start(const snapshot& snap, std::int64_t device, std::span<const trace_event> events,
                                 const allocator_settings& recorded);

  /// Moves the state past one event. O(log blocks) for an alloc or free, O(log ranges + ranges
  /// touched) for a segment event.
  allocation_change apply(const trace_event& event);

  /// A reserved range: a segment, or a mapped run of an expandable one.
  struct mapped_range {
    std::uint64_t bytes = 0;   ///< bytes reserved from its start
    std::uint64_t stream = 0;  ///< raw cudaStream_t of the segment
  };
  /// The reserved ranges now, by start address (under expandable segments, touching runs of one
  /// stream are one range).
  const std::map<std::uint64_t, mapped_range>& mapped() const noexcept { return mapped_; }

  /// The free space of every reserved range now: gaps between live blocks (pending frees
  /// count as live, as the allocator cannot reuse them yet).
  std::vector<free_space> free_spaces() const;

  /// Bytes allocated and not yet freed by the user (torch's allocated_bytes).
  std::int64_t allocated_bytes() const noexcept { return allocated_bytes_; }
  /// Live blocks (pending frees included) by address.
  const std::map<std::uint64_t, live_block>& blocks() const noexcept { return blocks_; }
  /// Frees in the events applied so far of blocks allocated before the trace.
  std::uint64_t frees_of_earlier_blocks() const noexcept { return frees_of_earlier_blocks_; }
  /// Events applied so far that contradict the state (a free of no live block, an alloc over a
  /// live one).
  std::uint64_t inconsistencies() const noexcept { return inconsistencies_; }

  /// Totals: allocated bytes not below 0. Whole: also allocated bytes equal to the sum over the
  /// live blocks not pending free. Nothing once a sum reached the int64 limits (sizes near 2^63,
  /// in no real trace). That reserved ranges do not overlap, nor live blocks, holds only for
  /// traces that never map mapped memory or allocate inside a live block, so it is no invariant
  /// of the set. O(blocks).
  std::optional<std::string> broken_invariant(invariant_scope scope) const;

 private:
  // The size of the block an `alloc` got: the caching allocator hands out a whole free block
  // when should_split says so, and the free space between two live blocks of a segment is one
  // block, since frees coalesce.
  using block_map = std::map<std::uint64_t, live_block>;
  using range_map = std::map<std::uint64_t, mapped_range>;
  // `next_block`: the first live block above event.addr.
  std::uint64_t block_size_for(const trace_event& event, block_map::const_iterator next_block);
  // The range with the greatest start at or below `address`, or mapped_.end().
  range_map::const_iterator range_at_or_below(std::uint64_t address);
  // blocks_.find(address), through hints_.known.
  block_map::iterator find_block(std::uint64_t address);
  void map_range(std::uint64_t address, std::uint64_t size, std::uint64_t stream);
  void unmap_range(std::uint64_t address, std::uint64_t size);
  // allocated_bytes_ += bytes, held at the int64 limits; allocated_saturated_ remembers it did.
  void add_allocated(std::int64_t bytes);

  block_map blocks_;
  range_map mapped_;  // reserved ranges by address
  // What apply() keeps from one event to the next (rlmem/model/detail/live_set_hints.hpp).
  using pass_hints = detail::pass_hints<block_map, range_map>;
  pass_hints hints_;
  const snapshot* snap_ = nullptr;  // for the streams of segment events
  allocator_settings settings_;  // the recording's
  std::int64_t allocated_bytes_ = 0;
  bool allocated_saturated_ = false;  // allocated_bytes_ reached a limit once: no longer the blocks' sum
  std::uint64_t frees_of_earlier_blocks_ = 0;
  std::uint64_t inconsistencies_ = 0;
};

/// Reserved bytes of `device` before its first event: the final segments minus the trace's
/// net segment growth.
std::int64_t reserved_at_trace_start(const snapshot& snap, std::int64_t device, std::span<const trace_event> events);

/// The change in reserved bytes an event makes (segment events only).
std::int64_t reserved_delta(const trace_event& event) noexcept;

}  // namespace rlmem
