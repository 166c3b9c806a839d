// SPDX-License-Identifier: MIT
#pragma once
// Byte sums that hold at the ends of their range instead of overflowing: each size below 2^63 is
// data (a 36 TiB request is a bug to diagnose, not bad input), and a trace can sum such sizes
// past it.

#include <cstdint>

namespace rlmem {

/// a + b, held at INT64_MIN or INT64_MAX.
inline std::int64_t saturating_add(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t sum = 0;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? INT64_MAX : INT64_MIN;
}

/// a - b, held at INT64_MIN or INT64_MAX.
inline std::int64_t saturating_subtract(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t difference = 0;
  if (!__builtin_sub_overflow(a, b, &difference)) return difference;
  return b < 0 ? INT64_MAX : INT64_MIN;
}

/// a + b, held at UINT64_MAX.
inline std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept {
  return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

/// A byte count as a signed figure, held at INT64_MAX.
inline std::int64_t signed_bytes(std::uint64_t bytes) noexcept {
  return bytes > static_cast<std::uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<std::int64_t>(bytes);
}

}  // namespace rlmem
