/* SPDX-License-Identifier: MIT */
/* librlmem's runtime: a CUDA virtual-memory allocator for a training job, one per device per
 * process, as PyTorch's pluggable allocator entry points and as plain C calls (tags, pause and
 * resume, statistics). Unlike the rest of the C ABI it keeps process-wide state: the runtime of
 * each device opened. Every function but rlmem_torch_malloc catches everything; each is safe
 * from any thread. A failure's `*error_out` (when error_out is not NULL) is the line of that call's
 * failure, whatever other threads' calls fail meanwhile; NULL on success. Free it with
 * rlmem_string_free(). */
#ifndef RLMEM_RLMEM_RUNTIME_H
#define RLMEM_RLMEM_RUNTIME_H

#include <rlmem/rlmem.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Options of rlmem_runtime_open_*: call rlmem_runtime_options_init() first, then set fields.
 *  Layouts (rlmem.h says what struct_size accepts): up to copy_chunk_bytes, up to
 *  keep_host_buffers, and all of it; fields past the caller's struct_size take their defaults
 *  (0 for each here). */
typedef struct rlmem_runtime_options {
  size_t struct_size;          /**< sizeof(rlmem_runtime_options), set by init */
  uint64_t capacity_bytes;     /**< most bytes the runtime maps (a memory fraction); 0: the device */
  int release_free_pages;      /**< 1: unmap a page once no block uses it (fenced; slower) */
  uint64_t reservation_bytes;  /**< address space per tag and stream; 0: the device's memory */
  uint64_t copy_chunk_bytes;   /**< pause/resume copy chunk and pinned slab size; 0: 64 MiB */
  int keep_host_buffers;       /**< 1: keep pinned slabs after resume for the next pause */
  uint64_t history_entries;    /**< allocator events kept for rlmem_runtime_snapshot_json; 0: none;
                                    at most 2^24 (16777216; 768 MiB of host memory, reserved at open):
                                    more is RLMEM_E_INVALID_ARGUMENT */
} rlmem_runtime_options;

/** Fills the caller's `struct_size` bytes of `options` with the defaults (every field 0) and
 *  struct_size.
 *  @return RLMEM_OK, or RLMEM_E_INVALID_ARGUMENT (NULL options; a struct_size that is no layout:
 *    only struct_size is written, when it fits, so that rlmem_runtime_open_* refuses it with a
 *    reason). */
RLMEM_API int rlmem_runtime_options_init_sized(rlmem_runtime_options* options, size_t struct_size);
/** The function behind rlmem_runtime_options_init() for ctypes and dlsym: writes the 0.2 release's layout. */
RLMEM_API void rlmem_runtime_options_init(rlmem_runtime_options* options);
/** Fills `options` (of the caller's sizeof) with the defaults. */
#define rlmem_runtime_options_init(options) ((void)rlmem_runtime_options_init_sized((options), sizeof *(options)))

/** Options for every runtime opened from now on by first use (rlmem_torch_malloc on a device
 *  with no runtime yet), copied; NULL restores the defaults. RLMEM_E_INVALID_ARGUMENT with the
 *  reason for a struct_size of no layout. */
RLMEM_API int rlmem_runtime_configure(const rlmem_runtime_options* options, char** error_out);

/** Opens the runtime of CUDA device `ordinal` (the driver loaded at run time, on the primary context
 *  PyTorch uses). `options` NULL: rlmem_runtime_configure's, or the defaults. RLMEM_E_STATE when it is open already; RLMEM_E_DEVICE
 *  with the reason when there is no driver or device; RLMEM_E_INVALID_ARGUMENT with the reason
 *  for a struct_size of no layout. */
RLMEM_API int rlmem_runtime_open_cuda(int ordinal, const rlmem_runtime_options* options, char** error_out);

/** Opens the runtime of device `ordinal` over a fake device in host memory of `total_bytes` with
 *  pages of `granularity` bytes (a power of two), whose contents round-trip: tests without a GPU. */
RLMEM_API int rlmem_runtime_open_fake(int ordinal, uint64_t total_bytes, uint64_t granularity,
                                      const rlmem_runtime_options* options, char** error_out);

/** Closes the runtime of `ordinal`: all its memory goes back and every address it gave is invalid.
 *  RLMEM_E_STATE when not open. */
RLMEM_API int rlmem_runtime_close(int ordinal);

/** 1 when the runtime of `ordinal` is open, else 0. */
RLMEM_API int rlmem_runtime_is_open(int ordinal);

RLMEM_API int rlmem_runtime_allocate(int ordinal, uint64_t size, uint64_t stream, uint64_t* address, char** error_out);
RLMEM_API int rlmem_runtime_free(int ordinal, uint64_t address, char** error_out);

/** Allocations from now on (every thread) go to `tag` until the matching leave; regions nest. */
RLMEM_API int rlmem_runtime_enter_region(int ordinal, const char* tag, char** error_out);
RLMEM_API int rlmem_runtime_leave_region(int ordinal, char** error_out);

/** Releases the tag's physical memory, keeping its addresses; `keep_host` 1 backs the contents up
 *  to pinned host memory, 0 discards them (resume fills zeros). */
RLMEM_API int rlmem_runtime_pause(int ordinal, const char* tag, int keep_host, char** error_out);
/** Maps memory again at the tag's addresses and restores (or zero-fills) its contents. */
RLMEM_API int rlmem_runtime_resume(int ordinal, const char* tag, char** error_out);
/** Frees the blocks CUDA graph captures allocated on `ordinal` that the program has freed since
 *  (kept until now because every replay of the graph uses them), in `tag`, or in every tag when
 *  `tag` is NULL: call it once those graphs are destroyed. */
RLMEM_API int rlmem_runtime_release_graph_memory(int ordinal, const char* tag, char** error_out);
/** The live blocks of `tag` whose every byte is still what a discard's resume filled in (0xFF in
 *  the checking mode, RLMEM_CHECK_PAUSED=1; else 0), as JSON [{"address", "size"}]: memory
 *  discarded and never written since, such as weights not loaded again. Free with
 *  rlmem_string_free(). RLMEM_E_STATE when the tag is paused. */
RLMEM_API int rlmem_runtime_blocks_still_filled_json(int ordinal, const char* tag, char** json_out, char** error_out);
/** Unmaps the pages no block uses. */
RLMEM_API int rlmem_runtime_empty_cache(int ordinal, char** error_out);
/** Frees the pinned host slabs kept for reuse (keep_host_buffers). */
RLMEM_API int rlmem_runtime_release_host_buffers(int ordinal, char** error_out);

/** Pins host slabs now until `bytes` of them wait for the next pause, which then copies at full
 *  speed instead of pinning as it goes (~2 GB/s). RLMEM_E_INVALID_ARGUMENT, nothing pinned, for
 *  more than the smaller of the device memory the runtime may map (capacity_bytes, else the
 *  device's total: the most a pause backs up) and half the host's physical memory (the message
 *  says which, and how much); RLMEM_E_NO_MEMORY when the host cannot pin that much (what was
 *  pinned stays, for release_host_buffers). */
RLMEM_API int rlmem_runtime_reserve_host_buffers(int ordinal, uint64_t bytes, char** error_out);

/** Every peak counter back to its current value (per-step peaks). */
RLMEM_API int rlmem_runtime_reset_peaks(int ordinal, char** error_out);

/** A growable buffer in the current region's tag: `max_bytes` of addresses reserved, memory
 *  mapped by rlmem_runtime_grow from its start up; the data never moves. RLMEM_E_INVALID_ARGUMENT
 *  for max_bytes 0 or 2^63 and more; RLMEM_E_NO_MEMORY when the address space is short. */
RLMEM_API int rlmem_runtime_growable_reserve(int ordinal, uint64_t max_bytes, uint64_t* address, char** error_out);
/** Makes the buffer's first `bytes` usable (rounded up to the page; never shrinks); `*grown` (may
 *  be NULL) receives the bytes usable now. RLMEM_E_INVALID_ARGUMENT, nothing changed and `*grown`
 *  not written, for `bytes` more than the buffer's max_bytes; RLMEM_E_NO_MEMORY, nothing
 *  changed, when the device has too little memory. */
RLMEM_API int rlmem_runtime_grow(int ordinal, uint64_t address, uint64_t bytes, uint64_t* grown, char** error_out);
RLMEM_API int rlmem_runtime_growable_release(int ordinal, uint64_t address, char** error_out);

/** Synchronous copies from and to memory the runtime handed out (checks, tests). */
RLMEM_API int rlmem_runtime_read(int ordinal, uint64_t address, void* destination, uint64_t size, char** error_out);
RLMEM_API int rlmem_runtime_write(int ordinal, uint64_t address, const void* source, uint64_t size, char** error_out);

/** The runtime's counters as JSON: {"tags": [{"name", "paused", "allocated_bytes": {"current",
 *  "peak", "total"}, "allocations": {...}, "mapped_bytes": {...}, "paused_bytes",
 *  "host_backup_bytes", "pauses", "resumes", "failed_allocations", "writes_while_paused", "graph_held_bytes", "last_pause": {"copied_bytes",
 *  "seconds"}, "last_resume": {...}}], "totals": {"allocated_bytes": {...}, "allocations": {...},
 *  "reserved_bytes": {...}, "alloc_retries", "ooms", "host_buffer_bytes", "device_calls": {"map":
 *  {"calls", "seconds"}, ...}}}: device_calls, every primitive the runtime called (create, map,
 *  set_access, unmap, release, synchronize, the copies) with the seconds spent in it. Free with rlmem_string_free(). */
RLMEM_API int rlmem_runtime_statistics_json(int ordinal, char** json_out, char** error_out);

/** The runtime's state and history as torch's memory snapshot names them, as JSON:
 *  {"segments": [...], "device_traces": [[...], ...], "rlmem": {"events_dropped"}}: every mapped
 *  run of pages an expandable segment with its live blocks, every kept event a trace entry
 *  (alloc, free_requested, free_completed, segment_map, segment_unmap, oom) with no frames.
 *  rlmem.runtime.dump_snapshot() pickles it, and rlmem inspect, replay and report read that. */
RLMEM_API int rlmem_runtime_snapshot_json(int ordinal, char** json_out, char** error_out);

/** torch.cuda.memory.CUDAPluggableAllocator's entry points for change_current_allocator (the
 *  runtime of `device` opened on first use). A request that cannot be served throws a C++
 *  exception whose what() is the one-line reason: a null would be handed to the program as a
 *  tensor (torch 2.11 checks nothing). It is torch's c10::OutOfMemoryError when the process has
 *  it (looked up at run time; torch raises torch.OutOfMemoryError for it), else std::bad_alloc's
 *  kind. */
RLMEM_API void* rlmem_torch_malloc(size_t size, int device, void* stream);
RLMEM_API void rlmem_torch_free(void* pointer, size_t size, int device, void* stream);

/** The same for torch.cuda.MemPool(allocator): a request that cannot be served returns NULL, and
 *  torch raises torch.OutOfMemoryError itself. */
RLMEM_API void* rlmem_torch_pool_malloc(size_t size, int device, void* stream);

/** Makes now the memory torch's libraries keep for the calling thread on its current CUDA stream
 *  of `device` (`stream`, which the caller reads from torch: torch.cuda.current_stream().cuda_stream;
 *  `device` must be torch's current device) by calling torch's own getters,
 *  at::cuda::getCurrentCUDABlasHandle and getCUDABlasLtWorkspace: the cuBLAS and cuBLASLt
 *  workspaces go to the tag "libraries", never paused. The thread's later requests on `stream`
 *  are then never taken for a workspace, and the first call on a device records the sizes torch
 *  made, so that other threads there read their callers' stacks (a few microseconds each) only
 *  for requests of those sizes, each until found. Call it under rlmem_torch_malloc before the
 *  first region of each thread and stream (rlmem.runtime.region() does). RLMEM_E_STATE where the
 *  getters are not in the process (no torch with CUDA) or one failed; nothing changes then. */
RLMEM_API int rlmem_torch_prepare_libraries(int device, void* stream, char** error_out);

#ifdef __cplusplus
}
#endif

#endif /* RLMEM_RLMEM_RUNTIME_H */
