// SPDX-License-Identifier: MIT
#pragma once
// The rlmem allocator policy over the device seam: one address-space reservation per stream,
// blocks of 4 MiB or more placed best fit among the free ranges whose pages are mapped (as
// torch's expandable segments reuse their mapped free blocks), others, and those no mapped range
// holds, best fit inside it (or at its top), physical pages mapped under a block as it is
// handed out and counted by the blocks that use them, and pages no block uses released when
// memory runs short, at empty_cache(), or at once. Address space is cheap and never the limit;
// only pages are memory, so free gaps cost at most the pages they share with live blocks.
// The same code runs in replay over the fake device and, in the runtime, over CUDA.

#include <rlmem/policy/allocator_policy.hpp>
#include <rlmem/policy/detail/rlmem_policy_parts.hpp>
#include <rlmem/device/device.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rlmem {

/// How the rlmem policy places blocks and gives pages back; the defaults are the runtime's.
struct rlmem_policy_options {
  /// Unmap a page as soon as no block uses it: reserved stays closest to what is live, at the
  /// cost of a map and an unmap per reuse. Otherwise free pages stay mapped until a request
  /// finds no memory, or empty_cache().
  bool release_free_pages = false;
  /// set_per_process_memory_fraction as bytes; 0 for none.
  std::uint64_t capacity_bytes = 0;
  /// Address space reserved per stream (rounded up to the granularity): it bounds the bytes
  /// one stream can have live, so make it no less than the device.
  std::uint64_t reservation_bytes = std::uint64_t{256} << 30;
  /// Keep every map and unmap in segment_events() (replay reads them); a long-running runtime
  /// turns this off so its memory does not grow with time.
  bool keep_segment_events = true;
  /// restore_range() maps the pages it restores in runs of up to this many bytes (rounded down to
  /// the page), one physical allocation and one mapping each: on an H100 that costs 25 times
  /// less per byte than page by page, which is what lets a resume keep up with its copies. Such
  /// a run goes back to the device only as a whole: once no block uses any of its pages (or
  /// when its tag pauses again). The page size (the granularity) restores page by page.
  std::uint64_t restore_run_bytes = std::uint64_t{64} << 20;
  /// allocate() maps the pages that lie wholly inside a new block in runs of up to this many
  /// bytes, one allocation and one mapping each, as a resume does (a 512 MiB activation: 16
  /// driver mappings instead of 256, each costing about the same); pages at a block's ends,
  /// which neighbours may share, are mapped one by one. A run goes back only as a whole, so a
  /// free page inside a run another block still uses stays mapped until that block goes: the
  /// price in memory. 32 MiB: on the recorded workloads replayed (docs/runtime.md) the smallest
  /// capacity that completes rises by at most 2% against page by page (64 MiB: 3%). The page
  /// size maps page by page.
  std::uint64_t allocation_run_bytes = std::uint64_t{32} << 20;
  /// A request of at least this many bytes takes the best-fitting free range whose pages are all
  /// mapped before any other place (0: never): no new memory while freed pages wait elsewhere.
  /// Under caps of 1.035-1.10x of frag_default's demand the cache went back once in 10 steps
  /// instead of 4-8 times. 4 MiB: smaller requests fill the pages live blocks share and, placed
  /// so, cut the large mapped ranges; on the recordings replayed the smallest completing capacity
  /// moved by -0.2% to +1.4% (from 2 MiB: -0.3% to +2.6%; docs/runtime.md).
  std::uint64_t mapped_first_bytes = std::uint64_t{4} << 20;
};

/// Told of every page mapped (true) or unmapped (false), with the key of its arena.
using page_observer = std::function<void(bool mapped, std::uint64_t address, std::uint64_t size, std::uint64_t arena_key)>;

/// A range of addresses and its length in bytes.
struct address_run {
  std::uint64_t address = 0;  ///< the first byte
  std::uint64_t bytes = 0;    ///< the length; 0 for an empty run
  /// Same address and length.
  bool operator==(const address_run&) const = default;
};

/// The rlmem allocator policy over a device (see the file comment).
class rlmem_policy final : public allocator_policy {
 public:
  /// Pre: `gpu` outlives the policy and is used by nothing else.
  rlmem_policy(device& gpu, rlmem_policy_options options);
  rlmem_policy(const rlmem_policy&) = delete;
  rlmem_policy& operator=(const rlmem_policy&) = delete;
  ~rlmem_policy() override;

  /// Memory from before the trace: each live block is asked for again, in the order given
  /// (addresses are the policy's own; segments' pools and kinds do not apply).
  std::vector<model_block*> add_existing_segment(std::uint64_t address, std::uint64_t size, std::uint64_t stream,
                                                 const std::vector<model_block>& live, bool small_pool, bool expandable) override;
  void close_existing_reservations() override {}
  model_block* allocate(std::uint64_t requested_bytes, std::uint64_t stream) override;
  void free_requested(model_block* block) override;
  void free_completed(model_block* block) override;
  void empty_cache() override { release_cached_pages(); }

  std::int64_t allocated_bytes() const noexcept override { return allocated_bytes_; }
  std::int64_t reserved_bytes() const noexcept override { return static_cast<std::int64_t>(mapped_pages_ * page_bytes_); }
  /// Contiguous mapped runs, as a snapshot lists expandable segments. O(pages).
  std::uint64_t segments() const noexcept override;
  /// Requests that released cached pages and tried again.
  std::uint64_t alloc_retries() const noexcept override { return retries_; }
  /// Every page mapped and unmapped, in order.
  const std::vector<model_segment_event>& segment_events() const noexcept override { return events_; }

  // Pausing (the runtime's pause and resume). Arenas are keyed by what allocate() calls a stream;
  // pages never span two arenas, so a range of one arena holds only its own blocks' pages.

  /// The device's granularity: every page the policy maps is this many bytes.
  std::uint64_t page_bytes() const noexcept { return page_bytes_; }
  /// The address range of the arena keyed `stream`; false when it has none yet.
  bool arena_range(std::uint64_t stream, address_run& range) const;
  /// Bytes mapped for the arena keyed `stream` now.
  std::uint64_t arena_mapped_bytes(std::uint64_t stream) const;
  /// Contiguous runs of pages in `range` that live blocks use (mapped or paused), in address order.
  std::vector<address_run> used_runs(address_run range) const;
  /// Releases every page in `range`: those no block uses for good, the others until
  /// restore_range() maps new memory at their addresses. Blocks stay live; placing one in the
  /// range before the restore is the caller's error. Fences the device first unless `fenced`
  /// says the caller has (and nothing ran on the range since). False when the device failed
  /// (fault() says how); pages released so far stay released.
  bool release_range(address_run range, bool fenced = false);
  /// Maps new memory, contents unspecified, under every paused page in `range`, in runs of up
  /// to restore_run_bytes; the runs mapped, in address order. False when memory ran short
  /// (nothing in the range changed) or the device failed. release_range() gives a restored run
  /// back when the range reaches its end.
  bool restore_range(address_run range, std::vector<address_run>& restored);
  // Growable buffers: an arena of their own whose pages are mapped from its base up, never
  // shared, so the buffer's data never moves while it grows.

  /// Reserves `max_bytes` (rounded up to the page) as the arena keyed `key`, nothing mapped.
  /// Pre: no arena has that key. False when address space ran out (or fault()), or past
  /// reservation_bytes (the device's memory, in the runtime).
  bool reserve_growable(std::uint64_t key, std::uint64_t max_bytes, std::uint64_t& base);
  /// Maps pages so that the first `bytes` of the buffer are memory; never unmaps. False when
  /// memory or the reservation ran short: nothing changed.
  bool grow(std::uint64_t key, std::uint64_t bytes);
  /// Bytes mapped at the buffer's start.
  std::uint64_t grown_bytes(std::uint64_t key) const;
  /// Unmaps the buffer's pages (fenced) and frees its reservation.
  void release_growable(std::uint64_t key);

  /// Contiguous runs of mapped pages in `range`, in address order.
  std::vector<address_run> mapped_runs(address_run range) const;
  /// Every page mapped or unmapped from now on is told to `observer` (the runtime's history).
  void observe_pages(page_observer observer) { observer_ = std::move(observer); }

  /// Bytes of pages released by release_range() and not yet restored or freed.
  std::uint64_t paused_bytes() const noexcept { return paused_pages_ * page_bytes_; }

  /// A device call failed for a reason other than memory (a broken precondition): the policy's
  /// bug, never the program's. Empty while all is well.
  const std::string& fault() const noexcept override { return fault_; }
  /// The caller has reported the fault.
  void clear_fault() noexcept { fault_.clear(); }
  /// Totals: the pages mapped, paused and cached against the page map's size and the arenas'
  /// counts. Whole: also every page's users against the live blocks on it, its arena and run;
  /// the spans of each arena linked in address order without overlap, their gaps and the two
  /// sets that index them; and the mapped free ranges covering exactly the free bytes on mapped
  /// pages. O(pages + spans + pages under live blocks).
  std::optional<std::string> broken_invariant(invariant_scope scope) const override;

 private:
  // The parts (rlmem/policy/detail/rlmem_policy_parts.hpp), by their names here.
  using span = detail::policy_span;
  using arena = detail::policy_arena;
  using page = detail::policy_page;
  using page_map = detail::page_map;
  using memory_run = detail::memory_run;
  using size_key = detail::size_key;
  using gap_set = detail::gap_set;
  using mapped_free_set = detail::mapped_free_set;

  arena* arena_of(std::uint64_t stream);
  arena& add_arena(std::uint64_t key, std::uint64_t base, std::uint64_t size);
  /// Chooses where a block of `size` goes and carves it out; nullptr when the arena is full.
  span* place(arena& where, std::uint64_t size);
  /// A live span for [address, address + size), carved out of the gap after `before` (or the
  /// space above the top when `before` is the highest) and out of the mapped free ranges.
  span* carve(arena& where, span* before, std::uint64_t address, std::uint64_t size);
  /// The live span `block` back to the gaps, joined with its neighbours; a gap reaching the
  /// top lowers the top instead. Unlinks it, to be recycled by the caller.
  void give_back(arena& where, span* block);
  /// The live span nearest below or at `address` (found from the arena's cursor, which it moves).
  span* live_at_or_before(arena& where, std::uint64_t address);
  /// [begin, end), free and mapped, joins the mapped free ranges (merged with those it touches).
  void add_mapped_free(arena& where, std::uint64_t begin, std::uint64_t end);
  /// [begin, end) is no longer free or no longer mapped.
  void remove_mapped_free(arena& where, std::uint64_t begin, std::uint64_t end);
  /// The free parts of [begin, end), whose pages are mapped now, join the mapped free ranges.
  void add_free_parts(arena& where, std::uint64_t begin, std::uint64_t end);
  /// The parts of [begin, end) on mapped pages join the mapped free ranges. Pre: [begin, end) is free.
  void add_mapped_parts(arena& where, std::uint64_t begin, std::uint64_t end);
  span* new_span(std::uint64_t start, std::uint64_t end, bool live);
  /// Set entries in and out of the arena's two sets, their nodes kept for the next entry: in a
  /// steady state no node is allocated.
  void enter_gaps(arena& where, span* before);
  void leave_gaps(arena& where, span* before);
  void enter_mapped_free(arena& where, span* range);
  void leave_mapped_free(arena& where, span* range);
  /// The live span nearest below `at` (the head at least).
  static span* live_before(span* at);
  void link_after(span* at, span* added);
  void unlink(span* gone);
  bool map_pages(arena& owner, span& block);
  bool map_page(arena& owner, std::uint64_t address);
  /// Maps `bytes` of pages no one has at `address` as one run (one page: an ordinary page), each
  /// page with one user. False with nothing changed.
  bool map_new_run(arena& owner, std::uint64_t address, std::uint64_t bytes);
  /// create + map + set_access of `bytes` at `address`, as one allocation; the handle, or 0
  /// with fault_ set unless out of memory.
  physical_handle new_memory(std::uint64_t address, std::uint64_t bytes);
  void record(bool alloc, std::uint64_t address, const arena& owner);
  /// The pages under [address, address + size) lose a user, from `first` (the first of them);
  /// true when all of them are still mapped afterwards (none was paused or given back).
  bool leave_pages(std::uint64_t address, std::uint64_t size, page_map::iterator first);
  void unmap_page(std::uint64_t address);
  /// Maps [address, address + bytes) of paused pages as one run; false with nothing changed.
  bool map_restored_run(std::uint64_t address, std::uint64_t bytes);
  /// Unmaps a run: its unused pages are forgotten, the others paused. Pre: fenced.
  bool unmap_run(std::uint64_t start);
  bool run_unused(std::uint64_t start) const;
  /// Gives a page no block uses back: alone, or with its run once the whole run is unused.
  void release_unused_page(std::uint64_t address);
  /// Gives every cached page back (fenced first; a run only once all of it is unused). True when
  /// any went.
  bool release_cached_pages();
  bool room_for(std::uint64_t pages) const noexcept;
  /// Contiguous runs of the pages in `range` for which `wanted(page)` holds.
  template <typename Wanted>
  std::vector<address_run> runs_of_pages(address_run range, Wanted wanted) const;

  device& gpu_;
  rlmem_policy_options options_;
  std::uint64_t page_bytes_;
  std::int64_t allocated_bytes_ = 0;
  std::uint64_t retries_ = 0;
  std::unordered_map<std::uint64_t, arena> arenas_;   // by stream
  page_map pages_;                                    // pages blocks use or cached, mapped or paused
  std::uint64_t mapped_pages_ = 0;
  std::uint64_t paused_pages_ = 0;
  std::uint64_t cached_pages_ = 0;                     // mapped pages no block uses
  std::map<std::uint64_t, memory_run> runs_;  // by start address
  std::deque<span> storage_;
  std::vector<span*> recycled_;
  std::vector<gap_set::node_type> spare_gap_nodes_;
  std::vector<mapped_free_set::node_type> spare_mapped_free_nodes_;
  std::vector<model_segment_event> events_;
  page_observer observer_;
  std::string fault_;
};

}  // namespace rlmem
