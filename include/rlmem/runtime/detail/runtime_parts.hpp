// SPDX-License-Identifier: MIT
#pragma once
// The runtime's own parts (runtime.hpp): what it keeps per tag, per live block and per growable
// buffer. Not API: the runtime's data members are typed with them, so they are in a header.

#include <rlmem/policy/rlmem_policy.hpp>
#include <rlmem/runtime/runtime_types.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace rlmem::detail {

/// A piece of a pinned slab holding a paused tag's bytes of `range`.
struct runtime_backup_chunk {
  address_run range;
  void* host = nullptr;
};
/// What the runtime keeps for one tag.
struct runtime_tag_state {
  tag_statistics stats;
  std::vector<std::uint64_t> arena_keys;     // one per stream the tag allocated on
  std::vector<runtime_backup_chunk> backup;  // pieces of slabs, in the order copied
  std::vector<void*> slabs;
  bool pausing = false;                      // a pause waits for its copies without the lock
  physical_handle poison = 0;                // checking mode: the page of check_fill
  std::vector<std::uint64_t> poisoned;       // pages it is mapped under while paused
  std::uint64_t unproven_blocks = 0;         // live blocks allocate_unproven() made
};
/// A block the runtime handed out, by its address.
struct runtime_live_block {
  model_block* block = nullptr;
  std::uint32_t tag = 0;
  std::uint64_t stream = 0;
  std::uint64_t requested = 0;
  bool captured = false;        // allocated while its stream was captured into a CUDA graph
  bool held_for_graph = false;  // captured, and freed by the program since
  std::string unproven;         // why it may be a library's (allocate_unproven), else empty
};
/// A growable buffer, by its base address.
struct runtime_growable {
  std::uint64_t key = 0;
  std::uint32_t tag = 0;
  std::uint64_t max_bytes = 0;  // as the caller asked, before rounding to the page
};

}  // namespace rlmem::detail
