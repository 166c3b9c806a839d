// SPDX-License-Identifier: MIT
// Where the device calls go under memory pressure, step by step: one recording replayed under
// caps near its demand, torch's expandable segments (the caching allocator model) and the rlmem
// policy side by side over the fake device. Per step: requests that released cached memory and
// tried again (num_alloc_retries), fences, and the driver calls (create, map, set_access, unmap,
// release). Steps end where `rlmem inspect` finds them (the recording's step ends).
//
//   replay_pressure SNAPSHOT DEMAND_BYTES [FACTOR...]

#include <rlmem/model/allocator_rules.hpp>
#include <rlmem/device/fake_device.hpp>
#include <rlmem/inspect/inspect.hpp>
#include <rlmem/replay/replay.hpp>
#include <rlmem/snapshot/snapshot_reader.hpp>
#include <rlmem/model/trace_simulation.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using namespace rlmem;

struct counts {
  std::uint64_t retries = 0, fences = 0, creates = 0, maps = 0, unmaps = 0, releases = 0, mapped_bytes = 0;
  counts operator-(const counts& o) const {
    return {retries - o.retries, fences - o.fences, creates - o.creates, maps - o.maps, unmaps - o.unmaps, releases - o.releases,
            mapped_bytes - o.mapped_bytes};
  }
};

counts now_of(const simulation_step& step, std::uint64_t mapped_bytes) {
  const fake_device& gpu = step.device;
  return {step.model.alloc_retries(), gpu.fences(), gpu.succeeded(device_op::create), gpu.succeeded(device_op::map),
          gpu.succeeded(device_op::unmap), gpu.succeeded(device_op::release), mapped_bytes};
}

struct run_result {
  bool completed = false;
  std::vector<counts> steps;  // [i]: step i + 1; one more for events after the last step end
  std::size_t step_count = 0;
  counts total;
  std::vector<std::pair<std::size_t, std::uint64_t>> retry_events;  // event index, size
};

run_result run(const snapshot& snap, trace_simulation_options options, const std::vector<std::uint64_t>& step_ends) {
  run_result out;
  const device_trace* trace = snap.trace_for(default_device(snap));
  auto events = snap.events_of(*trace);
  counts at_step_start{};
  counts at_trace_start{};
  counts last{};
  std::uint64_t mapped = 0;
  auto next_end = step_ends.begin();
  simulation_observer observe = [&](const simulation_step& step) {
    for (const model_segment_event& e : step.segment_events_made) {
      if (e.alloc) mapped += e.size;
    }
    counts current = now_of(step, mapped);
    if (step.events_applied == 0) {
      at_step_start = current;
      at_trace_start = current;
      last = current;
      return;
    }
    const trace_event& event = events[step.events_applied - 1];
    if (current.retries != last.retries) out.retry_events.push_back({step.events_applied - 1, event.size});
    last = current;
    if (next_end != step_ends.end() && step.events_applied - 1 == *next_end) {
      out.steps.push_back(last - at_step_start);
      at_step_start = last;
      ++next_end;
    }
  };
  trace_simulation sim = simulate_trace(snap, options, observe);
  out.step_count = step_ends.size();
  if (next_end == step_ends.end() && events.size() - 1 > step_ends.back()) out.steps.push_back(last - at_step_start);
  out.completed = sim.ooms.empty() || sim.ooms.back().recorded;
  out.total = last - at_trace_start;  // the memory from before recording placed, not counted
  return out;
}

void print(const char* label, const run_result& r) {
  std::printf("%-34s %s\n", label, r.completed ? "completes" : "OOM");
  std::printf("  %4s %7s %6s %7s %6s %7s %8s %10s\n", "step", "retries", "fences", "creates", "maps", "unmaps", "releases", "mapped MiB");
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    const counts& c = r.steps[i];
    // Steps count from 1; a row past the last step end holds the events after it.
    std::string step = i < r.step_count ? std::to_string(i + 1) : "rest";
    std::printf("  %4s %7llu %6llu %7llu %6llu %7llu %8llu %10llu\n", step.c_str(), (unsigned long long)c.retries, (unsigned long long)c.fences,
                (unsigned long long)c.creates, (unsigned long long)c.maps, (unsigned long long)c.unmaps, (unsigned long long)c.releases,
                (unsigned long long)(c.mapped_bytes >> 20));
  }
  const counts& t = r.total;
  std::printf("  %4s %7llu %6llu %7llu %6llu %7llu %8llu %10llu\n", "all", (unsigned long long)t.retries, (unsigned long long)t.fences,
              (unsigned long long)t.creates, (unsigned long long)t.maps, (unsigned long long)t.unmaps, (unsigned long long)t.releases,
              (unsigned long long)(t.mapped_bytes >> 20));
  std::printf("  retried at:");
  for (auto [event, size] : r.retry_events) std::printf(" %zu(%llu MiB)", event, (unsigned long long)(size >> 20));
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: replay_pressure SNAPSHOT DEMAND_BYTES [FACTOR...]\n");
    return 2;
  }
  auto read = read_snapshot_file(argv[1]);
  if (!read.ok()) {
    std::fprintf(stderr, "replay_pressure: cannot read %s\n", argv[1]);
    return 2;
  }
  const snapshot snap = std::move(read).value();
  std::uint64_t demand = std::strtoull(argv[2], nullptr, 10);
  std::vector<std::uint64_t> step_ends;
  for (const step_end& end : inspect(snap).steps) step_ends.push_back(end.event);
  std::vector<double> factors;
  for (int i = 3; i < argc; ++i) factors.push_back(std::strtod(argv[i], nullptr));
  if (factors.empty()) factors = {1.02, 1.05, 1.10};
  {
    replay_options torch;
    allocator_settings expandable = settings_of(snap);
    expandable.expandable_segments = true;
    torch.settings = expandable;
    replay_options policy;
    policy.allocator = rlmem_policy_options{};
    for (auto [label, options] : {std::pair{"torch, expandable segments (model)", torch}, std::pair{"rlmem policy", policy}}) {
      std::uint64_t smallest = min_capacity(snap, options);
      std::printf("smallest completing capacity, %s: %llu B (%.4fx)\n", label, (unsigned long long)smallest,
                  static_cast<double>(smallest) / static_cast<double>(demand));
    }
  }
  for (double factor : factors) {
    std::uint64_t cap = static_cast<std::uint64_t>(static_cast<double>(demand) * factor);
    std::printf("== cap %.3fx = %llu B\n", factor, (unsigned long long)cap);
    trace_simulation_options torch;
    torch.capacity_bytes = cap;
    allocator_settings expandable = settings_of(snap);
    expandable.expandable_segments = true;
    torch.settings = expandable;
    print("torch, expandable segments (model)", run(snap, torch, step_ends));
    trace_simulation_options policy;
    policy.capacity_bytes = cap;
    policy.allocator = rlmem_policy_options{};
    print("rlmem policy", run(snap, policy, step_ends));
  }
  return 0;
}
