// SPDX-License-Identifier: MIT
// The live set against what the bundled recordings show: from the state it rebuilds at trace
// start, the allocator's rules applied to every event must arrive at the dump's own blocks, and
// the dump's blocks must be what the rules make of their requested sizes.

#include "fixtures.hpp"
#include "model/fixture_files.hpp"

#include <rlmem/model/allocator_rules.hpp>
#include <rlmem/model/live_set.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

namespace rlmem {

namespace {

struct dump_figures {
  std::int64_t allocated = 0;
  std::int64_t reserved = 0;
};

dump_figures dump_of(const snapshot& snap, std::int64_t device) {
  dump_figures figures;
  for (const segment& seg : snap.segments) {
    if (seg.device != device) continue;
    figures.allocated += static_cast<std::int64_t>(seg.allocated_size);
    figures.reserved += static_cast<std::int64_t>(seg.total_size);
  }
  return figures;
}

std::span<const trace_event> events_of(const snapshot& snap, std::int64_t device) {
  const device_trace* trace = snap.trace_for(device);
  return trace ? snap.events_of(*trace) : std::span<const trace_event>{};
}

}  // namespace

TEST(live_set, every_recording_replays_from_its_trace_start_to_its_dump) {
  for (const std::string& name : testing::snapshot_fixture_names()) {
    SCOPED_TRACE(name);
    const snapshot& snap = testing::fixture(name);
    std::int64_t device = default_device(snap);
    std::span<const trace_event> events = events_of(snap, device);
    ASSERT_FALSE(events.empty());
    live_set state = live_set::at_trace_start(snap, device, events, settings_of(snap));
    std::int64_t reserved = reserved_at_trace_start(snap, device, events);
    ASSERT_EQ(state.broken_invariant(invariant_scope::whole), std::nullopt) << "at trace start";
    for (std::size_t i = 0; i < events.size(); ++i) {
      state.apply(events[i]);
      reserved += reserved_delta(events[i]);
      // The counted invariants after every event, the sums over the blocks after every 61st.
      ASSERT_EQ(state.broken_invariant(i % 61 == 0 ? invariant_scope::whole : invariant_scope::totals), std::nullopt) << "after event " << i;
    }
    EXPECT_EQ(state.broken_invariant(invariant_scope::whole), std::nullopt) << "after the last event";
    // Ranges that do not overlap are no invariant of the set (a trace may map mapped memory), but
    // the recordings' do not.
    std::uint64_t range_end = 0;
    for (const auto& [address, range] : state.mapped()) {
      EXPECT_GE(address, range_end) << "expected the reserved range at " << address << " to start after the one before it ends";
      range_end = address + range.bytes;
    }
    EXPECT_EQ(state.inconsistencies(), 0u) << "expected every event to fit the live set";
    dump_figures dump = dump_of(snap, device);
    EXPECT_EQ(state.allocated_bytes(), dump.allocated) << "expected the dump's allocated bytes " << dump.allocated << ", saw "
                                                       << state.allocated_bytes();
    EXPECT_EQ(reserved, dump.reserved) << "expected the dump's reserved bytes " << dump.reserved << ", saw " << reserved;

    // Each active block of the dump is live, at the size the rules gave it when it was made.
    std::uint64_t checked = 0;
    for (const segment& seg : snap.segments) {
      if (seg.device != device) continue;
      for (const block& held : snap.blocks_of(seg)) {
        if (held.state != block_state::active_allocated && held.state != block_state::active_pending_free) continue;
        auto found = state.blocks().find(held.address);
        ASSERT_NE(found, state.blocks().end()) << "the dump's block at " << held.address << " is not live";
        EXPECT_EQ(found->second.bytes, held.size) << "block at " << held.address << ": expected the dump's " << held.size
                                                  << " bytes, saw " << found->second.bytes;
        ++checked;
      }
    }
    EXPECT_GT(checked, 0u) << "expected active blocks in the dump";
  }
}

// apply() keeps hints between events (blocks by address, a spare node, the last range), which
// name nodes of the set's own trees: a copy made, or assigned, between a free's request and its
// completion must go on as the original does, and leave the original whole.
TEST(live_set, a_copy_made_between_a_free_request_and_its_completion_goes_on_as_the_original) {
  const snapshot& snap = testing::fixture("grpo_leak_logits.pickle.zst");
  std::int64_t device = default_device(snap);
  std::span<const trace_event> events = events_of(snap, device);
  live_set original = live_set::at_trace_start(snap, device, events, settings_of(snap));
  std::size_t middle = events.size() / 2;
  while (middle < events.size() && events[middle].action != trace_action::free_requested) ++middle;
  ASSERT_LT(middle + 1, events.size());
  ASSERT_EQ(events[middle + 1].action, trace_action::free_completed) << "expected torch's request-then-completion pair";
  for (std::size_t i = 0; i <= middle; ++i) original.apply(events[i]);
  live_set copied = original;
  live_set assigned = live_set::at_trace_start(snap, device, events, settings_of(snap));
  assigned.apply(events[0]);
  assigned = original;
  std::size_t differences = 0;
  for (std::size_t i = middle + 1; i < events.size(); ++i) {
    std::int64_t expected = original.apply(events[i]).bytes;
    std::int64_t from_copy = copied.apply(events[i]).bytes;
    std::int64_t from_assigned = assigned.apply(events[i]).bytes;
    if ((from_copy != expected || from_assigned != expected) && ++differences <= 3) {
      ADD_FAILURE() << "event " << i << ": expected a change of " << expected << " B, the copy saw " << from_copy
                    << " B and the assigned set " << from_assigned << " B";
    }
  }
  for (const live_set* other : {&copied, &assigned}) {
    EXPECT_EQ(other->allocated_bytes(), original.allocated_bytes());
    EXPECT_EQ(other->blocks().size(), original.blocks().size());
    EXPECT_TRUE(std::equal(other->blocks().begin(), other->blocks().end(), original.blocks().begin(), original.blocks().end(),
                           [](const auto& a, const auto& b) { return a.first == b.first && a.second.bytes == b.second.bytes; }));
  }
  EXPECT_EQ(original.allocated_bytes(), dump_of(snap, device).allocated) << "the original ends at the dump";
}

TEST(live_set, dump_blocks_are_their_requests_rounded_or_a_block_kept_whole) {
  for (const std::string& name : testing::snapshot_fixture_names()) {
    SCOPED_TRACE(name);
    const snapshot& snap = testing::fixture(name);
    allocator_settings settings = settings_of(snap);
    std::uint64_t whole = 0;
    std::uint64_t rounded_exactly = 0;
    for (const block& held : snap.blocks) {
      if (held.state != block_state::active_allocated || held.requested_size == 0) continue;
      std::uint64_t rounded = round_request(held.requested_size, settings);
      ASSERT_LE(rounded, held.size) << "block at " << held.address << " requested " << held.requested_size << ": expected at most its "
                                    << held.size << " bytes, rounded to " << rounded;
      if (rounded == held.size) {
        ++rounded_exactly;
        continue;
      }
      EXPECT_FALSE(should_split(held.size, rounded, settings))
          << "block at " << held.address << " of " << held.size << " bytes for a request rounded to " << rounded
          << ": expected a block the allocator hands out whole, saw one it would have split";
      ++whole;
    }
    EXPECT_GT(rounded_exactly, 0u);
    RecordProperty(name + "_blocks_kept_whole", static_cast<int>(whole));
  }
}

TEST(live_set, trace_start_holds_the_dump_minus_what_the_trace_did) {
  for (const std::string& name : testing::snapshot_fixture_names()) {
    SCOPED_TRACE(name);
    const snapshot& snap = testing::fixture(name);
    std::int64_t device = default_device(snap);
    std::span<const trace_event> events = events_of(snap, device);
    live_set start = live_set::at_trace_start(snap, device, events, settings_of(snap));
    // Blocks live at trace start are the dump's blocks the trace never touched, plus those it
    // frees before allocating: none of them was made in the trace.
    std::int64_t mapped = 0;
    for (const auto& [address, range] : start.mapped()) mapped += static_cast<std::int64_t>(range.bytes);
    std::int64_t reserved = reserved_at_trace_start(snap, device, events);
    EXPECT_EQ(mapped, reserved) << "expected the reserved ranges at trace start to sum to " << reserved << ", saw " << mapped;
    std::int64_t held = 0;
    for (const auto& [address, live] : start.blocks()) {
      EXPECT_TRUE(live.before_trace);
      if (!live.pending_free) held += static_cast<std::int64_t>(live.bytes);
    }
    EXPECT_EQ(start.allocated_bytes(), held) << "expected allocated bytes at trace start to be the live blocks' " << held << ", saw "
                                             << start.allocated_bytes();
    EXPECT_LE(start.allocated_bytes(), reserved) << "live blocks cannot hold more than was reserved";
  }
}

}  // namespace rlmem
