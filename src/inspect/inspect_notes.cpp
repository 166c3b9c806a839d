// SPDX-License-Identifier: MIT
// The notes inspect() adds after its analyses: what the steps, leaks, OOMs, times and the
// recording's own state leave unsaid or uncertain.

#include "stages.hpp"

#include <rlmem/base/format.hpp>

#include <string>

namespace rlmem::detail {

std::string human_count(std::uint64_t count, std::string_view noun) {
  return format_count(count) + " " + std::string(noun) + (count == 1 ? "" : "s");
}

void add_notes(const snapshot& snap, std::span<const trace_event> events, const note_facts& facts, inspection& result) {
  const step_search& steps = facts.steps;
  const timeline& line = result.memory;
  const std::size_t leaks_found = facts.leaks_found;
  const std::uint64_t oom_count = facts.ooms.count;
  const std::uint64_t ooms_first = facts.ooms.first;
  const std::uint64_t ooms_last = facts.ooms.last;
  if (!steps.problem.empty()) result.notes.push_back(steps.problem);
  if (result.steps.size() < 3 && !events.empty()) {
    result.notes.push_back(result.steps.empty()
                               ? "no training steps found (no ProfilerStep or optimizer annotations, no optimizer frames): pass "
                                 "--step-marker REGEX naming a frame that allocates at the start of each step"
                               : "only " + human_count(result.steps.size(), "step") + " found: leaks need 3 or more to be told from one-time growth");
  }
  if (leaks_found > result.leaks.size()) {
    result.notes.push_back(human_count(leaks_found, "leak") + " found: the " + format_count(result.leaks.size()) +
                           " growing fastest are listed");
  }
  if (oom_count > result.ooms.size()) {
    result.notes.push_back(human_count(oom_count, "oom event") + ": forensics for the first " + format_count(ooms_first) +
                           " and the last " + format_count(ooms_last) + " only");
  }
  if (!events.empty() && !result.times_known) {
    result.notes.push_back("the trace records no times (no time_us: torch 2.1 or older): durations and times are not shown");
  }
  if (line.blocks_live_at_start > 0) {
    result.notes.push_back("the trace starts with " + human_count(line.blocks_live_at_start, "block") +
                           " already allocated: recording began after they were made, or the ring buffer "
                           "(max_entries) dropped the events that made them");
  }
  if (line.frees_of_earlier_blocks > 0) {
    result.notes.push_back(human_count(line.frees_of_earlier_blocks, "free") + " in the trace release blocks allocated before it began");
  }
  if (const plain_value* overflowed = snap.setting("trace_alloc_overflowed"); overflowed && overflowed->boolean) {
    result.notes.push_back("torch reports the trace ring buffer overflowed: the oldest events are missing");
  }
  if (line.inconsistencies > 0) {
    result.notes.push_back(human_count(line.inconsistencies, "event") + " contradict the dump-time segments (allocated figures may be off)");
  }
  if (!facts.has_trace || events.empty()) {
    result.notes.push_back(snap.segments.empty() && snap.device_traces.empty()
                               ? "the snapshot is empty: no segments and no trace were recorded"
                               : "no trace events for this device: record with torch.cuda.memory._record_memory_history() to get a timeline");
  }
}

}  // namespace rlmem::detail
