// SPDX-License-Identifier: MIT
#pragma once
// The caching allocator's size rules (CUDACachingAllocator.cpp, torch 2.5 to 2.11): how a request
// is rounded, which pool serves it, what a new segment is sized, which cached block may serve a
// request and when it is split. inspect's live set and the caching allocator model both follow
// these, so that the two cannot drift apart.

#include <rlmem/model/allocator_settings.hpp>
#include <rlmem/policy/allocator_policy.hpp>  // min_block_bytes

#include <cstdint>

namespace rlmem {

inline constexpr std::uint64_t small_request_bytes = std::uint64_t{1} << 20;     ///< kSmallSize: the small pool's largest request
inline constexpr std::uint64_t small_segment_bytes = std::uint64_t{2} << 20;     ///< kSmallBuffer: a small-pool segment
inline constexpr std::uint64_t large_segment_bytes = std::uint64_t{20} << 20;    ///< kLargeBuffer: segment of a request under 10 MiB
inline constexpr std::uint64_t min_large_alloc_bytes = std::uint64_t{10} << 20;  ///< kMinLargeAlloc
inline constexpr std::uint64_t large_round_bytes = std::uint64_t{2} << 20;       ///< kRoundLarge: larger segments round to it

/// round_size: the bytes a request of `requested_bytes` occupies under `settings`: at least
/// 512, a multiple of 512, or of a power-of-two division where roundup_power2_divisions asks.
/// Held at the largest multiple of 512 below 2^64 rather than wrapping to 0.
std::uint64_t round_request(std::uint64_t requested_bytes, const allocator_settings& settings) noexcept;

/// Whether a request, rounded by round_request, is served by the small pool (get_pool).
constexpr bool small_pool_request(std::uint64_t rounded_bytes) noexcept { return rounded_bytes <= small_request_bytes; }

/// Whether a segment of `segment_bytes` belongs to the small pool, for dumps and traces that do
/// not name its pool: only small-pool segments are exactly 2 MiB (get_allocation_size).
constexpr bool small_pool_segment(std::uint64_t segment_bytes) noexcept { return segment_bytes == small_segment_bytes; }

/// get_allocation_size: the segment a cudaMalloc asks for to serve a rounded request (2 MiB for
/// the small pool, 20 MiB under 10 MiB, else rounded up to 2 MiB; held at the largest multiple
/// of 2 MiB below 2^64 rather than wrapping).
std::uint64_t segment_size_for(std::uint64_t rounded_bytes) noexcept;

/// get_free_block's oversize rules: a cached block of at least max_split_size serves only a
/// request of at least max_split_size, and then only if it is less than
/// max_non_split_rounding larger.
bool may_serve(std::uint64_t block_bytes, std::uint64_t rounded_bytes, const allocator_settings& settings) noexcept;

/// should_split: whether a free block of `block_bytes` that serves a rounded request is split
/// (the request takes the low end, the remainder stays free) or handed out whole: a small-pool
/// block (or any block of an expandable segment) splits when 512 bytes or more remain, a large
/// one under max_split_size when more than 1 MiB remains.
/// Precondition: block_bytes >= rounded_bytes.
bool should_split(std::uint64_t block_bytes, std::uint64_t rounded_bytes, const allocator_settings& settings) noexcept;

}  // namespace rlmem
