// SPDX-License-Identifier: MIT
// The caching allocator model; comments name the CUDACachingAllocator.cpp function each part
// follows (see ../shared notes: torch-caching-allocator.md).

#include "caching_allocator.hpp"

#include <algorithm>

namespace rlmem::detail {

namespace {
constexpr std::uint64_t small_size = std::uint64_t{1} << 20;       // kSmallSize
constexpr std::uint64_t small_buffer = std::uint64_t{2} << 20;     // kSmallBuffer
constexpr std::uint64_t large_buffer = std::uint64_t{20} << 20;    // kLargeBuffer
constexpr std::uint64_t min_large_alloc = std::uint64_t{10} << 20; // kMinLargeAlloc
constexpr std::uint64_t round_large = std::uint64_t{2} << 20;      // kRoundLarge

std::uint64_t allocation_size(std::uint64_t size) {  // get_allocation_size
  if (size <= small_size) return small_buffer;
  if (size < min_large_alloc) return large_buffer;
  return (size + round_large - 1) / round_large * round_large;
}
}  // namespace

caching_allocator_model::caching_allocator_model(const allocator_settings& settings, std::uint64_t capacity_bytes,
                                                 std::function<std::uint64_t(std::uint64_t)> address_for)
    : settings_(settings), capacity_(capacity_bytes), address_for_(std::move(address_for)) {}

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

std::vector<model_block*> caching_allocator_model::add_existing_segment(std::uint64_t address, std::uint64_t size,
                                                                        std::uint64_t stream, const std::vector<model_block>& live) {
  bool small = size == small_buffer;
  std::vector<model_block*> made;
  model_block* previous = nullptr;
  std::uint64_t cursor = address;
  auto append = [&](std::uint64_t ptr, std::uint64_t bytes, bool in_use, bool allocated) {
    model_block* block = new_block({ptr, bytes, stream, small, allocated, in_use, previous, nullptr});
    if (previous != nullptr) previous->next = block;
    previous = block;
    if (!in_use) pool_of(small).insert(block);
    return block;
  };
  for (const model_block& held : live) {
    if (held.ptr > cursor) append(cursor, held.ptr - cursor, false, false);
    made.push_back(append(held.ptr, held.size, true, held.allocated));
    if (held.allocated) allocated_bytes_ += static_cast<std::int64_t>(held.size);
    cursor = held.ptr + held.size;
  }
  if (address + size > cursor) append(cursor, address + size - cursor, false, false);
  reserved_bytes_ += static_cast<std::int64_t>(size);
  ++segments_;
  return made;
}

bool caching_allocator_model::should_split(const model_block* block, std::uint64_t size) const {
  std::uint64_t remaining = block->size - size;
  if (block->small_pool) return remaining >= 512;
  return size < settings_.max_split_size && remaining > small_size;
}

// get_free_block: best fit within the stream; the oversize rules look at the first candidate only.
model_block* caching_allocator_model::take_free_block(pool& free, std::uint64_t size, std::uint64_t stream) {
  model_block key{0, size, stream};
  auto found = free.lower_bound(&key);
  if (found == free.end() || (*found)->stream != stream) return nullptr;
  model_block* block = *found;
  if (size < settings_.max_split_size && block->size >= settings_.max_split_size) return nullptr;
  if (size >= settings_.max_split_size && block->size >= size + settings_.max_non_split_rounding) return nullptr;
  free.erase(found);
  return block;
}

// alloc_block: a new segment from the device, unless the capacity forbids it.
model_block* caching_allocator_model::new_segment(std::uint64_t size, std::uint64_t alloc_size, std::uint64_t stream,
                                                  bool small, bool retry) {
  (void)size;
  if (retry) ++retries_;
  if (capacity_ > 0 && static_cast<std::uint64_t>(reserved_bytes_) + alloc_size > capacity_) return nullptr;
  std::uint64_t address = address_for_(alloc_size);
  reserved_bytes_ += static_cast<std::int64_t>(alloc_size);
  ++segments_;
  events_.push_back({true, address, alloc_size});
  return new_block({address, alloc_size, stream, small, false, false, nullptr, nullptr});
}

void caching_allocator_model::release_segment(model_block* block) {  // release_block
  pool_of(block->small_pool).erase(block);
  reserved_bytes_ -= static_cast<std::int64_t>(block->size);
  --segments_;
  events_.push_back({false, block->ptr, block->size});
  delete_block(block);
}

// release_available_cached_blocks: free whole oversize segments, only with max_split_size set.
bool caching_allocator_model::release_oversize_blocks(pool& free, std::uint64_t size, std::uint64_t stream) {
  if (settings_.max_split_size == UINT64_MAX) return false;
  model_block key{0, std::max(size, settings_.max_split_size), stream};
  auto found = free.lower_bound(&key);
  if (found != free.end() && (*found)->stream == stream) {
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
    released += current->size;
    release_segment(current);
    if (first) break;
  }
  return released >= key.size;
}

// release_cached_blocks: every free block that is a whole segment, large pool first.
bool caching_allocator_model::release_cached_segments() {
  for (pool* free : {&large_free_, &small_free_}) {
    std::vector<model_block*> whole;
    for (model_block* block : *free) {
      if (block->prev == nullptr && block->next == nullptr) whole.push_back(block);
    }
    for (model_block* block : whole) release_segment(block);
  }
  return true;
}

void caching_allocator_model::empty_cache() { release_cached_segments(); }

model_block* caching_allocator_model::allocate(std::uint64_t requested_bytes, std::uint64_t stream) {  // malloc
  std::uint64_t size = round_request(requested_bytes, settings_);
  bool small = size <= small_size;
  pool& free = pool_of(small);
  std::uint64_t alloc_size = allocation_size(size);
  model_block* block = take_free_block(free, size, stream);
  if (block == nullptr) {
    block = new_segment(size, alloc_size, stream, small, false);
    if (block == nullptr && release_oversize_blocks(free, size, stream)) block = new_segment(size, alloc_size, stream, small, false);
    if (block == nullptr && release_cached_segments()) block = new_segment(size, alloc_size, stream, small, true);
    if (block == nullptr) return nullptr;
  }
  if (should_split(block, size)) {  // alloc_found_block: the allocation takes the low end
    model_block* low = new_block({block->ptr, size, stream, small, false, false, block->prev, block});
    if (block->prev != nullptr) block->prev->next = low;
    block->prev = low;
    block->ptr += size;
    block->size -= size;
    free.insert(block);
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

void caching_allocator_model::free_completed(model_block* block) {  // free_block + try_merge_blocks
  free_requested(block);
  block->in_use = false;
  pool& free = pool_of(block->small_pool);
  for (model_block* neighbour : {block->prev, block->next}) {
    if (neighbour == nullptr || neighbour->in_use) continue;
    free.erase(neighbour);
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
  free.insert(block);
}

}  // namespace rlmem::detail
