// SPDX-License-Identifier: MIT
#pragma once
// Replays a snapshot's allocation trace through a model of PyTorch's CUDA caching allocator
// (native backend, torch 2.5 to 2.11) on a simulated device, and answers what-ifs: another
// capacity, other PYTORCH_CUDA_ALLOC_CONF settings, the smallest capacity that completes. The
// allocator's settings, rules and simulation are the model layer's (include/rlmem/model/model.hpp);
// a replay is one trace simulation (trace_simulation.hpp) compared with the recording.

#include <rlmem/model/allocator_settings.hpp>
#include <rlmem/snapshot/snapshot.hpp>
#include <rlmem/model/trace_simulation.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rlmem {

/// What replay() replays, under which limit and policy.
struct replay_options {
  std::int64_t device = -1;             ///< -1: the device with the longest trace
  std::optional<allocator_settings> settings;  ///< none: the snapshot's own
  std::uint64_t capacity_bytes = 0;     ///< set_per_process_memory_fraction as bytes; 0 = unlimited
  /// With capacity_bytes 0: replay under the limit the trace proves it ran at
  /// (infer_recorded_limit), if any, else without one.
  bool infer_capacity = true;
  /// Another policy than torch's allocator is a what-if: no fidelity to compare.
  allocator_choice allocator;
};

/// The first request the model could not serve.
struct replay_oom {
  std::uint64_t event = 0;              ///< index of the alloc in the trace
  std::uint64_t requested_bytes = 0;    ///< rounded
  std::int64_t allocated_bytes = 0;     ///< the model's after its failed attempts
  std::int64_t reserved_bytes = 0;      ///< the model's after its failed attempts (cache released)
  bool recorded = false;                ///< the recording failed it too and went on: so did the replay
};

/// How well the replay reproduced what the recording did, under the recording's settings.
struct replay_fidelity {
  bool applicable = false;              ///< the replay ran under the recorded settings
  std::uint64_t segment_events_expected = 0;  ///< the recording's segment allocs, maps, frees and unmaps in the events replayed
  std::uint64_t segment_events_matched = 0;  ///< in order, by action and size, until the first mismatch
  std::string first_mismatch;           ///< "" when every segment event matched
};

/// What one replay did.
struct replay_result {
  bool completed = false;               ///< every request of the trace was served
  std::optional<replay_oom> oom;        ///< the first request not served, recorded ooms included; none when completed
  std::string unsupported;              ///< set when the trace cannot be replayed faithfully, and why
  std::int64_t peak_allocated_bytes = 0;  ///< the model's highest over the events replayed
  std::int64_t peak_reserved_bytes = 0;   ///< the model's highest over the events replayed
  std::uint64_t segments = 0;           ///< segments at the end
  std::uint64_t num_alloc_retries = 0;  ///< requests that released the cache and tried again (torch's num_alloc_retries)
  std::uint64_t events_replayed = 0;    ///< trace events applied; short of the trace when an unrecorded OOM ended it
  std::uint64_t capacity_bytes = 0;     ///< the limit it ran under; 0 = none
  std::optional<recorded_limit> inferred_limit;  ///< set when that limit is the one the trace proves
  bool recording_ended_in_oom = false;  ///< the model served a request the recording failed (a recorded oom)
  replay_fidelity fidelity;             ///< against the recording's segment events; not applicable under other settings or policies
  std::vector<std::string> notes;       ///< what the reader should know about this replay
};

/// Replays one device's trace. Never guesses: a trace it cannot model (recorded with expandable
/// segments but replayed without, inconsistent with its segments) comes back with `unsupported`.
replay_result replay(const snapshot& snap, const replay_options& options = {});

/// The smallest capacity, to 2 MiB, under which the trace completes with `settings`
/// (0 when it does not complete even without a limit).
std::uint64_t min_capacity(const snapshot& snap, const replay_options& options);

/// One row of `rlmem replay --compare`.
struct settings_comparison {
  std::string label;           ///< "recorded", "expandable_segments:True", "max_split_size_mb:128", "floor"
  allocator_settings settings;  ///< the settings of this row
  replay_result result;        ///< under options.capacity_bytes
  std::uint64_t min_capacity_bytes = 0;  ///< min_capacity() under these settings; 0 when it does not complete unlimited
  /// Peak allocated over the whole trace, replayed without a limit: what no setting can go below
  /// (`result`'s peak stops at an OOM under a capacity).
  std::int64_t floor_bytes = 0;
};

/// The recorded settings, expandable segments, several max_split_size values, and the floor
/// (peak allocated: what no setting can go below).
std::vector<settings_comparison> compare_settings(const snapshot& snap, const replay_options& options);

}  // namespace rlmem
