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
  bool ok() const noexcept { return code == 0; }
};

/// Memory of one device as the driver counts it: every process, plus the driver's own reserve.
struct gpu_memory {
  std::uint64_t total_bytes = 0;
  std::uint64_t used_bytes = 0;
  std::uint64_t free_bytes = 0;
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
  count_
};

/// "visible", "no_such_process", "not_permitted", "empty" (the names in watch JSON).
std::string_view command_line_status_name(command_line_status status) noexcept;

struct process_command_line {
  command_line_status status = command_line_status::no_such_process;
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
  std::int64_t rank = 0;
  std::string message;
  std::optional<std::int64_t> bytes_per_step;  ///< leak: mean growth per step (not negative)
  std::optional<std::int64_t> since_step;      ///< leak: the step in which the growth began
  std::string site;                            ///< leak: the allocation site, once a snapshot named it
  std::string snapshot;                        ///< the snapshot that named it
  bool cleared = false;                        ///< leak: the line that says the alert no longer holds
};

/// One line of the log: torch.cuda.memory_stats() figures at one step end.
/// One tag of the rlmem runtime, as the StepMonitor logs them under rlmem.runtime.install().
struct steplog_runtime_tag {
  std::string name;  ///< the user's bytes: escape before printing
  bool paused = false;
  std::int64_t allocated = 0;  ///< allocated_bytes.current
  std::int64_t mapped = 0;     ///< mapped_bytes.current
  std::int64_t pauses = 0;
  std::optional<double> last_pause_seconds;
  std::optional<double> last_resume_seconds;
};


struct steplog_record {
  double time = 0;  ///< Unix seconds
  std::int64_t step = 0;
  std::optional<double> step_seconds;
  std::int64_t rank = 0;
  std::int64_t world_size = 1;
  std::int64_t device = 0;
  std::int64_t allocated = 0;
  std::int64_t reserved = 0;
  std::int64_t active = 0;
  std::int64_t inactive_split = 0;  ///< free pieces of split blocks: the fragmentation figure
  std::int64_t step_peak_allocated = 0;
  std::optional<std::int64_t> step_peak_reserved;
  bool peak_is_per_step = false;    ///< false: the peaks are since the process (or the user) last reset them
  std::int64_t allocations = 0;
  std::int64_t num_alloc_retries = 0;  ///< cumulative
  std::int64_t num_ooms = 0;           ///< cumulative
  std::int64_t device_free = 0;
  std::int64_t device_total = 0;
  std::optional<std::int64_t> limit;  ///< the process's cap (a memory fraction), when the monitor knew one
  std::vector<steplog_alert> alerts;
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
  std::int64_t step = 0;
  double time = 0;
  steplog_alert alert;
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
  explicit steplog_follower(std::string path, steplog_limits limits = {});
  ~steplog_follower();
  steplog_follower(const steplog_follower&) = delete;
  steplog_follower& operator=(const steplog_follower&) = delete;

  /// Reads what was appended since the last call; file trouble shows in state(), never throws
  /// for it (only std::bad_alloc may escape).
  void poll();

  const std::string& path() const noexcept { return path_; }
  steplog_file_state state() const noexcept { return state_; }
  /// Why the file is unreadable, or "" (strerror's text).
  const std::string& state_message() const noexcept { return state_message_; }
  /// Step ends of the current series, oldest first, at most limits.history_steps.
  const std::deque<steplog_record>& records() const noexcept { return records_; }
  /// Alerts of the current series, oldest first, at most limits.alerts_kept.
  const std::deque<steplog_alert_seen>& alerts() const noexcept { return alerts_; }
  std::uint64_t lines_parsed() const noexcept { return lines_parsed_; }
  std::uint64_t lines_skipped() const noexcept { return lines_skipped_; }
  /// The last skipped line's reason with its byte offset: "at byte 1,234: not JSON".
  const std::string& last_skip() const noexcept { return last_skip_; }
  /// Lines of another rank than the first one seen (a log several ranks write into).
  std::uint64_t other_rank_lines() const noexcept { return other_rank_lines_; }
  /// Times the file was truncated, replaced or removed.
  std::uint64_t reopened() const noexcept { return reopened_; }
  /// Times the step count went back (the job restarted); each starts a new series.
  std::uint64_t series_restarts() const noexcept { return series_restarts_; }
  /// Bytes of a last line still waiting for its newline.
  std::size_t pending_bytes() const noexcept { return pending_.size(); }

 private:
  bool open_file(bool from_start);
  void close_file();
  bool read_available(std::uint64_t& budget);
  void take_line(std::string_view line, std::uint64_t offset);
  void skip(std::uint64_t offset, const std::string& reason);

  std::string path_;
  steplog_limits limits_;
  int fd_ = -1;
  std::uint64_t device_ = 0;   ///< st_dev and st_ino of the open file, to notice a replacement
  std::uint64_t inode_ = 0;
  std::uint64_t offset_ = 0;   ///< next byte to read
  std::uint64_t line_start_ = 0;  ///< offset of the first byte of the line being assembled
  bool ever_opened_ = false;
  bool discard_to_newline_ = false;  ///< inside a line that is too long, or cut by the tail start
  std::string pending_;              ///< bytes of an incomplete line
  std::string before_offset_;        ///< the last bytes read, to notice the file was rewritten
  steplog_file_state state_ = steplog_file_state::waiting;
  std::string state_message_;
  std::deque<steplog_record> records_;
  std::deque<steplog_alert_seen> alerts_;
  std::optional<std::int64_t> rank_;
  std::uint64_t lines_parsed_ = 0;
  std::uint64_t lines_skipped_ = 0;
  std::string last_skip_;
  std::uint64_t other_rank_lines_ = 0;
  std::uint64_t reopened_ = 0;
  std::uint64_t series_restarts_ = 0;
};

// ---- One refresh -------------------------------------------------------------------------------

/// A process on a GPU, with its command line as far as it can be read.
struct gpu_process_view {
  gpu_process process;
  process_command_line command_line;
};

/// One GPU at one refresh, with the history of its used memory.
struct gpu_view {
  std::uint32_t index = 0;
  std::string name;
  gpu_memory memory;
  std::optional<std::uint32_t> utilisation_percent;  ///< empty where the driver does not say (MIG)
  std::vector<gpu_process_view> processes;           ///< most memory first
  std::string error;  ///< what the driver failed to answer for this device, "" when it answered all
  std::vector<std::uint64_t> used_history;  ///< used bytes at recent refreshes, oldest first, this one last
};

/// The log at one refresh: the latest step end and what the advice rules need from before it.
struct log_view {
  std::string path;
  steplog_file_state state = steplog_file_state::waiting;
  std::string state_message;
  std::uint64_t lines_parsed = 0;
  std::uint64_t lines_skipped = 0;
  std::string last_skip;
  std::uint64_t other_rank_lines = 0;
  std::uint64_t reopened = 0;
  std::uint64_t series_restarts = 0;
  std::size_t pending_bytes = 0;
  std::optional<steplog_record> latest;          ///< empty until a record was read
  std::vector<step_sample> samples;              ///< the kept step ends as the step-end rules read them
  std::vector<std::int64_t> allocated_history;   ///< allocated at recent step ends, oldest first
  std::vector<std::int64_t> step_history;        ///< the step of each of those
  std::size_t steps_kept = 0;                    ///< records of the current series held
  std::int64_t max_step_peak_allocated = 0;      ///< the largest step peak among them: what the cache must serve
  /// The rules' window: the counts at the step end `window_steps` steps before the latest.
  std::size_t window_steps = 0;
  std::int64_t window_first_step = 0;
  std::int64_t retries_before_window = 0;
  std::int64_t ooms_before_window = 0;
  std::int64_t allocated_before_window = 0;
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
enum class advice_level : std::uint8_t { warning, info };

/// One line of advice: a rule's verdict with the numbers that led to it.
struct watch_advice {
  std::string kind;  ///< oom, alloc_retries, headroom, leak, fragmentation, gpu_full, under_use, idle, fine
  advice_level level = advice_level::info;
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
  bool nvml_available = false;
  std::string nvml_message;  ///< why NVML is unavailable, or why the device list failed this time
  std::vector<gpu_view> gpus;
  std::optional<log_view> log;
  std::vector<watch_advice> advice;
};

/// The advice for a frame, warnings first, from its numbers alone (the text quotes them).
std::vector<watch_advice> advise(const watch_frame& frame, const advice_thresholds& thresholds = {});

struct watch_options {
  std::string log_path;              ///< "" to watch the GPUs alone
  std::size_t gpu_history = 240;     ///< used-memory samples kept per GPU
  std::size_t alerts_shown = 5;      ///< alerts copied into each frame
  steplog_limits log_limits;
  advice_thresholds thresholds;
  std::string proc_root = "/proc";   ///< where command lines are read
};

/// The state between refreshes: the GPU source, the log follower, the used-memory histories.
class watch_session {
 public:
  /// `gpus` may be null (NVML unavailable; `nvml_message` says why): the log is shown alone.
  watch_session(std::unique_ptr<gpu_source> gpus, std::string nvml_message, watch_options options);

  /// Samples every GPU, reads what the log gained, and computes the advice. `now` is Unix seconds.
  watch_frame refresh(double now);

 private:
  std::unique_ptr<gpu_source> gpus_;
  std::string nvml_message_;
  watch_options options_;
  std::unique_ptr<steplog_follower> log_;
  std::vector<std::deque<std::uint64_t>> used_history_;  ///< per device index
};

}  // namespace rlmem
