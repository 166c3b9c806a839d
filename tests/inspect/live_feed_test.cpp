// SPDX-License-Identifier: MIT
// The live set replayed on its own thread hands over exactly what the same replay in line
// gives, in event order, whatever the chunk and ring sizes; a reader that stops early or asks
// too far neither hangs nor reads past the events.

#include "fixtures.hpp"
#include "inspect/live_feed.hpp"

#include <rlmem/inspect/inspect.hpp>
#include <rlmem/base/saturating.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace rlmem {

using testing::fixture;

namespace {

struct trace_of_device {
  const snapshot* snap;
  std::int64_t device;
  std::span<const trace_event> events;
};

trace_of_device trace_in(const std::string& name) {
  const snapshot& snap = fixture(name);
  std::int64_t device = default_device(snap);
  const device_trace* trace = snap.trace_for(device);
  return {&snap, device, trace ? snap.events_of(*trace) : std::span<const trace_event>{}};
}

// The fields each struct is compared by (none of them has ==).
auto fields_of(const allocation_change& c) {
  return std::tie(c.bytes, c.count, c.stack, c.before_trace, c.replaced_bytes, c.replaced_stack, c.replaced_before_trace);
}
auto fields_of(const live_block& b) { return std::tie(b.bytes, b.stack, b.pending_free, b.before_trace); }
auto fields_of(const free_space& f) { return std::tie(f.segment_bytes, f.stream, f.largest_free_bytes, f.free_bytes); }

bool same_change(const allocation_change& a, const allocation_change& b) { return fields_of(a) == fields_of(b); }

template <class T>
bool same_all(const std::vector<T>& a, const std::vector<T>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const T& x, const T& y) { return fields_of(x) == fields_of(y); });
}

// Every event's change and figures, the moments and the final state, from the feed and from
// live_set::apply in line.
void expect_feed_matches_replay(const std::string& name, std::size_t chunk_events, std::size_t ring_chunks,
                                bool on_thread = true) {
  SCOPED_TRACE(name + (on_thread ? ", on a thread" : ", in line") + ", chunks of " + std::to_string(chunk_events) +
               ", ring of " + std::to_string(ring_chunks));
  trace_of_device trace = trace_in(name);
  ASSERT_GT(trace.events.size(), 100u);
  const allocator_settings recorded = settings_of(*trace.snap);
  const live_set start = live_set::at_trace_start(*trace.snap, trace.device, trace.events, recorded);
  const std::int64_t reserved_at_start = reserved_at_trace_start(*trace.snap, trace.device, trace.events);
  const std::size_t count = trace.events.size();
  std::vector<std::size_t> moments = {count - 1, count / 3, 0, count / 3};  // unsorted, with a repeat
  std::vector<std::int64_t> allocated(count), reserved(count);
  auto started = detail::live_feed::start(start, trace.events, reserved_at_start, allocated, reserved, moments, on_thread,
                                          chunk_events, ring_chunks);
  ASSERT_TRUE(started.ok()) << started.failure().detail;
  detail::live_feed& feed = *started.value();

  live_set state = start;
  std::int64_t reserved_now = reserved_at_start;
  std::size_t differences = 0;
  for (std::size_t i = 0; i < count; ++i) {
    allocation_change expected = state.apply(trace.events[i]);
    reserved_now = saturating_add(reserved_now, reserved_delta(trace.events[i]));
    const allocation_change& seen = feed.change(i);
    if (!same_change(seen, expected) || allocated[i] != state.allocated_bytes() || reserved[i] != reserved_now) {
      if (++differences <= 3) {
        ADD_FAILURE() << "event " << i << ": expected change " << expected.bytes << " B, allocated " << state.allocated_bytes()
                      << ", reserved " << reserved_now << "; saw " << seen.bytes << " B, " << allocated[i] << ", " << reserved[i];
      }
    }
    if (i == count / 3 || i == 0 || i == count - 1) {
      EXPECT_TRUE(same_all(feed.moment(i).blocks, detail::live_blocks_of(state))) << "live blocks after event " << i;
      EXPECT_TRUE(same_all(feed.moment(i).spaces, state.free_spaces())) << "free spaces after event " << i;
    }
  }
  EXPECT_EQ(differences, 0u);
  const live_set& after_all = feed.final_state();
  EXPECT_TRUE(same_all(detail::live_blocks_of(after_all), detail::live_blocks_of(state)));
  EXPECT_EQ(after_all.allocated_bytes(), state.allocated_bytes());
  EXPECT_EQ(after_all.inconsistencies(), state.inconsistencies());
  EXPECT_EQ(after_all.frees_of_earlier_blocks(), state.frees_of_earlier_blocks());
}

}  // namespace

TEST(live_feed, hands_over_the_replay_in_line_of_real_traces_whatever_the_chunking) {
  // A leak over GRPO steps (blocks live at trace start; 251,183 events), expandable segments,
  // an OOM. Small chunks make the two threads wait on each other often; a handover costs a
  // wake-up, so the smallest go with the shortest trace.
  for (const char* name : {"grpo_leak_logits.pickle.zst", "frag_expandable.pickle.zst", "frag_default_oom.pickle.zst"}) {
    expect_feed_matches_replay(name, 16384, 4);  // inspect's sizes
    expect_feed_matches_replay(name, 1009, 2);
  }
  expect_feed_matches_replay("frag_default_oom.pickle.zst", 7, 2);
  expect_feed_matches_replay("frag_default_oom.pickle.zst", 1, 1);  // one change at a time
  // One usable core: no thread, each event applied as it is asked for.
  expect_feed_matches_replay("grpo_leak_logits.pickle.zst", 16384, 4, false);
}

// Asking past the last event, out of order or for a moment not kept breaks a documented
// precondition (the forward pass never does): only what a reader may do is tested here.
TEST(live_feed, a_reader_that_stops_early_or_reads_to_the_end_neither_hangs_nor_reads_beyond) {
  trace_of_device trace = trace_in("grpo_leak_logits.pickle.zst");
  const live_set start = live_set::at_trace_start(*trace.snap, trace.device, trace.events, settings_of(*trace.snap));
  std::vector<std::int64_t> allocated(trace.events.size()), reserved(trace.events.size());
  {
    // The thread fills its ring and waits; the destructor must stop it.
    auto feed = detail::live_feed::start(start, trace.events, 0, allocated, reserved, {}, true, 5, 2);
    ASSERT_TRUE(feed.ok()) << feed.failure().detail;
    (void)feed.value()->change(0);
    (void)feed.value()->change(1);
  }
  for (bool on_thread : {true, false}) {
    auto feed = detail::live_feed::start(start, trace.events, 0, allocated, reserved, {}, on_thread, 64, 2);
    ASSERT_TRUE(feed.ok()) << feed.failure().detail;
    for (std::size_t i = 0; i < trace.events.size(); ++i) (void)feed.value()->change(i);
    EXPECT_EQ(feed.value()->final_state().allocated_bytes(), allocated.back()) << (on_thread ? "on a thread" : "in line");
  }
}

TEST(live_feed, refuses_timeline_arrays_that_do_not_hold_one_figure_per_event) {
  trace_of_device trace = trace_in("grpo_leak_logits.pickle.zst");
  const live_set start = live_set::at_trace_start(*trace.snap, trace.device, trace.events, settings_of(*trace.snap));
  std::vector<std::int64_t> short_array(trace.events.size() - 1), right(trace.events.size());
  for (bool short_allocated : {true, false}) {
    auto feed = short_allocated ? detail::live_feed::start(start, trace.events, 0, short_array, right, {})
                                : detail::live_feed::start(start, trace.events, 0, right, short_array, {});
    EXPECT_FALSE(feed.ok()) << "expected arrays one figure short refused";
    EXPECT_EQ(feed.code(), inspect_errc::timeline_size_mismatch) << error_name(feed.code());
    EXPECT_EQ(feed.failure().detail, "live_feed: the allocated and reserved arrays must hold one figure per event");
  }
}

}  // namespace rlmem
