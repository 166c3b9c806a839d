// SPDX-License-Identifier: MIT
#pragma once
// The parts of the model of torch's caching allocator (caching_allocator.hpp): the orders of its
// free pools, the memory it holds from the device, and its expandable reservations. Not API:
// the model's data members are typed with them, so they are in a header.

#include <rlmem/policy/allocator_policy.hpp>
#include <rlmem/device/device.hpp>

#include <cstdint>
#include <memory_resource>
#include <set>

namespace rlmem::detail {

/// A pool's order: torch's BlockComparatorSize.
struct by_stream_size_address {
  bool operator()(const model_block* a, const model_block* b) const noexcept {
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    return a->ptr < b->ptr;
  }
};

/// The unmapped blocks' order: torch's BlockComparatorAddress.
struct by_stream_address {
  bool operator()(const model_block* a, const model_block* b) const noexcept {
    return a->stream != b->stream ? a->stream < b->stream : a->ptr < b->ptr;
  }
};

// Set nodes come from a pool resource: the free lists change on every allocation and free.
using free_pool = std::pmr::set<model_block*, by_stream_size_address>;
using unmapped_pool = std::pmr::set<model_block*, by_stream_address>;

/// A cudaMalloc'd segment or a page of an expandable segment as the device holds it.
struct device_memory {
  std::uint64_t address = 0;  // on the device
  std::uint64_t bytes = 0;
  physical_handle handle = 0;
};

/// An expandable segment's reserved address range (its start is the key it is kept by).
struct expandable_reservation {
  std::uint64_t end = 0;
  std::uint64_t stream = 0;
  bool small = false;
};

}  // namespace rlmem::detail
