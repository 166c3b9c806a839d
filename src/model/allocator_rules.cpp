// SPDX-License-Identifier: MIT
// The size rules of CUDACachingAllocator.cpp; comments name the torch function each follows.

#include <rlmem/model/allocator_rules.hpp>

#include <algorithm>
#include <bit>

namespace rlmem {

namespace {
// The largest multiple of `step` (a power of two) that a uint64 holds: where rounding saturates.
constexpr std::uint64_t largest_multiple(std::uint64_t step) { return UINT64_MAX / step * step; }

// `value` rounded up to a multiple of `step`, held at the largest multiple.
std::uint64_t round_up_saturating(std::uint64_t value, std::uint64_t step) {
  if (value > largest_multiple(step)) return largest_multiple(step);
  return (value + step - 1) / step * step;
}
}  // namespace

// round_size, with roundup_power2_next_division for the power-of-two divisions.
std::uint64_t round_request(std::uint64_t size, const allocator_settings& settings) noexcept {
  if (size < min_block_bytes) return min_block_bytes;
  unsigned log2_size = static_cast<unsigned>(std::bit_width(size)) - 1;
  std::size_t bucket = log2_size > 20 ? std::min<std::size_t>(log2_size - 20, 15) : 0;  // roundup_power2_divisions(size)
  std::uint64_t divisions = settings.roundup_power2_divisions[bucket];
  if (divisions > 1 && size > min_block_bytes * divisions) {
    if (std::has_single_bit(size)) return size;
    std::uint64_t floor2 = std::bit_floor(size);
    std::uint64_t step = floor2 >> (std::bit_width(divisions) - 1);
    if (step == 0) return floor2 << 1;
    std::uint64_t low = size & ~(step - 1);
    if (low == size) return size;
    return low > UINT64_MAX - step ? largest_multiple(min_block_bytes) : low + step;
  }
  return round_up_saturating(size, min_block_bytes);
}

std::uint64_t segment_size_for(std::uint64_t rounded_bytes) noexcept {  // get_allocation_size
  if (small_pool_request(rounded_bytes)) return small_segment_bytes;
  if (rounded_bytes < min_large_alloc_bytes) return large_segment_bytes;
  return round_up_saturating(rounded_bytes, large_round_bytes);
}

bool may_serve(std::uint64_t block_bytes, std::uint64_t rounded_bytes, const allocator_settings& settings) noexcept {  // get_free_block
  if (rounded_bytes < settings.max_split_size && block_bytes >= settings.max_split_size) return false;
  return rounded_bytes < settings.max_split_size || block_bytes - rounded_bytes < settings.max_non_split_rounding;
}

bool should_split(std::uint64_t block_bytes, std::uint64_t rounded_bytes, const allocator_settings& settings) noexcept {
  std::uint64_t remaining = block_bytes - rounded_bytes;
  if (small_pool_request(rounded_bytes) || settings.expandable_segments) return remaining >= min_block_bytes;
  return rounded_bytes < settings.max_split_size && remaining > small_request_bytes;
}

}  // namespace rlmem
