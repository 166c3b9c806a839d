// SPDX-License-Identifier: MIT
// Replay speed: trace events per second through the caching allocator model, and the time of
// a --min-capacity bisection.

#include <rlmem/replay/replay.hpp>
#include <rlmem/snapshot/snapshot_reader.hpp>

#include <benchmark/benchmark.h>

#include <map>
#include <string>

namespace {

const rlmem::snapshot& loaded(const std::string& name) {
  static std::map<std::string, rlmem::snapshot> cache;
  auto found = cache.find(name);
  if (found != cache.end()) return found->second;
  auto read = rlmem::read_snapshot_file(std::string(RLMEM_TESTDATA_DIR) + "/snapshots/" + name + ".pickle.zst");
  return cache.emplace(name, std::move(read).value()).first->second;
}

void replay_trace(benchmark::State& state, const std::string& name) {
  const rlmem::snapshot& snap = loaded(name);
  std::uint64_t events = 0;
  for (auto _ : state) {
    rlmem::replay_result result = rlmem::replay(snap);
    if (!result.unsupported.empty()) state.SkipWithError(result.unsupported.c_str());
    events += result.events_replayed;
    benchmark::DoNotOptimize(result);
  }
  state.counters["events_per_second"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}

void min_capacity_search(benchmark::State& state, const std::string& name) {
  const rlmem::snapshot& snap = loaded(name);
  for (auto _ : state) benchmark::DoNotOptimize(rlmem::min_capacity(snap, {}));
}

int register_all() {
  for (const char* name : {"frag_default", "grpo_clean", "grpo_leak_logits"}) {
    benchmark::RegisterBenchmark((std::string("replay/") + name).c_str(), replay_trace, std::string(name))->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("min_capacity/frag_default", min_capacity_search, std::string("frag_default"))->Unit(benchmark::kMillisecond);
  return 0;
}
const int registered = register_all();

}  // namespace
