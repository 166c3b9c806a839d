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

/* Version of this header: RLMEM_VERSION_MAJOR, _MINOR, _PATCH and RLMEM_VERSION_STRING, generated
 * from CMakeLists.txt into the build tree (<build>/include/rlmem/version.h: put <build>/include on
 * the include path next to include/). rlmem_version() tells the library's. */
#include <rlmem/version.h>

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

/* Structs with a struct_size (rlmem_inspect_options, rlmem_leak_verdict, rlmem_step_rules,
 * rlmem_step_judgment, rlmem_runtime_options): struct_size is the caller's sizeof, so that a library
 * newer than the caller's header still works with the caller's older, smaller struct.
 * - Accepted: the size of one of the struct's published layouts (each struct lists them below,
 *   oldest first). Refused with RLMEM_E_INVALID_ARGUMENT, and a one-line reason where the
 *   function has an error_out: any other size, smaller than the first layout, between two, or
 *   larger than this library's struct (a header newer than the library: it does not know what
 *   the extra fields mean, so it does not guess that zeros there are harmless).
 * - The library reads and writes only the caller's struct_size bytes: fields past them take
 *   their defaults, and an output struct keeps the caller's struct_size.
 * - The *_init() functions are macros over *_init_sized(struct, sizeof *struct), so that they
 *   too write only the caller's struct. The functions of the same name remain for callers that
 *   cannot use the macros (ctypes, dlsym, binaries built against the 0.2 release's header): they
 *   write that release's layout, never a later one. */

/** "MAJOR.MINOR.PATCH": the library's version (RLMEM_VERSION_STRING of the header it was built
 *  with). Never NULL; static storage. */
RLMEM_API const char* rlmem_version(void);

/** "RLMEM_E_BAD_INPUT" for a status code; "RLMEM_E_UNKNOWN" for other values. Static storage. */
RLMEM_API const char* rlmem_status_name(int status);

/** Frees a string the library returned (JSON documents, error messages). NULL is allowed. */
RLMEM_API void rlmem_string_free(char* text);

/** Options of rlmem_inspect_*; the same as `rlmem inspect`'s flags.
 *  IMPORTANT: call rlmem_inspect_options_init() first, then set fields: struct_size lets a newer
 *  library accept an older caller's smaller struct. One layout so far: all of it (0.1.0 on). */
typedef struct rlmem_inspect_options {
  size_t struct_size;          /**< sizeof(rlmem_inspect_options), set by init */
  int64_t device;              /**< CUDA device to report; -1: the one with the longest trace */
  uint32_t top;                /**< allocation sites listed at the peak (--top); 10 by default */
  const char* step_marker;     /**< regex on frames "path:line function" (--step-marker); NULL/"" = automatic */
  int64_t limit_bytes;         /**< memory limit for OOM verdicts (--limit); 0 = derived */
  const char* category_rules;  /**< text of a rules file (--categories FILE's content); NULL = built-in */
  const char* source_name;     /**< name in the report's "file" field; NULL: the path, or "<bytes>" */
} rlmem_inspect_options;

/** Fills the caller's `struct_size` bytes of `options` with the defaults (device -1, top 10,
 *  everything else empty) and struct_size.
 *  @return RLMEM_OK, or RLMEM_E_INVALID_ARGUMENT (NULL options; a struct_size that is no layout:
 *    only struct_size is written, when it fits, so that the functions taking the struct refuse
 *    it with a reason). */
RLMEM_API int rlmem_inspect_options_init_sized(rlmem_inspect_options* options, size_t struct_size);
/** The function behind rlmem_inspect_options_init() for ctypes and dlsym: writes the 0.2 release's layout. */
RLMEM_API void rlmem_inspect_options_init(rlmem_inspect_options* options);
/** Fills `options` (of the caller's sizeof) with the defaults. */
#define rlmem_inspect_options_init(options) ((void)rlmem_inspect_options_init_sized((options), sizeof *(options)))

/** Checks one value of rlmem_inspect_options as `rlmem inspect` checks its flag: `option` is the
 *  flag ("--device", "--top" or "--limit", the last in bytes with 0 meaning derived), `value` its
 *  text in decimal digits. The functions taking the struct check its numbers the same way; this
 *  one lets a binding refuse a value its field cannot hold (a top of 2**32 + 10) in those words.
 *  `*error_out`, when error_out is not NULL, receives the line ("--top: '2000000' is not a whole
 *  number from 1 to 1000000") on failure and NULL on success; free it with rlmem_string_free().
 *  @return RLMEM_OK, RLMEM_E_INVALID_ARGUMENT (a value out of range, an unknown option, NULL), or
 *    RLMEM_E_NO_MEMORY. */
RLMEM_API int rlmem_check_inspect_option(const char* option, const char* value, char** error_out);

/** Inspects the snapshot at `path` (pickle, gzip or zstd, as torch.cuda.memory._dump_snapshot
 *  writes it; nothing in it is executed) and returns the JSON document `rlmem inspect --json`
 *  prints (docs/schema/inspect.schema.json), NUL-terminated, in `*json_out`.
 *  `options` may be NULL (defaults). `*error_out`, when error_out is not NULL, receives a one-line
 *  message on failure (the line the CLI prints after "rlmem: ") and NULL on success.
 *  Free both with rlmem_string_free().
 *  @return RLMEM_OK, or RLMEM_E_INVALID_ARGUMENT (NULL path or json_out, a struct_size of no layout,
 *    a number out of range (rlmem_check_inspect_option's line), invalid step marker, unknown
 *    device, bad rules text), RLMEM_E_BAD_INPUT (unreadable or malformed snapshot),
 *    RLMEM_E_NO_MEMORY, RLMEM_E_INTERNAL. */
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

/** Reads an option file (a --categories rules file) the way the CLI does: only a regular file
 *  (a FIFO, a device such as /dev/zero, a socket or a folder is refused at once, never read or
 *  waited on), at most 16 MiB. `*text_out` receives the bytes, NUL-terminated (the file itself
 *  may hold NULs: `*size_out` counts them), to free with rlmem_string_free().
 *  `*error_out`, when error_out is not NULL, receives the CLI's line on failure ("PATH: not a
 *  regular file (a FIFO, a device or a folder)"; the CLI prints it after "--categories ").
 *  @return RLMEM_OK, RLMEM_E_INVALID_ARGUMENT (NULL path, text_out or size_out),
 *    RLMEM_E_BAD_INPUT (missing, unreadable, not a regular file, too large), RLMEM_E_NO_MEMORY,
 *    RLMEM_E_INTERNAL. */
RLMEM_API int rlmem_read_option_file(const char* path, char** text_out, size_t* size_out, char** error_out);

/** Writes `size` bytes at `data` to `path` as the CLI writes `report -o PATH`: symbolic links are
 *  followed (they stay links); a regular file, or no file yet, is replaced whole (a temporary of
 *  a unique name, created exclusively in the same folder, renamed over it: a reader never sees
 *  half of it, and no planted file or link is written through); a device, a FIFO or a
 *  descriptor name (/dev/stdout, /dev/fd/N) is written in place, never replaced.
 *  `*error_number_out`, when not NULL, receives the errno of the failure (0 on success);
 *  `*error_out`, when not NULL, the line "cannot write PATH: <strerror>".
 *  @return RLMEM_OK, RLMEM_E_INVALID_ARGUMENT (NULL path; NULL data with size > 0),
 *    RLMEM_E_BAD_INPUT (the path cannot be written), RLMEM_E_INTERNAL. */
RLMEM_API int rlmem_write_file(const char* path, const void* data, size_t size, int* error_number_out,
                               char** error_out);

/** The verdict of the growth rule (docs/monitor.md, "The leak rule") on one series.
 *  Layouts: up to bytes_per_step (0.1.0 and 0.2's first builds), and all of it; the library
 *  writes the fields of the caller's layout and nothing past it. */
typedef struct rlmem_leak_verdict {
  size_t struct_size;      /**< set by the caller to sizeof(rlmem_leak_verdict) (or an older layout's size) */
  int leaking;             /**< 1: the series grows like a leak, up to its last figure */
  uint64_t first_step;     /**< index in the series of the first step end of the growth (>= 1) */
  uint64_t steps;          /**< step ends from first_step to the last */
  int64_t bytes_per_step;  /**< the growth's rate (Theil-Sen slope, or event size over period) */
  int stopped;             /**< 1: significant growth that stopped or thinned out before the last figure */
  uint64_t last_event;     /**< index of the last step end that rose above the noise */
  uint64_t events;         /**< step ends from first_step on that rose above the noise */
  uint64_t period;         /**< median gap between those (1: every step; 0: fewer than two) */
  int64_t noise_bytes;     /**< the series' scatter: a robust standard deviation of one figure */
  int64_t level_bytes;     /**< the median figure */
  double z;                /**< the rate over its standard error */
  double kendall_z;        /**< Mann-Kendall's statistic over the growth */
} rlmem_leak_verdict;

/** The step monitor's growth rule on one series of step-end figures (the newest 256 are judged):
 *  `bytes[0]` is the baseline, `bytes[i]` the figure at step end i. A change point where growth
 *  began, the Theil-Sen slope after it tested against the scatter of the series' own changes,
 *  Mann-Kendall's trend test, and the step ends that rose above the noise (3 every step, or 2
 *  alike ones up to 4 steps apart), still coming at the last figure; at least 0.01% of the
 *  series' level per step. `counts` (may be NULL) is accepted for compatibility and not read: a
 *  leak into one tensor keeps the count flat. `min_steady_steps` is no longer read either.
 *  Any int64 values and any n are accepted.
 *  @return RLMEM_OK, or RLMEM_E_INVALID_ARGUMENT (NULL bytes with n > 0, NULL verdict, a
 *    struct_size of no layout), RLMEM_E_INTERNAL. No message: the status alone. */
RLMEM_API int rlmem_leak_check(const int64_t* bytes, const uint64_t* counts, size_t n, size_t min_steady_steps,
                               rlmem_leak_verdict* verdict);

/** Figures a job sampled at one step end (torch.cuda.memory_stats() names). */
typedef struct rlmem_step_sample {
  int64_t step;                 /**< the step this sample ends; steps increase along a history */
  int64_t allocated;            /**< allocated_bytes.all.current */
  int64_t reserved;             /**< reserved_bytes.all.current */
  int64_t inactive_split;       /**< inactive_split_bytes.all.current */
  int64_t step_peak_allocated;  /**< allocated_bytes.all.peak */
  int64_t step_peak_reserved;   /**< reserved_bytes.all.peak; -1 when unknown */
  int64_t allocations;          /**< allocation.all.current */
  int64_t num_alloc_retries;    /**< cumulative */
  int64_t num_ooms;             /**< cumulative */
  int64_t device_free;          /**< cudaMemGetInfo's free */
  int64_t device_total;         /**< cudaMemGetInfo's total */
  int64_t limit;                /**< the process's cap (memory fraction x total), 0: none */
} rlmem_step_sample;

/** Thresholds of the step-end rules. Call rlmem_step_rules_init() first, then set fields.
 *  One layout so far: all of it. */
typedef struct rlmem_step_rules {
  size_t struct_size;                /**< sizeof(rlmem_step_rules), set by init */
  uint64_t leak_window;              /**< newest step ends the leak rule judges (64; 3 to 256) */
  double leak_min_z;                 /**< the rate's significance, in standard errors (4) */
  uint64_t leak_min_events;          /**< step ends above the noise, every step (3; at least 2) */
  double leak_min_relative_rate;     /**< rate at least this share of the level per step (1e-4) */
  int64_t leak_min_bytes_per_step;   /**< ... and this many bytes (0) */
  double leak_stop_after_periods;    /**< growth over after this many periods without an event (2) */
  int64_t fragmentation_bytes;       /**< reserved beyond every peak, at least (512 MiB) */
  double fragmentation_fraction;     /**< ... and this share of reserved (0.20) */
  uint64_t fragmentation_window;     /**< step ends over which it must have grown (5) */
  double headroom_fraction;          /**< free at the peak below this share of the limit (0.10) */
  int64_t headroom_steps;            /**< or the leak fills it within this many steps (500; 0: never) */
} rlmem_step_rules;

/** Fills the caller's `struct_size` bytes of `rules` with the defaults above and struct_size.
 *  @return RLMEM_OK, or RLMEM_E_INVALID_ARGUMENT (NULL rules; a struct_size that is no layout:
 *    only struct_size is written, when it fits). */
RLMEM_API int rlmem_step_rules_init_sized(rlmem_step_rules* rules, size_t struct_size);
/** The function behind rlmem_step_rules_init() for ctypes and dlsym: writes the 0.2 release's layout. */
RLMEM_API void rlmem_step_rules_init(rlmem_step_rules* rules);
/** Fills `rules` (of the caller's sizeof) with the defaults. */
#define rlmem_step_rules_init(rules) ((void)rlmem_step_rules_init_sized((rules), sizeof *(rules)))

/** What the rules say at the newest step end of a history. One layout so far: all of it.
 *  IMPORTANT: `leak` is the whole rlmem_leak_verdict of this header: that struct cannot grow
 *  again without a new layout of this one. */
typedef struct rlmem_step_judgment {
  size_t struct_size;             /**< set by the caller to sizeof(rlmem_step_judgment) */
  rlmem_leak_verdict leak;        /**< indexes into the history; leak.struct_size is sizeof(rlmem_leak_verdict) */
  int64_t leak_count_before;      /**< live allocations at the step end before the growth */
  int64_t peak_allocated_seen;    /**< the largest allocated peak: history and peak_allocated_before */
  int64_t unused_reserved;        /**< reserved beyond it at the newest step end */
  int fragmented;                 /**< the state: unused reserved over both fragmentation thresholds */
  int fragmentation;              /**< the alert: fragmented, and grown with reserved over the window */
  int64_t fragmentation_growth;   /**< unused reserved gained over the window */
  uint64_t fragmentation_steps;   /**< step ends in that window */
  int alloc_retries;              /**< the alert: the allocator freed its cache and retried since the step end before */
  int64_t new_alloc_retries;      /**< since the step end before */
  int headroom;                   /**< the alert: free_at_peak below the headroom fraction, or the leak fills it soon */
  int64_t outside_bytes;          /**< device total - free - reserved: the context, other processes */
  int64_t limit_bytes;            /**< the sample's limit, else the device total */
  int64_t free_at_peak;           /**< what the limit leaves at the step's reserved peak */
  int64_t steps_to_limit;         /**< at the leak's rate, steps until the peak passes it; -1: no leak */
  int oom;                        /**< the alert: an OOM since the step end before */
  int64_t new_ooms;               /**< since the step end before */
} rlmem_step_judgment;

/** The step-end rules (leak, fragmentation, alloc_retries, headroom with the OOM forecast, oom)
 *  over `history` (`n` samples, oldest first, the judged step end last): the one implementation
 *  that the Python StepMonitor and `rlmem watch` both call. `peak_allocated_before`: the largest
 *  allocated peak before the history (0: none). `rules` may be NULL (the defaults). Work is
 *  O(n + leak_window^3).
 *  @return RLMEM_OK, or RLMEM_E_INVALID_ARGUMENT (NULL history with n > 0, NULL or wrongly sized
 *    judgment or rules, a threshold out of range: a NaN, a negative fraction, a window out of
 *    [3, 256]), RLMEM_E_INTERNAL. */
RLMEM_API int rlmem_judge_step(const rlmem_step_sample* history, size_t n, int64_t peak_allocated_before,
                               const rlmem_step_rules* rules, rlmem_step_judgment* judgment);

/** The imbalance rule over ranks for one figure (`figure[i]` of the i-th rank): the largest and
 *  smallest differ by at least `fraction` (0 to 1) of the largest and `min_bytes`. Writes
 *  `*imbalanced` (0 or 1) and the indexes of the first largest and first smallest figure.
 *  @return RLMEM_OK, or RLMEM_E_INVALID_ARGUMENT (NULL figure with n > 0, NULL outputs, a
 *    fraction outside [0, 1] or NaN, negative min_bytes). */
RLMEM_API int rlmem_judge_imbalance(const int64_t* figure, size_t n, double fraction, int64_t min_bytes,
                                    int* imbalanced, size_t* high, size_t* low);

#ifdef __cplusplus
}
#endif

#endif /* RLMEM_RLMEM_H */
