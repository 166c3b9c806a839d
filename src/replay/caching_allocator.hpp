// SPDX-License-Identifier: MIT
#pragma once
// A model of DeviceCachingAllocator (torch 2.5 to 2.11, native backend, cudaMalloc segments):
// small and large pools ordered by (stream, size, address), best fit with the two oversize
// rules, should_split taking the low end, merging on free, and the malloc slow path
// (release of oversize blocks, then of every cached segment, counted as a retry).
// Segments come from a simulated device with a capacity (set_per_process_memory_fraction).

#include <rlmem/replay.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <vector>

namespace rlmem::detail {

struct model_block {
  std::uint64_t ptr = 0;
  std::uint64_t size = 0;
  std::uint64_t stream = 0;
  bool small_pool = false;
  bool allocated = false;  // handed out and not yet freed by the user
  bool in_use = false;     // allocated or waiting for free_completed
  model_block* prev = nullptr;  // neighbours in the same segment, address order
  model_block* next = nullptr;
};

/// A cudaMalloc or cudaFree the model made.
struct model_segment_event {
  bool alloc = true;
  std::uint64_t address = 0;
  std::uint64_t size = 0;
};

class caching_allocator_model {
 public:
  /// `capacity_bytes` 0 means no limit. `address_for(size)` names the address of a new segment.
  caching_allocator_model(const allocator_settings& settings, std::uint64_t capacity_bytes,
                          std::function<std::uint64_t(std::uint64_t)> address_for);

  /// A segment that existed before the trace, with its live blocks (address, size, in use and
  /// allocated flags); the gaps become free blocks. Returns the live blocks' model blocks.
  std::vector<model_block*> add_existing_segment(std::uint64_t address, std::uint64_t size, std::uint64_t stream,
                                                 const std::vector<model_block>& live);

  /// malloc(): nullptr when the request cannot be served (an OOM).
  model_block* allocate(std::uint64_t requested_bytes, std::uint64_t stream);
  /// free(): the user let go; allocated bytes drop.
  void free_requested(model_block* block);
  /// free_block(): the block is reusable and merges with free neighbours.
  void free_completed(model_block* block);
  /// torch.cuda.empty_cache(): every whole free segment goes back to the device.
  void empty_cache();

  std::int64_t allocated_bytes() const noexcept { return allocated_bytes_; }
  std::int64_t reserved_bytes() const noexcept { return reserved_bytes_; }
  std::uint64_t segments() const noexcept { return segments_; }
  std::uint64_t alloc_retries() const noexcept { return retries_; }
  const std::vector<model_segment_event>& segment_events() const noexcept { return events_; }

 private:
  struct by_stream_size_address {
    bool operator()(const model_block* a, const model_block* b) const noexcept {
      if (a->stream != b->stream) return a->stream < b->stream;
      if (a->size != b->size) return a->size < b->size;
      return a->ptr < b->ptr;
    }
  };
  using pool = std::set<model_block*, by_stream_size_address>;

  model_block* new_block(const model_block& value);
  void delete_block(model_block* block);
  pool& pool_of(bool small) { return small ? small_free_ : large_free_; }
  model_block* take_free_block(pool& free, std::uint64_t size, std::uint64_t stream);
  model_block* new_segment(std::uint64_t size, std::uint64_t alloc_size, std::uint64_t stream, bool small, bool retry);
  bool release_oversize_blocks(pool& free, std::uint64_t size, std::uint64_t stream);
  bool release_cached_segments();
  void release_segment(model_block* block);
  bool should_split(const model_block* block, std::uint64_t size) const;

  allocator_settings settings_;
  std::uint64_t capacity_;
  std::function<std::uint64_t(std::uint64_t)> address_for_;
  std::deque<model_block> storage_;
  std::vector<model_block*> recycled_;
  pool small_free_;
  pool large_free_;
  std::int64_t allocated_bytes_ = 0;
  std::int64_t reserved_bytes_ = 0;
  std::uint64_t segments_ = 0;
  std::uint64_t retries_ = 0;
  std::vector<model_segment_event> events_;
};

}  // namespace rlmem::detail
