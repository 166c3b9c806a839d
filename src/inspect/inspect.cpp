// SPDX-License-Identifier: MIT
// inspect(): one backward walk to the state at trace start, one forward pass for the timeline
// and what was live at step ends, OOMs, samples and the end (the live set's half of it on
// another core: live_feed), and a partial replay up to the peaks to see what was live there.
// Each stage is a function of stages.hpp in a file of its own; this file runs them in order.

#include "analysis.hpp"
#include "stages.hpp"

#include <rlmem/model/allocator_rules.hpp>
#include <rlmem/base/format.hpp>
#include <rlmem/inspect/inspect.hpp>
#include <rlmem/model/live_set.hpp>

#include <algorithm>
#include <future>
#include <utility>

namespace rlmem {

inspection inspect(const snapshot& snap, const inspect_options& options) {
  inspection result;
  detail::choose_device(snap, options, result);

  const device_trace* trace = snap.trace_for(result.device);
  std::span<const trace_event> events = trace ? snap.events_of(*trace) : std::span<const trace_event>{};
  result.events = events.size();
  // The state at trace start (a walk of every event and of the dump) on a second core, while
  // this one does everything else that does not need the timeline: the counts, the stacks'
  // sites and categories, the step ends, the OOMs to report. Both only read the snapshot.
  const allocator_settings recorded = settings_of(snap);
  std::future<std::pair<live_set, std::int64_t>> at_start = std::async(std::launch::async, [&snap, device = result.device, events, &recorded] {
    return std::pair<live_set, std::int64_t>(live_set::at_trace_start(snap, device, events, recorded),
                                             reserved_at_trace_start(snap, device, events));
  });
  // The timeline's two arrays (16 bytes an event, fresh pages the kernel faults in and zeroes)
  // on a third thread, beside those two.
  std::future<void> timeline_storage = std::async(std::launch::async, [&line = result.memory, count = events.size()] {
    line.allocated.resize(count);
    line.reserved.resize(count);
  });
  detail::count_events(snap, events, result);
  bool expandable = detail::summarize_segments(snap, result);
  expandable = expandable || recorded.expandable_segments;

  const std::vector<category_rule>& rules = options.category_rules.empty() ? default_category_rules() : options.category_rules;
  detail::stack_index stacks(snap, rules);
  detail::step_search steps = detail::find_step_ends(stacks.frames(), result.device, events, options.step_marker);
  result.step_method = steps.method;
  std::vector<std::uint64_t> step_ends = steps.ends;
  std::sort(step_ends.begin(), step_ends.end());
  detail::oom_simulation_plan plan;
  detail::oom_selection ooms = detail::select_oom_reports(
      events, result.events_by_action[static_cast<std::size_t>(trace_action::oom)], options.max_oom_reports, plan);

  const std::pair<live_set, std::int64_t> started = at_start.get();
  const live_set& start = started.first;
  timeline_storage.get();
  detail::forward_pass_result pass = detail::run_forward_pass(
      {events, start, started.second, step_ends, plan, recorded, expandable, options.limit_bytes > 0}, stacks, result);
  detail::find_peaks(events, start, stacks, result);
  detail::judge_ooms(snap, events, options, steps.ends, expandable, recorded, pass.reports_of_oom, plan, result);
  result.peak_site_count = result.peak_by_site.size();
  if (result.peak_by_site.size() > options.top) result.peak_by_site.resize(options.top);

  for (std::uint64_t end : steps.ends) {
    auto at = static_cast<std::int64_t>(end);
    result.steps.push_back({end, events[end].time_us, detail::allocated_after(result.memory, at), detail::reserved_after(result.memory, at)});
  }
  std::size_t leaks_found = detail::report_leaks(snap, options, pass, stacks, result);
  detail::add_notes(snap, events, {steps, leaks_found, ooms, trace != nullptr}, result);
  return result;
}

result<inspection, inspect_errc> inspect_checked(const snapshot& snap, const inspect_options& options) {
  using failure = basic_error<inspect_errc>;
  if (std::string problem = check_inspect_options(options); !problem.empty()) return failure{inspect_errc::option_out_of_range, 0, problem};
  if (!options.step_marker.empty()) {
    auto marker = detail::compile_step_marker(options.step_marker);
    if (!marker.ok()) {
      return failure{marker.code(), 0,
                     "step marker '" + elide_middle(options.step_marker, 80) + "' is not a valid regular expression (" +
                         marker.failure().detail + ")"};
    }
  }
  inspection out = inspect(snap, options);
  if (options.device >= 0 && std::find(out.devices.begin(), out.devices.end(), options.device) == out.devices.end()) {
    std::string known;
    for (std::int64_t device : out.devices) known += (known.empty() ? "" : ", ") + std::to_string(device);
    return failure{inspect_errc::no_such_device, 0,
                   "has no device " + std::to_string(options.device) + " (devices: " + (known.empty() ? "none" : known) + ")"};
  }
  auto exact = [](std::int64_t bytes) { return format_count(static_cast<std::uint64_t>(bytes)) + " B"; };
  if (options.limit_bytes > 0 && options.limit_bytes < out.limit.proven_low_bytes) {
    return failure{inspect_errc::limit_below_recording, 0,
                   "--limit " + exact(options.limit_bytes) + " is below the " + exact(out.limit.proven_low_bytes) +
                       " the recording reserved, so its limit was at least that"};
  }
  if (options.limit_bytes > 0 && options.limit_bytes > out.limit.proven_high_bytes) {
    return failure{inspect_errc::limit_above_recording, 0,
                   "--limit " + exact(options.limit_bytes) + " is above the " + exact(out.limit.proven_high_bytes) +
                       " the recording shows the limit was at most (at event " + format_count(out.limit.proven_high_event) +
                       " it refused memory that would have fit under it)"};
  }
  return out;
}

}  // namespace rlmem
