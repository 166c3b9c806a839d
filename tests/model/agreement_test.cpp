// SPDX-License-Identifier: MIT
// The differential check of fuzz_model_agreement over every bundled recording, deterministically:
// inspect's live set and replay's caching allocator model agree on allocated bytes after every
// event where both apply, and both apply for as long as the model follows the recording.

#include "fixtures.hpp"
#include "model/fixture_files.hpp"
#include "model_agreement.hpp"

#include <gtest/gtest.h>

namespace rlmem {

TEST(model_agreement, live_set_and_model_agree_on_every_bundled_recording) {
  for (const std::string& name : testing::snapshot_fixture_names()) {
    SCOPED_TRACE(name);
    const snapshot& snap = testing::fixture(name);
    testing::model_agreement outcome = testing::check_model_agreement(snap);
    ASSERT_TRUE(outcome.replayed) << outcome.stopped;
    EXPECT_EQ(outcome.disagreement, "") << "after " << outcome.states_compared << " states that agreed";
    if (outcome.stopped.empty()) {
      EXPECT_EQ(outcome.states_compared, outcome.events + 1)
          << "expected the trace start and all " << outcome.events << " events compared, saw " << outcome.states_compared;
      continue;
    }
    // The comparison may end early only where the model stops following the recording: at the
    // OOM the recording had too (the replay ends there), or where it parts from the recording.
    replay_result replayed = replay(snap);
    const device_trace* trace = snap.trace_for(default_device(snap));
    ASSERT_NE(trace, nullptr);
    if (replayed.oom && outcome.states_compared == replayed.oom->event + 1) {
      EXPECT_EQ(snap.events_of(*trace)[replayed.oom->event].action, trace_action::oom)
          << "expected the model to run out of memory only where the recording did: " << outcome.stopped;
      continue;
    }
    // Where replay is known to part from the recording (issue 11, item 3): a run at the device's
    // capacity replayed without its limit, and expandable reservations placed apart from the
    // recording's (the model reserves for a 141 GiB card).
    bool known_divergence = name == "frag_default_oom.pickle.zst" || name.starts_with("tiny_oom_expandable_compile");
    EXPECT_TRUE(known_divergence) << "expected the comparison to cover the whole trace, saw it stop " << outcome.stopped;
  }
}

}  // namespace rlmem
