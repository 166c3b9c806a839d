// SPDX-License-Identifier: MIT
// Peak-preserving downsampling of timelines.

#include <rlmem/inspect/inspect.hpp>

#include <algorithm>

namespace rlmem {

std::vector<std::size_t> timeline_points(const timeline& line, std::size_t buckets) {
  std::size_t count = line.allocated.size();
  std::vector<std::size_t> points;
  if (count <= 2 * buckets) {
    points.resize(count);
    for (std::size_t i = 0; i < count; ++i) points[i] = i;
    return points;
  }
  for (std::size_t bucket = 0; bucket < buckets; ++bucket) {
    std::size_t begin = bucket * count / buckets;
    std::size_t end = (bucket + 1) * count / buckets;
    std::size_t most_allocated = begin;
    std::size_t most_reserved = begin;
    for (std::size_t i = begin; i < end; ++i) {
      if (line.allocated[i] > line.allocated[most_allocated]) most_allocated = i;
      if (line.reserved[i] > line.reserved[most_reserved]) most_reserved = i;
    }
    points.push_back(std::min(most_allocated, most_reserved));
    if (most_allocated != most_reserved) points.push_back(std::max(most_allocated, most_reserved));
  }
  return points;
}

std::vector<column_peak> timeline_columns(const timeline& line, std::size_t columns) {
  std::vector<column_peak> peaks;
  std::size_t count = line.allocated.size();
  if (count == 0 || columns == 0) return peaks;
  columns = std::min(columns, count);
  for (std::size_t column = 0; column < columns; ++column) {
    column_peak peak{line.allocated[column * count / columns], line.reserved[column * count / columns]};
    for (std::size_t i = column * count / columns; i < (column + 1) * count / columns; ++i) {
      peak.allocated = std::max(peak.allocated, line.allocated[i]);
      peak.reserved = std::max(peak.reserved, line.reserved[i]);
    }
    peaks.push_back(peak);
  }
  return peaks;
}

}  // namespace rlmem
