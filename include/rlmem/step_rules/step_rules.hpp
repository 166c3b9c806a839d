// SPDX-License-Identifier: MIT
#pragma once
// The step-end rules, once for every caller: the Python StepMonitor (through librlmem),
// `rlmem watch` on a StepMonitor log, and inspect's per-site leak rule. A rule reads figures
// that a job sampled at its step ends and says what holds, with the numbers that led to it; the
// words are the caller's. Nothing here allocates beyond its inputs' size, throws or prints.
//
// This part sits under inspect and watch and includes no other part: the figures are plain
// integers, whatever read them (torch.cuda.memory_stats(), a log, a snapshot's sites).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace rlmem {

// ---- Growth: is a series of step-end figures leaking? ------------------------------------------

/// Thresholds of the growth rule (docs/monitor.md: "The leak rule").
struct growth_rule {
  /// The growth must stand out from the series' own noise: its Theil-Sen slope at least this many
  /// standard errors, the error taken from the scatter of step-to-step changes.
  double min_z = 4.0;
  /// Mann-Kendall's trend statistic over the growing stretch at least this (a weak bar: it keeps
  /// a slope that one outlier made from passing when the scatter is near zero).
  double min_kendall_z = 1.0;
  /// Step ends within the growing stretch that rose above the noise (events), at least.
  std::size_t min_events = 3;
  /// Where events come every few steps, up to `max_two_event_period` apart, this many suffice
  /// when they are alike: the largest at most `sparse_size_ratio` times the smallest (a leak
  /// kept every k-th step keeps the same thing each time; a buffer re-grown to a new longest
  /// length grows by whatever the new length adds).
  /// Only after `settled_steps` step ends before the change point: in a run's first steps
  /// buffers grow to new longest lengths often, and alike.
  std::size_t min_sparse_events = 2;
  std::size_t max_two_event_period = 4;  ///< the widest median gap, in step ends, at which min_sparse_events suffice
  std::size_t settled_steps = 6;         ///< step ends before the change point for min_sparse_events to apply
  /// Events needed beyond `min_events` when fewer than 4 step ends before the growth show what
  /// the series does without it: a run of rises in a series that varies can be chance.
  std::size_t extra_events_without_history = 1;
  double sparse_size_ratio = 1.5;  ///< events alike: the largest rise at most this many times the smallest
  /// Events every few steps must be alike until this many have come.
  std::size_t alike_until_events = 6;
  /// The trend path, for series whose noise hides single steps (step ends that follow the
  /// response length, batch sizes that cycle): a stretch of at least `trend_min_points` step
  /// ends whose slope is `trend_min_z` standard errors and whose Mann-Kendall statistic is
  /// `trend_min_kendall_z` (one-sided p about 0.001) grows, events or not.
  std::size_t trend_min_points = 8;
  double trend_min_z = 5.0;          ///< the trend path's slope, in standard errors
  double trend_min_kendall_z = 3.0;  ///< the trend path's Mann-Kendall statistic
  /// Effect size: growth per step at least this share of the series' level (the median of the
  /// window); 1e-4 is 0.01% per step, 8 MiB a step on an 80 GB job.
  double min_relative_rate = 1e-4;
  /// ... and at least this many bytes per step.
  std::int64_t min_bytes_per_step = 0;
  /// An event rises more than max(event_noise_factor x the noise, half the smallest rate counted).
  double event_noise_factor = 3.0;
  /// The growth is over when no event came for more than max(2, stop_after_periods x the period)
  /// step ends: a cache that filled and stopped is cleared within 3 steps of its last growth.
  double stop_after_periods = 2.0;
  /// Growth whose events thin out is a buffer following the longest length seen, not a leak:
  /// the later half of the gaps between events on average more than this many times the earlier
  /// half (and the last gap 3 steps or more).
  double widening_gap_factor = 1.5;
  /// Index of the first step end whose growth may start a leak (index 0 is the baseline). A
  /// caller whose series starts before the first step ended passes 2: the first step fills
  /// optimizer state and caches once.
  std::size_t first_countable = 1;
  /// Only the last this many figures are judged (the cost is cubic in it).
  std::size_t max_points = 256;
};

/// What the growth rule says of one series. Indexes are into the series as given.
struct growth_verdict {
  bool growing = false;  ///< a leak: significant, large enough, and still going on at the last figure
  /// Significant growth whose events stopped (or widened) before the last figure: a cache that
  /// filled, a buffer grown to the longest length seen. `first`..`last_event` say where it was.
  bool stopped = false;
  std::size_t first = 0;       ///< the change point: the first step end of the growth (>= 1)
  std::size_t last_event = 0;  ///< the last step end that rose above the noise
  std::size_t steps = 0;       ///< step ends from `first` to the last figure
  std::size_t events = 0;      ///< step ends in that stretch that rose above the noise
  std::size_t period = 0;      ///< median gap between events (1: every step)
  std::int64_t bytes_per_step = 0;  ///< the growth's rate: Theil-Sen slope, or event size / period
  std::int64_t noise_bytes = 0;     ///< the series' scatter (robust standard deviation of one figure)
  std::int64_t level_bytes = 0;     ///< the median figure of the window
  double z = 0;          ///< slope over its standard error
  double kendall_z = 0;  ///< Mann-Kendall's statistic over the growing stretch
};

/// Judges `bytes` (oldest first; `bytes[0]` is the baseline, `bytes[i]` the figure at step end i).
/// `counts`, when not empty, must be as long; the rule does not need them (a leak into one tensor
/// keeps the count flat) and reads nothing from them. Any int64 values are accepted: the
/// arithmetic is done in doubles from differences taken in unsigned arithmetic.
growth_verdict judge_growth(std::span<const std::int64_t> bytes, const growth_rule& rule = {});

// ---- The rules of one step end -------------------------------------------------------------------

/// The figures a job samples at a step end (torch.cuda.memory_stats() names in comments).
struct step_sample {
  std::int64_t step = 0;                 ///< the step number; increasing along a history
  std::int64_t allocated = 0;            ///< allocated_bytes.all.current
  std::int64_t reserved = 0;             ///< reserved_bytes.all.current
  std::int64_t inactive_split = 0;       ///< inactive_split_bytes.all.current
  std::int64_t step_peak_allocated = 0;  ///< allocated_bytes.all.peak
  std::int64_t step_peak_reserved = -1;  ///< reserved_bytes.all.peak; -1 when unknown
  std::int64_t allocations = 0;          ///< allocation.all.current
  std::int64_t num_alloc_retries = 0;    ///< cumulative
  std::int64_t num_ooms = 0;             ///< cumulative
  std::int64_t device_free = 0;          ///< cudaMemGetInfo's free: every process's use counted
  std::int64_t device_total = 0;         ///< cudaMemGetInfo's total: the card's memory
  std::int64_t limit = 0;  ///< the process's own cap (a memory fraction), 0 when none: the card's total applies
};

/// Thresholds of the step-end rules (docs/monitor.md lists each with its default).
struct step_rules {
  growth_rule leak;              ///< the growth rule, applied to the allocated bytes
  std::size_t leak_window = 64;  ///< step ends the leak rule judges (the newest)
  std::int64_t fragmentation_bytes = std::int64_t{512} << 20;  ///< unused reserved bytes, at least, to be fragmented
  double fragmentation_fraction = 0.20;  ///< ... and at least this share of reserved
  std::size_t fragmentation_window = 5;  ///< step ends over which unused reserved must grow for the alert
  /// Headroom is thin when the limit left over at the step's peak is below this share of the limit.
  double headroom_fraction = 0.10;
  /// The headroom rule also holds when, at the leak's rate, the step peak passes the limit within
  /// this many steps (0: never).
  std::int64_t headroom_steps = 500;
};

/// What the rules say at the newest step end of a history.
struct step_judgment {
  growth_verdict leak;                 ///< indexes are into the history given
  std::int64_t leak_count_before = 0;  ///< live allocations at the step end before the growth
  /// The allocated peak that the step ends' reserved memory is judged against: the largest of
  /// `peak_allocated_before` and every allocated figure and peak in the history.
  std::int64_t peak_allocated_seen = 0;
  std::int64_t unused_reserved = 0;    ///< reserved beyond that peak: what no step needed at once
  /// The state: unused reserved at least `fragmentation_bytes` and `fragmentation_fraction` of
  /// reserved (`rlmem watch` shows it).
  bool fragmented = false;
  /// The alert: fragmented, and grown with reserved over the window (the monitor raises it).
  bool fragmentation = false;
  std::int64_t fragmentation_growth = 0;  ///< unused reserved gained over the window
  std::size_t fragmentation_steps = 0;    ///< step ends in that window
  bool alloc_retries = false;          ///< a cudaMalloc failed and the cache was freed to retry it, since the step end before
  std::int64_t new_alloc_retries = 0;  ///< since the step end before
  /// Thin headroom: free_at_peak below headroom_fraction of the limit, or steps_to_limit below
  /// headroom_steps.
  bool headroom = false;
  /// What others hold: device total - free - reserved (the CUDA context, other processes).
  std::int64_t outside_bytes = 0;
  std::int64_t limit_bytes = 0;        ///< the cap judged against: the sample's limit, else the card
  /// The limit left over at the step's peak: limit - outside - peak reserved (the card's total),
  /// or limit - peak reserved (a process cap, which counts PyTorch's memory alone).
  std::int64_t free_at_peak = 0;
  /// At the leak's rate, step ends until the step's allocated peak no longer fits the limit
  /// (beside what others hold, on the card); empty without a leak.
  std::optional<std::int64_t> steps_to_limit;
  bool oom = false;           ///< an allocation failed with an out-of-memory error since the step end before
  std::int64_t new_ooms = 0;  ///< since the step end before
};

/// The rules over `history` (oldest first, the step end judged last; steps increasing).
/// `peak_allocated_before`: the largest allocated peak of the job before the history (0: none),
/// so that a window that dropped the longest step still knows what the cache had to serve.
step_judgment judge_step(std::span<const step_sample> history, std::int64_t peak_allocated_before,
                         const step_rules& rules = {});

/// Imbalance over ranks, for one figure.
struct imbalance_verdict {
  bool imbalanced = false;  ///< the spread is at least the fraction of the largest figure and min_bytes
  std::size_t high = 0;  ///< index of the first largest figure
  std::size_t low = 0;   ///< index of the first smallest
  std::int64_t spread_bytes = 0;  ///< largest less smallest (0 for no ranks)
};

/// Whether one figure of every rank (allocated at the step end, or the step's peak) differs
/// across ranks by at least `fraction` of the largest and `min_bytes`.
imbalance_verdict judge_imbalance(std::span<const std::int64_t> figures, double fraction = 0.20,
                                  std::int64_t min_bytes = std::int64_t{512} << 20);

}  // namespace rlmem
