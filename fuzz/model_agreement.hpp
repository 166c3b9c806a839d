// SPDX-License-Identifier: MIT
#pragma once
// The differential check of the model layer, as simdjson's fuzz_implementations checks two
// parsers: inspect's live set and replay's caching allocator model read one trace, and after
// every event where both apply they must hold the same allocated bytes. Both apply from the
// trace start until the model parts from the recording (a block placed elsewhere, a segment
// event the recording did not make, an OOM the recording did not have) or the trace contradicts
// itself (the live set counts an inconsistency); after that their numbers may differ for reasons
// neither rule decides. Used by fuzz_model_agreement and by tests/model/agreement_test.cpp.

#include <rlmem/model/allocator_settings.hpp>
#include <rlmem/model/caching_allocator.hpp>
#include <rlmem/model/live_set.hpp>
#include <rlmem/model/trace_simulation.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace rlmem::testing {

struct model_agreement {
  bool replayed = false;             ///< replay modelled the trace (it refuses some, with a reason)
  std::uint64_t events = 0;          ///< in the trace
  std::uint64_t states_compared = 0; ///< the trace start and the events after which both applied
  std::string stopped;               ///< why the comparison ended before the trace did, "" when it did not
  std::string disagreement;          ///< "" when they agree: where and by how much they differ
};

/// Runs the check on the default device of `snap`. O(events log blocks), as inspect and replay are.
inline model_agreement check_model_agreement(const snapshot& snap) {
  model_agreement outcome;
  const device_trace* trace = snap.trace_for(default_device(snap));
  std::span<const trace_event> events = trace ? snap.events_of(*trace) : std::span<const trace_event>{};
  outcome.events = events.size();
  live_set state = live_set::at_trace_start(snap, default_device(snap), events, settings_of(snap));
  std::vector<std::pair<bool, std::uint64_t>> recorded_segment_events;  // (alloc or map, bytes)
  std::size_t segment_events_checked = 0;
  bool following = true;
  auto stop = [&](std::string why) {
    following = false;
    outcome.stopped = std::move(why);
  };

  auto compare = [&](const simulation_step& step) {
    std::size_t applied = step.events_applied;
    const allocator_policy& model = step.model;
    const model_block* allocated = step.allocated;
    if (!following) return;
    std::string where = applied == 0 ? "at trace start" : "after event " + std::to_string(applied - 1);
    if (applied > 0) {
      const trace_event& event = events[applied - 1];
      std::uint64_t inconsistent_before = state.inconsistencies();
      state.apply(event);
      if (state.inconsistencies() != inconsistent_before) return stop(where + ": the trace contradicts the live set");
      bool grows = event.action == trace_action::segment_alloc || event.action == trace_action::segment_map;
      if (grows || event.action == trace_action::segment_free || event.action == trace_action::segment_unmap) {
        recorded_segment_events.emplace_back(grows, event.size);
      }
      if (event.action == trace_action::alloc && allocated->ptr != event.addr) {
        return stop(where + ": the model placed the block at " + std::to_string(allocated->ptr) + ", the recording at " +
                    std::to_string(event.addr));
      }
      const auto& made = model.segment_events();
      for (; segment_events_checked < std::min(made.size(), recorded_segment_events.size()); ++segment_events_checked) {
        const auto& recorded = recorded_segment_events[segment_events_checked];
        if (made[segment_events_checked].alloc != recorded.first || made[segment_events_checked].size != recorded.second) {
          return stop(where + ": segment event " + std::to_string(segment_events_checked) + " differs from the recording's");
        }
      }
      if (event.action == trace_action::alloc && made.size() != recorded_segment_events.size()) {
        return stop(where + ": the model made " + std::to_string(made.size()) + " segment events, the recording " +
                    std::to_string(recorded_segment_events.size()));
      }
    }
    // Past the int64 range the live set holds its sums and the model's are meaningless.
    if (state.allocated_bytes() == INT64_MAX || state.allocated_bytes() == INT64_MIN) return stop(where + ": sums beyond int64");
    ++outcome.states_compared;
    if (state.allocated_bytes() != model.allocated_bytes()) {
      outcome.disagreement = where + ": expected the model to hold the live set's " + std::to_string(state.allocated_bytes()) +
                             " allocated bytes, saw " + std::to_string(model.allocated_bytes());
      following = false;
    }
  };
  // Under the limit the trace proves, as replay runs it by default: without it the model parts
  // from a capped recording at its first refusal.
  trace_simulation_options options;
  if (std::optional<recorded_limit> limit = infer_recorded_limit(snap, default_device(snap))) options.capacity_bytes = limit->replay_bytes();
  trace_simulation replayed = simulate_trace(snap, options, compare);
  outcome.replayed = replayed.unsupported.empty();
  if (!outcome.replayed) outcome.stopped = "replay refused the trace: " + replayed.unsupported;
  if (following && !replayed.ooms.empty() && !replayed.ooms.back().recorded) {
    outcome.stopped = "the model ran out of memory at event " + std::to_string(replayed.ooms.back().event);
  }
  return outcome;
}

}  // namespace rlmem::testing
