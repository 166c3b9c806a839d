// SPDX-License-Identifier: MIT
#pragma once
// Cuts a per-event timeline down to a few points without losing its peaks.

#include <rlmem/inspect.hpp>

#include <cstddef>
#include <vector>

namespace rlmem::detail {

/// Event indices to show: for each of `buckets` equal slices, the event with the most allocated
/// and the one with the most reserved bytes, in order, without repeats. Every event when the
/// timeline is shorter than 2 * buckets.
std::vector<std::size_t> timeline_points(const timeline& line, std::size_t buckets);

/// The largest allocated and reserved value in each of `columns` slices (for charts).
struct column_peak {
  std::int64_t allocated = 0;
  std::int64_t reserved = 0;
};
std::vector<column_peak> timeline_columns(const timeline& line, std::size_t columns);

}  // namespace rlmem::detail
