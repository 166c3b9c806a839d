// SPDX-License-Identifier: MIT
// Every decision the rlmem policy makes on a recording, reduced to one line per run: the trace
// replayed through the policy (free pages cached, and released at once) uncapped and under caps
// of 1.00x-1.10x of its peak allocated (near the demand the cache is released and requests
// fail), with a digest of every address handed out, every page mapped and unmapped, and the
// allocated and reserved bytes, segments and retries after every event. Two builds that print the same lines placed everything alike: a change to
// the policy's bookkeeping must not change them (tools/model/compare_policy_builds.sh).
//
//   policy_digest SNAPSHOT

#include <rlmem/snapshot/snapshot_reader.hpp>
#include <rlmem/model/trace_simulation.hpp>

#include <cstdint>
#include <cstdio>

namespace {

using namespace rlmem;

// FNV-1a over 64-bit words: any changed value, or order, changes it.
struct digest {
  std::uint64_t value = 14695981039346656037ull;
  void add(std::uint64_t word) {
    for (int byte = 0; byte < 8; ++byte) {
      value ^= (word >> (8 * byte)) & 0xff;
      value *= 1099511628211ull;
    }
  }
};

struct run_summary {
  trace_simulation result;
  digest decisions;
};

run_summary run(const snapshot& snap, bool release_free_pages, std::uint64_t capacity_bytes) {
  trace_simulation_options options;
  rlmem_policy_options policy;
  policy.release_free_pages = release_free_pages;
  options.allocator = policy;
  options.capacity_bytes = capacity_bytes;
  run_summary summary;
  summary.result = simulate_trace(snap, options, [&summary](const simulation_step& step) {
    digest& made = summary.decisions;
    made.add(step.events_applied);
    if (step.allocated != nullptr) {
      made.add(step.allocated->ptr);
      made.add(step.allocated->size);
    }
    for (const model_segment_event& event : step.segment_events_made) {
      made.add(event.alloc ? 1 : 0);
      made.add(event.address);
      made.add(event.size);
    }
    made.add(static_cast<std::uint64_t>(step.model.allocated_bytes()));
    made.add(static_cast<std::uint64_t>(step.model.reserved_bytes()));
    made.add(step.model.segments());
    made.add(step.model.alloc_retries());
  });
  return summary;
}

void print(const char* name, bool release_free_pages, const char* cap, const run_summary& summary) {
  const trace_simulation& result = summary.result;
  std::printf("%s release_free_pages=%d cap=%s: events %llu, ooms %zu, retries %llu, peak reserved %lld, segment events %zu, "
              "digest %016llx%s%s\n", name,
              release_free_pages ? 1 : 0, cap, (unsigned long long)result.events_applied, result.ooms.size(),
              (unsigned long long)result.alloc_retries,
              (long long)result.peak_reserved_bytes, result.segment_events.size(), (unsigned long long)summary.decisions.value,
              result.unsupported.empty() ? "" : ", unsupported: ", result.unsupported.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: policy_digest SNAPSHOT\n");
    return 2;
  }
  auto read = read_snapshot_file(argv[1]);
  if (!read.ok()) {
    std::fprintf(stderr, "policy_digest: cannot read %s\n", argv[1]);
    return 2;
  }
  const snapshot snap = std::move(read).value();
  for (bool release_free_pages : {false, true}) {
    run_summary uncapped = run(snap, release_free_pages, 0);
    print(argv[1], release_free_pages, "none", uncapped);
    if (!uncapped.result.unsupported.empty()) continue;
    const auto demand = static_cast<std::uint64_t>(uncapped.result.peak_allocated_bytes);
    for (auto [cap, hundredths] : {std::pair{"1.00x", 100}, std::pair{"1.02x", 102}, std::pair{"1.05x", 105}, std::pair{"1.10x", 110}}) {
      print(argv[1], release_free_pages, cap, run(snap, release_free_pages, demand * hundredths / 100));
    }
  }
  return 0;
}
