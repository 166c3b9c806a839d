// SPDX-License-Identifier: MIT
#pragma once
// The stages of inspect(), in the order it runs them, each in a file of its own: the facts of
// the trace and the dump (trace_facts.cpp), the one forward pass (forward_pass.cpp), the peaks
// (peaks.cpp), OOM forensics (oom_forensics.cpp), leaks (leak_report.cpp) and the notes
// (inspect_notes.cpp). A new diagnosis is a stage of its own that reads what the pass left.

#include "analysis.hpp"
#include "live_feed.hpp"
#include "site_totals.hpp"
#include "site_tracker.hpp"
#include "stack_index.hpp"

#include <rlmem/model/allocator_rules.hpp>
#include <rlmem/inspect/inspect.hpp>
#include <rlmem/model/live_set.hpp>
#include <rlmem/snapshot/snapshot.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rlmem::detail {

/// "1 event", "3 segments".
std::string human_count(std::uint64_t count, std::string_view noun);

/// The timeline's allocated and reserved bytes after event `event` (-1: at trace start).
inline std::int64_t allocated_after(const timeline& line, std::int64_t event) {
  return event < 0 ? line.allocated_at_start : line.allocated[static_cast<std::size_t>(event)];
}
inline std::int64_t reserved_after(const timeline& line, std::int64_t event) {
  return event < 0 ? line.reserved_at_start : line.reserved[static_cast<std::size_t>(event)];
}

// -- trace_facts.cpp: what the trace and the dump say before any replay.

/// The device reported (options.device, else the one with the most data), the devices that
/// have data, and a note naming the others when the choice was made among several.
void choose_device(const snapshot& snap, const inspect_options& options, inspection& result);
/// Events by action, the streams the trace uses, whether it has times, its first and last times.
void count_events(const snapshot& snap, std::span<const trace_event> events, inspection& result);
/// The dump's segments of the device (final bytes, mostly empty segments, their streams), the
/// streams sorted and unique. Returns whether a segment of the device is expandable.
bool summarize_segments(const snapshot& snap, inspection& result);

// -- oom_forensics.cpp: which OOMs get forensics, what was free at each, and the verdicts.

/// How many oom events the trace has, and how many of the first and of the last get forensics.
struct oom_selection {
  std::uint64_t count = 0;
  std::uint64_t first = 0;
  std::uint64_t last = 0;
};
/// Full OOM forensics walk every live block and range: for the first and the last OOMs only.
/// Fills plan.oom_events and plan.reported.
oom_selection select_oom_reports(std::span<const trace_event> events, std::uint64_t oom_count,
                                 std::size_t max_oom_reports, oom_simulation_plan& plan);
/// The report of the oom event at `index`, from the state then: the timeline's figures, the
/// free spaces by pool, the site holding the most.
oom_report report_oom(std::size_t index, const trace_event& event, const timeline& line, const allocator_settings& recorded,
                      bool limit_given, bool expandable, std::span<const free_space> spaces, const site_tracker& sites,
                      stack_index& stacks);
/// The limit the OOMs prove (result.limit), then each reported OOM's proofs and verdict under it.
/// `step_ends` as find_step_ends found them; `reports_of_oom`: the index into plan.oom_events of
/// each of result.ooms.
void judge_ooms(const snapshot& snap, std::span<const trace_event> events, const inspect_options& options,
                const std::vector<std::uint64_t>& step_ends, bool expandable, const allocator_settings& recorded,
                const std::vector<std::size_t>& reports_of_oom, oom_simulation_plan& plan, inspection& result);

// -- forward_pass.cpp: the timeline, and categories and sites through every change.

struct forward_pass_input {
  std::span<const trace_event> events;
  const live_set& start;
  std::int64_t reserved_at_start = 0;
  const std::vector<std::uint64_t>& step_ends;  ///< ascending
  const oom_simulation_plan& plan;              ///< the oom events, and those reported
  const allocator_settings& recorded;
  bool expandable = false;
  bool limit_given = false;
};
/// What the pass leaves for the stages after it.
struct forward_pass_result {
  site_tracker sites;                        ///< every site's series at the step ends
  std::vector<site_total> at_last_step_end;  ///< live bytes by site at the last step end
  std::vector<std::size_t> reports_of_oom;   ///< index into plan.oom_events of each oom report
};
/// One forward pass: fills result.memory (the timeline), the category samples, the categories
/// at the peak and the end, the sites at the end, the OOM reports.
forward_pass_result run_forward_pass(const forward_pass_input& input, stack_index& stacks, inspection& result);

// -- peaks.cpp

/// The peaks of the timeline, the fragmentation figures at them and at the end, and the live
/// blocks at the peaks (a second, partial replay up to the later one).
void find_peaks(std::span<const trace_event> events, const live_set& start, stack_index& stacks, inspection& result);

// -- leak_report.cpp

/// Leaks over the pass's site series (result.leaks, its summary and the blocks each holds at
/// the dump). Returns how many leaks were found before the cut to options.max_leaks.
std::size_t report_leaks(const snapshot& snap, const inspect_options& options, forward_pass_result& pass,
                         stack_index& stacks, inspection& result);

// -- inspect_notes.cpp

/// What the notes say of the steps, the leaks and the OOMs found.
struct note_facts {
  const step_search& steps;
  std::size_t leaks_found = 0;
  oom_selection ooms;
  bool has_trace = false;
};
/// The notes after the analyses, in the order a reader meets them.
void add_notes(const snapshot& snap, std::span<const trace_event> events, const note_facts& facts, inspection& result);

}  // namespace rlmem::detail
