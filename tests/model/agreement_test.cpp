// SPDX-License-Identifier: MIT
// The differential check of fuzz_model_agreement over every bundled recording, deterministically:
// inspect's live set and replay's caching allocator model agree on allocated bytes after every
// event where both apply, and both apply for as long as the model follows the recording.

#include "fixtures.hpp"
#include "inspect/crafted.hpp"
#include "model/fixture_files.hpp"
#include "model_agreement.hpp"

#include <gtest/gtest.h>

namespace rlmem {

TEST(model_agreement, live_set_and_model_agree_on_every_bundled_recording) {
  for (const std::string& name : testing::snapshot_fixture_names()) {
    SCOPED_TRACE(name);
    const snapshot& snap = testing::fixture(name);
    testing::model_agreement outcome = testing::check_model_agreement(snap);
    // Every recording is followed to its end (issue 11, item 3; docs/replay-fidelity-findings.md),
    // capped ones under the limit their trace proves.
    ASSERT_TRUE(outcome.replayed) << outcome.stopped;
    EXPECT_EQ(outcome.disagreement, "") << "after " << outcome.states_compared << " states that agreed";
    EXPECT_EQ(outcome.stopped, "") << "expected the comparison to cover the whole trace";
    EXPECT_EQ(outcome.states_compared, outcome.events + 1)
        << "expected the trace start and all " << outcome.events << " events compared, saw " << outcome.states_compared;
  }
}

namespace {
constexpr std::uint64_t mib = std::uint64_t{1} << 20;
}  // namespace

TEST(model_agreement, both_round_with_the_recorded_alloc_conf_string) {
  testing::crafted_snapshot made;
  made.segment(0, 64 * mib);
  made.event(trace_action::alloc, 0, 5 * mib + 1);     // 6 MiB under 4 divisions
  made.event(trace_action::alloc, 6 * mib, 3 * mib);
  made.event(trace_action::alloc, 9 * mib, 25 * mib);  // 28 MiB
  for (std::uint64_t address : {0 * mib, 6 * mib, 9 * mib}) {
    made.event(trace_action::free_requested, address, 0);
    made.event(trace_action::free_completed, address, 0);
  }
  snapshot snap = made.build();
  plain_value conf;
  conf.type = plain_value::kind::text;
  conf.text = "roundup_power2_divisions:4";
  snap.allocator_settings.emplace_back("PYTORCH_CUDA_ALLOC_CONF", conf);
  testing::model_agreement outcome = testing::check_model_agreement(snap);
  EXPECT_EQ(outcome.disagreement, "");
  EXPECT_EQ(outcome.stopped, "");
  EXPECT_EQ(outcome.states_compared, outcome.events + 1);
}

// Found by the differential check: replay dropped live blocks that lie above every reserved
// range, so its allocated bytes fell short of the live set's from the trace start.
TEST(model_agreement, live_blocks_outside_every_segment_are_refused_not_dropped) {
  testing::crafted_snapshot made;
  made.segment(0, 2 * mib);
  made.event(trace_action::free_requested, 64 * mib, 1000);  // allocated before the trace, in no segment
  made.event(trace_action::free_completed, 64 * mib, 1000);
  testing::model_agreement outcome = testing::check_model_agreement(made.build());
  EXPECT_EQ(outcome.disagreement, "");
  EXPECT_FALSE(outcome.replayed) << "expected replay to refuse the trace, saw it replayed";
  EXPECT_NE(outcome.stopped.find("a block outside its segment"), std::string::npos) << outcome.stopped;
}

}  // namespace rlmem
