// SPDX-License-Identifier: MIT
#pragma once
// A bounded cache of the stacks of recent frame lists, by the bytes of their runs of memo
// references: the trace-entry shortcut's way past a memo lookup per frame.

#include "entry_scanner.hpp"
#include "value.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace rlmem::detail {

// The stacks of recent frame lists, by the bytes of their run of LONG_BINGET and BINGET (the
// memo references between MARK and APPENDS). Torch writes a
// few thousand distinct stacks millions of times, each as the same run of memo references to
// the same frames, so the bytes name the stack: a hit skips a memo lookup per frame and the
// stack's interning. That holds while the memo entries the run names keep their frames; the
// pickle machine clears the cache whenever an existing memo entry is overwritten (Python's
// pickler never does, but any pickle may). Entries are checked byte for byte, never by hash
// alone. Memory is bounded: `slots` entries and at most `arena_limit` bytes of runs.
class recent_stacks {
 public:
  static constexpr std::size_t slots = 1024;
  static constexpr std::size_t max_run_bytes = max_frame_run_bytes;
  static constexpr std::size_t arena_limit = std::size_t{1} << 20;

  // The stack of `run`, or a value of kind none when it is not known.
  [[gnu::always_inline]] value find(std::span<const std::byte> run, std::uint64_t hash) const {
    const slot& at = slots_[hash % slots];
    if (at.hash != hash || at.length != run.size() || at.length == 0) return value::make(vkind::none, 0);
    if (std::memcmp(arena_.data() + at.offset, run.data(), run.size()) != 0) return value::make(vkind::none, 0);
    return at.stack;
  }
  void remember(std::span<const std::byte> run, std::uint64_t hash, value stack) {
    if (run.empty() || run.size() > max_run_bytes) return;
    if (arena_.size() + run.size() > arena_limit) clear();
    if (arena_.capacity() == 0) arena_.reserve(arena_limit);
    slot& at = slots_[hash % slots];
    at = {hash, static_cast<std::uint32_t>(arena_.size()), static_cast<std::uint32_t>(run.size()), stack};
    arena_.insert(arena_.end(), run.begin(), run.end());
  }
  void clear() {
    slots_.fill({});
    arena_.clear();
  }
 private:
  struct slot {
    std::uint64_t hash = 0;
    std::uint32_t offset = 0;
    std::uint32_t length = 0;
    value stack;
  };
  std::array<slot, slots> slots_{};
  std::vector<std::byte> arena_;
};

}  // namespace rlmem::detail
