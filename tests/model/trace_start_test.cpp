// SPDX-License-Identifier: MIT
// The state at trace start as the simulation rebuilds it from the dump and the trace undone,
// checked through the segment events the model then makes.

#include "byte_units.hpp"
#include "inspect/crafted.hpp"

#include <rlmem/model/trace_simulation.hpp>

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace rlmem {

namespace {
using testing::sizes::mib;

std::string describe(const std::vector<model_segment_event>& events) {
  std::ostringstream out;
  for (const model_segment_event& event : events) out << (event.alloc ? " +" : " -") << event.size / mib << " MiB at " << event.address / mib << " MiB;";
  return out.str();
}
}  // namespace

// Issue 27, item 6 (kkaitlyn111/cs336-a2-systems, 7 of its traces): recording began, then
// torch.cuda.empty_cache() freed the cached 20 MiB segments, and cudaMalloc later gave one of their
// addresses to a 2 MiB small-pool segment, the one the dump holds there. Taking that segment's pool
// for the freed one put a 20 MiB segment in the small pool, and empty_cache() then released the
// 2 MiB segment first (the small pool is released after the large one, in size order).
TEST(trace_start, a_freed_segment_keeps_its_pool_when_a_later_segment_of_the_other_pool_takes_its_address) {
  testing::crafted_snapshot made;
  stack_id emptied = made.stack({made.frame("emptyCache"), made.frame("empty_cache", "torch/cuda/memory.py")});
  const std::uint64_t reused = 256 * mib;  // a 20 MiB segment, then a 2 MiB small-pool one
  const std::uint64_t cached = 320 * mib;  // a 2 MiB small-pool segment, cached and free
  made.segment(reused, 2 * mib, 512);      // the dump: the small segment with its one block
  made.event(trace_action::segment_free, reused, 20 * mib, emptied);
  made.event(trace_action::segment_free, cached, 2 * mib, emptied);
  made.event(trace_action::segment_alloc, reused, 2 * mib);
  made.event(trace_action::alloc, reused, 512);
  snapshot snap = made.build();
  snap.strings.emplace_back("small");
  snap.segments[0].segment_type = static_cast<string_id>(snap.strings.size() - 1);

  trace_simulation simulated = simulate_trace(snap, {});
  ASSERT_EQ(simulated.unsupported, "");
  const std::vector<model_segment_event> recorded = {{false, reused, 20 * mib}, {false, cached, 2 * mib}, {true, reused, 2 * mib}};
  ASSERT_EQ(simulated.segment_events.size(), recorded.size()) << "expected" << describe(recorded) << " saw" << describe(simulated.segment_events);
  for (std::size_t i = 0; i < recorded.size(); ++i) {
    EXPECT_EQ(simulated.segment_events[i].alloc, recorded[i].alloc) << "event " << i << ": expected" << describe(recorded) << " saw" << describe(simulated.segment_events);
    EXPECT_EQ(simulated.segment_events[i].size, recorded[i].size) << "event " << i << ": expected" << describe(recorded) << " saw" << describe(simulated.segment_events);
    EXPECT_EQ(simulated.segment_events[i].address, recorded[i].address) << "event " << i << ": expected" << describe(recorded) << " saw" << describe(simulated.segment_events);
  }
  EXPECT_EQ(simulated.peak_reserved_bytes, static_cast<std::int64_t>(22 * mib)) << "the two cached segments at trace start";
}

}  // namespace rlmem
