// SPDX-License-Identifier: MIT
// The simulations behind OOM verdicts: the whole trace through the caching allocator model once
// per setting tried, under the judged limit; every OOM of the trace is read off those passes.

#include "analysis.hpp"

#include <rlmem/model/allocator_rules.hpp>
#include <rlmem/base/format.hpp>
#include <rlmem/base/saturating.hpp>
#include <rlmem/model/trace_simulation.hpp>
#include <rlmem/base/usable_cores.hpp>

#include <algorithm>
#include <bit>
#include <functional>
#include <future>
#include <map>
#include <optional>

namespace rlmem::detail {

namespace {

constexpr std::uint64_t mib = std::uint64_t{1} << 20;

// max_split_size_mb keeps cached blocks of at least that size whole for requests of at least
// that size: a power of two no larger than the smallest request keeps large blocks for every
// request judged. torch refuses values of 20 MiB or less.
std::uint64_t max_split_size_for(std::span<const std::uint64_t> requests) {
  std::uint64_t smallest = UINT64_MAX;
  for (std::uint64_t bytes : requests) {
    if (bytes <= largest_gpu_memory_bytes) smallest = std::min(smallest, bytes);
  }
  if (smallest == UINT64_MAX) smallest = 256 * mib;  // only shape bugs: any value is as good
  return std::max<std::uint64_t>(std::bit_floor(smallest / mib), 32) * mib;
}

// What the failing request asked of the device on top of what the simulation held: a cudaMalloc
// segment, or under expandable segments the pages that map it (to a page: the free end of the
// mapped range may hold part of it).
std::uint64_t new_memory_for(std::uint64_t rounded_bytes, const allocator_settings& settings) {
  if (!settings.expandable_segments) return segment_size_for(rounded_bytes);
  std::uint64_t page = small_pool_request(rounded_bytes) ? small_segment_bytes : large_segment_bytes;
  return rounded_bytes > UINT64_MAX - page ? UINT64_MAX / page * page : (rounded_bytes + page - 1) / page * page;
}

// One pass: where it failed and the most it reserved before each boundary (every OOM event, and
// the end of the trace).
struct pass {
  oom_remedy remedy = oom_remedy::expandable_segments;
  std::string setting;
  std::string not_tried;  // "" when it ran
  trace_simulation result;
  std::vector<std::int64_t> reserved_before;  // by boundary: most reserved over the states before it
};

// What a remedy simulates, at whatever limit.
struct remedy_run {
  oom_remedy remedy = oom_remedy::expandable_segments;
  std::string setting;
  std::string not_tried;  // "" when it can run
  allocator_settings settings;
  std::vector<std::uint64_t> empty_cache_before;
};

pass run_pass(const snapshot& snap, std::int64_t device, const remedy_run& how, std::int64_t limit_bytes,
              std::span<const std::uint64_t> boundaries) {
  pass one{how.remedy, how.setting, how.not_tried, {}, {}};
  if (!how.not_tried.empty()) return one;
  trace_simulation_options options;
  options.device = device;
  options.settings = how.settings;
  options.capacity_bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(limit_bytes, 0));
  options.empty_cache_before = how.empty_cache_before;
  std::int64_t most = 0;
  std::size_t next = 0;
  one.reserved_before.reserve(boundaries.size());
  one.result = simulate_trace(snap, options, [&](const simulation_step& step) {
    // The state after `events_applied` events is the state before event `events_applied`: the
    // last state a boundary there counts (the end of the trace counts the final state).
    most = std::max(most, step.model.reserved_bytes());
    while (next < boundaries.size() && boundaries[next] == step.events_applied) {
      one.reserved_before.push_back(most);
      ++next;
    }
  });
  if (!one.result.unsupported.empty()) one.not_tried = "the trace cannot be simulated: " + one.result.unsupported;
  return one;
}

oom_proof proof_of(const pass& one, std::uint64_t oom_event, std::uint64_t window_end,
                   std::size_t window_boundary, std::int64_t limit_bytes) {
  oom_proof proof;
  proof.remedy = one.remedy;
  proof.setting = one.setting;
  proof.limit_bytes = limit_bytes;
  if (!one.not_tried.empty()) {
    proof.not_tried = one.not_tried;
    return proof;
  }
  // The simulation goes on past a recorded OOM it fails too (the program caught the error) and
  // ends at the first request the recording served that it cannot: that one is its last entry.
  const std::vector<simulated_oom>& ooms = one.result.ooms;
  const simulated_oom* failed = nullptr;
  auto at_or_after = std::lower_bound(ooms.begin(), ooms.end(), oom_event,
                                      [](const simulated_oom& oom, std::uint64_t event) { return oom.event < event; });
  if (!ooms.empty() && !ooms.back().recorded && ooms.back().event < oom_event) {
    failed = &ooms.back();
  } else if (at_or_after != ooms.end() && at_or_after->event < window_end) {
    failed = &*at_or_after;
  }
  proof.tried = true;
  if (failed != nullptr) {
    proof.failed_event = failed->event;
    proof.failed_requested_bytes = failed->requested_bytes;
    proof.reserved_reached_bytes = failed->reserved_bytes;
    if (failed->event == oom_event) {
      std::uint64_t more = new_memory_for(failed->requested_bytes, one.result.settings);
      proof.reserved_needed_bytes = saturating_add(failed->reserved_bytes, signed_bytes(more));
    }
    return proof;
  }
  proof.served = true;
  proof.reserved_reached_bytes = one.reserved_before[window_boundary];
  return proof;
}


// The passes of one remedy's search, by limit: an OOM's bisection reuses those another made.
class remedy_search {
 public:
  /// At most `most_passes` passes, over every OOM searched.
  remedy_search(const snapshot& snap, std::int64_t device, const remedy_run& how, std::span<const std::uint64_t> oom_events,
                std::span<const std::uint64_t> boundaries, std::size_t most_passes)
      : snap_(snap), device_(device), how_(how), oom_events_(oom_events), boundaries_(boundaries), most_passes_(most_passes) {}

  // The smallest limit in (low, high] at which the remedy serves OOM `k`, to 2 MiB; 0 when it
  // does not serve at `high`; -1 when the passes ran out first. Serving is taken to be monotone
  // in the limit (more memory never hurts these settings); the answer is a limit a pass served.
  std::int64_t smallest_serving_limit(std::int64_t low, std::int64_t high, std::size_t k) {
    std::optional<bool> at_high = served_at(high, k);
    if (!at_high) return -1;
    if (!*at_high) return 0;
    constexpr std::int64_t step = 2 * static_cast<std::int64_t>(mib);
    while (high - low > step) {
      std::int64_t middle = low + (high - low) / 2;
      std::optional<bool> served = served_at(middle, k);
      if (!served) return -1;
      (*served ? high : low) = middle;
    }
    return high;
  }

 private:
  std::optional<bool> served_at(std::int64_t limit, std::size_t k) {
    auto found = passes_.find(limit);
    if (found == passes_.end()) {
      if (passes_.size() >= most_passes_) return std::nullopt;
      found = passes_.emplace(limit, run_pass(snap_, device_, how_, limit, boundaries_)).first;
    }
    return proof_of(found->second, oom_events_[k], boundaries_[k + 1], k + 1, limit).served;
  }

  const snapshot& snap_;
  std::int64_t device_;
  const remedy_run& how_;
  std::span<const std::uint64_t> oom_events_;
  std::span<const std::uint64_t> boundaries_;
  std::size_t most_passes_;
  std::map<std::int64_t, pass> passes_;
};

}  // namespace

std::vector<std::vector<oom_proof>> prove_ooms(const snapshot& snap, std::int64_t device, std::span<const trace_event> events,
                                               const oom_simulation_plan& plan) {
  const allocator_settings recorded = settings_of(snap);
  std::vector<std::uint64_t> requests;
  for (std::uint64_t event : plan.oom_events) requests.push_back(round_request(events[event].size, recorded));
  // Boundaries: each OOM's event (the end of the window of the OOM before it) and the trace's end.
  std::vector<std::uint64_t> boundaries(plan.oom_events.begin(), plan.oom_events.end());
  boundaries.push_back(events.size());

  std::vector<remedy_run> remedies;
  allocator_settings expandable = recorded;
  expandable.expandable_segments = true;
  remedies.push_back({oom_remedy::expandable_segments, "expandable_segments:True",
                      recorded.expandable_segments || plan.expandable_trace ? "already the recorded setting" : "", expandable, {}});

  // empty_cache() at the start of each OOM's step: after the last step end before it, else right
  // before the request. (Right before the request it can change nothing: the malloc's slow path
  // releases every cached segment itself before it fails.)
  std::vector<std::uint64_t> empty_cache_before;
  for (std::uint64_t event : plan.oom_events) {
    auto after = std::lower_bound(plan.step_ends.begin(), plan.step_ends.end(), event);
    empty_cache_before.push_back(after == plan.step_ends.begin() ? event : *std::prev(after) + 1);
  }
  // Said in the user's terms: the step's number (step 1 ends at the first step end) and the code
  // that makes the step's first allocation.
  std::vector<std::string> empty_cache_settings;
  for (std::size_t k = 0; k < plan.oom_events.size(); ++k) {
    std::uint64_t at = empty_cache_before[k];
    if (!plan.reported[k]) {
      empty_cache_settings.emplace_back();  // no proof is made for it: its stack is not resolved
      continue;
    }
    if (at == plan.oom_events[k]) {
      empty_cache_settings.push_back("empty_cache() right before the request");
      continue;
    }
    auto step = static_cast<std::uint64_t>(std::upper_bound(plan.step_ends.begin(), plan.step_ends.end(), at) - plan.step_ends.begin()) + 1;
    allocation_site first = resolve_site(snap, events[at].stack);
    std::string where = first.user_frame.empty() ? first.label : first.user_frame;
    empty_cache_settings.push_back("empty_cache() at the start of step " + format_count(step) + " (before event " + format_count(at) +
                                   (where.empty() ? std::string() : ", " + where) + ")");
  }
  std::vector<std::uint64_t> points = empty_cache_before;
  points.erase(std::unique(points.begin(), points.end()), points.end());
  remedies.push_back({oom_remedy::empty_cache, "", "", recorded, std::move(points)});

  allocator_settings split = recorded;
  split.max_split_size = max_split_size_for(requests);
  if (plan.expandable_trace && !recorded.expandable_segments) split.expandable_segments = true;  // the trace's reservations need it
  remedies.push_back({oom_remedy::max_split_size, "max_split_size_mb:" + std::to_string(split.max_split_size / mib),
                      split == recorded ? "already the recorded setting" : "", split, {}});

  // Each remedy's passes (at the judged limit, then its search) run on a thread of their own.
  auto prove_remedy = [&](const remedy_run& how) {
    pass judged = run_pass(snap, device, how, plan.limit_bytes, boundaries);
    remedy_search search(snap, device, how, plan.oom_events, boundaries, plan.search_passes);
    std::vector<oom_proof> by_oom(plan.oom_events.size());
    for (std::size_t k = 0; k < plan.oom_events.size(); ++k) {
      if (!plan.reported[k]) continue;
      oom_proof& proof = by_oom[k];
      proof = proof_of(judged, plan.oom_events[k], boundaries[k + 1], k + 1, plan.limit_bytes);
      if (how.remedy == oom_remedy::empty_cache) proof.setting = empty_cache_settings[k];
      if (proof.served && plan.search_high_bytes > 0) proof.serves_from_bytes = plan.limit_bytes;
      if (proof.tried && !proof.served && plan.search_high_bytes > plan.limit_bytes) {
        proof.serves_from_bytes = search.smallest_serving_limit(plan.limit_bytes, plan.search_high_bytes, k);
      }
    }
    return by_oom;
  };
  std::vector<std::future<std::vector<oom_proof>>> running;
  for (const remedy_run& how : remedies) {
    running.push_back(std::async(several_cores_usable() ? std::launch::async : std::launch::deferred, prove_remedy, std::cref(how)));
  }
  std::vector<std::vector<oom_proof>> proofs(plan.oom_events.size());
  for (auto& each : running) {
    std::vector<oom_proof> by_oom = each.get();
    for (std::size_t k = 0; k < plan.oom_events.size(); ++k) {
      if (plan.reported[k]) proofs[k].push_back(std::move(by_oom[k]));
    }
  }
  return proofs;
}

}  // namespace rlmem::detail
