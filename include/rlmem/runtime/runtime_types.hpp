// SPDX-License-Identifier: MIT
#pragma once
// The runtime's values (runtime.hpp): its options, its history and snapshot in torch's shape, and
// the figures per tag and over every tag, as the runtime's calls take and return them.

#include <rlmem/device/timed_device.hpp>
#include <rlmem/policy/rlmem_policy.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rlmem {

/// What a pause does with the contents of a tag's memory.
enum class keep_contents : std::uint8_t {
  discard,  ///< gone; resume fills every byte with runtime_options::discard_fill
  host,     ///< copied to pinned host memory, restored bit-exact by resume, then freed
};

/// How a runtime places, pauses and records memory.
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
  /// The trace entry's action: a page mapped or unmapped is a segment_map or segment_unmap.
  enum class kind : std::uint8_t { alloc, free_requested, free_completed, segment_map, segment_unmap, oom };
  kind action = kind::alloc;      ///< what happened
  std::uint64_t address = 0;      ///< the block's or page's address; 0 for an oom
  std::uint64_t size = 0;         ///< the block's bytes (rounded), the page's, or for an oom the bytes requested
  std::uint64_t stream = 0;       ///< raw cudaStream_t; 0 for a growable buffer's pages
  std::int64_t time_us = 0;      ///< microseconds since the Unix epoch
  std::uint64_t device_free = 0; ///< oom only: free bytes on the device as the driver said
};

/// The runtime's state and history in the shape of torch's memory snapshot: each mapped run of
/// pages is an expandable segment holding the live blocks in it.
struct runtime_snapshot {
  /// A live block.
  struct block {
    std::uint64_t address = 0;    ///< its first byte
    std::uint64_t size = 0;       ///< bytes it takes (the request rounded up to 512)
    std::uint64_t requested = 0;  ///< bytes the program asked for
  };
  /// A contiguous run of mapped pages of one arena (one tag and stream, or one growable buffer).
  struct segment {
    std::uint64_t address = 0;  ///< its first byte
    std::uint64_t size = 0;     ///< bytes mapped, a multiple of the page
    std::uint64_t stream = 0;   ///< raw cudaStream_t; 0 for a growable buffer
    std::vector<block> blocks;  ///< live blocks in address order
  };
  std::vector<segment> segments;  ///< by arena, each arena's in address order
  std::vector<history_event> events;  ///< oldest first
  std::uint64_t events_dropped = 0;   ///< older events the ring no longer holds
};

/// {current, peak, total} as torch's memory_stats() and RMM's statistics adaptor count them;
/// total sums every increase.
struct counter {
  std::uint64_t current = 0;  ///< now
  std::uint64_t peak = 0;     ///< the highest current since the start or reset_peaks()
  std::uint64_t total = 0;    ///< every increase summed
  /// Raises current (and total, and peak if passed) by `amount`.
  void add(std::uint64_t amount) noexcept;
  /// Lowers current by `amount`. Pre: amount <= current.
  void remove(std::uint64_t amount) noexcept { current -= amount; }
  /// Moves current to `value`, counting a rise as an increase.
  void set(std::uint64_t value) noexcept;
};

/// One tag's figures.
struct tag_statistics {
  std::string name;     ///< as enter_region() named it
  bool paused = false;  ///< paused and not yet resumed
  counter allocated_bytes;   ///< bytes handed out (requests rounded up to 512)
  counter allocations;       ///< blocks handed out
  counter mapped_bytes;      ///< physical memory held by the tag's pages
  std::uint64_t paused_bytes = 0;       ///< released by pause and still in use: resume maps them again
  std::uint64_t host_backup_bytes = 0;  ///< pinned host memory holding the contents
  std::uint64_t pauses = 0;              ///< pause() calls that paused it
  std::uint64_t resumes = 0;             ///< resume() calls that resumed it
  std::uint64_t failed_allocations = 0;  ///< allocations refused: out of memory, or while paused
  /// Checking mode: resumes that found the tag's paused memory written while it was paused.
  std::uint64_t writes_while_paused = 0;
  /// Blocks a CUDA graph capture allocated that the program has freed since: kept, because every
  /// replay of the graph still uses them, until release_graph_memory().
  std::uint64_t graph_held_bytes = 0;
  /// The last pause and resume: bytes copied (0 for a discard) and seconds, from the call to
  /// its return, copies included.
  std::uint64_t last_pause_copied_bytes = 0;
  double last_pause_seconds = 0;              ///< the last pause's wall-clock seconds
  std::uint64_t last_resume_copied_bytes = 0; ///< bytes the last resume copied back; 0 for a discard
  double last_resume_seconds = 0;             ///< the last resume's wall-clock seconds
};

/// The runtime's figures over every tag.
struct runtime_totals {
  counter allocated_bytes;  ///< bytes handed out (requests rounded up to 512)
  counter allocations;      ///< blocks handed out
  counter reserved_bytes;  ///< pages mapped, every tag together
  std::uint64_t alloc_retries = 0;  ///< requests that released cached pages and tried again
  std::uint64_t ooms = 0;           ///< allocations and growths refused for want of memory
  std::uint64_t host_buffer_bytes = 0;  ///< pinned slabs held: backups and those kept for reuse
  device_call_totals device_calls;      ///< every device call the runtime made, counted and timed
};

/// host_buffers_limit(): the most reserve_host_buffers() takes, and which bound it is.
struct host_buffers_bound {
  std::uint64_t bytes = 0;  ///< the limit
  std::string_view why;     ///< static text: "half the host's physical memory", or the device's memory or capacity
};

}  // namespace rlmem
