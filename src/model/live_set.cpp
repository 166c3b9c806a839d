// SPDX-License-Identifier: MIT
// Live allocations: undo the trace from the dump-time blocks, then replay forward.

#include <rlmem/model/allocator_rules.hpp>
#include <rlmem/model/live_set.hpp>
#include <rlmem/base/saturating.hpp>

#include <algorithm>
#include <iterator>
#include <string>
#include <unordered_map>

namespace rlmem {

std::int64_t reserved_delta(const trace_event& event) noexcept {
  switch (event.action) {
    case trace_action::segment_alloc:
    case trace_action::segment_map: return signed_bytes(event.size);
    case trace_action::segment_free:
    case trace_action::segment_unmap: return -signed_bytes(event.size);
    default: return 0;
  }
}

std::int64_t reserved_at_trace_start(const snapshot& snap, std::int64_t device, std::span<const trace_event> events) {
  std::int64_t reserved = 0;
  for (const segment& seg : snap.segments) {
    if (seg.device == device) reserved = saturating_add(reserved, signed_bytes(seg.total_size));
  }
  for (const trace_event& event : events) reserved = saturating_add(reserved, -reserved_delta(event));
  return reserved;
}

void live_set::map_range(std::uint64_t address, std::uint64_t size, std::uint64_t stream) {
  if (size == 0) return;
  hints_.range_known = false;
  auto range = mapped_.try_emplace(address, mapped_range{0, stream}).first;
  range->second.bytes = std::max(range->second.bytes, size);
  range->second.stream = stream;
  if (!settings_.expandable_segments) return;
  // Under expandable segments a run of mapped pages of one stream is one segment, however its
  // pages were mapped: join the run with the ranges it touches, so that a block that was live
  // across a page mapped later (the trace undone from the dump) lies in one range.
  if (range != mapped_.begin()) {
    auto before = std::prev(range);
    if (before->second.stream == stream && before->first + before->second.bytes == address) {
      before->second.bytes += range->second.bytes;
      mapped_.erase(range);
      range = before;
    }
  }
  for (auto after = std::next(range); after != mapped_.end() && after->second.stream == stream &&
                                      after->first == range->first + range->second.bytes;
       after = mapped_.erase(after)) {
    range->second.bytes += after->second.bytes;
  }
}

void live_set::unmap_range(std::uint64_t address, std::uint64_t size) {
  hints_.range_known = false;
  std::uint64_t end = address + size;
  auto range = mapped_.upper_bound(address);
  if (range != mapped_.begin()) --range;
  while (range != mapped_.end() && range->first < end) {
    std::uint64_t start = range->first;
    std::uint64_t stop = start + range->second.bytes;
    std::uint64_t stream = range->second.stream;
    range = mapped_.erase(range);
    if (start < address) mapped_[start] = {std::min(stop, address) - start, stream};
    if (stop > end) mapped_[end] = {stop - end, stream};
  }
}

live_set::range_map::const_iterator live_set::range_at_or_below(std::uint64_t address) {
  if (hints_.range_known) {
    auto after = std::next(hints_.range);
    if (hints_.range->first <= address && (after == mapped_.end() || after->first > address)) return hints_.range;
  }
  auto range = mapped_.upper_bound(address);
  if (range == mapped_.begin()) return mapped_.end();
  --range;
  hints_.range_known = true;
  hints_.range = range;
  return range;
}

std::uint64_t live_set::block_size_for(const trace_event& event, block_map::const_iterator next_block) {
  std::uint64_t rounded = round_request(event.size, settings_);
  // Expandable segments map pages on demand: a segment's mapped bytes are not one contiguous
  // range, so the free space after a block cannot be read off the segments. The dumps we have
  // show their blocks at the rounded size.
  if (settings_.expandable_segments) return rounded;
  // End of the reserved memory that holds the address (adjacent mapped ranges are one segment).
  auto range = range_at_or_below(event.addr);
  if (range == mapped_.end()) return rounded;
  std::uint64_t reserved_end = range->first + range->second.bytes;
  if (reserved_end <= event.addr) return rounded;
  std::uint64_t free_end = next_block == blocks_.end() ? reserved_end : std::min(reserved_end, next_block->first);
  if (free_end < event.addr + rounded) return rounded;
  std::uint64_t free_bytes = free_end - event.addr;
  return should_split(free_bytes, rounded, settings_) ? rounded : free_bytes;
}

live_set live_set::at_trace_start(const snapshot& snap, std::int64_t device, std::span<const trace_event> events,
                                   const allocator_settings& recorded) {
  live_set state;
  state.snap_ = &snap;
  state.settings_ = recorded;
  // The first event of each address says whether its block predates the trace: a free first
  // means it was allocated before recording began, an alloc first means it was not. This is
  // undoing the trace from the dump, done in one forward pass over a hash map. A free_completed
  // first (no free_requested before it: torch versions that record only the completion, or a
  // ring buffer cut between the two) is a block that was live, and allocated, at trace start.
  struct first_touch {
    trace_action action;
    std::uint64_t size;
    stack_id stack;
  };
  std::unordered_map<std::uint64_t, first_touch> first;
  first.reserve(1u << 14);
  for (const trace_event& event : events) {
    if (event.action == trace_action::alloc || event.action == trace_action::free_requested ||
        event.action == trace_action::free_completed) {
      first.try_emplace(event.addr, first_touch{event.action, event.size, event.stack});
    }
  }
  for (const auto& [address, touch] : first) {
    if (touch.action == trace_action::alloc) continue;
    state.blocks_[address] = {round_request(touch.size, recorded), touch.stack, false, true};
  }
  for (const segment& seg : snap.segments) {
    if (seg.device != device) continue;
    state.map_range(seg.address, seg.total_size, seg.stream);
    for (const block& held : snap.blocks_of(seg)) {
      if (held.state != block_state::active_allocated && held.state != block_state::active_pending_free) continue;
      if (first.contains(held.address)) continue;  // the trace decided above
      state.blocks_[held.address] = {held.size, held.stack, held.state == block_state::active_pending_free, true};
    }
  }
  // Reserved ranges: undo the segment events from the last to the first.
  for (auto event = events.rbegin(); event != events.rend(); ++event) {
    if (event->action == trace_action::segment_alloc || event->action == trace_action::segment_map) {
      state.unmap_range(event->addr, event->size);
    } else if (event->action == trace_action::segment_free || event->action == trace_action::segment_unmap) {
      state.map_range(event->addr, event->size, snap.streams[snap.tag_of(*event).stream]);
    }
  }
  for (auto& [address, held] : state.blocks_) {
    held.before_trace = true;
    if (!held.pending_free) state.add_allocated(signed_bytes(held.bytes));
  }
  return state;
}

void live_set::add_allocated(std::int64_t bytes) {
  std::int64_t sum = 0;
  if (!__builtin_add_overflow(allocated_bytes_, bytes, &sum)) {
    allocated_bytes_ = sum;
    return;
  }
  allocated_bytes_ = saturating_add(allocated_bytes_, bytes);
  allocated_saturated_ = true;
}

std::optional<std::string> live_set::broken_invariant(invariant_scope scope) const {
  if (allocated_saturated_) return std::nullopt;
  if (allocated_bytes_ < 0) return "allocated bytes below 0: " + std::to_string(allocated_bytes_);
  if (scope == invariant_scope::totals) return std::nullopt;
  std::int64_t allocated = 0;
  for (const auto& [address, held] : blocks_) {
    if (!held.pending_free && __builtin_add_overflow(allocated, signed_bytes(held.bytes), &allocated)) {
      return "allocated bytes: counted " + std::to_string(allocated_bytes_) + ", the live blocks not pending free hold 2^63 or more";
    }
  }
  if (allocated != allocated_bytes_) {
    return "allocated bytes: counted " + std::to_string(allocated_bytes_) + ", the live blocks not pending free hold " + std::to_string(allocated);
  }
  return std::nullopt;
}

live_set::block_map::iterator live_set::find_block(std::uint64_t address) {
  pass_hints::known_block& known = hints_.known[pass_hints::known_slot(address)];
  if (known.set && known.address == address) return known.block;
  auto found = blocks_.find(address);
  if (found != blocks_.end()) known = {address, found, true};
  return found;
}

allocation_change live_set::apply(const trace_event& event) {
  allocation_change change;
  auto freed = [&](const live_block& held) {
    add_allocated(-signed_bytes(held.bytes));
    change.bytes = -signed_bytes(held.bytes);
    change.count = -1;
    change.stack = held.stack;
    change.before_trace = held.before_trace;
  };
  switch (event.action) {
    case trace_action::alloc: {
      // One descent finds both the next block (for the size) and where the new one goes.
      auto next_block = blocks_.upper_bound(event.addr);
      live_block made{block_size_for(event, next_block), event.stack, false, false};
      if (next_block != blocks_.begin() && std::prev(next_block)->first == event.addr) {
        auto found = std::prev(next_block);
        ++inconsistencies_;
        const live_block& replaced = found->second;
        if (!replaced.pending_free) {
          add_allocated(-signed_bytes(replaced.bytes));
          change.replaced_bytes = -signed_bytes(replaced.bytes);
          change.replaced_stack = replaced.stack;
          change.replaced_before_trace = replaced.before_trace;
        }
        found->second = made;
      } else {
        auto inserted = blocks_.end();
        if (!hints_.spare.empty()) {
          hints_.spare.key() = event.addr;
          hints_.spare.mapped() = made;
          inserted = blocks_.insert(next_block, std::move(hints_.spare));
        } else {
          inserted = blocks_.emplace_hint(next_block, event.addr, made);
        }
        hints_.known[pass_hints::known_slot(event.addr)] = {event.addr, inserted, true};
      }
      add_allocated(signed_bytes(made.bytes));
      change.bytes = signed_bytes(made.bytes);
      change.count = 1;
      change.stack = made.stack;
      change.before_trace = false;
      break;
    }
    case trace_action::free_requested: {
      auto found = find_block(event.addr);
      if (found == blocks_.end()) {
        ++inconsistencies_;
        break;
      }
      if (found->second.before_trace) ++frees_of_earlier_blocks_;
      if (!found->second.pending_free) freed(found->second);
      found->second.pending_free = true;
      break;
    }
    case trace_action::free_completed: {
      auto found = find_block(event.addr);
      if (found == blocks_.end()) {
        ++inconsistencies_;
        break;
      }
      if (!found->second.pending_free) {
        // A free_completed with no free_requested before it: the request fell out of the trace.
        if (found->second.before_trace) ++frees_of_earlier_blocks_;
        freed(found->second);
      }
      hints_.known[pass_hints::known_slot(event.addr)].set = false;  // found there by find_block
      hints_.spare = blocks_.extract(found);
      break;
    }
    case trace_action::segment_alloc:
    case trace_action::segment_map:
      map_range(event.addr, event.size, snap_->streams[snap_->tag_of(event).stream]);
      break;
    case trace_action::segment_free:
    case trace_action::segment_unmap:
      unmap_range(event.addr, event.size);
      break;
    default:
      break;
  }
  return change;
}

std::vector<free_space> live_set::free_spaces() const {
  std::vector<free_space> spaces;
  spaces.reserve(mapped_.size());
  for (const auto& [start, range] : mapped_) {
    std::uint64_t end = start + range.bytes;
    free_space space{range.bytes, range.stream, 0, 0};
    std::uint64_t cursor = start;
    for (auto held = blocks_.lower_bound(start); held != blocks_.end() && held->first < end; ++held) {
      if (held->first > cursor) {
        space.free_bytes += held->first - cursor;
        space.largest_free_bytes = std::max(space.largest_free_bytes, held->first - cursor);
      }
      cursor = std::max(cursor, held->first + held->second.bytes);
    }
    if (end > cursor) {
      space.free_bytes += end - cursor;
      space.largest_free_bytes = std::max(space.largest_free_bytes, end - cursor);
    }
    spaces.push_back(space);
  }
  return spaces;
}

}  // namespace rlmem
