// SPDX-License-Identifier: MIT
// The runtime's own allocation path on a real workload's requests, without a GPU: a recording's
// allocs and frees replayed through rlmem::runtime over the fake device, pass after pass (the
// steps after the first pass make no device call, as on the H100), timed per call. This is the
// CPU time rlmem adds to every tensor torch makes and frees (docs/runtime.md, "Where the time
// goes"); run it under `perf record` to see where inside.
//
//   runtime_trace_costs SNAPSHOT [PASSES] [CAPACITY_BYTES]

#include <rlmem/device/fake_device.hpp>
#include <rlmem/runtime/runtime.hpp>
#include <rlmem/snapshot/snapshot_reader.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include <vector>

namespace {

using namespace rlmem;
using clock_type = std::chrono::steady_clock;

// Requests by size: under a page (they share pages), a few pages, and large.
constexpr std::array<std::uint64_t, 4> class_limits{std::uint64_t{2} << 20, std::uint64_t{8} << 20, std::uint64_t{64} << 20, ~std::uint64_t{0}};
constexpr std::array<const char*, 4> class_names{"< 2 MiB", "2-8 MiB", "8-64 MiB", ">= 64 MiB"};

std::size_t class_of(std::uint64_t bytes) {
  std::size_t at = 0;
  while (bytes >= class_limits[at]) ++at;
  return at;
}

struct pass_costs {
  std::uint64_t allocations = 0, frees = 0, failed = 0;
  std::array<std::uint64_t, 4> allocations_by_class{}, frees_by_class{};
  std::array<double, 4> allocate_ns_by_class{}, free_ns_by_class{};
  double allocate_ns = 0, free_ns = 0;
  double per_allocation() const { return allocate_ns / static_cast<double>(std::max<std::uint64_t>(1, allocations)); }
  double per_free() const { return free_ns / static_cast<double>(std::max<std::uint64_t>(1, frees)); }
};

pass_costs replay_pass(runtime& rt, std::span<const trace_event> events) {
  pass_costs costs;
  std::unordered_map<std::uint64_t, std::uint64_t> ours;  // the recording's address -> the runtime's
  for (const trace_event& event : events) {
    if (event.action == trace_action::alloc) {
      auto start = clock_type::now();
      result<std::uint64_t, runtime_errc> made = rt.allocate(event.size, 0);
      double ns = std::chrono::duration<double, std::nano>(clock_type::now() - start).count();
      if (!made.ok()) {
        ++costs.failed;
        continue;
      }
      costs.allocate_ns += ns;
      ++costs.allocations;
      costs.allocate_ns_by_class[class_of(event.size)] += ns;
      ++costs.allocations_by_class[class_of(event.size)];
      ours[event.addr] = made.value();
    } else if (event.action == trace_action::free_completed) {
      auto found = ours.find(event.addr);
      if (found == ours.end()) continue;  // made before the recording began
      auto start = clock_type::now();
      (void)rt.free(found->second);
      double ns = std::chrono::duration<double, std::nano>(clock_type::now() - start).count();
      costs.free_ns += ns;
      ++costs.frees;
      costs.free_ns_by_class[class_of(event.size)] += ns;
      ++costs.frees_by_class[class_of(event.size)];
      ours.erase(found);
    }
  }
  for (const auto& [recorded, address] : ours) (void)rt.free(address);  // each pass starts empty
  return costs;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: runtime_trace_costs SNAPSHOT [PASSES] [CAPACITY_BYTES]\n");
    return 2;
  }
  auto read = read_snapshot_file(argv[1]);
  if (!read.ok()) {
    std::fprintf(stderr, "runtime_trace_costs: cannot read %s\n", argv[1]);
    return 2;
  }
  const snapshot snap = std::move(read).value();
  int passes = argc > 2 ? std::max(2, std::atoi(argv[2])) : 20;
  const device_trace* trace = snap.trace_for(default_device(snap));
  if (trace == nullptr) {
    std::fprintf(stderr, "runtime_trace_costs: %s has no trace\n", argv[1]);
    return 2;
  }
  fake_device gpu;
  runtime_options options;
  options.policy.reservation_bytes = gpu.config().total_bytes;
  if (argc > 3) options.policy.capacity_bytes = std::strtoull(argv[3], nullptr, 10);
  runtime rt(gpu, options);
  pass_costs later;
  for (int pass = 0; pass < passes; ++pass) {
    pass_costs costs = replay_pass(rt, snap.events_of(*trace));
    std::printf("pass %2d: %6llu allocations %7.0f ns each, %6llu frees %7.0f ns each, %llu failed\n", pass + 1,
                (unsigned long long)costs.allocations, costs.per_allocation(),
                (unsigned long long)costs.frees, costs.per_free(), (unsigned long long)costs.failed);
    if (pass == 0) continue;
    later.allocations += costs.allocations;
    later.frees += costs.frees;
    later.allocate_ns += costs.allocate_ns;
    later.free_ns += costs.free_ns;
    for (std::size_t at = 0; at < class_limits.size(); ++at) {
      later.allocations_by_class[at] += costs.allocations_by_class[at];
      later.frees_by_class[at] += costs.frees_by_class[at];
      later.allocate_ns_by_class[at] += costs.allocate_ns_by_class[at];
      later.free_ns_by_class[at] += costs.free_ns_by_class[at];
    }
  }
  std::printf("passes 2-%d: allocate %.0f ns, free %.0f ns per call\n", passes, later.per_allocation(), later.per_free());
  for (std::size_t at = 0; at < class_limits.size(); ++at) {
    auto each = [](double ns, std::uint64_t count) { return ns / static_cast<double>(std::max<std::uint64_t>(1, count)); };
    std::printf("  %-9s %8llu allocations %7.0f ns, %8llu frees %7.0f ns\n", class_names[at], (unsigned long long)later.allocations_by_class[at],
                each(later.allocate_ns_by_class[at], later.allocations_by_class[at]), (unsigned long long)later.frees_by_class[at],
                each(later.free_ns_by_class[at], later.frees_by_class[at]));
  }
  return 0;
}
