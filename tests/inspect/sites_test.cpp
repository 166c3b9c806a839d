// SPDX-License-Identifier: MIT
// Site resolution skips torch internals and plumbing and finds the user's own frame.

#include "fixtures.hpp"

#include <rlmem/inspect/inspect.hpp>

#include <gtest/gtest.h>

namespace rlmem {

using testing::fixture;

namespace {

// The stack of the dump-time block at `address` in `snap`.
stack_id stack_of_block(const snapshot& snap, std::uint64_t address) {
  for (const block& held : snap.blocks) {
    if (held.address == address) return held.stack;
  }
  ADD_FAILURE() << "no block at " << address;
  return 0;
}

}  // namespace

TEST(sites, module_call_wrappers_are_skipped_to_the_model_code) {
  // Innermost first: torch linear.forward, module _call_impl x2, then modeling_qwen2.py:47.
  const snapshot& snap = fixture("frag_default_oom.pickle.zst");
  allocation_site site = resolve_site(snap, stack_of_block(snap, 139961709887488));
  EXPECT_EQ(site.label, "transformers/models/qwen2/modeling_qwen2.py:47 forward");
  EXPECT_EQ(site.user_frame, "rl/record.py:41 logprobs_of");
}

TEST(sites, cpp_stacks_resolve_to_the_python_caller) {
  // Recorded with stacks="all": dozens of C++ frames (allocator, dispatcher) come first.
  const snapshot& snap = fixture("tiny_oom_cpp_stacks.pickle");
  allocation_site site = resolve_site(snap, snap.blocks_of(snap.segments[0])[0].stack);
  EXPECT_EQ(site.label, "rl/p.py:20 <module>");
  EXPECT_EQ(site.user_frame, "rl/p.py:20 <module>");
}

TEST(sites, no_frames_says_so) {
  const snapshot& snap = fixture("tiny_oom_cpp_stacks.pickle");
  EXPECT_EQ(resolve_site(snap, 0).label, "<no stack recorded>");
}

}  // namespace rlmem
