// SPDX-License-Identifier: MIT
#pragma once
// The rlmem policy's own parts (rlmem_policy.hpp): its spans, pages, arenas and the sets that
// index them. Not API: the policy's data members are typed with them, so they are in a header.

#include <rlmem/policy/allocator_policy.hpp>
#include <rlmem/device/device.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <utility>

namespace rlmem::detail {

struct policy_span;
struct policy_arena;

/// (bytes, address): best fit is the first at or after (request, 0), the lowest among equals.
using size_key = std::pair<std::uint64_t, std::uint64_t>;

/// Live spans with a gap after them (the highest excepted), by (gap bytes, gap address).
struct by_gap {
  using is_transparent = void;
  static size_key key(const policy_span* at);
  bool operator()(const policy_span* a, const policy_span* b) const { return key(a) < key(b); }
  bool operator()(const policy_span* a, const size_key& b) const { return key(a) < b; }
  bool operator()(const size_key& a, const policy_span* b) const { return a < key(b); }
};

/// Mapped free ranges, by (bytes, address).
struct by_length {
  using is_transparent = void;
  static size_key key(const policy_span* at);
  bool operator()(const policy_span* a, const policy_span* b) const { return key(a) < key(b); }
  bool operator()(const policy_span* a, const size_key& b) const { return key(a) < b; }
  bool operator()(const size_key& a, const policy_span* b) const { return a < key(b); }
};

using gap_set = std::set<policy_span*, by_gap>;
using mapped_free_set = std::set<policy_span*, by_length>;

/// A page blocks use or the policy caches, mapped or paused.
struct policy_page {
  physical_handle handle = 0;  // 0 while paused
  std::uint32_t users = 0;
  policy_arena* owner = nullptr;
  std::uint64_t run = 0;  // the start of the restored run it is mapped in; 0 when mapped alone
};

using page_map = std::map<std::uint64_t, policy_page>;

/// A range of an arena, linked to its neighbours in address order as torch links its blocks:
/// a live block, or a mapped free range (free bytes that all lie on mapped pages: memory a
/// block can take with no new page), the longest such. The free bytes after a live span up to
/// the next live one are its gap; the other free bytes are on pages not mapped. Nothing is
/// searched by address: neighbours are a pointer away.
struct policy_span {
  model_block block;  // first member: free_completed() finds the span from the block it handed out
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  policy_span* prev = nullptr;
  policy_span* next = nullptr;
  std::uint64_t gap_after = 0;  // live: free bytes up to the next live span; 0 on the highest
  bool live = false;
  // Where the span is in its set (live, with a gap after it; or mapped free): erased without a search.
  gap_set::iterator gap_entry;
  mapped_free_set::iterator mapped_free_entry;
  page_map::iterator first_page;  // live: the page its first byte lies on, kept while it is used
};

/// One stream's reservation (or a growable buffer's) and the spans in it.
struct policy_arena {
  policy_arena() = default;
  policy_arena(const policy_arena&) = delete;  // its spans point at `head`
  policy_arena& operator=(const policy_arena&) = delete;
  std::uint64_t base = 0;
  std::uint64_t size = 0;
  std::uint64_t mapped_pages = 0;
  std::uint64_t key = 0;
  /// A growable buffer's: no blocks, pages mapped from the base up to grown_bytes.
  bool growable = false;
  std::uint64_t grown_bytes = 0;
  /// A live span of no bytes at the base: the gap before the lowest block is its gap.
  policy_span head;
  policy_span* highest = &head;  // the live span that ends where the never-used space above starts
  /// A live span at or below the address last looked up: page-by-page walks (releasing the
  /// cache, a pause, a restore) step on from it instead of from the base.
  policy_span* cursor = &head;
  gap_set gaps_by_size;
  mapped_free_set mapped_free_by_size;
};

/// Pages mapped as one allocation and one mapping (by allocate() or restore_range()).
struct memory_run {
  physical_handle handle = 0;
  std::uint64_t bytes = 0;
};

inline size_key by_gap::key(const policy_span* at) { return {at->gap_after, at->end}; }
inline size_key by_length::key(const policy_span* at) { return {at->end - at->start, at->start}; }

}  // namespace rlmem::detail
