// SPDX-License-Identifier: MIT
// Leaks: sites whose live memory keeps growing from one step end to the next, one entry per
// cause, and how much of the step-end growth of allocated memory they explain.

#include "analysis.hpp"

#include <rlmem/base/saturating.hpp>
#include <rlmem/step_rules/step_rules.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string_view>

namespace rlmem {

namespace {

// The growth rule for one allocation site: a site's live bytes carry no other step's leftovers,
// so two step ends above the noise suffice (the process-wide monitor asks for three, four
// without history before the growth), any rate counts, and while fewer than four events show, the site's own allocations must have grown
// too: a site that holds the latest batch grows with batch sizes without keeping anything.
growth_rule site_rule() {
  growth_rule rule;
  rule.min_events = 2;
  rule.min_relative_rate = 0;
  rule.extra_events_without_history = 0;
  return rule;
}

constexpr std::size_t events_without_counts = 4;

}  // namespace

leak_trend leak_trend_of(std::span<const std::int64_t> bytes, std::span<const std::uint64_t> counts) {
  leak_trend trend;
  growth_verdict growth = judge_growth(bytes, site_rule());
  if (!growth.growing) return trend;
  if (growth.events < events_without_counts &&
      (counts.size() != bytes.size() || counts.back() <= counts[growth.first - 1])) {
    return trend;
  }
  trend.leaking = true;
  trend.first_step = growth.first;
  trend.steps = growth.steps;
  trend.bytes_per_step = growth.bytes_per_step;
  return trend;
}

namespace detail {

namespace {

// A site the leak rule flags, and the frame it is named after.
struct growing_site {
  const site_series* series = nullptr;
  leak_trend trend;
  std::span<const frame_id> stack;      // its representative stack, innermost first
  site_frames positions;
  std::int64_t line = 0;
};

// What two growing sites share when they are one cause (see `leak`): the steps over which they
// grew, the function they were made in, and every frame outward of it. Empty when the site
// stands alone: no stack, or a stack of C++ frames only. Strings are interned by the reader, so
// ids compare as text does.
std::vector<std::int64_t> cause_key(const snapshot& snap, const growing_site& site) {
  std::vector<std::int64_t> key;
  if (site.positions.site == site_frames::none) return key;
  const frame& made_in = snap.frames[site.stack[site.positions.site]];
  key = {static_cast<std::int64_t>(site.trend.first_step), static_cast<std::int64_t>(site.trend.steps), made_in.filename,
         made_in.name};
  for (frame_id id : site.stack.subspan(site.positions.site + 1)) {
    const frame& outer = snap.frames[id];
    key.insert(key.end(), {outer.filename, outer.name, outer.line});
  }
  return key;
}

// A site's live bytes at every step end, from its sparse changes: O(step ends).
std::vector<std::int64_t> dense_bytes(const site_series& one, std::size_t step_ends) {
  std::vector<std::int64_t> dense(step_ends, 0);
  for (std::size_t change = 0; change < one.steps.size(); ++change) {
    std::size_t until = change + 1 < one.steps.size() ? one.steps[change + 1] : step_ends;
    std::fill(dense.begin() + one.steps[change], dense.begin() + static_cast<std::ptrdiff_t>(until), one.bytes[change]);
  }
  return dense;
}

// One cause from its lines (a group of growing sites with one key), its figures the lines' sums.
leak leak_of(frame_index& frames, std::vector<const growing_site*> group, std::size_t step_ends) {
  std::sort(group.begin(), group.end(), [](const growing_site* a, const growing_site* b) {
    return a->line != b->line ? a->line < b->line : a->series->site.label < b->series->site.label;
  });
  const growing_site* fastest = group.front();
  leak made;
  made.first_step = fastest->trend.first_step;
  made.steps = fastest->trend.steps;
  made.bytes_at_step_end.assign(step_ends, 0);
  std::vector<std::int64_t> lines;
  for (const growing_site* grower : group) {
    const site_series& one = *grower->series;
    if (grower->trend.bytes_per_step > fastest->trend.bytes_per_step) fastest = grower;
    leak_line line;
    line.site = one.site;
    if (one.site.stack != 0) line.site.user_frame = resolve_site(frames, one.site.stack).user_frame;
    line.line = grower->line;
    line.bytes_per_step = grower->trend.bytes_per_step;
    line.live_bytes_at_end = one.bytes.back();
    line.live_count_at_end = one.counts.back();
    made.bytes_per_step = saturating_add(made.bytes_per_step, line.bytes_per_step);
    made.live_bytes_at_end = saturating_add(made.live_bytes_at_end, line.live_bytes_at_end);
    made.live_count_at_end += line.live_count_at_end;
    std::vector<std::int64_t> dense = dense_bytes(one, step_ends);
    for (std::size_t step = 0; step < step_ends; ++step) made.bytes_at_step_end[step] = saturating_add(made.bytes_at_step_end[step], dense[step]);
    lines.push_back(grower->line);
    made.lines.push_back(std::move(line));
  }
  const leak_line& fastest_line = made.lines[static_cast<std::size_t>(
      std::find(group.begin(), group.end(), fastest) - group.begin())];
  made.site = fastest_line.site;
  if (group.size() > 1) {
    frame_id made_in = fastest->stack[fastest->positions.site];
    made.site.label = frames.label_of_lines(made_in, lines);
    // Where the lines are the user's own code, the user frame is the function, not one line.
    if (fastest->positions.user == fastest->positions.site) made.site.user_frame = made.site.label;
  }
  return made;
}

}  // namespace

std::vector<leak> detect_leaks(frame_index& frames, const std::vector<site_series>& series, std::size_t step_ends,
                               std::size_t max_leaks, std::size_t& growing) {
  const snapshot& snap = frames.snap();
  std::vector<growing_site> found;
  std::vector<std::int64_t> bytes;
  std::vector<std::uint64_t> counts;
  for (const site_series& one : series) {
    // A leak grows at the last step end, and at every step end of its growing run: the run is
    // within the last stretch of consecutive step ends at which the series changed.
    if (one.steps.empty() || one.steps.back() + std::size_t{1} != step_ends) continue;
    std::size_t run = one.steps.size() - 1;
    while (run > 0 && one.steps[run - 1] + 1 == one.steps[run]) --run;
    bytes.clear();
    counts.clear();
    std::size_t offset = 0;  // step end of bytes[0]
    if (one.steps[run] > 0) {
      // The figures held at the step end before the run: the previous change's, or none yet.
      offset = one.steps[run] - 1;
      bytes.push_back(run > 0 ? one.bytes[run - 1] : 0);
      counts.push_back(run > 0 ? one.counts[run - 1] : 0);
    }
    bytes.insert(bytes.end(), one.bytes.begin() + static_cast<std::ptrdiff_t>(run), one.bytes.end());
    counts.insert(counts.end(), one.counts.begin() + static_cast<std::ptrdiff_t>(run), one.counts.end());
    leak_trend trend = leak_trend_of(bytes, counts);
    if (!trend.leaking) continue;
    trend.first_step += offset;
    growing_site grower{&one, trend, {}, {}, 0};
    if (one.site.stack != 0) {
      grower.stack = snap.stack(one.site.stack);
      grower.positions = locate_site_frames(frames, grower.stack);
      if (grower.positions.site != site_frames::none) grower.line = snap.frames[grower.stack[grower.positions.site]].line;
    }
    found.push_back(grower);
  }

  // Group by cause: O(growing sites x their stack depth x log).
  std::vector<std::vector<const growing_site*>> causes;
  std::map<std::vector<std::int64_t>, std::size_t> cause_by_key;
  for (const growing_site& grower : found) {
    std::vector<std::int64_t> key = cause_key(snap, grower);
    if (key.empty()) {
      causes.push_back({&grower});
      continue;
    }
    auto [at, added] = cause_by_key.try_emplace(std::move(key), causes.size());
    if (added) causes.emplace_back();
    causes[at->second].push_back(&grower);
  }
  growing = causes.size();

  struct ranked {
    std::int64_t bytes_per_step = 0;
    std::string_view label;  // the first of its lines' labels, to break ties
    std::size_t cause = 0;
  };
  std::vector<ranked> order;
  for (std::size_t cause = 0; cause < causes.size(); ++cause) {
    ranked one{0, causes[cause].front()->series->site.label, cause};
    for (const growing_site* grower : causes[cause]) {
      one.bytes_per_step = saturating_add(one.bytes_per_step, grower->trend.bytes_per_step);
      one.label = std::min(one.label, std::string_view(grower->series->site.label));
    }
    order.push_back(one);
  }
  auto faster = [](const ranked& a, const ranked& b) {
    return a.bytes_per_step != b.bytes_per_step ? a.bytes_per_step > b.bytes_per_step : a.label < b.label;
  };
  std::size_t kept = std::min(max_leaks, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept), order.end(), faster);
  std::vector<leak> leaks;
  for (std::size_t i = 0; i < kept; ++i) leaks.push_back(leak_of(frames, causes[order[i].cause], step_ends));
  return leaks;
}

leak_summary summarize_leaks(std::span<const step_end> steps, const std::vector<leak>& leaks) {
  leak_summary summary;
  if (steps.size() < 3) return summary;
  summary.measured = true;
  summary.from_step = 1;
  summary.to_step = steps.size();
  summary.allocated_from_bytes = steps.front().allocated_bytes;
  summary.allocated_to_bytes = steps.back().allocated_bytes;
  auto steps_compared = static_cast<std::int64_t>(summary.to_step - summary.from_step);
  summary.growth_per_step_bytes = saturating_subtract(summary.allocated_to_bytes, summary.allocated_from_bytes) / steps_compared;
  for (std::size_t k = 1; k < steps.size(); ++k) {
    if (steps[k].allocated_bytes > steps[k - 1].allocated_bytes) ++summary.step_ends_grown;
  }
  // bytes_at_step_end[k] is step end k (index 0 is the trace start).
  std::int64_t explained = 0;
  for (const leak& found : leaks) {
    const std::vector<std::int64_t>& held = found.bytes_at_step_end;
    if (held.size() <= summary.to_step) continue;
    explained = saturating_add(explained, saturating_subtract(held[summary.to_step], held[summary.from_step]));
  }
  summary.explained_per_step_bytes = explained / steps_compared;
  summary.growth_without_named_leak = leaks.empty() && summary.growth_per_step_bytes > 0 &&
                                      2 * summary.step_ends_grown > summary.to_step - summary.from_step;
  return summary;
}

}  // namespace detail

}  // namespace rlmem
