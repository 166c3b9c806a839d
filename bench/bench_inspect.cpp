// SPDX-License-Identifier: MIT
// Throughput of the reader and of the whole `inspect` on the real fixtures, in MB/s of
// uncompressed pickle. Inputs are decompressed into memory first, so disk and zstd are not timed.

#include <rlmem/inspect/inspect.hpp>
#include <rlmem/model/live_set.hpp>
#include <rlmem/report/report.hpp>
#include <rlmem/snapshot/snapshot_reader.hpp>

#include <benchmark/benchmark.h>
#include <zstd.h>

#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

const std::vector<std::byte>& pickle_bytes(const std::string& name) {
  static std::map<std::string, std::vector<std::byte>> cache;
  auto found = cache.find(name);
  if (found != cache.end()) return found->second;
  std::ifstream input(std::string(RLMEM_TESTDATA_DIR) + "/snapshots/" + name + ".pickle.zst", std::ios::binary);
  std::vector<char> compressed((std::istreambuf_iterator<char>(input)), std::istreambuf_iterator<char>());
  unsigned long long size = ZSTD_getFrameContentSize(compressed.data(), compressed.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) throw std::runtime_error("cannot size " + name);
  std::vector<std::byte> raw(size);
  std::size_t got = ZSTD_decompress(raw.data(), raw.size(), compressed.data(), compressed.size());
  if (ZSTD_isError(got) || got != size) throw std::runtime_error("cannot decompress " + name);
  return cache.emplace(name, std::move(raw)).first->second;
}

void parse(benchmark::State& state, const std::string& name) {
  const auto& bytes = pickle_bytes(name);
  for (auto _ : state) {
    auto read = rlmem::read_snapshot_bytes(bytes);
    if (!read.ok()) state.SkipWithError(rlmem::describe(read.failure()).c_str());
    benchmark::DoNotOptimize(read);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes.size()));
}

void whole_inspect(benchmark::State& state, const std::string& name) {
  const auto& bytes = pickle_bytes(name);
  for (auto _ : state) {
    auto read = rlmem::read_snapshot_bytes(bytes);
    if (!read.ok()) state.SkipWithError(rlmem::describe(read.failure()).c_str());
    rlmem::inspection result = rlmem::inspect(read.value());
    std::string text = rlmem::render_inspection_text(read.value(), result, name);
    benchmark::DoNotOptimize(text);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes.size()));
}

void analyses_only(benchmark::State& state, const std::string& name) {
  auto read = rlmem::read_snapshot_bytes(pickle_bytes(name));
  for (auto _ : state) {
    rlmem::inspection result = rlmem::inspect(read.value());
    benchmark::DoNotOptimize(result);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * pickle_bytes(name).size()));
}

// The live set carried through every event, alone: inspect's timeline pass runs it on a thread
// of its own, and it bounds that pass. Items are events.
void live_set_pass(benchmark::State& state, const std::string& name) {
  auto read = rlmem::read_snapshot_bytes(pickle_bytes(name));
  const rlmem::snapshot& snap = read.value();
  std::int64_t device = rlmem::default_device(snap);
  const rlmem::device_trace* trace = snap.trace_for(device);
  std::span<const rlmem::trace_event> events = trace ? snap.events_of(*trace) : std::span<const rlmem::trace_event>{};
  const rlmem::live_set start = rlmem::live_set::at_trace_start(snap, device, events, rlmem::settings_of(snap));
  for (auto _ : state) {
    rlmem::live_set state_now = start;
    for (const rlmem::trace_event& event : events) benchmark::DoNotOptimize(state_now.apply(event));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * events.size()));
}

const char* const fixtures[] = {"grpo_clean", "grpo_leak_logits", "frag_default", "frag_expandable"};

int register_all() {
  for (const char* name : fixtures) {
    benchmark::RegisterBenchmark((std::string("parse/") + name).c_str(), parse, std::string(name))->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("analyses/") + name).c_str(), analyses_only, std::string(name))->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("inspect/") + name).c_str(), whole_inspect, std::string(name))->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("live_set_pass/") + name).c_str(), live_set_pass, std::string(name))->Unit(benchmark::kMillisecond);
  }
  return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
