// SPDX-License-Identifier: MIT
// The caching allocator model; comments name the CUDACachingAllocator.cpp function each part
// follows.

#include <rlmem/model/allocator_rules.hpp>
#include <rlmem/model/caching_allocator.hpp>
#include <rlmem/base/saturating.hpp>

#include <algorithm>
#include <iterator>
#include <limits>
#include <tuple>

namespace rlmem {

namespace {
// An expandable segment reserves 1.125 x the device's memory. Snapshots do not record the device,
// so a reservation is at most that of a 141 GiB card and ends where the recording placed the next
// one (its trace-start runs and segment_map addresses), which bounds it to the recorded device.
constexpr std::uint64_t largest_reservation_bytes = std::uint64_t{141} * 1125 / 1000 << 30;

std::uint64_t round_up(std::uint64_t value, std::uint64_t step) { return (value + step - 1) / step * step; }
}  // namespace

caching_allocator_model::caching_allocator_model(device& gpu, const allocator_settings& settings, std::uint64_t capacity_bytes,
                                                 recorded_addresses recorded)
    : gpu_(gpu), granularity_(gpu.config().granularity), settings_(settings), capacity_(capacity_bytes), recorded_(std::move(recorded)) {}

caching_allocator_model::~caching_allocator_model() {
  if (!memory_.empty()) gpu_.synchronize();
  while (!memory_.empty()) give_back_memory(memory_.begin()->first);
}

void caching_allocator_model::device_failed(const char* call, device_errc code) {
  if (code != device_errc::out_of_memory && fault_.empty()) fault_ = std::string(call) + ": " + std::string(error_name(code));
}

// cudaMalloc, or ExpandableSegment::map's cuMemCreate + cuMemMap + cuMemSetAccess of one page
// (its reservation is the model's; the device reserves the page alone, at its address).
bool caching_allocator_model::take_memory(std::uint64_t size, std::uint64_t requested, bool at_requested, std::uint64_t& address) {
  // A size off the grid (a crafted dump's trace-start segment) takes whole granules.
  std::uint64_t bytes = round_up(size, granularity_);
  if (bytes < size) bytes = size;  // no granule holds it: the device refuses it
  std::uint64_t reserved = 0;
  if (device_errc code = gpu_.reserve(bytes, requested, reserved); code != device_errc::ok) {
    device_failed("reserve", code);
    return false;
  }
  physical_handle handle = 0;
  if (device_errc code = map_new_memory(gpu_, reserved, bytes, handle); code != device_errc::ok) {
    gpu_.free_reservation(reserved, bytes);
    device_failed("mapping memory", code);
    return false;
  }
  std::uint64_t placed = at_requested ? requested : reserved;
  if (!memory_.emplace(placed, device_memory{reserved, bytes, handle}).second) {  // a crafted dump's overlapping segments
    gpu_.unmap(reserved, bytes);
    gpu_.release(handle);
    gpu_.free_reservation(reserved, bytes);
    if (fault_.empty()) fault_ = "two segments or pages at one address";
    return false;
  }
  address = placed;
  return true;
}

void caching_allocator_model::give_back_memory(std::uint64_t address) {
  auto found = memory_.find(address);
  if (found == memory_.end()) return;  // trace-start memory the device could not hold (a fault)
  const device_memory& held = found->second;
  gpu_.unmap(held.address, held.bytes);
  gpu_.release(held.handle);
  gpu_.free_reservation(held.address, held.bytes);
  memory_.erase(found);
}

// Expandable segments map pages of a small or a large segment's size.
std::uint64_t caching_allocator_model::page_of(bool small) const { return small ? small_segment_bytes : large_segment_bytes; }

model_block* caching_allocator_model::new_block(const model_block& value) {
  if (!recycled_.empty()) {
    model_block* block = recycled_.back();
    recycled_.pop_back();
    *block = value;
    return block;
  }
  return &storage_.emplace_back(value);
}

void caching_allocator_model::delete_block(model_block* block) { recycled_.push_back(block); }

// insert_into_blocks: a free block joins its pool, stamped with the pool's GC clock.
void caching_allocator_model::insert_free(model_block* block) {
  block->gc_clock = free_lookups_[block->small_pool];
  pool_of(block->small_pool).insert(block);
}

bool caching_allocator_model::garbage_collects() const { return capacity_ > 0 && settings_.garbage_collection_threshold > 0; }

// garbage_collect_cached_blocks: above threshold x capacity, release whole free segments of the
// large pool that have waited at least the average number of lookups, until enough is back.
void caching_allocator_model::garbage_collect() {
  auto threshold = static_cast<std::uint64_t>(settings_.garbage_collection_threshold * static_cast<double>(capacity_));
  auto reserved = static_cast<std::uint64_t>(reserved_bytes_);
  if (reserved <= threshold) return;
  std::uint64_t target = reserved - threshold;
  std::uint64_t clock = free_lookups_[false];
  auto collectable = [](const model_block* b) { return b->prev == nullptr && b->next == nullptr && !b->expandable; };
  double total_age = 0;
  std::uint64_t candidates = 0;
  for (const model_block* block : large_free_) {
    if (!collectable(block)) continue;
    total_age += static_cast<double>(clock - block->gc_clock);
    ++candidates;
  }
  std::uint64_t reclaimed = 0;
  bool freed = true;
  while (reclaimed < target && freed && candidates > 0) {
    double average_age = total_age / static_cast<double>(candidates);
    freed = false;
    for (auto it = large_free_.begin(); it != large_free_.end();) {
      model_block* block = *it++;
      auto age = static_cast<double>(clock - block->gc_clock);
      if (!collectable(block) || age < average_age) continue;
      freed = true;
      reclaimed += block->size;
      total_age -= age;
      --candidates;
      release_segment(block);
    }
  }
}

// `block` takes over its neighbour `neighbour` (its prev or next), which is deleted.
void caching_allocator_model::absorb(model_block* block, model_block* neighbour) {
  if (neighbour == block->prev) {
    block->ptr = neighbour->ptr;
    block->prev = neighbour->prev;
    if (block->prev != nullptr) block->prev->next = block;
  } else {
    block->next = neighbour->next;
    if (block->next != nullptr) block->next->prev = block;
  }
  block->size += neighbour->size;
  delete_block(neighbour);
}

std::vector<model_block*> caching_allocator_model::add_existing_segment(std::uint64_t address, std::uint64_t size, std::uint64_t stream,
                                                                        const std::vector<model_block>& live, bool small, bool expandable) {
  std::vector<model_block*> made;
  model_block* previous = nullptr;
  std::uint64_t cursor = address;
  auto append = [&](std::uint64_t ptr, std::uint64_t bytes, bool in_use, bool allocated) {
    model_block* block = new_block({ptr, bytes, stream, small, allocated, in_use, true, expandable, previous, nullptr});
    if (previous != nullptr) previous->next = block;
    previous = block;
    if (!in_use) insert_free(block);
    return block;
  };
  for (const model_block& held : live) {
    if (held.ptr > cursor) append(cursor, held.ptr - cursor, false, false);
    made.push_back(append(held.ptr, held.size, true, held.allocated));
    if (held.allocated) allocated_bytes_ = saturating_add(allocated_bytes_, signed_bytes(held.size));
    cursor = held.ptr + held.size;
  }
  if (address + size > cursor) append(cursor, address + size - cursor, false, false);
  if (previous == nullptr) return made;  // an empty range holds nothing
  // Its memory, where the recording had it: an expandable run page by page, as it was mapped.
  std::uint64_t chunk = expandable ? page_of(small) : size;
  for (std::uint64_t offset = 0; offset < size; offset += chunk) {
    std::uint64_t placed = 0;
    if (!take_memory(std::min(chunk, size - offset), address + offset, true, placed)) {
      if (fault_.empty()) fault_ = "the device cannot hold the memory at trace start";
      break;
    }
  }
  reserved_bytes_ = saturating_add(reserved_bytes_, signed_bytes(size));  // a hostile dump's segments may sum past int64
  if (expandable) {
    model_block* head = previous;
    while (head->prev != nullptr) head = head->prev;
    existing_runs_.push_back(head);
  } else {
    ++segments_;
  }
  return made;
}

void caching_allocator_model::close_existing_reservations() {
  // Mapped runs by address: a run continues the reservation of the run before it when both are
  // of one pool and stream (torch reserves per pool and stream), with an unmapped gap between;
  // a run of another pool or stream between them means another reservation, as reservations do
  // not interleave.
  std::sort(existing_runs_.begin(), existing_runs_.end(), [](const model_block* a, const model_block* b) { return a->ptr < b->ptr; });
  auto last_of = [](model_block* block) {
    while (block->next != nullptr) block = block->next;
    return block;
  };
  auto add_unmapped = [&](std::uint64_t from, std::uint64_t to, model_block* before, model_block* after) {
    model_block* gap = new_block({from, to - from, before->stream, before->small_pool, false, false, false, true, before, after});
    before->next = gap;
    if (after != nullptr) after->prev = gap;
    unmapped_of(gap->small_pool).insert(gap);
  };
  std::vector<std::pair<model_block*, model_block*>> heads_and_tails;
  for (model_block* run : existing_runs_) {
    if (!heads_and_tails.empty()) {
      auto& [head, tail] = heads_and_tails.back();
      if (head->small_pool == run->small_pool && head->stream == run->stream && run->ptr - head->ptr < largest_reservation_bytes) {
        add_unmapped(tail->ptr + tail->size, run->ptr, tail, run);
        tail = last_of(run);
        continue;
      }
    }
    heads_and_tails.emplace_back(run, last_of(run));
  }
  for (std::size_t i = 0; i < heads_and_tails.size(); ++i) {
    auto [head, tail] = heads_and_tails[i];
    std::uint64_t end = reservation_end_for(head->ptr);
    if (i + 1 < heads_and_tails.size()) end = std::min(end, heads_and_tails[i + 1].first->ptr);
    if (tail->ptr + tail->size < end) add_unmapped(tail->ptr + tail->size, end, tail, nullptr);
    reservations_.emplace(head->ptr, reservation{end, head->stream, head->small_pool});
  }
  existing_runs_.clear();
}

// get_free_block: best fit within the stream; the oversize rules look at the first candidate only.
model_block* caching_allocator_model::take_free_block(pool& free, std::uint64_t size, std::uint64_t stream) {
  if (garbage_collects()) ++free_lookups_[&free == &small_free_];  // the GC's clock
  model_block key{0, size, stream};
  auto found = free.lower_bound(&key);
  if (found == free.end() || (*found)->stream != stream) return nullptr;
  if ((*found)->expandable) {
    // Prefer blocks that do not border the unmapped tail, which could grow instead.
    auto with_tail = [](const model_block* b) { return b->size + (b->next != nullptr && !b->next->mapped ? b->next->size : 0); };
    for (auto next = std::next(found); next != free.end() && (*next)->stream == stream && with_tail(*next) < with_tail(*found); ++next) {
      found = next;
    }
  }
  model_block* block = *found;
  if (!may_serve(block->size, size, settings_)) return nullptr;
  free.erase(found);
  return block;
}

std::uint64_t caching_allocator_model::reservation_end_for(std::uint64_t base) const {
  std::uint64_t end = base + std::min(largest_reservation_bytes, std::numeric_limits<std::uint64_t>::max() - base);
  auto next = reservations_.upper_bound(base);
  return next == reservations_.end() ? end : std::min(end, next->first);
}

// Pages of an expandable segment are numbered from its reservation's start (ExpandableSegment's
// ptr_), which need not be a multiple of the page size.
std::uint64_t caching_allocator_model::page_origin(std::uint64_t address) const {
  auto after = reservations_.upper_bound(address);
  return after == reservations_.begin() ? 0 : std::prev(after)->first;
}

// The recorded reservation at `address` ends the reservation holding it there, where the model's
// reservation was larger than the recording's: only its unmapped tail may be cut.
bool caching_allocator_model::cut_reservation_at(std::uint64_t address) {
  auto after = reservations_.upper_bound(address);
  if (after == reservations_.begin() || address >= std::prev(after)->second.end) return true;  // none holds it
  auto holder = std::prev(after);
  unmapped_pool& unmapped = unmapped_of(holder->second.small);
  model_block key{address, 0, holder->second.stream};
  auto gap_after = unmapped.upper_bound(&key);
  if (gap_after == unmapped.begin()) return false;
  model_block* gap = *std::prev(gap_after);
  if (gap->stream != holder->second.stream || gap->next != nullptr || address < gap->ptr || address - gap->ptr >= gap->size) return false;
  holder->second.end = address;
  if (gap->ptr < address) {
    gap->size = address - gap->ptr;
    return true;
  }
  unmapped.erase(std::prev(gap_after));
  if (gap->prev != nullptr) gap->prev->next = nullptr;
  delete_block(gap);
  if (holder->first == address) reservations_.erase(holder);  // nothing of it was left
  return true;
}

// A new reservation starts where the recording's did when the model maps as the recording did:
// the model's next map is the recording's next one.
std::uint64_t caching_allocator_model::new_reservation_base() {
  const std::vector<std::uint64_t>& maps = recorded_.maps;
  if (maps_made_ < maps.size() && cut_reservation_at(maps[maps_made_])) return maps[maps_made_];
  std::uint64_t address = synthetic_base_;
  synthetic_base_ += largest_reservation_bytes;
  return address;
}

// find_expandable_block: the lowest unmapped range of the pool and stream that, with the free
// block before it, can hold `size`; otherwise a new reservation.
model_block* caching_allocator_model::find_expandable_block(std::uint64_t size, std::uint64_t stream, bool small) {
  unmapped_pool& unmapped = unmapped_of(small);
  model_block key{0, 0, stream};
  for (auto it = unmapped.lower_bound(&key); it != unmapped.end() && (*it)->stream == stream; ++it) {
    model_block* candidate = *it;
    if (candidate->prev != nullptr && !candidate->prev->in_use) candidate = candidate->prev;
    std::uint64_t room = 0;
    for (model_block* block = candidate; block != nullptr && !block->in_use && room < size; block = block->next) room += block->size;
    if (room >= size) return candidate;
  }
  std::uint64_t base = new_reservation_base();
  std::uint64_t end = reservation_end_for(base);
  reservations_.emplace(base, reservation{end, stream, small});
  model_block* whole = new_block({base, end - base, stream, small, false, false, false, true, nullptr, nullptr});
  unmapped.insert(whole);
  return whole;
}

// map_block: map the pages that cover [ptr, ptr + size) of an unmapped block, each its own
// memory (ExpandableSegment::map); when the device refuses one, those mapped here go back
// (cuMemCreate OOM) and nothing changed.
bool caching_allocator_model::map_block(model_block* block, std::uint64_t size) {
  std::uint64_t page = page_of(block->small_pool);
  std::uint64_t bytes = std::min(round_up(size, page), block->size);
  if (bytes > static_cast<std::uint64_t>(INT64_MAX - reserved_bytes_)) return false;  // past any device: the count would overflow
  for (std::uint64_t offset = 0; offset < bytes; offset += page) {
    std::uint64_t placed = 0;
    if (!take_memory(std::min(page, bytes - offset), block->ptr + offset, true, placed)) {
      for (std::uint64_t mapped = 0; mapped < offset; mapped += page) give_back_memory(block->ptr + mapped);  // never used: no fence
      return false;
    }
  }
  unmapped_of(block->small_pool).erase(block);
  if (bytes < block->size) {
    model_block* tail = new_block({block->ptr + bytes, block->size - bytes, block->stream, block->small_pool, false, false, false, true, block, block->next});
    if (block->next != nullptr) block->next->prev = tail;
    block->next = tail;
    unmapped_of(block->small_pool).insert(tail);
  }
  block->size = bytes;
  block->mapped = true;
  reserved_bytes_ += static_cast<std::int64_t>(bytes);
  ++maps_made_;
  events_.push_back({true, block->ptr, bytes});
  merge_free_neighbours(block, pool_of(block->small_pool));
  return true;
}

// try_allocate_expandable_block: map pages until one free block holds `size`.
model_block* caching_allocator_model::expandable_block(std::uint64_t size, std::uint64_t stream, bool small) {
  model_block* block = find_expandable_block(size, stream, small);
  if (!block->mapped && !map_block(block, std::min(block->size, size))) return nullptr;
  while (block->size < size) {
    model_block* next = block->next;
    // Out of reservation or of device memory: pages mapped so far stay mapped and free.
    if (next == nullptr || next->mapped || !map_block(next, std::min(size - block->size, next->size))) return nullptr;
    block = next;  // map_block merged `block` into `next`
  }
  pool_of(small).erase(block);
  return block;
}

// alloc_block: a new segment from the device (cudaMalloc), unless the capacity forbids it. It
// asks for the recording's next segment address when the sizes agree.
model_block* caching_allocator_model::new_segment(std::uint64_t size, std::uint64_t alloc_size, std::uint64_t stream,
                                                  bool small, bool retry) {
  if (retry) ++retries_;
  if (capacity_ > 0 && static_cast<std::uint64_t>(reserved_bytes_) + alloc_size > capacity_) return nullptr;
  if (settings_.expandable_segments) return expandable_block(size, stream, small);
  if (alloc_size > static_cast<std::uint64_t>(INT64_MAX - reserved_bytes_)) return nullptr;  // past any device: the count would overflow
  const std::vector<model_segment_event>& recorded = recorded_.segments;
  bool as_recorded = segments_placed_ < recorded.size() && recorded[segments_placed_].size == alloc_size;
  std::uint64_t address = 0;
  if (!take_memory(alloc_size, as_recorded ? recorded[segments_placed_].address : 0, false, address)) return nullptr;  // cudaMalloc OOM
  if (as_recorded) ++segments_placed_;
  reserved_bytes_ += static_cast<std::int64_t>(alloc_size);
  ++segments_;
  events_.push_back({true, address, alloc_size});
  return new_block({address, alloc_size, stream, small, false, false, true, false, nullptr, nullptr});
}

void caching_allocator_model::release_segment(model_block* block) {  // release_block
  gpu_.synchronize();  // cudaFree waits for the device
  give_back_memory(block->ptr);
  pool_of(block->small_pool).erase(block);
  reserved_bytes_ -= static_cast<std::int64_t>(block->size);
  --segments_;
  events_.push_back({false, block->ptr, block->size});
  delete_block(block);
}

// unmap_block: give back the whole pages inside a free block of an expandable segment.
void caching_allocator_model::unmap_block(model_block* block) {
  std::uint64_t page = page_of(block->small_pool);
  std::uint64_t origin = page_origin(block->ptr);
  std::uint64_t begin = origin + round_up(block->ptr - origin, page);
  std::uint64_t end = origin + (block->ptr + block->size - origin) / page * page;
  if (end <= begin) return;
  gpu_.synchronize();  // unmapHandles synchronizes the stream first
  for (auto mapped = memory_.lower_bound(begin); mapped != memory_.end() && mapped->first < end;) {
    std::uint64_t address = mapped++->first;
    give_back_memory(address);
  }
  pool& free = pool_of(block->small_pool);
  free.erase(block);
  if (begin > block->ptr) {  // the part before the first whole page stays mapped and free
    model_block* before = new_block({block->ptr, begin - block->ptr, block->stream, block->small_pool, false, false, true, true, block->prev, block});
    if (block->prev != nullptr) block->prev->next = before;
    block->prev = before;
    insert_free(before);
  }
  if (block->ptr + block->size > end) {
    model_block* after = new_block({end, block->ptr + block->size - end, block->stream, block->small_pool, false, false, true, true, block, block->next});
    if (block->next != nullptr) block->next->prev = after;
    block->next = after;
    insert_free(after);
  }
  block->ptr = begin;
  block->size = end - begin;
  block->mapped = false;
  reserved_bytes_ -= static_cast<std::int64_t>(end - begin);
  events_.push_back({false, begin, end - begin});
  unmapped_pool& unmapped = unmapped_of(block->small_pool);
  for (model_block* neighbour : {block->prev, block->next}) {  // join unmapped neighbours
    if (neighbour == nullptr || neighbour->mapped) continue;
    unmapped.erase(neighbour);
    absorb(block, neighbour);
  }
  unmapped.insert(block);
}

// release_available_cached_blocks: free whole oversize segments, only with max_split_size set.
bool caching_allocator_model::release_oversize_blocks(pool& free, std::uint64_t size, std::uint64_t stream) {
  if (settings_.max_split_size == UINT64_MAX) return false;
  model_block key{0, std::max(size, settings_.max_split_size), stream};
  auto found = free.lower_bound(&key);
  if (found != free.end() && (*found)->stream == stream && !(*found)->expandable) {
    release_segment(*found);
    return true;
  }
  if (found == free.begin()) return false;
  std::uint64_t released = 0;
  --found;
  while (released < key.size && (*found)->size >= settings_.max_split_size && (*found)->stream == stream) {
    model_block* current = *found;
    bool first = found == free.begin();
    if (!first) --found;
    if (!current->expandable) {
      released += current->size;
      release_segment(current);
    }
    if (first) break;
  }
  return released >= key.size;
}

// release_cached_blocks: every free block that is a whole segment, large pool first; free
// blocks of expandable segments give back their whole pages.
bool caching_allocator_model::release_cached_segments() {
  for (pool* free : {&large_free_, &small_free_}) {
    std::vector<model_block*> whole;
    std::vector<model_block*> expandable;
    for (model_block* block : *free) {
      if (block->expandable) {
        expandable.push_back(block);
      } else if (block->prev == nullptr && block->next == nullptr) {
        whole.push_back(block);
      }
    }
    for (model_block* block : whole) release_segment(block);
    for (model_block* block : expandable) unmap_block(block);
  }
  return true;
}

void caching_allocator_model::empty_cache() { release_cached_segments(); }

// A mapped run ends at an unmapped block after it or at its reservation's end. O(unmapped
// blocks + reservations x log blocks), for the end of a replay.
std::uint64_t caching_allocator_model::segments() const noexcept {
  std::uint64_t runs = 0;
  for (const unmapped_pool* unmapped : {&small_unmapped_, &large_unmapped_}) {
    for (const model_block* block : *unmapped) runs += block->prev != nullptr ? 1 : 0;
  }
  for (const auto& [start, held] : reservations_) {
    const unmapped_pool& unmapped = held.small ? small_unmapped_ : large_unmapped_;
    model_block key{held.end - 1, 0, held.stream};
    auto after = unmapped.upper_bound(&key);
    bool ends_unmapped = after != unmapped.begin() && (*std::prev(after))->stream == held.stream &&
                         (*std::prev(after))->ptr + (*std::prev(after))->size == held.end;
    if (!ends_unmapped) ++runs;
  }
  return segments_ + runs;
}

model_block* caching_allocator_model::allocate(std::uint64_t requested_bytes, std::uint64_t stream) {  // malloc
  std::uint64_t size = round_request(requested_bytes, settings_);
  bool small = small_pool_request(size);
  pool& free = pool_of(small);
  std::uint64_t alloc_size = segment_size_for(size);
  model_block* block = take_free_block(free, size, stream);
  if (block == nullptr) {
    if (garbage_collects()) garbage_collect();
    block = new_segment(size, alloc_size, stream, small, false);
    if (block == nullptr && release_oversize_blocks(free, size, stream)) block = new_segment(size, alloc_size, stream, small, false);
    if (block == nullptr && release_cached_segments()) block = new_segment(size, alloc_size, stream, small, true);
    if (block == nullptr) return nullptr;
  }
  if (should_split(block->size, size, settings_)) {  // alloc_found_block: the allocation takes the low end
    model_block* low = new_block({block->ptr, size, stream, small, false, false, true, block->expandable, block->prev, block});
    if (block->prev != nullptr) block->prev->next = low;
    block->prev = low;
    block->ptr += size;
    block->size -= size;
    insert_free(block);
    block = low;
  }
  block->allocated = true;
  block->in_use = true;
  allocated_bytes_ += static_cast<std::int64_t>(block->size);
  return block;
}

void caching_allocator_model::free_requested(model_block* block) {
  if (!block->allocated) return;
  block->allocated = false;
  allocated_bytes_ -= static_cast<std::int64_t>(block->size);
}

// try_merge_blocks: absorb free neighbours of the same kind (mapped with mapped).
void caching_allocator_model::merge_free_neighbours(model_block* block, pool& free) {
  for (model_block* neighbour : {block->prev, block->next}) {
    if (neighbour == nullptr || neighbour->in_use || !neighbour->mapped) continue;
    free.erase(neighbour);
    absorb(block, neighbour);
  }
  insert_free(block);
}

void caching_allocator_model::free_completed(model_block* block) {  // free_block
  free_requested(block);
  block->in_use = false;
  merge_free_neighbours(block, pool_of(block->small_pool));
}

}  // namespace rlmem
