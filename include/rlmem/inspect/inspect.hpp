// SPDX-License-Identifier: MIT
#pragma once
// What `rlmem inspect` computes from a snapshot: the allocated/reserved timeline (including
// memory that existed before recording began), a summary, and what held memory at the peak.

#include <rlmem/inspect/inspect_errors.hpp>
#include <rlmem/snapshot/snapshot.hpp>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rlmem {

/// Allocated and reserved bytes after every event of one device's trace.
struct timeline {
  std::int64_t device = 0;               ///< CUDA device ordinal
  std::int64_t allocated_at_start = 0;   ///< bytes live before the first event
  std::int64_t reserved_at_start = 0;    ///< reserved then: the dump's segments less the trace's net growth
  std::uint64_t blocks_live_at_start = 0;  ///< blocks allocated before recording began and live at its start
  std::uint64_t frees_of_earlier_blocks = 0;  ///< frees in the trace of blocks allocated before it
  std::uint64_t inconsistencies = 0;     ///< events that contradict the segments (should be 0)
  std::vector<std::int64_t> allocated;   ///< after event i
  std::vector<std::int64_t> reserved;    ///< after event i
};

/// Where an allocation came from, resolved from its stack.
struct allocation_site {
  std::string label;       ///< "transformers/models/qwen2/modeling_qwen2.py:47 forward"
  std::string user_frame;  ///< nearest frame in the user's own code, "" when none
  stack_id stack = 0;      ///< a representative stack (of the largest allocation)
};

/// Bytes live at one moment, grouped by allocation site.
struct site_usage {
  allocation_site site;     ///< its stack: that of the site's largest live block
  std::uint64_t bytes = 0;  ///< live blocks' rounded sizes, summed; pending frees left out
  std::uint64_t count = 0;  ///< live blocks
};

/// What live memory is for, from the frames that allocated it. `before_recording` holds the
/// blocks allocated before recording began: they have no frames, so nothing says what they are
/// (weights loaded first often are, but so is anything else made before the first event); no
/// rule assigns it and no rule can. The built-in rules (docs/inspect.md) assign the others so:
enum class memory_category : std::uint8_t {
  weights,           ///< parameters: from_pretrained, safetensors, load_state_dict, Module.to, deepcopy
  optimizer_state,   ///< what the optimizer keeps across steps (AdamW's exp_avg and exp_avg_sq)
  gradients,         ///< autograd's; also blocks with no frames allocated during the trace
  activations,       ///< saved by module forward passes for the backward pass
  kv_cache,          ///< transformers' caches of keys and values
  logits,            ///< log_softmax, cross_entropy, log-probabilities, lm_head
  temporaries,       ///< other torch work: the rest of optimizer.step(), generate()
  other,             ///< no rule matched a frame
  before_recording,  ///< allocated before recording began: no frames, so no rule assigns it
  count_             ///< the number of categories, not one
};
/// Categories, before_recording included: the length of category_bytes.
inline constexpr std::size_t memory_category_count = static_cast<std::size_t>(memory_category::count_);
/// Live bytes per category, indexed by memory_category.
using category_bytes = std::array<std::int64_t, memory_category_count>;

/// "optimizer_state".
std::string_view memory_category_name(memory_category category) noexcept;

/// One row of the category table. Frames are matched as "path:line function". Rules marked
/// any_frame are tried first, in order, against every frame; then the others, frame by frame
/// from the innermost outwards, so the frame closest to the allocation decides.
struct category_rule {
  memory_category category = memory_category::other;  ///< what a stack this rule decides is counted as
  std::string pattern;     ///< a substring of the frame text
  bool any_frame = false;  ///< written "@category pattern" in a rules file
};

/// The built-in rules (see docs/inspect.md); `--categories FILE` replaces them.
const std::vector<category_rule>& default_category_rules();

/// Parses a rules file: one `[@]<category> <substring>` per line (quotes keep spaces), `#`
/// comments, blank lines. Fails with inspect_errc::unknown_category, category_not_assignable or
/// missing_pattern and, in `detail`, the line printed ("line 3: unknown category 'weight' (one
/// of ...)").
result<std::vector<category_rule>, inspect_errc> parse_category_rules(std::string_view text);

/// The longest step marker accepted: a pattern matched against one frame's "path:line function"
/// needs far less, and RE2 is never handed a pattern whose compilation would cost megabytes.
inline constexpr std::size_t max_step_marker_bytes = 4096;

/// What inspect() looks at and how much it reports; check_inspect_options() checks the numbers.
struct inspect_options {
  std::int64_t device = -1;  ///< -1: the device with the most data (see default_device)
  std::size_t top = 10;      ///< sites kept in the peak breakdown
  /// RE2 regex searched in frames "path:line function" ('\' in paths read as '/'); "" = automatic.
  /// RE2 matches in time linear in the text (no backreferences or lookaround). At most
  /// max_step_marker_bytes.
  std::string step_marker;
  std::int64_t limit_bytes = 0;             ///< the memory limit for OOM verdicts; 0 = derive
  std::vector<category_rule> category_rules; ///< empty = default_category_rules()
  /// OOM events given full forensics: the first half and the last half of this many; the others
  /// are counted (events_by_action) and noted. Each costs a walk of the live blocks.
  std::size_t max_oom_reports = 64;
  /// Without limit_bytes, the passes (simulations of the whole trace) each remedy's search over
  /// the limit's range may run, shared by the OOMs reported; an OOM it cannot finish is judged at
  /// the range's low end, and says so. 0: no search.
  std::size_t limit_search_passes = 48;
  /// Leaks (causes) reported, fastest growth first; each carries its whole step series.
  std::size_t max_leaks = 64;
};

/// A whole-number option of `rlmem inspect` and of rlmem_inspect_options, with its range: the one
/// table that the CLI's flags, the C ABI and so the Python package check values against.
struct whole_number_option {
  std::string_view flag;  ///< as the CLI spells it, and as every refusal names it: "--top"
  std::uint64_t min = 0;  ///< the least value taken
  std::uint64_t max = 0;  ///< the largest value taken
};
/// CUDA device indices are small (c10::DeviceIndex is 8 or 16 bits); -1 in inspect_options is
/// the default, not a value of the option.
inline constexpr whole_number_option device_option{"--device", 0, 32767};
/// Sites listed at the peak: a table longer than this is no report.
inline constexpr whole_number_option top_option{"--top", 1, 1'000'000};
/// inspect_options::limit_bytes, 0 meaning derived (the CLI's --limit takes a size of 1 B or more).
inline constexpr whole_number_option limit_option{"--limit", 0, (std::uint64_t{1} << 63) - 1};

/// Empty when `text` is a value of `option`; else the line every caller prints, the option first:
/// "--top: '2000000' is not a whole number from 1 to 1000000".
std::string check_option(const whole_number_option& option, std::string_view text);

/// The numbers of `options` (device, top, limit_bytes) checked against the options' ranges:
/// empty, or check_option's line for the first out of range. inspect_checked() runs it first.
std::string check_inspect_options(const inspect_options& options);

/// The end of one training step, found in the trace.
struct step_end {
  std::uint64_t event = 0;          ///< index of the step's last event
  std::int64_t time_us = 0;         ///< that event's, microseconds since the epoch (0 when the trace has no times)
  std::int64_t allocated_bytes = 0; ///< after that event
  std::int64_t reserved_bytes = 0;  ///< after that event
};

/// One line of a leak: an allocation site that grew at every step end of its leak's run.
struct leak_line {
  allocation_site site;                 ///< "transformers/cache_utils.py:146 update"
  std::int64_t line = 0;                ///< the line of the frame the site is named after, 0 when none
  std::int64_t bytes_per_step = 0;      ///< this line's mean growth per step
  std::int64_t live_bytes_at_end = 0;   ///< at the last step end
  std::uint64_t live_count_at_end = 0;  ///< live blocks of the line at the last step end
};

/// One cause of a leak. Growing sites are one cause when they grew over the same step ends and
/// are lines of one function under the same callers: their stacks name the same function (file
/// and name) and every frame outward of it is the same (file, line, name). Keys and values of a
/// KV cache written by two lines of `update`, or softmax and log_softmax of one entropy function,
/// are one leak. The figures are the lines' sums.
struct leak {
  allocation_site site;                 ///< "transformers/cache_utils.py:146,147 update": the lines it covers;
                                        ///< the stack of its fastest-growing line
  std::int64_t bytes_per_step = 0;      ///< mean growth per step once growing, over every line
  std::uint64_t steps = 0;              ///< steps over which it grew
  std::uint64_t first_step = 0;         ///< 1-based step in which it first grew
  std::int64_t live_bytes_at_end = 0;   ///< at the last step end
  std::uint64_t live_count_at_end = 0;  ///< live blocks of its lines at the last step end
  std::vector<std::int64_t> bytes_at_step_end;  ///< trace start, then each step end
  std::vector<leak_line> lines;         ///< by line number
  /// Live blocks of its lines when the snapshot was taken (address, rounded size), largest first,
  /// at most `max_leak_blocks`: what the Python side matches to the tensors that hold them.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> live_blocks;
  std::uint64_t live_blocks_left_out = 0;  ///< blocks past the cap
};

/// Live blocks listed per leak.
inline constexpr std::size_t max_leak_blocks = 256;

/// The growth of allocated memory at step ends after step 1, and how much of it the named leaks
/// explain. Step 1 is left out as the leak rule leaves it out: optimizer state fills once there.
struct leak_summary {
  bool measured = false;                        ///< 3 or more step ends were found
  std::uint64_t from_step = 0;                  ///< step 1
  std::uint64_t to_step = 0;                    ///< the last step
  std::int64_t allocated_from_bytes = 0;        ///< allocated at the end of from_step
  std::int64_t allocated_to_bytes = 0;          ///< and of to_step
  std::int64_t growth_per_step_bytes = 0;       ///< (to - from) / (to_step - from_step), toward 0
  std::uint64_t step_ends_grown = 0;            ///< step ends after from_step holding more than the one before
  std::int64_t explained_per_step_bytes = 0;    ///< the named leaks' growth over the same step ends
  /// No leak is named, yet allocated memory at step ends grew from step 1 to the last and at
  /// more than half of the step ends between.
  bool growth_without_named_leak = false;
};

/// What the per-site leak rule says of one allocation site's step ends.
struct leak_trend {
  bool leaking = false;             ///< the rule flags the site; the figures below are 0 otherwise
  std::size_t first_step = 0;       ///< index of the first step end of the growth (the change point, >= 1)
  std::size_t steps = 0;            ///< step ends from there to the last
  std::int64_t bytes_per_step = 0;  ///< the growth's rate (include/rlmem/step_rules/step_rules.hpp)
};

/// inspect's leak rule for one allocation site: the step monitor's growth rule
/// (rlmem::judge_growth) on `bytes` (`bytes[0]` the baseline, `bytes[i]` the site's live bytes at
/// step end i), with two events above the noise enough and no floor on the rate, since a site
/// carries nothing but its own allocations; while fewer than four events show, `counts` (live
/// allocations at the same moments, or empty when unknown) must have grown over the growth too.
/// Precondition: `counts` is empty or as long as `bytes`.
leak_trend leak_trend_of(std::span<const std::int64_t> bytes, std::span<const std::uint64_t> counts);

/// Largest free block of one pool and stream at an OOM.
struct free_block_summary {
  bool small_pool = false;  ///< blocks of requests up to 1 MiB, in 2 MiB segments
  std::uint64_t stream = 0;  ///< raw cudaStream_t
  std::uint64_t largest_free_bytes = 0;  ///< the largest gap between live blocks (pending frees live)
  std::uint64_t free_bytes = 0;          ///< gaps summed over the pool's segments
};

/// What caused one OOM, as the settings' simulations (oom_proof) under the judged limit show it.
enum class oom_verdict : std::uint8_t {
  /// A setting tried serves the request; without a simulation: the live tensors and the request
  /// fit under the limit's low end.
  fragmentation,
  /// No setting tried serves the request under the judged limit or higher in the recording's
  /// range (without a simulation: the live tensors and the request do not fit under its low end),
  /// or the request alone is larger than any GPU.
  capacity,
  /// The recording shows only a range for its limit, and a setting serves the request in the
  /// upper part of it (from oom_report::fragmentation_from_bytes) but not below.
  depends_on_limit
};
/// "fragmentation", "capacity", "depends_on_limit": the JSON's and the page's spelling.
std::string_view oom_verdict_name(oom_verdict verdict) noexcept;

/// The settings an OOM verdict tries, each in one simulation of the whole trace under the limit
/// the verdict is judged at.
enum class oom_remedy : std::uint8_t {
  expandable_segments,  ///< expandable_segments:True, the other recorded settings kept
  empty_cache,          ///< torch.cuda.empty_cache() at the start of the step that makes the request
  max_split_size,       ///< max_split_size_mb at the largest power of two not above the smallest request
  count_                ///< the number of remedies, not one
};
/// The settings tried: oom_report::proofs holds one proof each.
inline constexpr std::size_t oom_remedy_count = static_cast<std::size_t>(oom_remedy::count_);

/// What one setting did for one OOM in its simulation.
struct oom_proof {
  oom_remedy remedy = oom_remedy::expandable_segments;  ///< the setting simulated
  /// "expandable_segments:True", "max_split_size_mb:256", "empty_cache() at the start of the
  /// step (before event 7,144)", "empty_cache() right before the request".
  std::string setting;
  bool tried = false;           ///< false: `not_tried` says why (already the recorded setting, trace refused)
  std::string not_tried;        ///< why not, one line; empty when tried
  /// The request was served, and so was every request after it up to the next recorded OOM or
  /// the end of the trace.
  bool served = false;
  /// Not served: the first request the simulation could not serve (this OOM's, or one before or
  /// after it that the recording served), with its rounded size.
  std::uint64_t failed_event = 0;
  std::uint64_t failed_requested_bytes = 0;  ///< that request's size, rounded as the allocator rounds
  /// The most the simulation reserved from the trace start until it failed or, served, until the
  /// next recorded OOM or the end of the trace.
  std::int64_t reserved_reached_bytes = 0;
  /// Not served at this OOM's own request: what reserved would have become with the request's new
  /// segment (or mapped pages) on top of what the simulation held after its failed attempts.
  std::int64_t reserved_needed_bytes = 0;
  std::int64_t limit_bytes = 0;  ///< the capacity simulated
  /// The smallest limit in the recording's range at which this setting serves the request (to
  /// 2 MiB; limit_bytes when it serves there); 0 when it serves nowhere in the range, or the
  /// limit was given; -1 when the search's passes (inspect_options::limit_search_passes) ran out.
  std::int64_t serves_from_bytes = 0;
  /// One line of the above: "with expandable_segments:True the request is served and so is the
  /// run after it; reserved would reach 2.55 GiB of 2.61 GiB".
  std::string summary;
};

/// Forensics of one `oom` event.
struct oom_report {
  std::uint64_t event = 0;              ///< index of the `oom` event in the device's trace
  std::int64_t time_us = 0;             ///< its time, microseconds since the epoch (0 when the trace has no times)
  std::uint64_t requested_bytes = 0;    ///< rounded as the allocator rounds
  std::uint64_t segment_bytes = 0;      ///< the segment a cudaMalloc would have needed
  std::int64_t allocated_bytes = 0;     ///< when it was raised
  std::int64_t reserved_bytes = 0;      ///< when it was raised
  std::int64_t reserved_unallocated_bytes = 0;  ///< reserved - allocated: what the free blocks held
  std::uint64_t device_free_bytes = 0;  ///< what CUDA reported free (the event's device_free)
  std::int64_t limit_low_bytes = 0;     ///< the limit was at least this (oom_limit's range)
  std::int64_t limit_high_bytes = 0;    ///< and at most this
  bool limit_given = false;             ///< --limit was passed: low == high == it
  std::uint64_t largest_free_block_bytes = 0;  ///< the largest gap between live blocks, pending frees live
  std::vector<free_block_summary> free_by_pool;  ///< one per pool and stream
  oom_verdict verdict = oom_verdict::capacity;   ///< why it happened; `explanation` says how that follows
  /// depends_on_limit: the least serves_from_bytes of the settings, where fragmentation begins.
  std::int64_t fragmentation_from_bytes = 0;
  /// No request follows this one before the next OOM or the trace's end (a job that died here):
  /// a setting that serves it is shown to serve it, and nothing after it.
  bool last_request_recorded = false;
  /// One per oom_remedy, in its order. The verdict is fragmentation only when one of them was
  /// served; the first that was is the one named.
  std::vector<oom_proof> proofs;
  /// Whether a simulation backs the verdict; false when none could run (the trace cannot be
  /// simulated), and then the verdict follows from the numbers alone.
  bool proven = false;
  /// The request alone is larger than any GPU's memory: a wrong shape, not a memory budget.
  bool request_larger_than_any_gpu = false;
  /// Capacity: bytes the run lacked under the judged limit: the live tensors plus the request
  /// beyond it, or, when they fit in the bytes, the least any setting tried would have needed
  /// reserved beyond it. 0 for fragmentation.
  std::int64_t short_by_bytes = 0;
  std::string proof;        ///< one line: what the deciding simulation showed
  std::string explanation;  ///< why the verdict follows from the numbers
  std::string advice;       ///< one line of what to do
  allocation_site request_site;  ///< where the failing request was made
  allocation_site largest_site;  ///< the site holding the most bytes at the OOM
  std::uint64_t largest_site_bytes = 0;  ///< live bytes of largest_site
};

/// GPU memory of the largest cards made (288 GB: NVIDIA B300, AMD MI355X); a single request above
/// it cannot be served anywhere. The shape-bug explanation names this figure.
inline constexpr std::uint64_t largest_gpu_memory_bytes = 288'000'000'000;

/// The memory limit a trace with OOMs proves, and the one its OOM verdicts are judged under.
struct oom_limit {
  /// The most the trace reserved: the limit was at least this.
  std::int64_t proven_low_bytes = 0;
  /// The limit was at most this: the least, over the OOMs, of reserved at the OOM plus the new
  /// segment its request needed, less a byte (or plus what CUDA had free, if less), and over the
  /// other refusals the recording shows (infer_recorded_limit), the same. INT64_MAX without OOMs.
  std::int64_t proven_high_bytes = INT64_MAX;
  std::uint64_t proven_high_event = 0;  ///< the refusal that sets proven_high_bytes
  std::int64_t judged_bytes = 0;        ///< the simulations' capacity: --limit, else proven_low_bytes
  bool given = false;                   ///< --limit was passed
};

/// The limit as the recording shows it, or as given: "2.61 GiB to 2.65 GiB" (format_byte_range),
/// "at least 2.61 GiB", "2.50 GiB (given)". Every command states the range with this.
std::string limit_range_text(const oom_limit& limit);

/// Reserved-but-unallocated memory and free blocks.
struct fragmentation_report {
  std::int64_t max_unallocated_bytes = 0;  ///< reserved - allocated, worst over the trace
  std::int64_t max_unallocated_event = -1;  ///< the event after which it was; -1: before the first
  std::int64_t unallocated_at_peak_reserved_bytes = 0;  ///< after inspection::peak_reserved_event
  /// The largest gap between live blocks then; pending frees count as live.
  std::uint64_t largest_free_block_at_peak_reserved_bytes = 0;
  std::int64_t unallocated_at_end_bytes = 0;  ///< after the last event
  std::uint64_t largest_free_block_at_end_bytes = 0;  ///< after the last event, pending frees live
  std::uint64_t mostly_empty_segments = 0;       ///< at dump: under 10% allocated
  std::uint64_t mostly_empty_segment_bytes = 0;  ///< their total_size, summed
};

/// Bytes by category at sampled events (downsampled like the timeline).
struct category_timeline {
  std::vector<std::uint64_t> events;  ///< event indices, as timeline_points(memory, 1000) picks them
  std::vector<category_bytes> bytes;  ///< after each of `events`
};

/// The whole result of `rlmem inspect` on one device.
struct inspection {
  std::int64_t device = 0;                 ///< options.device, else default_device()
  std::uint64_t events = 0;                ///< in the device's trace
  std::array<std::uint64_t, trace_action_count> events_by_action{};  ///< indexed by trace_action
  std::int64_t first_time_us = 0;          ///< of the first event, microseconds since the epoch; 0 without events
  std::int64_t last_time_us = 0;           ///< of the last event
  /// false when no event carries a time (torch 2.1 era traces have no time_us): every *_time_us
  /// figure is then 0 and means nothing.
  bool times_known = false;

  std::int64_t peak_allocated_bytes = 0;   ///< the most allocated, the trace start included
  std::int64_t peak_allocated_event = -1;  ///< -1: already at the peak when the trace began
  std::int64_t peak_allocated_time_us = 0; ///< of peak_allocated_event; 0 when that is -1
  std::int64_t peak_reserved_bytes = 0;    ///< the most reserved, the trace start included
  std::int64_t peak_reserved_event = -1;   ///< -1: already at the peak when the trace began
  std::int64_t peak_reserved_time_us = 0;  ///< of peak_reserved_event; 0 when that is -1

  std::int64_t final_allocated_bytes = 0;  ///< from the segments at dump time
  std::int64_t final_active_bytes = 0;     ///< allocated and pending frees, from the segments at dump time
  std::int64_t final_reserved_bytes = 0;   ///< from the segments at dump time
  std::uint64_t segment_count = 0;         ///< the device's segments at dump time
  std::uint64_t largest_segment_bytes = 0; ///< the largest of their total_size
  std::uint64_t expandable_segment_count = 0;  ///< of them, those with is_expandable
  std::vector<std::uint64_t> streams;      ///< raw cudaStream_t values seen (0: default)
  std::vector<std::int64_t> devices;       ///< every device in the snapshot

  timeline memory;                         ///< allocated and reserved after every event
  std::vector<site_usage> peak_by_site;    ///< largest first, at most options.top
  std::uint64_t peak_site_count = 0;       ///< sites live at the peak before the cut to top

  std::vector<site_usage> end_by_site;     ///< live after the last event, every site, largest first
  category_bytes categories_at_end{};      ///< after the last event

  std::string step_method;                 ///< how steps were found, "" when none were
  std::vector<step_end> steps;             ///< every step end found, the way step_method says
  std::vector<leak> leaks;                 ///< one per cause, largest bytes_per_step first
  leak_summary summary_of_leaks;           ///< step-end growth and the share the leaks explain
  std::vector<oom_report> ooms;            ///< the OOMs given forensics (max_oom_reports), in trace order
  oom_limit limit;                         ///< meaningful when the trace has an OOM
  fragmentation_report fragmentation;      ///< unallocated reserved memory and free blocks
  category_bytes categories_at_peak{};     ///< after peak_allocated_event (at the trace start when -1)
  category_timeline categories;            ///< sampled across the trace, for the chart
  std::vector<std::string> notes;          ///< things a reader should know about the trace
};

/// Resolves the site and the nearest user frame of a stack (frames innermost first). Python
/// frames win; a stack of C++ frames only is named by its operator and autograd node
/// ("aten::bmm (BmmBackward0)"), past allocator and dispatcher helpers. Labels are at most 512
/// bytes (the middle of a longer one becomes "..."). Costs O(frames in the snapshot) per call for
/// its index of frames; inspect() shares one index over every stack.
allocation_site resolve_site(const snapshot& snap, stack_id stack);

/// The position in `snap.stack(stack)` (innermost first) of the frame resolve_site() names as
/// the user's own code (the page's "your code"): the frames inside it are torch's, libraries'
/// and wrappers', which the reports fold to show the user's frames first. The stack's size when
/// it has no such frame. Costs what resolve_site() does.
std::size_t user_frame_position(const snapshot& snap, stack_id stack);

/// Event indices of a timeline to show: for each of `buckets` equal slices, the event with the
/// most allocated and the one with the most reserved bytes, in order, without repeats. Every
/// event when the timeline is shorter than 2 * buckets. O(events).
std::vector<std::size_t> timeline_points(const timeline& line, std::size_t buckets);

/// The largest allocated and reserved value in one slice of a timeline (for charts).
struct column_peak {
  std::int64_t allocated = 0;  ///< the most allocated bytes after an event of the slice
  std::int64_t reserved = 0;   ///< the most reserved bytes after an event of the slice
};
/// The peaks of each of `columns` equal slices of a timeline. O(events).
std::vector<column_peak> timeline_columns(const timeline& line, std::size_t columns);

/// Runs every analysis of `rlmem inspect`.
inspection inspect(const snapshot& snap, const inspect_options& options = {});

/// inspect() as `rlmem inspect` and librlmem run it on what a person or a caller passed. Fails,
/// with the line printed in `detail`, when an option is out of range (check_inspect_options:
/// option_out_of_range), the step marker is too long or not a valid regular expression
/// (step_marker_too_long, invalid_step_marker), `options.device` is not a device of the snapshot
/// ("has no device 3 (devices: 0, 1)": no_such_device), or `options.limit_bytes` contradicts the
/// recording: below what it reserved (limit_below_recording), or above the bound an OOM of the
/// trace sets, its request would have fit so that limit did not stop it (limit_above_recording).
result<inspection, inspect_errc> inspect_checked(const snapshot& snap, const inspect_options& options);

}  // namespace rlmem
