// SPDX-License-Identifier: MIT
// The rlmem policy: best fit in per-stream address space, pages mapped under blocks and counted
// by the blocks that use them.

#include <rlmem/policy/allocator_policy.hpp>
#include <rlmem/policy/rlmem_policy.hpp>

#include <algorithm>
#include <iterator>
#include <string>

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
  arena made;
  if (device_errc code = gpu_.reserve(options_.reservation_bytes, 0, made.base); code != device_errc::ok) {
    if (code != device_errc::out_of_memory) fault_ = "reserve: " + std::string(device_error_name(code));
    return nullptr;
  }
  made.size = options_.reservation_bytes;
  made.key = stream;
  return &arenas_.emplace(stream, std::move(made)).first->second;
}

// A request of mapped_first_bytes or more: best fit among the free ranges on mapped pages, which
// needs no new memory. Otherwise (and for smaller requests, which fill the pages live blocks
// share) best fit among the free gaps, else the top of the arena; the lowest address among
// equals. Placing by gap alone mapped new pages where a gap fitted best while pages freed
// elsewhere stayed cached: under a cap near the demand that ran out of memory about once a step
// and released the whole cache (docs/runtime.md, "Why rlmem released about once a step").
bool rlmem_policy::place(arena& where, std::uint64_t size, std::uint64_t& address) {
  if (options_.mapped_first_bytes > 0 && size >= options_.mapped_first_bytes) {
    auto fit = where.mapped_free_by_size.lower_bound({size, 0});
    if (fit != where.mapped_free_by_size.end()) {
      address = fit->second;
      take_range(where, address, size);
      remove_mapped_free(where, address, address + size);
      return true;
    }
  }
  auto fit = where.free_by_size.lower_bound({size, 0});
  if (fit != where.free_by_size.end()) {
    address = fit->second;
  } else {
    if (size > where.size - where.top) return false;
    address = where.base + where.top;
  }
  take_range(where, address, size);
  remove_mapped_free(where, address, address + size);
  return true;
}

void rlmem_policy::take_range(arena& where, std::uint64_t address, std::uint64_t size) {
  std::uint64_t top = where.base + where.top;
  if (address >= top) {
    if (address > top) {  // a mapped range above the top: the space below it becomes a gap
      where.free_by_address.emplace(top, address - top);
      where.free_by_size.emplace(address - top, top);
    }
    where.top = address + size - where.base;
    return;
  }
  auto gap = std::prev(where.free_by_address.upper_bound(address));
  auto [start, bytes] = *gap;
  where.free_by_size.erase({bytes, start});
  where.free_by_address.erase(gap);
  if (address > start) {
    where.free_by_address.emplace(start, address - start);
    where.free_by_size.emplace(address - start, start);
  }
  if (start + bytes > address + size) {
    std::uint64_t rest = start + bytes - (address + size);
    where.free_by_address.emplace(address + size, rest);
    where.free_by_size.emplace(rest, address + size);
  }
}

void rlmem_policy::add_mapped_free(arena& where, std::uint64_t begin, std::uint64_t end) {
  if (begin >= end) return;
  auto after = where.mapped_free_by_address.upper_bound(begin);
  if (after != where.mapped_free_by_address.begin()) {
    auto before = std::prev(after);
    if (before->second >= begin) {
      begin = before->first;
      end = std::max(end, before->second);
      where.mapped_free_by_size.erase({before->second - before->first, before->first});
      where.mapped_free_by_address.erase(before);
    }
  }
  while (after != where.mapped_free_by_address.end() && after->first <= end) {
    end = std::max(end, after->second);
    where.mapped_free_by_size.erase({after->second - after->first, after->first});
    after = where.mapped_free_by_address.erase(after);
  }
  where.mapped_free_by_address.emplace(begin, end);
  where.mapped_free_by_size.emplace(end - begin, begin);
}

void rlmem_policy::remove_mapped_free(arena& where, std::uint64_t begin, std::uint64_t end) {
  auto at = where.mapped_free_by_address.upper_bound(begin);
  if (at != where.mapped_free_by_address.begin() && std::prev(at)->second > begin) --at;
  while (at != where.mapped_free_by_address.end() && at->first < end) {
    auto [start, stop] = *at;
    where.mapped_free_by_size.erase({stop - start, start});
    at = where.mapped_free_by_address.erase(at);
    if (start < begin) {
      where.mapped_free_by_address.emplace(start, begin);
      where.mapped_free_by_size.emplace(begin - start, start);
    }
    if (stop > end) {
      where.mapped_free_by_address.emplace(end, stop);
      where.mapped_free_by_size.emplace(stop - end, end);
      break;
    }
  }
}

void rlmem_policy::add_free_parts(arena& where, std::uint64_t begin, std::uint64_t end) {
  std::uint64_t top = where.base + where.top;
  add_mapped_free(where, std::max(begin, top), end);
  auto gap = where.free_by_address.upper_bound(begin);
  if (gap != where.free_by_address.begin()) --gap;
  for (; gap != where.free_by_address.end() && gap->first < end; ++gap) {
    add_mapped_free(where, std::max(begin, gap->first), std::min(end, gap->first + gap->second));
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

// A range back to the arena's free gaps, joined with its neighbours; a gap reaching the top
// lowers the top instead.
void rlmem_policy::give_back(arena& where, std::uint64_t address, std::uint64_t size) {
  auto after = where.free_by_address.lower_bound(address);
  if (after != where.free_by_address.end() && after->first == address + size) {
    size += after->second;
    where.free_by_size.erase({after->second, after->first});
    after = where.free_by_address.erase(after);
  }
  if (after != where.free_by_address.begin()) {
    auto before = std::prev(after);
    if (before->first + before->second == address) {
      address = before->first;
      size += before->second;
      where.free_by_size.erase({before->second, before->first});
      where.free_by_address.erase(before);
    }
  }
  if (address + size == where.base + where.top) {
    where.top = address - where.base;
    return;
  }
  where.free_by_address.emplace(address, size);
  where.free_by_size.emplace(size, address);
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
    if (code != device_errc::out_of_memory) fault_ = "mapping memory: " + std::string(device_error_name(code));
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
bool rlmem_policy::map_pages(arena& owner, std::uint64_t address, std::uint64_t size) {
  std::uint64_t first = address / page_bytes_ * page_bytes_;
  std::uint64_t end = address + size;
  std::uint64_t last = (end - 1) / page_bytes_ * page_bytes_;
  std::uint64_t most = std::max(page_bytes_, options_.allocation_run_bytes / page_bytes_ * page_bytes_);
  // An end page mapped before this call has its free parts among the mapped free ranges already.
  bool first_was_mapped = pages_.contains(first);
  bool last_was_mapped = pages_.contains(last);
  std::vector<std::uint64_t> mapped_here;  // the start of each page or run this call mapped
  std::uint64_t at = first;
  bool ok = true;
  while (at < end) {
    auto found = pages_.find(at);
    if (found != pages_.end() && found->second.handle == 0) {
      fault_ = "a block placed in a paused range";
      ok = false;
      break;
    }
    if (found != pages_.end()) {
      if (found->second.users++ == 0) --cached_pages_;
      at += page_bytes_;
      continue;
    }
    // A page at either end of the block may be shared later: alone. Inside: as long a run of
    // pages no one has as the block covers.
    std::uint64_t bytes = page_bytes_;
    if (at >= address) {
      while (bytes < most && at + bytes + page_bytes_ <= end && pages_.find(at + bytes) == pages_.end()) bytes += page_bytes_;
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
    if (!first_was_mapped) add_free_parts(owner, first, address);
    if (!last_was_mapped) add_free_parts(owner, end, round_up(end, page_bytes_));
    return true;
  }
  // Pages mapped by this call were never used: no fence is needed to give them back.
  if (at > first) leave_pages(first, at - first);
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
void rlmem_policy::leave_pages(std::uint64_t address, std::uint64_t size) {
  std::uint64_t first = address / page_bytes_ * page_bytes_;
  auto found = pages_.find(first);
  for (std::uint64_t at = first; at < address + size; at += page_bytes_) {
    // A block's pages are consecutive entries: step to the next rather than search for it.
    if (found == pages_.end() || found->first != at) found = pages_.find(at);
    if (--found->second.users > 0) {
      ++found;
      continue;
    }
    if (found->second.handle == 0) {
      --paused_pages_;
      found = pages_.erase(found);
      continue;
    }
    ++cached_pages_;
    std::uint64_t run = found->second.run;
    if (options_.release_free_pages && (run == 0 || run_unused(run))) {
      gpu_.synchronize();
      release_unused_page(at);
      found = pages_.lower_bound(at + page_bytes_);
      continue;
    }
    ++found;
  }
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
    fault_ = "releasing restored memory: " + std::string(device_error_name(code));
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

model_block* rlmem_policy::new_block(std::uint64_t ptr, std::uint64_t size, std::uint64_t stream) {
  model_block* block = nullptr;
  if (!recycled_.empty()) {
    block = recycled_.back();
    recycled_.pop_back();
  } else {
    block = &storage_.emplace_back();
  }
  *block = model_block{};
  block->ptr = ptr;
  block->size = size;
  block->stream = stream;
  block->allocated = true;
  block->in_use = true;
  block->expandable = true;
  return block;
}

model_block* rlmem_policy::allocate(std::uint64_t requested_bytes, std::uint64_t stream) {
  if (requested_bytes > options_.reservation_bytes) return nullptr;
  std::uint64_t size = round_up(std::max<std::uint64_t>(requested_bytes, 1), min_block_bytes);
  arena* where = arena_of(stream);
  if (where == nullptr) return nullptr;
  std::uint64_t address = 0;
  if (!place(*where, size, address)) return nullptr;
  if (!map_pages(*where, address, size)) {
    // Short of memory: every cached page goes back, with one fence, and the request tries again
    // (as torch's allocator frees its whole cache: releasing a little each time fenced 10 times
    // as often under a cap of 1.1x the demand, for steps 15% slower).
    bool released = release_cached_pages();
    bool mapped = released && map_pages(*where, address, size);
    if (released) ++retries_;
    if (!mapped) {
      give_back(*where, address, size);
      add_mapped_parts(*where, address, address + size);
      return nullptr;
    }
  }
  allocated_bytes_ += static_cast<std::int64_t>(size);
  return new_block(address, size, stream);
}

void rlmem_policy::free_requested(model_block* block) {
  if (!block->allocated) return;
  block->allocated = false;
  allocated_bytes_ -= static_cast<std::int64_t>(block->size);
}

void rlmem_policy::free_completed(model_block* block) {
  free_requested(block);
  leave_pages(block->ptr, block->size);
  arena& owner = arenas_.at(block->stream);
  give_back(owner, block->ptr, block->size);
  add_mapped_parts(owner, block->ptr, block->ptr + block->size);
  block->in_use = false;
  recycled_.push_back(block);
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
  arena made;
  if (max_bytes > options_.reservation_bytes) return false;  // and round_up cannot wrap past 2^64
  made.size = round_up(std::max<std::uint64_t>(max_bytes, 1), page_bytes_);
  if (device_errc code = gpu_.reserve(made.size, 0, made.base); code != device_errc::ok) {
    if (code != device_errc::out_of_memory) fault_ = "reserve: " + std::string(device_error_name(code));
    return false;
  }
  base = made.base;
  made.key = key;
  arenas_.emplace(key, std::move(made));
  return true;
}

bool rlmem_policy::grow(std::uint64_t key, std::uint64_t bytes) {
  arena& buffer = arenas_.at(key);
  if (bytes > buffer.size) return false;  // and round_up cannot wrap past 2^64
  std::uint64_t wanted = round_up(bytes, page_bytes_);
  std::uint64_t start = buffer.top;
  for (std::uint64_t at = buffer.base + start; buffer.top < wanted; at += page_bytes_) {
    bool mapped = map_page(buffer, at);
    if (!mapped && fault_.empty() && release_cached_pages()) {
      ++retries_;
      mapped = map_page(buffer, at);
    }
    if (!mapped) {
      // Pages mapped by this call were never used: no fence is needed to give them back.
      for (std::uint64_t back = buffer.base + start; back < at; back += page_bytes_) unmap_page(back);
      buffer.top = start;
      return false;
    }
    buffer.top += page_bytes_;
  }
  return true;
}

std::uint64_t rlmem_policy::grown_bytes(std::uint64_t key) const {
  auto found = arenas_.find(key);
  return found == arenas_.end() ? 0 : found->second.top;
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
      fault_ = "releasing a page: " + std::string(device_error_name(code));
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
