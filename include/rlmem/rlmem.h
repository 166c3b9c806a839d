/* SPDX-License-Identifier: MIT */
/* librlmem: the C ABI, the one way into rlmem from other languages (the Python package, the
 * runtime allocator). Plain C11; every function is safe to call from any thread with its own
 * arguments: the functions here keep no global mutable state, and nothing throws across them.
 * The runtime's functions (rlmem/rlmem_runtime.h) are the exception: they act on the process's
 * runtimes. */
#ifndef RLMEM_RLMEM_H
#define RLMEM_RLMEM_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* int64_t, uint64_t */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RLMEM_BUILDING_LIBRARY)
#define RLMEM_API __attribute__((visibility("default")))
#else
#define RLMEM_API
#endif

/** Version of this header; rlmem_version() tells the library's. */
#define RLMEM_VERSION_MAJOR 0
#define RLMEM_VERSION_MINOR 2
#define RLMEM_VERSION_PATCH 0

/** Status codes: 0 is success, failures are negative. rlmem_status_name() names each. */
typedef enum rlmem_status {
  RLMEM_OK = 0,
  RLMEM_E_INVALID_ARGUMENT = -1, /**< a NULL where a value is needed, a bad size, bad options */
  RLMEM_E_BAD_INPUT = -2,        /**< the snapshot (or rules text) cannot be read or is malformed */
  RLMEM_E_NO_MEMORY = -3,        /**< an allocation failed */
  RLMEM_E_INTERNAL = -4,         /**< a bug in rlmem: please report it with the message */
  RLMEM_E_STATE = -5,            /**< runtime: paused / not paused / not open / open already */
  RLMEM_E_DEVICE = -6            /**< runtime: no CUDA driver or device, or the driver failed */
} rlmem_status;

/** "0.1.0": the library's version. Never NULL; static storage. */
RLMEM_API const char* rlmem_version(void);

/** "RLMEM_E_BAD_INPUT" for a status code; "RLMEM_E_UNKNOWN" for other values. Static storage. */
RLMEM_API const char* rlmem_status_name(int status);

/** Frees a string the library returned (JSON documents, error messages). NULL is allowed. */
RLMEM_API void rlmem_string_free(char* text);

/** Options of rlmem_inspect_*; the same as `rlmem inspect`'s flags.
 *  IMPORTANT: call rlmem_inspect_options_init() first, then set fields: struct_size lets a newer
 *  library accept an older caller's smaller struct. */
typedef struct rlmem_inspect_options {
  size_t struct_size;          /**< sizeof(rlmem_inspect_options), set by init */
  int64_t device;              /**< CUDA device to report; -1: the one with the longest trace */
  uint32_t top;                /**< allocation sites listed at the peak (--top); 10 by default */
  const char* step_marker;     /**< regex on frames "path:line function" (--step-marker); NULL/"" = automatic */
  int64_t limit_bytes;         /**< memory limit for OOM verdicts (--limit); 0 = derived */
  const char* category_rules;  /**< text of a rules file (--categories FILE's content); NULL = built-in */
  const char* source_name;     /**< name in the report's "file" field; NULL: the path, or "<bytes>" */
} rlmem_inspect_options;

/** Fills `options` with the defaults (device -1, top 10, everything else empty). */
RLMEM_API void rlmem_inspect_options_init(rlmem_inspect_options* options);

/** Inspects the snapshot at `path` (pickle, gzip or zstd, as torch.cuda.memory._dump_snapshot
 *  writes it; nothing in it is executed) and returns the JSON document `rlmem inspect --json`
 *  prints (docs/schema/inspect.schema.json), NUL-terminated, in `*json_out`.
 *  `options` may be NULL (defaults). `*error_out`, when error_out is not NULL, receives a one-line
 *  message on failure (the line the CLI prints after "rlmem: ") and NULL on success.
 *  Free both with rlmem_string_free().
 *  @return RLMEM_OK, or RLMEM_E_INVALID_ARGUMENT (NULL path or json_out, bad struct_size, invalid
 *    step marker, unknown device, bad rules text), RLMEM_E_BAD_INPUT (unreadable or malformed
 *    snapshot), RLMEM_E_NO_MEMORY, RLMEM_E_INTERNAL. */
RLMEM_API int rlmem_inspect_file(const char* path, const rlmem_inspect_options* options, char** json_out,
                                 char** error_out);

/** As rlmem_inspect_file, for a snapshot held in memory (`size` bytes at `data`).
 *  IMPORTANT: `data` must stay valid until the call returns; nothing refers to it after. */
RLMEM_API int rlmem_inspect_bytes(const void* data, size_t size, const rlmem_inspect_options* options,
                                  char** json_out, char** error_out);

/** `rlmem report FILE`: as rlmem_inspect_file, but `*html_out` receives the self-contained HTML
 *  page (no network at view time) instead of the JSON document.
 *  @return as rlmem_inspect_file, and RLMEM_E_INTERNAL when this librlmem was built without the
 *    page's browser assets (node and npm missing at configure time). */
RLMEM_API int rlmem_report_file(const char* path, const rlmem_inspect_options* options, char** html_out,
                                char** error_out);

/** As rlmem_report_file, for a snapshot held in memory (`size` bytes at `data`).
 *  IMPORTANT: `data` must stay valid until the call returns; nothing refers to it after. */
RLMEM_API int rlmem_report_bytes(const void* data, size_t size, const rlmem_inspect_options* options,
                                 char** html_out, char** error_out);

/** The verdict of the leak rule on one series of step-end figures. */
typedef struct rlmem_leak_verdict {
  size_t struct_size;      /**< set by the caller to sizeof(rlmem_leak_verdict) */
  int leaking;             /**< 1: the series grows like a leak; 0: it does not */
  uint64_t first_step;     /**< index in the series of the first step end that grew (>= 1) */
  uint64_t steps;          /**< step ends over which it grew, up to the last */
  int64_t bytes_per_step;  /**< mean growth per step over those steps */
} rlmem_leak_verdict;

/** Applies the rule `rlmem inspect` applies to each allocation site's step ends to one series:
 *  `bytes[0]` is the baseline, `bytes[i]` the live bytes at step end i; `counts` (may be NULL)
 *  the live allocation counts at the same moments. A series leaks when, in at least two
 *  consecutive step ends up to the last, each holds more than the one before and the count of
 *  allocations grows too, or, over `min_steady_steps` or more, the growth is steady (the smallest
 *  step's growth at least half the largest). Growth in step 1 alone is never a leak.
 *  `min_steady_steps` 0 means inspect's 4 (one allocation site); a whole process's step ends
 *  also follow batch sizes, and the Python StepMonitor passes 8.
 *  @return RLMEM_OK, or RLMEM_E_INVALID_ARGUMENT (NULL bytes with n > 0, NULL verdict, bad
 *    struct_size), RLMEM_E_INTERNAL. */
RLMEM_API int rlmem_leak_check(const int64_t* bytes, const uint64_t* counts, size_t n, size_t min_steady_steps,
                               rlmem_leak_verdict* verdict);

#ifdef __cplusplus
}
#endif

#endif /* RLMEM_RLMEM_H */
