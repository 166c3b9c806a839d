// SPDX-License-Identifier: MIT
#pragma once
// The seam between a driver (replay; inspect's OOM judgement to come) and an allocator policy
// running over a device (device.hpp; replay's is the fake). caching_allocator_model (PyTorch's
// native allocator, with or without expandable segments) and rlmem_policy implement it.

#include <rlmem/base/invariants.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rlmem {

/// Every policy's blocks are multiples of it, as torch's are (kMinBlockSize), so that a request
/// occupies the same bytes under each.
inline constexpr std::uint64_t min_block_bytes = 512;

/// A block a policy hands out (Block in CUDACachingAllocator.cpp): the unit the driver and every
/// policy exchange.
struct model_block {
  std::uint64_t ptr = 0;     ///< address of its first byte
  std::uint64_t size = 0;    ///< bytes, a multiple of min_block_bytes: the request rounded, or a whole free block
  std::uint64_t stream = 0;  ///< raw cudaStream_t it was allocated on (the rlmem policy's arena key)
  bool small_pool = false;   ///< in torch's small pool (requests up to 1 MiB); never under the rlmem policy
  bool allocated = false;  ///< handed out and not yet freed by the user
  bool in_use = false;     ///< allocated or waiting for free_completed
  bool mapped = true;      ///< false: reserved address space of an expandable segment, no memory
  bool expandable = false;      ///< in an expandable segment (always under the rlmem policy)
  model_block* prev = nullptr;  ///< the block before it in its segment; nullptr at the start, and under the rlmem policy
  model_block* next = nullptr;  ///< the block after it in its segment; nullptr at the end, and under the rlmem policy
  std::uint64_t gc_clock = 0;  ///< the pool's lookup count when the block became free (gc_count_base)
};

/// A cudaMalloc/map or cudaFree/unmap a policy made.
struct model_segment_event {
  bool alloc = true;          ///< true for cudaMalloc or a map, false for cudaFree or an unmap
  std::uint64_t address = 0;  ///< the segment's or page's start, as the policy places it
  std::uint64_t size = 0;     ///< its bytes
};

/// An allocator policy: the decisions of an allocator, fed one trace event at a time.
class allocator_policy {
 public:
  virtual ~allocator_policy() = default;

  /// A segment that existed before the trace, with its live blocks; returns their blocks.
  virtual std::vector<model_block*> add_existing_segment(std::uint64_t address, std::uint64_t size, std::uint64_t stream,
                                                         const std::vector<model_block>& live, bool small_pool, bool expandable) = 0;
  /// Called once after the existing segments.
  virtual void close_existing_reservations() = 0;
  /// malloc(): nullptr when the request cannot be served (an OOM).
  virtual model_block* allocate(std::uint64_t requested_bytes, std::uint64_t stream) = 0;
  /// The user freed the block; allocated bytes drop.
  virtual void free_requested(model_block* block) = 0;
  /// The block is reusable (after the streams that used it are done).
  virtual void free_completed(model_block* block) = 0;
  /// torch.cuda.empty_cache().
  virtual void empty_cache() = 0;

  /// Bytes handed out and not yet freed by the user (torch's allocated_bytes).
  virtual std::int64_t allocated_bytes() const noexcept = 0;
  /// Bytes taken from the device: segments, or mapped pages of expandable ones.
  virtual std::int64_t reserved_bytes() const noexcept = 0;
  /// Segments held now as a snapshot lists them: cudaMalloc'd segments, and each contiguous
  /// mapped run of an expandable segment (torch's `segment` stat counts only the former).
  virtual std::uint64_t segments() const noexcept = 0;
  /// Mallocs that freed the cache and tried again (num_alloc_retries).
  virtual std::uint64_t alloc_retries() const noexcept = 0;
  /// Every segment allocation, map, free and unmap so far, in order.
  virtual const std::vector<model_segment_event>& segment_events() const noexcept = 0;
  /// A device call failed for a reason other than memory (a broken precondition, or memory that
  /// could not go where it must): what the policy's results cannot be trusted after. Empty while
  /// all is well.
  virtual const std::string& fault() const noexcept = 0;
  /// The first of the policy's invariants that does not hold, as text; nothing while all hold,
  /// or once fault() is set (nothing is promised after one). `scope` says how much it reads.
  virtual std::optional<std::string> broken_invariant(invariant_scope scope) const = 0;
};

}  // namespace rlmem
