// SPDX-License-Identifier: MIT
#pragma once
// One pass of a snapshot's trace through an allocator policy (the caching allocator model, or
// the rlmem policy) over the fake device: the model starts from the state the recording had at
// trace start (the live set's blocks in their segments), new segments ask the device for the
// addresses the recording got, and every alloc, free, empty_cache() and oom of the trace
// is fed to it in order. The caller says what to watch: replay compares the segment events with
// the recording's and searches capacities; inspect judges OOMs under other settings. Part of the
// model layer, so both can call it.

#include <rlmem/model/allocator_choice.hpp>
#include <rlmem/policy/allocator_policy.hpp>
#include <rlmem/model/allocator_settings.hpp>
#include <rlmem/model/caching_allocator.hpp>
#include <rlmem/device/fake_device.hpp>
#include <rlmem/snapshot/snapshot.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace rlmem {

/// What simulate_trace() replays and under which policy.
struct trace_simulation_options {
  std::int64_t device = -1;                    ///< -1: the device with the longest trace
  std::optional<allocator_settings> settings;  ///< none: the snapshot's own (settings_of)
  std::uint64_t capacity_bytes = 0;            ///< set_per_process_memory_fraction as bytes; 0 = no limit
  /// A what-if: torch.cuda.empty_cache() is called right before each of these events (indices
  /// into the device's trace, ascending), besides the calls the recording made.
  std::vector<std::uint64_t> empty_cache_before;
  /// The policy that decides, over a fake device: torch's allocator under `settings`, or
  /// another (`settings` then only round requests for the OOM list); its capacity is
  /// `capacity_bytes`.
  allocator_choice allocator;
};

/// A request the model could not serve.
struct simulated_oom {
  std::uint64_t event = 0;            ///< index of the alloc or oom in the device's trace
  std::uint64_t requested_bytes = 0;  ///< rounded under the simulated settings
  std::int64_t allocated_bytes = 0;   ///< the model's, after its failed attempts
  std::int64_t reserved_bytes = 0;    ///< the model's, after its failed attempts
  bool recorded = false;              ///< a recorded oom: the recording could not serve it either
};

/// The model after one step of the simulation, as an observer sees it.
struct simulation_step {
  /// Trace events applied so far: 0 is the state at trace start, n the state after event n - 1.
  std::size_t events_applied = 0;
  const allocator_policy& model;  ///< the policy that decides, valid during the call only
  /// The device the model runs on: what it holds is what the model reserved.
  const fake_device& device;
  /// The block the event's alloc got; nullptr for other events and at trace start.
  const model_block* allocated = nullptr;
  /// The segment allocations, maps, frees and unmaps this event made (none at trace start).
  std::span<const model_segment_event> segment_events_made;
};

/// Called at trace start and after every event the model applied.
using simulation_observer = std::function<void(const simulation_step&)>;

/// What one pass did.
struct trace_simulation {
  std::string unsupported;      ///< set when the trace cannot be simulated faithfully, and why; nothing else is
  std::int64_t device = 0;      ///< the device whose trace ran (options' device, or the default)
  allocator_settings settings;  ///< what the model ran under
  bool expandable_trace = false;  ///< the recording used expandable segments
  /// Events applied; short of the trace's size when the simulation ended at an OOM.
  std::uint64_t events_applied = 0;
  /// Every request the model could not serve, in trace order. A recorded oom the model fails too
  /// is applied and the simulation goes on, as the recording did (the program caught the
  /// error); a request the recording served ends the simulation and is the last entry.
  std::vector<simulated_oom> ooms;
  /// The model served a request the recording failed (a recorded oom event).
  bool served_a_recorded_oom = false;
  std::int64_t peak_allocated_bytes = 0;  ///< the model's highest, trace start included
  std::int64_t peak_reserved_bytes = 0;   ///< the model's highest, trace start included
  std::uint64_t segments = 0;        ///< cudaMalloc segments held at the end
  std::uint64_t alloc_retries = 0;   ///< num_alloc_retries
  std::vector<model_segment_event> segment_events;  ///< every one the model made, in order
  std::vector<std::string> notes;    ///< what a reader of the result should know
};

/// The per-process memory limit (set_per_process_memory_fraction) a recording ran under, as far
/// as its trace proves it: the allocator refused to grow (it released cached segments inside a
/// malloc, frames not naming empty_cache, before taking a new one), or a recorded oom left CUDA
/// free memory the request would have fit in.
struct recorded_limit {
  /// The limit is at least this: the recording's peak reserved, or reserved plus the allocation
  /// size alloc_block let through to map expandable pages, when larger.
  std::uint64_t low_bytes = 0;
  std::uint64_t high_bytes = 0;  ///< reserved plus what a refused request needed: the limit is below this
  std::uint64_t first_evidence_event = 0;  ///< the first refusal in the trace
  std::uint64_t high_event = 0;            ///< the refusal that sets high_bytes
  /// Under garbage_collection_threshold a release run is the collector's, which starts at the
  /// threshold x the limit: `high_bytes` is then reserved / threshold.
  bool garbage_collection = false;
  /// The limit to replay under: the low end reproduces every refusal the trace shows (the
  /// recording never reserved more, and refused at least this); under the collector, the high end
  /// less one byte, as the collector's releases start at a share of the limit.
  std::uint64_t replay_bytes() const noexcept { return garbage_collection ? high_bytes - 1 : low_bytes; }
};

/// The fake device a simulation runs on: 1 TiB, more than any card, until a recorded oom tells
/// how much the recording's had free; 2 MiB granularity, which every segment size and page of
/// PyTorch's allocator is a multiple of (allocator_rules.hpp); addresses the recording did not
/// give start at 2^56, above any a GPU hands out. No host pages and no log: its memory follows
/// the trace's live segments and pages, not the simulated GPU.
fake_device_options simulated_device_options();

/// The limit `device`'s trace proves it ran under, none when it shows no refusal or its bracket
/// is empty (the trace contradicts a single limit). O(events).
std::optional<recorded_limit> infer_recorded_limit(const snapshot& snap, std::int64_t device);

/// Simulates one device's trace; O(events log blocks). Never guesses: a trace it cannot model
/// (recorded with expandable segments but simulated without, inconsistent with its segments)
/// comes back with `unsupported` set. `observe`, when given, sees the trace start and every
/// applied event.
trace_simulation simulate_trace(const snapshot& snap, const trace_simulation_options& options,
                                const simulation_observer& observe = {});

}  // namespace rlmem
