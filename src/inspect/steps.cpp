// SPDX-License-Identifier: MIT
// Training-step boundaries: an explicit frame marker, record_function annotations
// (ProfilerStep#N, then the optimizer's own step/zero_grad ranges), or optimizer frames.

#include "analysis.hpp"

#include <rlmem/base/format.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace rlmem::detail {

namespace {

// Index of the last event at or before `time_us`, or none when the time precedes the trace.
bool last_event_at(std::span<const trace_event> events, std::int64_t time_us, std::uint64_t& index) {
  auto after = std::upper_bound(events.begin(), events.end(), time_us,
                                [](std::int64_t time, const trace_event& event) { return time < event.time_us; });
  if (after == events.begin()) return false;
  index = static_cast<std::uint64_t>(after - events.begin()) - 1;
  return true;
}

bool sorted_by_time(std::span<const trace_event> events) {
  return std::is_sorted(events.begin(), events.end(),
                        [](const trace_event& a, const trace_event& b) { return a.time_us < b.time_us; });
}

// Step ends from annotations: the START of ProfilerStep#N+1 ends step N; otherwise the END of
// each optimizer zero_grad (or step, when zero_grad is not recorded) ends a step.
std::vector<std::uint64_t> ends_from_annotations(const snapshot& snap, std::int64_t device,
                                                 std::span<const trace_event> events, std::string& method) {
  std::vector<std::int64_t> profiler_starts;
  std::vector<std::int64_t> zero_grad_ends;
  std::vector<std::int64_t> optimizer_step_ends;
  for (const annotation& mark : snap.annotations) {
    if (mark.device != device) continue;
    if (mark.name.starts_with("ProfilerStep#") && mark.stage == "START") profiler_starts.push_back(mark.time_us);
    if (mark.name.starts_with("Optimizer.zero_grad#") && mark.stage == "END") zero_grad_ends.push_back(mark.time_us);
    if (mark.name.starts_with("Optimizer.step#") && mark.stage == "END") optimizer_step_ends.push_back(mark.time_us);
  }
  std::vector<std::int64_t> times;
  if (profiler_starts.size() >= 2) {
    method = "ProfilerStep annotations";
    std::sort(profiler_starts.begin(), profiler_starts.end());
    // The step before each later ProfilerStep START ends just before it.
    times.assign(profiler_starts.begin() + 1, profiler_starts.end());
    for (auto& time : times) --time;
  } else if (!zero_grad_ends.empty()) {
    method = "optimizer zero_grad annotations";
    times = zero_grad_ends;
  } else if (!optimizer_step_ends.empty()) {
    method = "optimizer step annotations";
    times = optimizer_step_ends;
  }
  std::sort(times.begin(), times.end());
  std::vector<std::uint64_t> ends;
  for (std::int64_t time : times) {
    std::uint64_t index = 0;
    if (last_event_at(events, time, index) && (ends.empty() || index > ends.back())) ends.push_back(index);
  }
  return ends;
}

// Whether each stack passes through frames that satisfy `test`, looked up once per stack.
template <typename FrameTest>
class stack_test {
 public:
  stack_test(const snapshot& snap, FrameTest test) : snap_(snap), test_(std::move(test)), state_(snap.stack_offsets.size(), unknown) {}
  bool operator()(stack_id stack) {
    std::uint8_t& state = state_[stack];
    if (state == unknown) {
      state = no;
      for (frame_id id : snap_.stack(stack)) {
        if (test_(id)) {
          state = yes;
          break;
        }
      }
    }
    return state == yes;
  }

 private:
  enum : std::uint8_t { unknown, no, yes };
  const snapshot& snap_;
  FrameTest test_;
  std::vector<std::uint8_t> state_;  // by stack id
};

// Step ends from the optimizer's own allocations: the last event of each run of events whose
// stacks pass through torch/optim/ (runs closer than 64 events merge).
std::vector<std::uint64_t> ends_from_optimizer_frames(frame_index& frames, std::span<const trace_event> events) {
  stack_test in_optimizer(frames.snap(), [&](frame_id id) { return frames.is_optimizer(id); });
  std::vector<std::uint64_t> ends;
  std::uint64_t last = 0;
  bool open = false;
  for (std::uint64_t i = 0; i < events.size(); ++i) {
    if (events[i].action != trace_action::alloc || !in_optimizer(events[i].stack)) continue;
    if (open && i - last > 64) ends.push_back(last);
    last = i;
    open = true;
  }
  if (open) ends.push_back(last);
  return ends;
}

// A step ends where the next one begins: move each end past the frees that follow it (locals
// released as the step function returns), up to the next allocation.
void extend_over_trailing_frees(std::span<const trace_event> events, std::vector<std::uint64_t>& ends) {
  for (std::size_t k = 0; k < ends.size(); ++k) {
    std::uint64_t limit = k + 1 < ends.size() ? ends[k + 1] : events.size() - 1;
    std::uint64_t& end = ends[k];
    while (end < limit && events[end + 1].action != trace_action::alloc && events[end + 1].action != trace_action::oom) ++end;
  }
}

}  // namespace

result<std::unique_ptr<RE2>, inspect_errc> compile_step_marker(const std::string& pattern) {
  if (pattern.size() > max_step_marker_bytes) {
    return basic_error<inspect_errc>{inspect_errc::step_marker_too_long, 0,
                                     fmt::format("it is {} bytes long; a step marker is at most {} bytes", pattern.size(), max_step_marker_bytes)};
  }
  RE2::Options options;
  // A library never prints: RE2's own reason comes back in the failure instead of on stderr.
  options.set_log_errors(false);
  auto marker = std::make_unique<RE2>(pattern, options);
  if (!marker->ok()) {
    // RE2's reason quotes the pattern from where it failed: kept to one short line.
    return basic_error<inspect_errc>{inspect_errc::invalid_step_marker, 0, elide_middle(marker->error(), 200)};
  }
  return marker;
}

step_search find_step_ends(frame_index& frames, std::int64_t device, std::span<const trace_event> events,
                           const std::string& step_marker) {
  step_search found;
  if (events.empty()) return found;
  if (!step_marker.empty()) {
    auto compiled = compile_step_marker(step_marker);
    if (!compiled.ok()) {
      found.problem = "--step-marker is not a valid regular expression: " + compiled.failure().detail;
      return found;
    }
    std::unique_ptr<RE2> marker = std::move(compiled).value();
    found.method = "--step-marker " + step_marker;
    // RE2 runs in time linear in the text; each distinct frame is matched once.
    std::vector<std::uint8_t> frame_matched(frames.snap().frames.size(), 0);  // 0 unknown, 1 no, 2 yes
    std::string text;
    stack_test marked(frames.snap(), [&](frame_id id) {
      if (frame_matched[id] == 0) {
        frames.match_text(id, text);
        frame_matched[id] = RE2::PartialMatch(text, *marker) ? 2 : 1;
      }
      return frame_matched[id] == 2;
    });
    bool previous_matched = false;
    std::vector<std::uint64_t> starts;
    for (std::uint64_t i = 0; i < events.size(); ++i) {
      if (events[i].action != trace_action::alloc) continue;
      bool matched = marked(events[i].stack);
      // A run of matching allocations starts one step.
      if (matched && !previous_matched) starts.push_back(i);
      previous_matched = matched;
    }
    for (std::size_t k = 1; k < starts.size(); ++k) found.ends.push_back(starts[k] - 1);
    if (!starts.empty()) found.ends.push_back(events.size() - 1);
    return found;
  }
  if (sorted_by_time(events)) found.ends = ends_from_annotations(frames.snap(), device, events, found.method);
  if (found.ends.empty()) {
    found.ends = ends_from_optimizer_frames(frames, events);
    found.method = found.ends.empty() ? "" : "optimizer allocations in the stacks";
  }
  extend_over_trailing_frees(events, found.ends);
  return found;
}

}  // namespace rlmem::detail
