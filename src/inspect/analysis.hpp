// SPDX-License-Identifier: MIT
#pragma once
// Building blocks of inspect() that need no replay: step boundaries, leak detection over
// per-step site series, categories of stacks, OOM verdicts from numbers.

#include <rlmem/inspect.hpp>
#include <rlmem/snapshot.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace rlmem::detail {

/// Step ends (event indices, ascending) and how they were found: an explicit frame marker,
/// ProfilerStep or optimizer annotations, or optimizer frames in the stacks.
struct step_search {
  std::string method;
  std::vector<std::uint64_t> ends;
  std::string problem;  ///< set when the marker regex is invalid
};
step_search find_step_ends(const snapshot& snap, std::int64_t device, std::span<const trace_event> events,
                           const std::string& step_marker);

/// Live bytes and allocation count of one site at the trace start and at each step end.
struct site_series {
  allocation_site site;
  std::vector<std::int64_t> bytes;
  std::vector<std::uint64_t> counts;
};
/// Sites whose live bytes keep growing from step to step, largest growth first.
std::vector<leak> detect_leaks(const std::vector<site_series>& series);

/// The category of a stack under `rules`; stack 0 is weights when it was allocated before
/// recording began, gradients otherwise (the autograd engine's threads have no Python frames).
memory_category categorize(const snapshot& snap, stack_id stack, bool before_trace, const std::vector<category_rule>& rules);

/// The text a rule pattern is matched against: "path:line function".
std::string frame_match_text(const snapshot& snap, frame_id id);

/// The segment size cudaMalloc would be asked for to serve `requested` bytes
/// (2 MiB for small requests, 20 MiB up to 10 MiB, else rounded up to 2 MiB).
std::uint64_t segment_size_for(std::uint64_t requested_bytes) noexcept;

/// Fills verdict, explanation and advice of an OOM whose numbers are set.
void judge_oom(oom_report& report, bool expandable_segments);

}  // namespace rlmem::detail
