// SPDX-License-Identifier: MIT
// The rlmem policy: best fit in per-stream address space, pages mapped under blocks and counted
// by the blocks that use them.

#include <rlmem/policy/allocator_policy.hpp>
#include <rlmem/policy/rlmem_policy.hpp>

#include <algorithm>
#include <string>
#include <type_traits>

namespace rlmem {

namespace {

std::uint64_t round_up(std::uint64_t value, std::uint64_t unit) { return (value + unit - 1) / unit * unit; }

}  // namespace

rlmem_policy::rlmem_policy(device& gpu, rlmem_policy_options options)
    : gpu_(gpu), options_(options), page_bytes_(gpu.config().granularity) {
  options_.reservation_bytes = round_up(std::max(options_.reservation_bytes, page_bytes_), page_bytes_);
}

rlmem_policy::~rlmem_policy() {
  // Everything back to the device, pages first (a reservation is freed with nothing mapped).
  if (mapped_pages_ > 0) gpu_.synchronize();
  for (const auto& [address, held] : pages_) {
    if (held.handle == 0 || held.run != 0) continue;
    gpu_.unmap(address, page_bytes_);
    gpu_.release(held.handle);
  }
  for (const auto& [start, run] : runs_) {
    gpu_.unmap(start, run.bytes);
    gpu_.release(run.handle);
  }
  for (const auto& [stream, space] : arenas_) gpu_.free_reservation(space.base, space.size);
}

rlmem_policy::arena* rlmem_policy::arena_of(std::uint64_t stream) {
  auto found = arenas_.find(stream);
  if (found != arenas_.end()) return &found->second;
  std::uint64_t base = 0;
  if (device_errc code = gpu_.reserve(options_.reservation_bytes, 0, base); code != device_errc::ok) {
    if (code != device_errc::out_of_memory) fault_ = "reserve: " + std::string(error_name(code));
    return nullptr;
  }
  return &add_arena(stream, base, options_.reservation_bytes);
}

rlmem_policy::arena& rlmem_policy::add_arena(std::uint64_t key, std::uint64_t base, std::uint64_t size) {
  arena& made = arenas_.try_emplace(key).first->second;  // built in place: its spans point at its head
  made.base = base;
  made.size = size;
  made.key = key;
  made.head.start = base;
  made.head.end = base;
  made.head.live = true;
  return made;
}

namespace {

// Inserts `entry` with a node left by an earlier erase when there is one.
template <typename Set>
typename Set::iterator insert_reusing(Set& set, std::vector<typename Set::node_type>& spare, typename Set::value_type entry) {
  if (spare.empty()) return set.insert(entry).first;
  typename Set::node_type node = std::move(spare.back());
  spare.pop_back();
  node.value() = entry;
  return set.insert(std::move(node)).position;
}

}  // namespace

void rlmem_policy::enter_gaps(arena& where, span* before) {
  before->gap_entry = insert_reusing(where.gaps_by_size, spare_gap_nodes_, before);
}

void rlmem_policy::leave_gaps(arena& where, span* before) {
  spare_gap_nodes_.push_back(where.gaps_by_size.extract(before->gap_entry));
}

void rlmem_policy::enter_mapped_free(arena& where, span* range) {
  range->mapped_free_entry = insert_reusing(where.mapped_free_by_size, spare_mapped_free_nodes_, range);
}

void rlmem_policy::leave_mapped_free(arena& where, span* range) {
  spare_mapped_free_nodes_.push_back(where.mapped_free_by_size.extract(range->mapped_free_entry));
}

rlmem_policy::span* rlmem_policy::new_span(std::uint64_t start, std::uint64_t end, bool live) {
  span* made = nullptr;
  if (!recycled_.empty()) {
    made = recycled_.back();
    recycled_.pop_back();
  } else {
    made = &storage_.emplace_back();
  }
  *made = span{};
  made->start = start;
  made->end = end;
  made->live = live;
  return made;
}

void rlmem_policy::link_after(span* at, span* added) {
  added->prev = at;
  added->next = at->next;
  if (at->next != nullptr) at->next->prev = added;
  at->next = added;
}

rlmem_policy::span* rlmem_policy::live_before(span* at) {
  span* before = at->prev;
  while (!before->live) before = before->prev;  // the head is live
  return before;
}

void rlmem_policy::unlink(span* gone) {
  gone->prev->next = gone->next;  // every span but the head has one before it
  if (gone->next != nullptr) gone->next->prev = gone->prev;
}

// A request of mapped_first_bytes or more: best fit among the free ranges on mapped pages, which
// needs no new memory. Otherwise (and for smaller requests, which fill the pages live blocks
// share) best fit among the free gaps, else the top of the arena; the lowest address among
// equals. Placing by gap alone mapped new pages where a gap fitted best while pages freed
// elsewhere stayed cached: under a cap near the demand that ran out of memory about once a step
// and released the whole cache (docs/runtime.md, "Why rlmem released about once a step").
rlmem_policy::span* rlmem_policy::place(arena& where, std::uint64_t size) {
  if (options_.mapped_first_bytes > 0 && size >= options_.mapped_first_bytes) {
    auto fit = where.mapped_free_by_size.lower_bound(size_key{size, 0});
    if (fit != where.mapped_free_by_size.end()) {
      return carve(where, live_before(*fit), (*fit)->start, size);
    }
  }
  auto fit = where.gaps_by_size.lower_bound(size_key{size, 0});
  if (fit != where.gaps_by_size.end()) return carve(where, *fit, (*fit)->end, size);
  std::uint64_t top = where.highest->end;
  if (size > where.base + where.size - top) return nullptr;
  return carve(where, where.highest, top, size);
}

rlmem_policy::span* rlmem_policy::carve(arena& where, span* before, std::uint64_t address, std::uint64_t size) {
  span* block = new_span(address, address + size, true);
  if (before == where.highest) {
    // Above the top: the space below the block (a mapped range above the top) becomes a gap.
    before->gap_after = address - before->end;
    where.highest = block;
  } else {
    std::uint64_t gap_end = before->end + before->gap_after;
    leave_gaps(where, before);
    before->gap_after = address - before->end;
    block->gap_after = gap_end - block->end;
    if (block->gap_after > 0) enter_gaps(where, block);
  }
  if (before->gap_after > 0) enter_gaps(where, before);
  where.cursor = before;
  remove_mapped_free(where, address, block->end);
  // After the mapped free ranges below the block, which now all end at or before it.
  span* at = before;
  while (at->next != nullptr && at->next->start < address) at = at->next;
  link_after(at, block);
  return block;
}

void rlmem_policy::give_back(arena& where, span* block) {
  span* before = live_before(block);
  if (before->gap_after > 0) leave_gaps(where, before);
  if (block == where.highest) {
    before->gap_after = 0;
    where.highest = before;
  } else {
    if (block->gap_after > 0) leave_gaps(where, block);
    before->gap_after += block->end - block->start + block->gap_after;
    enter_gaps(where, before);
  }
  unlink(block);
  where.cursor = before;
}

rlmem_policy::span* rlmem_policy::live_at_or_before(arena& where, std::uint64_t address) {
  if (where.cursor->start > address) where.cursor = &where.head;
  for (span* at = where.cursor->next; at != nullptr && at->start <= address; at = at->next) {
    if (at->live) where.cursor = at;
  }
  return where.cursor;
}

// Merges with a range that ends at `begin` or starts at `end`; a live span never lies between.
void rlmem_policy::add_mapped_free(arena& where, std::uint64_t begin, std::uint64_t end) {
  if (begin >= end) return;
  span* at = live_at_or_before(where, begin);
  while (at->next != nullptr && at->next->start <= begin) at = at->next;
  span* range = nullptr;
  if (!at->live && at->end >= begin) {
    range = at;
    leave_mapped_free(where, range);
    end = std::max(end, range->end);
  } else {
    range = new_span(begin, end, false);
    link_after(at, range);
  }
  while (range->next != nullptr && !range->next->live && range->next->start <= end) {
    span* joined = range->next;
    leave_mapped_free(where, joined);
    end = std::max(end, joined->end);
    unlink(joined);
    recycled_.push_back(joined);
  }
  range->end = end;
  enter_mapped_free(where, range);
}

void rlmem_policy::remove_mapped_free(arena& where, std::uint64_t begin, std::uint64_t end) {
  span* at = live_at_or_before(where, begin);
  while (at != nullptr && at->end <= begin) at = at->next;
  while (at != nullptr && at->start < end) {
    span* next = at->next;
    if (!at->live) {
      std::uint64_t start = at->start;
      std::uint64_t stop = at->end;
      leave_mapped_free(where, at);
      if (start < begin) {
        at->end = begin;
        enter_mapped_free(where, at);
      }
      if (stop > end) {
        span* rest = at;
        if (start < begin) {
          rest = new_span(end, stop, false);
          link_after(at, rest);
        } else {
          rest->start = end;
        }
        enter_mapped_free(where, rest);
        return;
      }
      if (start >= begin) {
        unlink(at);
        recycled_.push_back(at);
      }
    }
    at = next;
  }
}

void rlmem_policy::add_free_parts(arena& where, std::uint64_t begin, std::uint64_t end) {
  if (where.growable) return;  // its bytes are the buffer's, never free
  // The free bytes after each live span from the one at or before `begin`, up to the next.
  for (span* live = live_at_or_before(where, begin); live != nullptr;) {
    span* next_live = live->next;
    while (next_live != nullptr && !next_live->live) next_live = next_live->next;
    std::uint64_t free_end = next_live != nullptr ? next_live->start : where.base + where.size;
    add_mapped_free(where, std::max(begin, live->end), std::min(end, free_end));
    if (free_end >= end) return;
    live = next_live;
  }
}

void rlmem_policy::add_mapped_parts(arena& where, std::uint64_t begin, std::uint64_t end) {
  // Each run of consecutive mapped pages joins as one range.
  std::uint64_t run_start = 0;
  std::uint64_t run_end = 0;
  for (auto at = pages_.lower_bound(begin / page_bytes_ * page_bytes_); at != pages_.end() && at->first < end; ++at) {
    if (at->second.handle == 0) continue;
    if (at->first != run_end) {
      add_mapped_free(where, std::max(begin, run_start), std::min(end, run_end));
      run_start = at->first;
    }
    run_end = at->first + page_bytes_;
  }
  add_mapped_free(where, std::max(begin, run_start), std::min(end, run_end));
}

// Under the capacity (set_per_process_memory_fraction); the device's own memory is its to refuse.
bool rlmem_policy::room_for(std::uint64_t pages) const noexcept {
  return options_.capacity_bytes == 0 || (mapped_pages_ + pages) * page_bytes_ <= options_.capacity_bytes;
}

void rlmem_policy::record(bool alloc, std::uint64_t address, const arena& owner) {
  if (options_.keep_segment_events) events_.push_back({alloc, address, page_bytes_});
  if (observer_) observer_(alloc, address, page_bytes_, owner.key);
}

physical_handle rlmem_policy::new_memory(std::uint64_t address, std::uint64_t bytes) {
  physical_handle handle = 0;
  if (device_errc code = map_new_memory(gpu_, address, bytes, handle); code != device_errc::ok) {
    if (code != device_errc::out_of_memory) fault_ = "mapping memory: " + std::string(error_name(code));
    return 0;
  }
  return handle;
}

bool rlmem_policy::map_page(arena& owner, std::uint64_t address) {
  if (!room_for(1)) return false;
  physical_handle handle = new_memory(address, page_bytes_);
  if (handle == 0) return false;
  pages_.emplace(address, page{handle, 1, &owner});
  ++mapped_pages_;
  ++owner.mapped_pages;
  record(true, address, owner);
  return true;
}

bool rlmem_policy::map_new_run(arena& owner, std::uint64_t address, std::uint64_t bytes) {
  if (bytes == page_bytes_) return map_page(owner, address);
  std::uint64_t pages = bytes / page_bytes_;
  if (!room_for(pages)) return false;
  physical_handle handle = new_memory(address, bytes);
  if (handle == 0) return false;
  runs_.emplace(address, memory_run{handle, bytes});
  for (std::uint64_t at = address; at < address + bytes; at += page_bytes_) {
    pages_.emplace(at, page{handle, 1, &owner, address});
    record(true, at, owner);
  }
  mapped_pages_ += pages;
  owner.mapped_pages += pages;
  return true;
}

// Every page under [address, address + size) gains a user; those no one had are mapped, the
// ones wholly inside the block in runs. On failure the pages taken so far are left again and
// those this call mapped go back to the device: nothing changed.
bool rlmem_policy::map_pages(arena& owner, span& block) {
  std::uint64_t address = block.start;
  std::uint64_t end = block.end;
  std::uint64_t first = address / page_bytes_ * page_bytes_;
  std::uint64_t last = (end - 1) / page_bytes_ * page_bytes_;
  std::uint64_t most = std::max(page_bytes_, options_.allocation_run_bytes / page_bytes_ * page_bytes_);
  // An end page mapped before this call has its free parts among the mapped free ranges already.
  bool first_was_mapped = false;
  bool last_was_mapped = false;
  std::vector<std::uint64_t> mapped_here;  // the start of each page or run this call mapped
  std::uint64_t at = first;
  bool ok = true;
  // The first page at or after `at` that someone has: one search, then a step per page.
  auto found = pages_.lower_bound(first);
  while (at < end) {
    bool held = found != pages_.end() && found->first == at;
    if (at == first) {
      first_was_mapped = held;
      block.first_page = found;
    }
    if (at == last) last_was_mapped = held;
    if (held && found->second.handle == 0) {
      fault_ = "a block placed in a paused range";
      ok = false;
      break;
    }
    if (held) {
      if (found->second.users++ == 0) --cached_pages_;
      ++found;
      at += page_bytes_;
      continue;
    }
    // A page at either end of the block may be shared later: alone. Inside: as long a run of
    // pages no one has as the block covers.
    std::uint64_t bytes = page_bytes_;
    if (at >= address) {
      while (bytes < most && at + bytes + page_bytes_ <= end && (found == pages_.end() || found->first != at + bytes)) bytes += page_bytes_;
    }
    if (!map_new_run(owner, at, bytes)) {
      ok = false;
      break;
    }
    mapped_here.push_back(at);
    at += bytes;
  }
  if (ok) {
    // The free parts of end pages this call mapped are mapped free ranges now. (Walking them for
    // every request made small requests in pages shared by many blocks cost about 10 us each.)
    if (!first_was_mapped) {
      block.first_page = pages_.find(first);
      add_free_parts(owner, first, address);
    }
    if (!last_was_mapped) add_free_parts(owner, end, round_up(end, page_bytes_));
    return true;
  }
  // Pages mapped by this call were never used: no fence is needed to give them back.
  if (at > first) leave_pages(first, at - first, pages_.find(first));
  for (std::uint64_t start : mapped_here) {
    auto held = pages_.find(start);
    if (held == pages_.end() || held->second.users > 0) continue;  // already given back, or shared meanwhile
    if (held->second.run != 0) {
      unmap_run(start);
    } else {
      --cached_pages_;
      unmap_page(start);
    }
  }
  return false;
}

void rlmem_policy::unmap_page(std::uint64_t address) {
  auto found = pages_.find(address);
  gpu_.unmap(address, page_bytes_);
  gpu_.release(found->second.handle);
  --mapped_pages_;
  arena& owner = *found->second.owner;
  --owner.mapped_pages;
  pages_.erase(found);
  remove_mapped_free(owner, address, address + page_bytes_);
  record(false, address, owner);
}

// A page no block uses any more is cached, or (release_free_pages) unmapped once the device is
// fenced; a paused one has no memory left to give back.
bool rlmem_policy::leave_pages(std::uint64_t address, std::uint64_t size, page_map::iterator first_page) {
  std::uint64_t first = address / page_bytes_ * page_bytes_;
  auto found = first_page;
  bool all_mapped = true;
  for (std::uint64_t at = first; at < address + size; at += page_bytes_) {
    // A block's pages are consecutive entries: step to the next rather than search for it.
    if (found == pages_.end() || found->first != at) found = pages_.find(at);
    if (--found->second.users > 0) {
      ++found;
      continue;
    }
    if (found->second.handle == 0) {
      --paused_pages_;
      all_mapped = false;
      found = pages_.erase(found);
      continue;
    }
    ++cached_pages_;
    std::uint64_t run = found->second.run;
    if (options_.release_free_pages && (run == 0 || run_unused(run))) {
      gpu_.synchronize();
      release_unused_page(at);
      all_mapped = false;
      found = pages_.lower_bound(at + page_bytes_);
      continue;
    }
    ++found;
  }
  return all_mapped;
}

void rlmem_policy::release_unused_page(std::uint64_t address) {
  std::uint64_t run = pages_.at(address).run;
  if (run != 0) {
    unmap_run(run);
    return;
  }
  --cached_pages_;
  unmap_page(address);
}

bool rlmem_policy::release_cached_pages() {
  if (cached_pages_ == 0) return false;
  gpu_.synchronize();
  bool released = false;
  for (auto at = pages_.begin(); at != pages_.end();) {
    const page& held = at->second;
    std::uint64_t address = at->first;
    if (held.users > 0 || held.handle == 0) {
      ++at;
      continue;
    }
    if (held.run != 0) {
      // A run goes back only once none of its pages is used; either way, on past its end.
      std::uint64_t start = held.run;
      std::uint64_t end = start + runs_.at(start).bytes;
      if (run_unused(start)) {
        unmap_run(start);
        released = true;
      }
      at = pages_.lower_bound(end);
      continue;
    }
    release_unused_page(address);
    released = true;
    at = pages_.upper_bound(address);
  }
  return released;
}

bool rlmem_policy::run_unused(std::uint64_t start) const {
  const memory_run& run = runs_.at(start);
  for (auto at = pages_.find(start); at != pages_.end() && at->first < start + run.bytes; ++at) {
    if (at->second.users > 0) return false;
  }
  return true;
}

bool rlmem_policy::map_restored_run(std::uint64_t address, std::uint64_t bytes) {
  physical_handle handle = new_memory(address, bytes);
  if (handle == 0) return false;
  bool alone = bytes == page_bytes_;  // a run of one page is an ordinary page
  if (!alone) runs_.emplace(address, memory_run{handle, bytes});
  for (std::uint64_t at = address; at < address + bytes; at += page_bytes_) {
    page& held = pages_.at(at);
    held.handle = handle;
    held.run = alone ? 0 : address;
    --paused_pages_;
    ++mapped_pages_;
    ++held.owner->mapped_pages;
    record(true, at, *held.owner);
  }
  add_free_parts(*pages_.at(address).owner, address, address + bytes);
  return true;
}

bool rlmem_policy::unmap_run(std::uint64_t start) {
  auto found = runs_.find(start);
  memory_run run = found->second;
  device_errc code = gpu_.unmap(start, run.bytes);
  if (code == device_errc::ok) code = gpu_.release(run.handle);
  if (code != device_errc::ok) {
    fault_ = "releasing restored memory: " + std::string(error_name(code));
    return false;
  }
  runs_.erase(found);
  for (std::uint64_t address = start; address < start + run.bytes; address += page_bytes_) {
    auto at = pages_.find(address);
    page& held = at->second;
    --mapped_pages_;
    --held.owner->mapped_pages;
    remove_mapped_free(*held.owner, address, address + page_bytes_);
    record(false, address, *held.owner);
    if (held.users == 0) {
      --cached_pages_;
      pages_.erase(at);
    } else {
      held.handle = 0;
      held.run = 0;
      ++paused_pages_;
    }
  }
  return true;
}

model_block* rlmem_policy::allocate(std::uint64_t requested_bytes, std::uint64_t stream) {
  if (requested_bytes > options_.reservation_bytes) return nullptr;
  std::uint64_t size = round_up(std::max<std::uint64_t>(requested_bytes, 1), min_block_bytes);
  arena* where = arena_of(stream);
  if (where == nullptr) return nullptr;
  span* placed = place(*where, size);
  if (placed == nullptr) return nullptr;
  if (!map_pages(*where, *placed)) {
    // Short of memory: every cached page goes back, with one fence, and the request tries again
    // (as torch's allocator frees its whole cache: releasing a little each time fenced 10 times
    // as often under a cap of 1.1x the demand, for steps 15% slower).
    bool released = release_cached_pages();
    bool mapped = released && map_pages(*where, *placed);
    if (released) ++retries_;
    if (!mapped) {
      give_back(*where, placed);
      add_mapped_parts(*where, placed->start, placed->end);
      recycled_.push_back(placed);
      return nullptr;
    }
  }
  allocated_bytes_ += static_cast<std::int64_t>(size);
  model_block& block = placed->block;
  block.ptr = placed->start;
  block.size = size;
  block.stream = stream;
  block.allocated = true;
  block.in_use = true;
  block.expandable = true;
  return &block;
}

void rlmem_policy::free_requested(model_block* block) {
  if (!block->allocated) return;
  block->allocated = false;
  allocated_bytes_ -= static_cast<std::int64_t>(block->size);
}

void rlmem_policy::free_completed(model_block* block) {
  static_assert(std::is_standard_layout_v<span>, "a span's address is its block's");
  span* freed = reinterpret_cast<span*>(block);
  free_requested(block);
  block->in_use = false;
  arena& owner = arenas_.at(block->stream);
  // Pages it gives back lie above the live block before it (whose own pages stay in use).
  owner.cursor = live_before(freed);
  bool all_mapped = leave_pages(freed->start, block->size, freed->first_page);
  give_back(owner, freed);
  // A live block's pages are mapped unless paused or just given back: only then walk them.
  if (all_mapped) {
    add_mapped_free(owner, freed->start, freed->end);
  } else {
    add_mapped_parts(owner, freed->start, freed->end);
  }
  recycled_.push_back(freed);
}

std::vector<model_block*> rlmem_policy::add_existing_segment(std::uint64_t, std::uint64_t, std::uint64_t stream,
                                                             const std::vector<model_block>& live, bool, bool) {
  std::vector<model_block*> made;
  for (const model_block& held : live) {
    model_block* block = allocate(held.size, stream);
    if (block == nullptr) break;  // the caller sees fewer blocks than it gave
    if (!held.allocated) free_requested(block);
    made.push_back(block);
  }
  return made;
}

std::uint64_t rlmem_policy::segments() const noexcept {
  std::uint64_t runs = 0;
  std::uint64_t end = 0;
  for (const auto& [address, held] : pages_) {
    if (held.handle == 0) continue;
    if (runs == 0 || address != end) ++runs;
    end = address + page_bytes_;
  }
  return runs;
}

bool rlmem_policy::reserve_growable(std::uint64_t key, std::uint64_t max_bytes, std::uint64_t& base) {
  if (max_bytes > options_.reservation_bytes) return false;  // and round_up cannot wrap past 2^64
  std::uint64_t size = round_up(std::max<std::uint64_t>(max_bytes, 1), page_bytes_);
  if (device_errc code = gpu_.reserve(size, 0, base); code != device_errc::ok) {
    if (code != device_errc::out_of_memory) fault_ = "reserve: " + std::string(error_name(code));
    return false;
  }
  add_arena(key, base, size).growable = true;
  return true;
}

bool rlmem_policy::grow(std::uint64_t key, std::uint64_t bytes) {
  arena& buffer = arenas_.at(key);
  if (bytes > buffer.size) return false;  // and round_up cannot wrap past 2^64
  std::uint64_t wanted = round_up(bytes, page_bytes_);
  std::uint64_t start = buffer.grown_bytes;
  for (std::uint64_t at = buffer.base + start; buffer.grown_bytes < wanted; at += page_bytes_) {
    bool mapped = map_page(buffer, at);
    if (!mapped && fault_.empty() && release_cached_pages()) {
      ++retries_;
      mapped = map_page(buffer, at);
    }
    if (!mapped) {
      // Pages mapped by this call were never used: no fence is needed to give them back.
      for (std::uint64_t back = buffer.base + start; back < at; back += page_bytes_) unmap_page(back);
      buffer.grown_bytes = start;
      return false;
    }
    buffer.grown_bytes += page_bytes_;
  }
  return true;
}

std::uint64_t rlmem_policy::grown_bytes(std::uint64_t key) const {
  auto found = arenas_.find(key);
  return found == arenas_.end() ? 0 : found->second.grown_bytes;
}

void rlmem_policy::release_growable(std::uint64_t key) {
  auto found = arenas_.find(key);
  if (found == arenas_.end()) return;
  arena& buffer = found->second;
  if (buffer.mapped_pages > 0) gpu_.synchronize();
  for (auto at = pages_.lower_bound(buffer.base); at != pages_.end() && at->first < buffer.base + buffer.size;) {
    std::uint64_t address = at->first;
    if (at->second.run != 0) {
      // Its pages come back paused (the buffer uses them) and are dropped as such below.
      unmap_run(at->second.run);
      at = pages_.lower_bound(address);
      continue;
    }
    ++at;
    if (pages_.at(address).handle != 0) {
      unmap_page(address);
    } else {
      pages_.erase(address);
      --paused_pages_;
    }
  }
  gpu_.free_reservation(buffer.base, buffer.size);
  arenas_.erase(found);
}

bool rlmem_policy::arena_range(std::uint64_t stream, address_run& range) const {
  auto found = arenas_.find(stream);
  if (found == arenas_.end()) return false;
  range = {found->second.base, found->second.size};
  return true;
}

std::uint64_t rlmem_policy::arena_mapped_bytes(std::uint64_t stream) const {
  auto found = arenas_.find(stream);
  return found == arenas_.end() ? 0 : found->second.mapped_pages * page_bytes_;
}

template <typename Wanted>
std::vector<address_run> rlmem_policy::runs_of_pages(address_run range, Wanted wanted) const {
  std::vector<address_run> runs;
  for (auto at = pages_.lower_bound(range.address); at != pages_.end() && at->first < range.address + range.bytes; ++at) {
    if (!wanted(at->second)) continue;
    if (!runs.empty() && runs.back().address + runs.back().bytes == at->first) {
      runs.back().bytes += page_bytes_;
    } else {
      runs.push_back({at->first, page_bytes_});
    }
  }
  return runs;
}

std::vector<address_run> rlmem_policy::mapped_runs(address_run range) const {
  return runs_of_pages(range, [](const page& held) { return held.handle != 0; });
}

std::vector<address_run> rlmem_policy::used_runs(address_run range) const {
  return runs_of_pages(range, [](const page& held) { return held.users > 0; });
}

bool rlmem_policy::release_range(address_run range, bool fenced) {
  if (!fenced) gpu_.synchronize();
  for (auto at = pages_.lower_bound(range.address); at != pages_.end() && at->first < range.address + range.bytes;) {
    page& held = at->second;
    if (held.handle == 0) {
      ++at;
      continue;
    }
    std::uint64_t address = at->first;
    if (held.run != 0) {
      // A restored run goes as a whole once the range reaches its end; the pages of it after
      // `range` are released with a later range (a pause releases each piece once it is copied).
      std::uint64_t run_end = held.run + runs_.at(held.run).bytes;
      if (run_end > range.address + range.bytes) {
        ++at;
        continue;
      }
      if (!unmap_run(held.run)) return false;
      at = pages_.lower_bound(run_end);
      continue;
    }
    device_errc code = gpu_.unmap(address, page_bytes_);
    if (code == device_errc::ok) code = gpu_.release(held.handle);
    if (code != device_errc::ok) {
      fault_ = "releasing a page: " + std::string(error_name(code));
      return false;
    }
    --mapped_pages_;
    --held.owner->mapped_pages;
    remove_mapped_free(*held.owner, address, address + page_bytes_);
    record(false, address, *held.owner);
    if (held.users == 0) {
      --cached_pages_;
      at = pages_.erase(at);
      continue;
    }
    held.handle = 0;
    ++paused_pages_;
    ++at;
  }
  return true;
}

bool rlmem_policy::restore_range(address_run range, std::vector<address_run>& restored) {
  restored.clear();
  std::vector<std::uint64_t> mapped_here;  // the start of each run this call mapped
  auto undo = [&] {
    for (std::uint64_t start : mapped_here) {
      page& held = pages_.at(start);
      if (held.run != 0) {
        unmap_run(start);  // its pages are in use: paused again
        continue;
      }
      gpu_.unmap(start, page_bytes_);
      gpu_.release(held.handle);
      held.handle = 0;
      --mapped_pages_;
      --held.owner->mapped_pages;
      remove_mapped_free(*held.owner, start, start + page_bytes_);
      ++paused_pages_;
    }
    restored.clear();
    return false;
  };
  std::uint64_t most = std::max(page_bytes_, options_.restore_run_bytes / page_bytes_ * page_bytes_);
  std::uint64_t range_end = range.address + range.bytes;
  for (auto at = pages_.lower_bound(range.address); at != pages_.end() && at->first < range_end;) {
    if (at->second.handle != 0) {
      ++at;
      continue;
    }
    // The paused pages from here that are contiguous, of one arena (one reservation), at most `most`.
    std::uint64_t start = at->first;
    const arena* owner = at->second.owner;
    std::uint64_t bytes = 0;
    while (at != pages_.end() && at->first == start + bytes && at->first < range_end && at->second.handle == 0 &&
           at->second.owner == owner && bytes < most) {
      bytes += page_bytes_;
      ++at;
    }
    // Short of memory, the cached pages of every arena go back once, as for an allocation.
    auto mapped = [&] { return room_for(bytes / page_bytes_) && map_restored_run(start, bytes); };
    bool ok = mapped();
    if (!ok && fault_.empty() && release_cached_pages()) {
      ++retries_;
      ok = mapped();
    }
    if (!ok) return undo();
    mapped_here.push_back(start);
    if (!restored.empty() && restored.back().address + restored.back().bytes == start) {
      restored.back().bytes += bytes;
    } else {
      restored.push_back({start, bytes});
    }
    at = pages_.lower_bound(start + bytes);
  }
  return true;
}

}  // namespace rlmem
