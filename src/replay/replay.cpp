// SPDX-License-Identifier: MIT
// The replay driver over the model layer's trace simulation: compares the model's segment
// events with the recorded ones, searches the smallest capacity, and compares settings.

#include <rlmem/base/format.hpp>
#include <rlmem/replay/replay.hpp>
#include <rlmem/model/trace_simulation.hpp>

#include <span>
#include <variant>
#include <vector>

namespace rlmem {

namespace {

bool is_segment_release(trace_action action) {
  return action == trace_action::segment_free || action == trace_action::segment_unmap;
}

// "+376.0 MiB" for a segment allocated or mapped, "-20.0 MiB" for one freed or unmapped.
std::string describe_segment_event(bool alloc, std::uint64_t size) {
  return (alloc ? "+" : "-") + format_bytes(static_cast<std::int64_t>(size));
}

replay_fidelity compare_segment_events(std::span<const trace_event> events, const std::vector<model_segment_event>& made) {
  replay_fidelity fidelity;
  fidelity.applicable = true;
  std::size_t produced = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    bool alloc = events[i].action == trace_action::segment_alloc || events[i].action == trace_action::segment_map;
    if (!alloc && !is_segment_release(events[i].action)) continue;
    ++fidelity.segment_events_expected;
    if (!fidelity.first_mismatch.empty()) continue;
    if (produced < made.size() && made[produced].alloc == alloc && made[produced].size == events[i].size) {
      ++fidelity.segment_events_matched;
      ++produced;
      continue;
    }
    fidelity.first_mismatch = "event " + format_count(i) + ": the recording's segment " + describe_segment_event(alloc, events[i].size) +
                              ", the model's " + (produced < made.size() ? describe_segment_event(made[produced].alloc, made[produced].size) : "none");
  }
  if (fidelity.first_mismatch.empty() && produced < made.size()) {
    fidelity.first_mismatch = "after the recorded segment events the model made one more: " +
                              describe_segment_event(made[produced].alloc, made[produced].size);
  }
  return fidelity;
}

}  // namespace

replay_result replay(const snapshot& snap, const replay_options& options) {
  trace_simulation_options run;
  run.device = options.device;
  run.settings = options.settings;
  run.capacity_bytes = options.capacity_bytes;
  run.allocator = options.allocator;
  replay_result result;
  if (run.capacity_bytes == 0 && options.infer_capacity) {
    result.inferred_limit = infer_recorded_limit(snap, options.device >= 0 ? options.device : default_device(snap));
    if (result.inferred_limit) run.capacity_bytes = result.inferred_limit->replay_bytes();
  }
  result.capacity_bytes = run.capacity_bytes;
  trace_simulation simulated = simulate_trace(snap, run);
  result.unsupported = std::move(simulated.unsupported);
  if (!result.unsupported.empty()) return result;
  if (!simulated.ooms.empty()) {
    const simulated_oom& oom = simulated.ooms.front();
    result.oom = replay_oom{oom.event, oom.requested_bytes, oom.allocated_bytes, oom.reserved_bytes, oom.recorded};
  }
  result.completed = !result.oom.has_value();
  result.peak_allocated_bytes = simulated.peak_allocated_bytes;
  result.peak_reserved_bytes = simulated.peak_reserved_bytes;
  result.segments = simulated.segments;
  result.num_alloc_retries = simulated.alloc_retries;
  result.events_replayed = simulated.events_applied;
  result.recording_ended_in_oom = simulated.served_a_recorded_oom;
  result.notes = std::move(simulated.notes);
  // Fidelity: torch's allocator under the recorded settings is what made the recording.
  if (std::holds_alternative<torch_allocator_options>(options.allocator) && simulated.settings == settings_of(snap)) {
    const device_trace* trace = snap.trace_for(simulated.device);
    std::span<const trace_event> events = snap.events_of(*trace);
    result.fidelity = compare_segment_events(events.first(result.events_replayed), simulated.segment_events);
  }
  return result;
}

std::uint64_t min_capacity(const snapshot& snap, const replay_options& options) {
  constexpr std::uint64_t step = std::uint64_t{2} << 20;
  replay_options unlimited = options;
  unlimited.capacity_bytes = 0;
  unlimited.infer_capacity = false;
  replay_result free_run = replay(snap, unlimited);
  if (!free_run.completed) return 0;
  // The answer lies between the live data's peak and what the unlimited run reserved.
  std::uint64_t low = static_cast<std::uint64_t>(free_run.peak_allocated_bytes) / step;  // does not complete below
  std::uint64_t high = (static_cast<std::uint64_t>(free_run.peak_reserved_bytes) + step - 1) / step;  // completes
  while (high - low > 1) {
    std::uint64_t middle = low + (high - low) / 2;
    replay_options capped = options;
    capped.capacity_bytes = middle * step;
    if (replay(snap, capped).completed) {
      high = middle;
    } else {
      low = middle;
    }
  }
  return high * step;
}

std::vector<settings_comparison> compare_settings(const snapshot& snap, const replay_options& options) {
  allocator_settings recorded = options.settings.value_or(settings_of(snap));
  std::vector<settings_comparison> rows;
  auto add = [&](std::string label, const allocator_settings& settings, allocator_choice allocator = torch_allocator_options{}) {
    replay_options run = options;
    run.settings = settings;
    run.allocator = allocator;
    settings_comparison row{std::move(label), settings, replay(snap, run), 0, 0};
    if (row.result.unsupported.empty()) {
      row.min_capacity_bytes = min_capacity(snap, run);
      replay_options unlimited = run;
      unlimited.capacity_bytes = 0;
      unlimited.infer_capacity = false;
      row.floor_bytes = replay(snap, unlimited).peak_allocated_bytes;
    }
    rows.push_back(std::move(row));
  };
  add("recorded", recorded);
  allocator_settings expandable = recorded;
  expandable.expandable_segments = true;
  if (!recorded.expandable_segments) add("expandable_segments:True", expandable);
  for (std::uint64_t megabytes : {64, 128, 256, 512}) {
    allocator_settings split = recorded;
    split.expandable_segments = false;
    split.max_split_size = megabytes << 20;
    if (split != recorded) add("max_split_size_mb:" + std::to_string(megabytes), split);
  }
  rlmem_policy_options caching;
  add("rlmem policy", recorded, caching);
  rlmem_policy_options releasing;
  releasing.release_free_pages = true;
  add("rlmem policy, free pages released", recorded, releasing);
  return rows;
}

}  // namespace rlmem
