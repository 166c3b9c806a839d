// SPDX-License-Identifier: MIT
#pragma once
// `rlmem watch`: every GPU as the driver sees it (NVML, behind the gpu_source seam), a
// StepMonitor log followed as it grows, and advice computed from their numbers. Nothing here prints.

#include <rlmem/step_rules/step_rules.hpp>
#include <rlmem/watch/watch_errors.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rlmem {

// ---- GPUs, through the driver ----------------------------------------------------------------

/// The outcome of one call through the GPU seam.
struct gpu_status {
  /// The library could not be loaded, or lacks a symbol watch needs (message: dlerror's text).
  static constexpr int load_failed = -1;
  /// This program is linked statically: it has no dynamic loader, and glibc's dlopen from such a
  /// program crashes loading the driver's NVML (SIGFPE on an H100 host), so it is never tried.
  static constexpr int static_program = -2;

  int code = 0;         ///< 0 success; load_failed or static_program; otherwise the nvmlReturn_t the driver returned
  std::string message;  ///< "" on success; otherwise nvmlErrorString's or dlerror's text
  /// Whether the call succeeded (code 0).
  bool ok() const noexcept { return code == 0; }
};

/// Memory of one device as the driver counts it: every process, plus the driver's own reserve.
struct gpu_memory {
  std::uint64_t total_bytes = 0;  ///< the device's memory (nvmlMemory_t total)
  std::uint64_t used_bytes = 0;   ///< held by every process and the driver's reserve (nvmlMemory_t used)
  std::uint64_t free_bytes = 0;   ///< neither held nor reserved (nvmlMemory_t free)
};

/// A compute process that holds memory on a device.
struct gpu_process {
  std::uint32_t pid = 0;                    ///< in the PID namespace the driver reports (often the host's)
  std::optional<std::uint64_t> used_bytes;  ///< empty where the driver cannot say (NVML_VALUE_NOT_AVAILABLE)
};

/// The seam between watch and the driver: the few questions watch asks about each GPU.
/// Driver failures come back as codes with their message; nothing here throws for them (only
/// std::bad_alloc may escape). Every `index` must be below the count from device_count().
class gpu_source {
 public:
  virtual ~gpu_source() = default;
  /// Devices visible to the driver (NVML ignores CUDA_VISIBLE_DEVICES).
  virtual gpu_status device_count(std::uint32_t& count) = 0;
  /// The marketing name, "NVIDIA H100 80GB HBM3".
  virtual gpu_status device_name(std::uint32_t index, std::string& name) = 0;
  /// The device's total, used and free memory now.
  virtual gpu_status device_memory(std::uint32_t index, gpu_memory& memory) = 0;
  /// Percent of the last sample period in which a kernel ran (NVML's "gpu" utilization); left
  /// empty, with success, where the device does not sample it (MIG instances).
  virtual gpu_status device_utilisation(std::uint32_t index, std::optional<std::uint32_t>& percent) = 0;
  /// Compute processes with memory on the device (graphics-only processes are not listed).
  virtual gpu_status device_processes(std::uint32_t index, std::vector<gpu_process>& processes) = 0;
};

/// The NVML library to load: $RLMEM_NVML_LIBRARY when set and not empty (tests point it at a
/// fake), otherwise "libnvidia-ml.so.1" as the driver installs it.
std::string nvml_library_path();

/// Loads NVML from `library` with dlopen (no link-time dependency on the driver) and initialises
/// it; the source shuts NVML down and unloads it when destroyed.
/// Returns null and sets `status` when:
/// - the program is linked statically: code gpu_status::static_program, nothing loaded;
/// - the library cannot be loaded or lacks a symbol: code gpu_status::load_failed, dlerror's text;
/// - nvmlInit_v2 fails (no driver loaded, no permission): its code and nvmlErrorString's text.
std::unique_ptr<gpu_source> open_nvml_gpu_source(const std::string& library, gpu_status& status);

// ---- Processes --------------------------------------------------------------------------------

/// Whether a process's command line could be read, and if not, why.
enum class command_line_status : std::uint8_t {
  visible,          ///< read; `text` holds it
  no_such_process,  ///< no such PID here: the process ended, or it lives in another PID namespace
  not_permitted,    ///< the PID exists but its cmdline cannot be read (hidepid, permissions)
  empty,            ///< readable but empty: a zombie or a kernel thread
  count_            ///< the number of statuses above, not a status
};

/// "visible", "no_such_process", "not_permitted", "empty" (the names in watch JSON).
std::string_view command_line_status_name(command_line_status status) noexcept;

/// A process's command line, or why it could not be read.
struct process_command_line {
  command_line_status status = command_line_status::no_such_process;  ///< whether `text` was read
  std::string text;  ///< arguments joined by spaces; raw bytes, untrusted (escape before printing)
};

/// Reads `<proc_root>/<pid>/cmdline`, at most `max_bytes` of it.
process_command_line read_command_line(std::uint32_t pid, const std::string& proc_root = "/proc",
                                       std::size_t max_bytes = 4096);

// ---- The StepMonitor log (docs/schema/steplog.schema.json) ------------------------------------

/// The value of the `schema` key of every line watch reads.
inline constexpr std::string_view steplog_schema = "rlmem.steplog/1";

/// An alert the monitor raised at a step end. Strings are untrusted: escape before printing.
struct steplog_alert {
  std::string kind;  ///< leak, fragmentation, alloc_retries, headroom, oom, imbalance (others kept as given)
  std::int64_t rank = 0;  ///< the rank that raised it
  std::string message;    ///< one line for a person, figures included
  std::optional<std::int64_t> bytes_per_step;  ///< leak: mean growth per step (not negative)
  std::optional<std::int64_t> since_step;      ///< leak: the step in which the growth began
  std::string site;                            ///< leak: the allocation site, once a snapshot named it
  std::string snapshot;                        ///< the snapshot that named it
  bool cleared = false;                        ///< leak: the line that says the alert no longer holds
};

/// One tag of the rlmem runtime, as the StepMonitor logs them under rlmem.runtime.install().
struct steplog_runtime_tag {
  std::string name;  ///< the user's bytes: escape before printing
  bool paused = false;         ///< the tag was paused at the step end
  std::int64_t allocated = 0;  ///< allocated_bytes.current
  std::int64_t mapped = 0;     ///< mapped_bytes.current
  std::int64_t pauses = 0;     ///< times the tag was paused, cumulative
  std::optional<double> last_pause_seconds;   ///< the last pause's duration, call to return, copies included; empty: none yet
  std::optional<double> last_resume_seconds;  ///< the last resume's duration, as last_pause_seconds
};


/// One line of the log: torch.cuda.memory_stats() figures at one step end. Figures are bytes
/// unless said otherwise.
struct steplog_record {
  double time = 0;  ///< Unix seconds
  std::int64_t step = 0;              ///< the step that just ended
  std::optional<double> step_seconds;  ///< wall time since the previous step end; empty on the first
  std::int64_t rank = 0;              ///< the writer's rank
  std::int64_t world_size = 1;        ///< ranks of the job (at least 1)
  std::int64_t device = 0;            ///< the writer's CUDA device index
  std::int64_t allocated = 0;         ///< allocated_bytes.all.current
  std::int64_t reserved = 0;          ///< reserved_bytes.all.current
  std::int64_t active = 0;            ///< active_bytes.all.current
  std::int64_t inactive_split = 0;  ///< free pieces of split blocks: the fragmentation figure
  std::int64_t step_peak_allocated = 0;  ///< allocated_bytes.all.peak (see peak_is_per_step)
  std::optional<std::int64_t> step_peak_reserved;  ///< reserved_bytes.all.peak; empty when the monitor did not log it
  bool peak_is_per_step = false;    ///< false: the peaks are since the process (or the user) last reset them
  std::int64_t allocations = 0;     ///< allocation.all.current: live allocations (a count)
  std::int64_t num_alloc_retries = 0;  ///< cumulative
  std::int64_t num_ooms = 0;           ///< cumulative
  std::int64_t device_free = 0;     ///< torch.cuda.mem_get_info()[0]: free on the device, every process counted
  std::int64_t device_total = 0;    ///< torch.cuda.mem_get_info()[1]: the device's memory
  std::optional<std::int64_t> limit;  ///< the process's cap (a memory fraction), when the monitor knew one
  std::vector<steplog_alert> alerts;              ///< raised at this step end, in the line's order
  std::vector<steplog_runtime_tag> runtime_tags;  ///< empty unless the job runs rlmem's runtime
  std::size_t runtime_tags_left_out = 0;          ///< tags past steplog_line_limits::max_runtime_tags
};

/// What parse_steplog_line keeps of one line.
struct steplog_line_limits {
  std::size_t max_runtime_tags = 32;  ///< runtime tags kept from one line; the rest are counted
};

/// Parses one line of a StepMonitor log (without its newline). Fails with a watch_errc and, in
/// `detail`, the reason watch shows when the line is no record: "not JSON", "schema 'x' is not
/// rlmem.steplog/1", "'reserved' missing", "'reserved' is not a non-negative integer", ... Keys
/// watch does not use are ignored.
result<steplog_record, watch_errc> parse_steplog_line(std::string_view line, const steplog_line_limits& limits = {});

/// Bounds on what following a log may hold in memory.
struct steplog_limits {
  std::size_t history_steps = 600;                ///< records kept, oldest dropped first
  std::size_t alerts_kept = 64;                   ///< alerts kept, oldest dropped first
  std::size_t max_line_bytes = 1 << 20;           ///< a longer line is skipped
  std::uint64_t tail_bytes = std::uint64_t{8} << 20;      ///< a larger file is read from this far before its end
  std::uint64_t max_bytes_per_poll = std::uint64_t{64} << 20;  ///< the rest waits for the next poll
  steplog_line_limits line;                       ///< what each line's record keeps
};

/// Where following the file stands.
enum class steplog_file_state : std::uint8_t {
  waiting,     ///< the file does not exist (yet, or any more); it is picked up when it appears
  following,   ///< open and read to its end
  unreadable,  ///< it exists but cannot be read (state_message says why)
};

/// An alert with the step end that carried it.
struct steplog_alert_seen {
  std::int64_t step = 0;  ///< the step end's step
  double time = 0;        ///< the step end's time, Unix seconds
  steplog_alert alert;    ///< the alert as the line gives it
};

/// Follows a log that a job appends to, like `tail -F`: each poll() reads the complete lines
/// added since the last one. A last line without its newline waits for the rest. A file that
/// shrank (truncated) is read again from its start; a file replaced under the same name
/// (rotated) is read to its end, then the new one from its start. Lines that are not records are
/// skipped and counted. A step that does not follow the previous one starts a new series (the job
/// restarted); lines of another rank than the first seen are counted and left out. Memory stays
/// within `limits`.
class steplog_follower {
 public:
  /// Follows the file at `path`, which need not exist yet; nothing is read before the first poll().
  explicit steplog_follower(std::string path, steplog_limits limits = {});
  ~steplog_follower();
  steplog_follower(const steplog_follower&) = delete;
  steplog_follower& operator=(const steplog_follower&) = delete;

  /// Reads what was appended since the last call; file trouble shows in state(), never throws
  /// for it (only std::bad_alloc may escape).
  void poll();

  /// The path as given.
  const std::string& path() const noexcept;
  /// Where following the file stands after the last poll().
  steplog_file_state state() const noexcept;
  /// Why the file is unreadable, or "" (strerror's text).
  const std::string& state_message() const noexcept;
  /// Step ends of the current series, oldest first, at most limits.history_steps.
  const std::deque<steplog_record>& records() const noexcept;
  /// Alerts of the current series, oldest first, at most limits.alerts_kept.
  const std::deque<steplog_alert_seen>& alerts() const noexcept;
  /// Lines that were records, of every series and rank, since the follower was made.
  std::uint64_t lines_parsed() const noexcept;
  /// Lines that were no record (or too long, or cut off), since the follower was made.
  std::uint64_t lines_skipped() const noexcept;
  /// The last skipped line's reason with its byte offset: "at byte 1,234: not JSON".
  const std::string& last_skip() const noexcept;
  /// Lines of another rank than the first one seen (a log several ranks write into).
  std::uint64_t other_rank_lines() const noexcept;
  /// Times the file was truncated, replaced or removed.
  std::uint64_t reopened() const noexcept;
  /// Times the step count went back (the job restarted); each starts a new series.
  std::uint64_t series_restarts() const noexcept;
  /// Bytes of a last line still waiting for its newline.
  std::size_t pending_bytes() const noexcept;

 private:
  struct impl;  // the open file, the line being assembled, the series and the counts (follower.cpp)
  std::unique_ptr<impl> impl_;
};

// ---- One refresh -------------------------------------------------------------------------------

/// A process on a GPU, with its command line as far as it can be read.
struct gpu_process_view {
  gpu_process process;                ///< as the driver lists it
  process_command_line command_line;  ///< read from `<proc_root>/<pid>/cmdline`
};

/// One GPU at one refresh, with the history of its used memory.
struct gpu_view {
  std::uint32_t index = 0;  ///< the driver's device index (NVML's order, not CUDA_VISIBLE_DEVICES')
  std::string name;         ///< the marketing name; "" when the driver failed to say
  gpu_memory memory;        ///< at this refresh; zero when the driver failed to say
  std::optional<std::uint32_t> utilisation_percent;  ///< empty where the driver does not say (MIG)
  std::vector<gpu_process_view> processes;           ///< most memory first
  std::string error;  ///< what the driver failed to answer for this device, "" when it answered all
  std::vector<std::uint64_t> used_history;  ///< used bytes at recent refreshes, oldest first, this one last
};

/// The log at one refresh: the latest step end and what the advice rules need from before it.
/// The file fields are the follower's figures of the same names (steplog_follower).
struct log_view {
  std::string path;                                        ///< the log's path as given
  steplog_file_state state = steplog_file_state::waiting;  ///< where following the file stands
  std::string state_message;                               ///< why the file is unreadable, or ""
  std::uint64_t lines_parsed = 0;                          ///< records read since watch started, every series and rank
  std::uint64_t lines_skipped = 0;                         ///< lines that were no record, since watch started
  std::string last_skip;                                   ///< the last skipped line's reason and byte offset, or ""
  std::uint64_t other_rank_lines = 0;                      ///< records of another rank than the first seen, left out
  std::uint64_t reopened = 0;                              ///< times the file was truncated, replaced or removed
  std::uint64_t series_restarts = 0;                       ///< times the step count went back (the job restarted)
  std::size_t pending_bytes = 0;                           ///< bytes of a last line still waiting for its newline
  std::optional<steplog_record> latest;          ///< empty until a record was read
  std::vector<step_sample> samples;              ///< the kept step ends as the step-end rules read them
  std::vector<std::int64_t> allocated_history;   ///< allocated at recent step ends, oldest first
  std::vector<std::int64_t> step_history;        ///< the step of each of those
  std::size_t steps_kept = 0;                    ///< records of the current series held
  std::int64_t max_step_peak_allocated = 0;      ///< the largest step peak among them: what the cache must serve
  /// The rules' window: the counts at the step end `window_steps` steps before the latest.
  std::size_t window_steps = 0;
  std::int64_t window_first_step = 0;        ///< the step of that step end (the window's base)
  std::int64_t retries_before_window = 0;    ///< num_alloc_retries at the window's base (cumulative)
  std::int64_t ooms_before_window = 0;       ///< num_ooms at the window's base (cumulative)
  std::int64_t allocated_before_window = 0;  ///< allocated bytes at the window's base
  std::vector<steplog_alert_seen> alerts;        ///< the latest alerts, oldest first
  std::size_t alerts_total = 0;                  ///< alerts held for the series (alerts is the tail)
  std::optional<steplog_alert_seen> latest_leak; ///< the series' most recent leak alert
};

/// Fills the figures of `view` from a series of step ends (oldest first) and its alerts: the
/// latest record, the allocated history, the largest step peak, the counts `window_steps` step
/// ends before the latest (or at the oldest, when fewer are held), and the last `alerts_shown`
/// alerts. The file fields (path, state, counts of lines) are left as they are.
void summarise_steps(const std::deque<steplog_record>& records, const std::deque<steplog_alert_seen>& alerts,
                     std::size_t window_steps, std::size_t alerts_shown, log_view& view);

/// How serious a piece of advice is.
enum class advice_level : std::uint8_t {
  warning,  ///< trouble now or coming: OOMs, retries, thin headroom, a leak, fragmentation, a full card
  info,     ///< worth knowing, nothing to change now: fine, room to grow, an idle GPU, a cleared alert
};

/// One line of advice: a rule's verdict with the numbers that led to it.
struct watch_advice {
  std::string kind;  ///< oom, alloc_retries, headroom, leak, fragmentation, gpu_full, under_use, idle, fine
  advice_level level = advice_level::info;  ///< warnings come first in a frame
  std::string text;  ///< may quote strings from the log (a leak's site): escape before printing
};

/// Thresholds of the advice rules (docs/watch.md explains each): the step-end rules' own (the
/// monitor's defaults, so watch and the monitor that wrote the log judge alike), and watch's.
struct advice_thresholds {
  step_rules rules;                      ///< leak, fragmentation, headroom (fraction and forecast steps)
  double under_use_fraction = 0.25;      ///< peak below this share of the card: room to grow
  std::size_t window_steps = 20;         ///< step ends over which retries and OOMs count as rising
};

/// Everything one refresh shows.
struct watch_frame {
  double time = 0;  ///< Unix seconds of the refresh
  bool nvml_available = false;  ///< the session has a GPU source (NVML loaded and initialised)
  std::string nvml_message;  ///< why NVML is unavailable, or why the device list failed this time
  std::vector<gpu_view> gpus;        ///< every device the driver lists, by index; empty without NVML
  std::optional<log_view> log;       ///< empty when no log is watched
  std::vector<watch_advice> advice;  ///< advise()'s lines for this frame, warnings first
};

/// The advice for a frame, warnings first, from its numbers alone (the text quotes them).
std::vector<watch_advice> advise(const watch_frame& frame, const advice_thresholds& thresholds = {});

/// What a watch_session watches and how much history it keeps.
struct watch_options {
  std::string log_path;              ///< "" to watch the GPUs alone
  std::size_t gpu_history = 240;     ///< used-memory samples kept per GPU
  std::size_t alerts_shown = 5;      ///< alerts copied into each frame
  steplog_limits log_limits;         ///< bounds on what following the log holds
  advice_thresholds thresholds;      ///< the advice rules' thresholds
  std::string proc_root = "/proc";   ///< where command lines are read
};

/// The state between refreshes: the GPU source, the log follower, the used-memory histories.
class watch_session {
 public:
  /// `gpus` may be null (NVML unavailable; `nvml_message` says why): the log is shown alone.
  watch_session(std::unique_ptr<gpu_source> gpus, std::string nvml_message, watch_options options);
  ~watch_session();
  watch_session(watch_session&&) noexcept;             ///< the moved-from session may only be destroyed
  watch_session& operator=(watch_session&&) noexcept;  ///< the moved-from session may only be destroyed

  /// Samples every GPU, reads what the log gained, and computes the advice. `now` is Unix seconds.
  watch_frame refresh(double now);

 private:
  struct impl;  // the GPU source, the log follower and the used-memory histories (session.cpp)
  std::unique_ptr<impl> impl_;
};

}  // namespace rlmem
