// SPDX-License-Identifier: MIT
#pragma once
// Building blocks of inspect() that need no replay: step boundaries, leak detection over
// per-step site series, categories of stacks, OOM verdicts from numbers.

#include "frames.hpp"

#include <rlmem/inspect/inspect.hpp>
#include <rlmem/snapshot/snapshot.hpp>

#include <re2/re2.h>

#include <cstdint>
#include <memory>
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
step_search find_step_ends(frame_index& frames, std::int64_t device, std::span<const trace_event> events,
                           const std::string& step_marker);

/// The step marker as RE2 compiles it (RE2 syntax, matched anywhere in "path:line function"). Fails
/// with step_marker_too_long or invalid_step_marker and, in `detail`, the reason alone ("it is
/// 5,000 bytes long; ...", RE2's own words), which each caller puts in its own sentence.
result<std::unique_ptr<re2::RE2>, inspect_errc> compile_step_marker(const std::string& pattern);

/// A site's live bytes and allocation count at the step ends where they changed: step 0 is the
/// trace start, and the site holds its figures until its next change (0 before the first).
/// Sparse, so recording costs O(changes), not O(sites x steps).
struct site_series {
  allocation_site site;
  std::vector<std::uint32_t> steps;  ///< ascending
  std::vector<std::int64_t> bytes;
  std::vector<std::uint64_t> counts;
};
/// Leaks, one per cause (see `leak`), largest growth first, at most `max_leaks`: the sites whose
/// live bytes keep growing from step to step (leak_trend_of over their step ends), grouped by
/// their representative stacks' frames. `step_ends` counts the step ends with the trace start;
/// `growing` gets how many causes grow before the cut.
/// O(changes + growing sites x stack depth x log + max_leaks x step_ends + lines): only a
/// series' last run of consecutive changes can grow.
std::vector<leak> detect_leaks(frame_index& frames, const std::vector<site_series>& series, std::size_t step_ends,
                               std::size_t max_leaks, std::size_t& growing);

/// The step-end growth of allocated memory from step 1 to the last, and the part of it the
/// named leaks explain (their live bytes over the same step ends). O(steps + leaks).
leak_summary summarize_leaks(std::span<const step_end> steps, const std::vector<leak>& leaks);

/// Categories of stacks under a table of rules. Each distinct frame's text is matched against
/// the rules once (O(rules x text) per frame), then a stack costs O(its frames).
class category_matcher {
 public:
  category_matcher(frame_index& frames, const std::vector<category_rule>& rules);

  /// The category of a stack; stack 0 is before_recording when it was allocated before
  /// recording began, gradients otherwise (the autograd engine's threads have no Python frames).
  /// The one place these two are decided: inspect's and the views' caches call it for stack 0.
  memory_category categorize(stack_id stack, bool before_trace);

 private:
  static constexpr std::uint32_t no_rule = UINT32_MAX;
  struct frame_matches {
    bool known = false;
    std::uint32_t first_any_frame_rule = no_rule;  // index into rules_
    std::uint32_t first_frame_rule = no_rule;
  };
  const frame_matches& matches_of(frame_id id);

  frame_index& frames_;
  const std::vector<category_rule>& rules_;
  std::vector<frame_matches> matches_;  // by frame id, filled on first use
  std::string text_;                    // reused for each frame's match text
};

/// What the simulations behind OOM verdicts need from inspect.
struct oom_simulation_plan {
  std::vector<std::uint64_t> oom_events;  ///< every oom event of the trace, ascending
  std::vector<bool> reported;             ///< by oom_events: given forensics, and so proofs
  std::vector<std::uint64_t> step_ends;   ///< ascending
  std::int64_t limit_bytes = 0;           ///< the judged limit, the simulations' capacity
  /// Without --limit, the top of the range the recording shows: a remedy not serving at
  /// limit_bytes is searched for the smallest limit up to this that it serves at. 0: no search.
  std::int64_t search_high_bytes = 0;
  std::size_t search_passes = 0;  ///< most passes each remedy's search runs (limit_search_passes)
  bool expandable_trace = false;          ///< recorded with expandable segments
};

/// The proofs of every reported OOM (empty for the others), one per oom_remedy in its order:
/// each setting is simulated over the whole trace once under limit_bytes (through
/// trace_simulation.hpp), whatever the number of OOMs. An OOM's request is served when the
/// simulation gets past it and past every request up to the next OOM (or the end of the
/// trace). With search_high_bytes, a setting that does not serve an OOM at limit_bytes is
/// simulated at the top of the range and, serving there, bisected to 2 MiB: at most
/// log2(range / 2 MiB) more passes per setting and OOM, the settings searched in parallel.
std::vector<std::vector<oom_proof>> prove_ooms(const snapshot& snap, std::int64_t device, std::span<const trace_event> events,
                                               const oom_simulation_plan& plan);

/// Fills the verdict, proof line, explanation and advice of an OOM whose numbers and proofs
/// are set: fragmentation when a setting tried was served (or, when no simulation could run,
/// when the live bytes and the request fit under the bracket's low end), capacity otherwise.
void judge_oom(oom_report& report, const oom_limit& limit);

}  // namespace rlmem::detail
