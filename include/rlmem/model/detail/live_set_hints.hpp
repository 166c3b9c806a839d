// SPDX-License-Identifier: MIT
#pragma once
// What live_set::apply() keeps from one event to the next to spare its trees work
// (live_set.hpp). Not API: the live set's data members are typed with it, so it is in a header.

#include <array>
#include <cstddef>
#include <cstdint>

namespace rlmem::detail {

/// Hints into a live set's trees of blocks (`BlockMap`) and reserved ranges (`RangeMap`): in the
/// forward pass the descents to a block (a mispredicted branch a level) and malloc were most of
/// its time. A copy of the set starts without them (they name nodes of the set's own trees).
template <typename BlockMap, typename RangeMap>
struct pass_hints {
  pass_hints() = default;
  pass_hints(const pass_hints&) noexcept {}
  pass_hints& operator=(const pass_hints&) noexcept {
    known = {};
    spare = {};
    range_known = false;
    return *this;
  }
  // Blocks by address, direct-mapped, for the frees' lookups: each slot names a node of the
  // block map with that address (set when a block is made or found, cleared when it goes). A
  // free's block is usually still there, so its lookup takes no descent of the tree.
  struct known_block {
    std::uint64_t address = 0;
    typename BlockMap::iterator block;
    bool set = false;
  };
  static constexpr int known_slot_bits = 9;
  static std::size_t known_slot(std::uint64_t address) {
    return static_cast<std::size_t>((address * 0x9e3779b97f4a7c15ULL) >> (64 - known_slot_bits));
  }
  std::array<known_block, std::size_t{1} << known_slot_bits> known{};
  // The node of the block freed last, for the next alloc: allocations and frees come in pairs.
  typename BlockMap::node_type spare;
  // The range the last allocation fell in: most fall in the one before's. Forgotten when a
  // range is mapped or unmapped.
  bool range_known = false;
  typename RangeMap::const_iterator range;
};

}  // namespace rlmem::detail
