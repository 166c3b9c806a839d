// SPDX-License-Identifier: MIT
#pragma once
// What the snapshot builder's records and tables cost in the held-value budget's 8-byte units
// (snapshot_builder::charge, read_limits::max_held_values).

#include <cstdint>

namespace rlmem::detail {

// What a record or table entry costs in the held-value budget's 8-byte units.
template <class T>
constexpr std::uint64_t units_of = (sizeof(T) + 7) / 8;
// A hash-table node: the entry, a next pointer and the cached hash.
constexpr std::uint64_t hash_node_units = 3;

}  // namespace rlmem::detail
