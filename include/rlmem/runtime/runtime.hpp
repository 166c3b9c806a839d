// SPDX-License-Identifier: MIT
#pragma once
// The rlmem runtime: the rlmem policy running for real over a device, for a training job. It
// adds what a process needs around the policy: a lock, tags (memory allocated inside a region
// belongs to that region's tag and lives in address space of its own), pause and resume of a tag
// (its physical memory released while every address stays valid, restored bit-exact from pinned
// host buffers or refilled with a documented byte), and counters per tag.

#include <rlmem/device/device.hpp>
#include <rlmem/policy/rlmem_policy.hpp>
#include <rlmem/device/timed_device.hpp>
#include <rlmem/runtime/runtime_errors.hpp>
#include <rlmem/runtime/runtime_types.hpp>
#include <rlmem/runtime/detail/runtime_parts.hpp>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rlmem {

/// Thread-safe: every member takes one lock (a pause lets it go while it waits for copies).
/// A call that fails returns its code and, in the failure's `detail`, its reason in one line; it
/// stores nothing, so that threads failing at once each get their own reason. A success costs no
/// allocation for the result: its failure holds an empty string.
class runtime {
 public:
  /// Pre: `gpu` outlives the runtime and is used by nothing else.
  runtime(device& gpu, runtime_options options);
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;
  /// Frees every pinned slab; the policy then gives every page and reservation back.
  ~runtime();

  /// The tag of every allocation made outside a region.
  static constexpr std::string_view default_tag = "default";
  /// The tag of memory torch's libraries keep for themselves (cuBLAS and cuBLASLt workspaces,
  /// made once per stream and used by every later GEMM, whatever region it runs in): never
  /// paused, and no region may name it.
  static constexpr std::string_view library_tag = "libraries";

  /// Allocations from now on (any thread) go to `tag`, created on first use; regions nest.
  /// invalid_argument for library_tag.
  result<void, runtime_errc> enter_region(std::string_view tag);
  /// Back to the enclosing region's tag; invalid_argument when no region is open.
  result<void, runtime_errc> leave_region();
  /// The innermost open region's tag (regions are the runtime's, not a thread's); default_tag when none is open.
  std::string current_tag() const;

  /// `bytes` (> 0) on `stream` in the current tag: the block's address, or the failure. Blocks of
  /// one tag and stream share pages, never with another tag or stream. Called per tensor: its
  /// success allocates nothing for the result.
  /// A block allocated while `stream` is being captured into a CUDA graph is kept when freed
  /// (every replay uses it) until release_graph_memory().
  result<std::uint64_t, runtime_errc> allocate(std::uint64_t bytes, std::uint64_t stream);
  /// The same in library_tag, whatever region is open: memory a library keeps for itself.
  result<std::uint64_t, runtime_errc> allocate_for_library(std::uint64_t bytes, std::uint64_t stream);
  /// As allocate(), for a request that may be memory a library keeps for itself (`why` says why
  /// it could not be told apart): pause() of its tag is refused, naming it, while it lives.
  result<std::uint64_t, runtime_errc> allocate_unproven(std::uint64_t bytes, std::uint64_t stream, std::string_view why);
  /// Gives a block back; allowed while its tag is paused (its pages are then not restored).
  result<void, runtime_errc> free(std::uint64_t address);
  /// Frees the blocks graph captures allocated that the program freed since, in `tag` (empty:
  /// every tag): call it once the graphs that used them are gone.
  result<void, runtime_errc> release_graph_memory(std::string_view tag);

  /// Releases the tag's physical memory, keeping its addresses. Fences the device first. While
  /// it waits for a backup's copies (keep_contents::host) the lock is let go where the device
  /// allows it (device::concurrent_wait): other threads allocate and free meanwhile.
  /// invalid_argument for library_tag, and for a tag that holds a block allocate_unproven() made.
  result<void, runtime_errc> pause(std::string_view tag, keep_contents keep);
  /// Maps new memory at the same addresses and restores or fills the contents. Memory
  /// allocated elsewhere meanwhile may leave too little: then nothing changes and the tag stays
  /// paused (out_of_memory), with its backup kept.
  result<void, runtime_errc> resume(std::string_view tag);
  /// Pages no block uses go back to the device (fenced first).
  result<void, runtime_errc> empty_cache();
  /// Frees the pinned slabs kept for reuse (keep_host_buffers).
  void release_host_buffers();
  /// Pins slabs now until `bytes` of them (whole slabs) wait for the next pause, so that pinning,
  /// 25 times slower than the copies, is paid here and not inside it (with keep_host_buffers,
  /// for every pause). invalid_argument, nothing pinned, for more than host_buffers_limit();
  /// out_of_memory when the host cannot pin that much: what was pinned stays.
  result<void, runtime_errc> reserve_host_buffers(std::uint64_t bytes);
  /// The most reserve_host_buffers() takes: the smaller of the device memory the runtime may map
  /// (capacity_bytes, else the device's total), which is the most a pause ever backs up, and
  /// half the host's physical memory, since pinned pages cannot be swapped out and a host pinned
  /// to the brim meets the kernel's OOM killer; with which bound it is.
  host_buffers_bound host_buffers_limit() const;

  /// A growable buffer in the current tag: `max_bytes` of address space reserved at once, no
  /// memory yet; its data never moves while it grows (a KV cache that grows with the sequence).
  /// The buffer's address, or the failure.
  result<std::uint64_t, runtime_errc> reserve_growable(std::uint64_t max_bytes);
  /// Maps memory so that the buffer's first `bytes` are usable (rounded up to the page); never
  /// shrinks. invalid_argument (nothing changed) for more than the buffer's max_bytes;
  /// out_of_memory (nothing changed) past the device's memory.
  result<void, runtime_errc> grow(std::uint64_t address, std::uint64_t bytes);
  /// Bytes usable at the buffer's start now.
  std::uint64_t grown_bytes(std::uint64_t address) const;
  /// Unmaps the buffer (fenced first) and frees its addresses.
  result<void, runtime_errc> release_growable(std::uint64_t address);

  /// Reads mapped memory through the device (tests, and bit-exactness checks).
  result<void, runtime_errc> read(std::uint64_t address, void* destination, std::uint64_t size);
  /// The other way: `size` bytes from `source` to mapped memory at `address`.
  result<void, runtime_errc> write(std::uint64_t address, const void* source, std::uint64_t size);

  /// The live blocks of `tag` (not paused) whose every byte is still the fill a discard left
  /// (check_fill in the checking mode, else discard_fill): memory discarded and never written
  /// since, such as weights not loaded again, in address order. Reads every such block through
  /// the device.
  result<std::vector<address_run>, runtime_errc> blocks_still_filled(std::string_view tag);

  /// Every peak back to its current value (a per-step peak, as torch.cuda.reset_peak_memory_stats).
  void reset_peaks();

  /// Every tag's figures, in the order the tags were first used (default_tag, library_tag first).
  std::vector<tag_statistics> statistics() const;
  /// The mapped memory with its live blocks now, and the history kept (history_entries).
  runtime_snapshot snapshot() const;
  /// The figures over every tag, with the device calls made so far.
  runtime_totals totals() const;

 private:
  using backup_chunk = detail::runtime_backup_chunk;
  using tag_state = detail::runtime_tag_state;
  using live_block = detail::runtime_live_block;
  using growable = detail::runtime_growable;

  tag_state& tag_named(std::string_view name);
  /// allocate()'s work in tag `tag_id`, the lock held; `unproven` says why the block may be a
  /// library's (allocate_unproven), empty otherwise.
  result<std::uint64_t, runtime_errc> allocate_in(std::uint32_t tag_id, std::uint64_t bytes, std::uint64_t stream,
                                                  std::string_view unproven = {});
  void free_block(std::unordered_map<std::uint64_t, live_block>::iterator found);
  /// Checking mode: maps the tag's poison page under every page its live blocks use.
  result<void, runtime_errc> poison(tag_state& tag);
  /// Checking mode: counts a write into the poison page, then unmaps it from the tag's pages
  /// (all of them, or those inside `within`).
  result<void, runtime_errc> unpoison(tag_state& tag, address_run within = {0, ~std::uint64_t{0}});
  tag_state* find_tag(std::string_view name);
  /// pause()'s refusal of a tag holding blocks allocate_unproven() made, naming the first.
  runtime_failure refuse_unproven(const tag_state& tag);
  std::uint64_t arena_key(std::uint32_t tag, std::uint64_t stream);
  void refresh_mapped(tag_state& tag);
  /// The policy's fault as a device_error saying `what` the runtime was doing; clears the fault.
  runtime_failure device_fault(std::string_view what);
  void free_backup(tag_state& tag);
  /// A pinned slab of copy_chunk_bytes: a kept one, or a new one.
  /// A new pinned slab, counted in host_buffer_bytes.
  device_errc pin_slab(void*& slab);
  void unpin_slab(void* slab);
  /// A kept slab, or a new one.
  device_errc take_slab(void*& slab);
  void give_slab(void* slab);
  void remember(history_event event);
  /// Every range of the tag that blocks use, cut into copy chunks.
  std::vector<address_run> chunks_in_use(const tag_state& tag) const;

  mutable std::mutex lock_;
  timed_device gpu_;  // the device, every call counted and timed
  runtime_options options_;
  rlmem_policy policy_;
  std::vector<tag_state> tags_;                   // by id; 0 is the default tag
  std::unordered_map<std::string, std::uint32_t> tag_ids_;
  std::vector<std::uint32_t> regions_;            // open regions, innermost last
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint64_t> arena_keys_;  // (tag, stream)
  std::unordered_map<std::uint64_t, live_block> live_;  // by address
  std::unordered_map<std::uint64_t, growable> growables_;  // by base address
  std::uint64_t next_arena_key_ = 1;
  std::unordered_map<std::uint64_t, std::uint64_t> stream_of_arena_;  // arena key -> the caller's stream
  std::vector<history_event> history_;  // a ring of options_.history_entries
  std::size_t history_next_ = 0;
  std::uint64_t history_dropped_ = 0;
  std::vector<void*> spare_slabs_;
  runtime_totals totals_;
};

}  // namespace rlmem
