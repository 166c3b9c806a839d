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

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rlmem {

/// What a pause does with the contents of a tag's memory.
enum class keep_contents : std::uint8_t {
  discard,  ///< gone; resume fills every byte with runtime_options::discard_fill
  host,     ///< copied to pinned host memory, restored bit-exact by resume, then freed
};

struct runtime_options {
  /// The policy's options (capacity, release of free pages, address space per stream and tag).
  /// keep_segment_events is forced off: a runtime runs for days.
  rlmem_policy_options policy;
  /// Backups and restores move in chunks of this many bytes (a multiple of the page), so that
  /// pinning or mapping the next chunk overlaps the copy of this one; backups are packed into
  /// pinned host buffers ("slabs") of this size.
  std::uint64_t copy_chunk_bytes = std::uint64_t{64} << 20;
  /// Keep the pinned slabs of a backup after resume, for the next pause to reuse. Pinning host
  /// memory runs at about 1 GB/s (10 GiB: ~11 s on an H100 host) while the copies run at ~50 GB/s,
  /// so a loop that pauses every step wants this; the price is host memory held between pauses
  /// (release_host_buffers() gives it back). Off: every slab is freed once its tag is resumed.
  bool keep_host_buffers = false;
  /// Every byte of a discarded tag's memory after resume: zeros, so that a KV cache or buffer
  /// read before it is written holds no stale data from another tag.
  std::uint8_t discard_fill = 0;
  /// The checking mode (RLMEM_CHECK_PAUSED=1 in librlmem): a paused tag's used pages are backed
  /// by one page of check_fill of the tag's own instead of nothing, so that a kernel reading
  /// paused memory sees NaNs instead of faulting and a write into it is counted at resume
  /// (writes_while_paused); a discarded tag comes back as check_fill, not discard_fill, so that
  /// weights discarded and never loaded again train to NaN, and blocks_still_filled() names
  /// them. Costs a map per page at pause and an unmap per page at resume.
  bool check_contents = false;
  /// 0xFF bytes: a NaN in every floating-point type (fp32, fp16, bf16, fp8 e5m2, fp64).
  std::uint8_t check_fill = 0xFF;
  /// Keep the last this many allocator events (allocations, frees, pages mapped and unmapped,
  /// OOMs) for snapshot(), as torch's _record_memory_history keeps its trace; 0: none; at most
  /// max_history_entries.
  std::uint64_t history_entries = 0;
  /// The ring is reserved whole when the runtime opens: 2^24 events are 768 MiB of host memory,
  /// hundreds of training steps of a large model's allocations (torch's own trace keeps 100,000
  /// by default).
  static constexpr std::uint64_t max_history_entries = std::uint64_t{1} << 24;
};

/// One event of the runtime's history, as a torch trace entry names it.
struct history_event {
  enum class kind : std::uint8_t { alloc, free_requested, free_completed, segment_map, segment_unmap, oom };
  kind action = kind::alloc;
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  std::uint64_t stream = 0;
  std::int64_t time_us = 0;      ///< microseconds since the Unix epoch
  std::uint64_t device_free = 0; ///< oom only: free bytes on the device as the driver said
};

/// The runtime's state and history in the shape of torch's memory snapshot: each mapped run of
/// pages is an expandable segment holding the live blocks in it.
struct runtime_snapshot {
  struct block {
    std::uint64_t address = 0;
    std::uint64_t size = 0;
    std::uint64_t requested = 0;
  };
  struct segment {
    std::uint64_t address = 0;
    std::uint64_t size = 0;
    std::uint64_t stream = 0;
    std::vector<block> blocks;  ///< live blocks in address order
  };
  std::vector<segment> segments;
  std::vector<history_event> events;  ///< oldest first
  std::uint64_t events_dropped = 0;   ///< older events the ring no longer holds
};

/// {current, peak, total} as torch's memory_stats() and RMM's statistics adaptor count them;
/// total sums every increase.
struct counter {
  std::uint64_t current = 0;
  std::uint64_t peak = 0;
  std::uint64_t total = 0;
  void add(std::uint64_t amount) noexcept;
  void remove(std::uint64_t amount) noexcept { current -= amount; }
  /// Moves current to `value`, counting a rise as an increase.
  void set(std::uint64_t value) noexcept;
};

struct tag_statistics {
  std::string name;
  bool paused = false;
  counter allocated_bytes;   ///< bytes handed out (requests rounded up to 512)
  counter allocations;       ///< blocks handed out
  counter mapped_bytes;      ///< physical memory held by the tag's pages
  std::uint64_t paused_bytes = 0;       ///< released by pause and still in use: resume maps them again
  std::uint64_t host_backup_bytes = 0;  ///< pinned host memory holding the contents
  std::uint64_t pauses = 0;
  std::uint64_t resumes = 0;
  std::uint64_t failed_allocations = 0;
  /// Checking mode: resumes that found the tag's paused memory written while it was paused.
  std::uint64_t writes_while_paused = 0;
  /// Blocks a CUDA graph capture allocated that the program has freed since: kept, because every
  /// replay of the graph still uses them, until release_graph_memory().
  std::uint64_t graph_held_bytes = 0;
  /// The last pause and resume: bytes copied (0 for a discard) and seconds, from the call to
  /// its return, copies included.
  std::uint64_t last_pause_copied_bytes = 0;
  double last_pause_seconds = 0;
  std::uint64_t last_resume_copied_bytes = 0;
  double last_resume_seconds = 0;
};

struct runtime_totals {
  counter allocated_bytes;
  counter allocations;
  counter reserved_bytes;  ///< pages mapped, every tag together
  std::uint64_t alloc_retries = 0;
  std::uint64_t ooms = 0;
  std::uint64_t host_buffer_bytes = 0;  ///< pinned slabs held: backups and those kept for reuse
  device_call_totals device_calls;      ///< every device call the runtime made, counted and timed
};

/// host_buffers_limit(): the most reserve_host_buffers() takes, and which bound it is.
struct host_buffers_bound {
  std::uint64_t bytes = 0;  ///< the limit
  std::string_view why;     ///< static text: "half the host's physical memory", or the device's memory or capacity
};

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
  /// Writes mapped memory through the device (tests, and bit-exactness checks).
  result<void, runtime_errc> write(std::uint64_t address, const void* source, std::uint64_t size);

  /// The live blocks of `tag` (not paused) whose every byte is still the fill a discard left
  /// (check_fill in the checking mode, else discard_fill): memory discarded and never written
  /// since, such as weights not loaded again, in address order. Reads every such block through
  /// the device.
  result<std::vector<address_run>, runtime_errc> blocks_still_filled(std::string_view tag);

  /// Every peak back to its current value (a per-step peak, as torch.cuda.reset_peak_memory_stats).
  void reset_peaks();

  std::vector<tag_statistics> statistics() const;
  runtime_snapshot snapshot() const;
  runtime_totals totals() const;

 private:
  struct backup_chunk {
    address_run range;
    void* host = nullptr;
  };
  struct tag_state {
    tag_statistics stats;
    std::vector<std::uint64_t> arena_keys;  // one per stream the tag allocated on
    std::vector<backup_chunk> backup;       // pieces of slabs, in the order copied
    std::vector<void*> slabs;
    bool pausing = false;                   // a pause waits for its copies without the lock
    physical_handle poison = 0;             // checking mode: the page of check_fill
    std::vector<std::uint64_t> poisoned;    // pages it is mapped under while paused
    std::uint64_t unproven_blocks = 0;      // live blocks allocate_unproven() made
  };
  struct live_block {
    model_block* block = nullptr;
    std::uint32_t tag = 0;
    std::uint64_t stream = 0;
    std::uint64_t requested = 0;
    bool captured = false;        // allocated while its stream was captured into a CUDA graph
    bool held_for_graph = false;  // captured, and freed by the program since
    std::string unproven;         // why it may be a library's (allocate_unproven), else empty
  };
  struct growable {
    std::uint64_t key = 0;
    std::uint32_t tag = 0;
    std::uint64_t max_bytes = 0;  // as the caller asked, before rounding to the page
  };

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
