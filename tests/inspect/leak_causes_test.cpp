// SPDX-License-Identifier: MIT
// One leak per cause (issue 11): growing sites that grew over the same steps and are lines of one
// function under the same callers are one leak; another caller or another growth run is another.

#include "byte_units.hpp"
#include "inspect/crafted.hpp"

#include <rlmem/inspect/inspect.hpp>

#include <gtest/gtest.h>

namespace rlmem {

using testing::crafted_snapshot;

namespace {

using testing::sizes::kib;
using testing::sizes::mib;

// Five steps, each started by an allocation at train.py:12. Every step keeps an entropy metric
// made by two lines of entropy_of (softmax, log_softmax) called from train.py:20, and tensors
// made by two lines of logits_of called from two different lines of train_step; from step 3 on,
// a third line of entropy_of keeps a tensor too.
inspection five_leaky_steps() {
  crafted_snapshot made;
  frame_id module = made.frame("<module>", "/home/u/rl/train.py", 5);
  auto under = [&](std::string_view function, std::int64_t line, std::int64_t caller_line) {
    return made.stack({made.frame(function, "/home/u/rl/metrics.py", line), made.frame("train_step", "/home/u/rl/train.py", caller_line), module});
  };
  stack_id marker = made.stack({made.frame("train_step", "/home/u/rl/train.py", 12), module});
  stack_id softmax = under("entropy_of", 50, 20);
  stack_id log_softmax = under("entropy_of", 51, 20);
  stack_id late = under("entropy_of", 52, 20);
  stack_id logits_a = under("logits_of", 70, 21);
  stack_id logits_b = under("logits_of", 71, 22);
  made.segment(0, 256 * mib);
  std::uint64_t address = 0;
  auto keep = [&](stack_id stack, std::uint64_t bytes) {
    made.event(trace_action::alloc, address, bytes, stack, 1);
    address += bytes;
  };
  for (int step = 1; step <= 5; ++step) {
    made.event(trace_action::alloc, 200 * mib, mib, marker, 1);
    made.event(trace_action::free_requested, 200 * mib, mib, marker, 1);
    made.event(trace_action::free_completed, 200 * mib, mib, marker, 1);
    keep(softmax, mib);
    keep(log_softmax, mib);
    keep(logits_a, 768 * kib);
    keep(logits_b, 640 * kib);
    if (step >= 3) keep(late, 256 * kib);
  }
  inspect_options options;
  options.step_marker = R"(train\.py:12 train_step)";
  return inspect(made.build(), options);
}

std::string labels(const inspection& result) {
  std::string joined;
  for (const leak& found : result.leaks) joined += found.site.label + " | ";
  return joined;
}

}  // namespace

TEST(leak_causes, two_lines_of_one_function_under_one_caller_are_one_leak) {
  inspection result = five_leaky_steps();
  ASSERT_EQ(result.steps.size(), 5u);
  ASSERT_EQ(result.leaks.size(), 4u) << "expected entropy_of 50-51, logits_of 70, logits_of 71, entropy_of 52; saw " << labels(result);
  const leak& entropy = result.leaks[0];
  EXPECT_EQ(entropy.site.label, "rl/metrics.py:50,51 entropy_of");
  EXPECT_EQ(entropy.bytes_per_step, static_cast<std::int64_t>(2 * mib)) << "the sum of its two lines";
  EXPECT_EQ(entropy.live_count_at_end, 10u);
  EXPECT_EQ(entropy.first_step, 1u);
  ASSERT_EQ(entropy.lines.size(), 2u);
  EXPECT_EQ(entropy.lines[0].site.label, "rl/metrics.py:50 entropy_of");
  EXPECT_EQ(entropy.lines[1].site.label, "rl/metrics.py:51 entropy_of");
  EXPECT_EQ(entropy.lines[0].bytes_per_step, static_cast<std::int64_t>(mib));
  EXPECT_EQ(entropy.lines[1].bytes_per_step, static_cast<std::int64_t>(mib));
  EXPECT_EQ(entropy.site.user_frame, entropy.site.label) << "the user's own function, not one of its lines";
  EXPECT_EQ(entropy.bytes_at_step_end, (std::vector<std::int64_t>{0, 2 * mib, 4 * mib, 6 * mib, 8 * mib, 10 * mib}));
}

TEST(leak_causes, lines_of_one_function_under_different_callers_are_two_leaks) {
  inspection result = five_leaky_steps();
  ASSERT_EQ(result.leaks.size(), 4u) << labels(result);
  EXPECT_EQ(result.leaks[1].site.label, "rl/metrics.py:70 logits_of");
  EXPECT_EQ(result.leaks[2].site.label, "rl/metrics.py:71 logits_of");
  EXPECT_EQ(result.leaks[1].lines.size(), 1u);
  EXPECT_EQ(result.leaks[1].bytes_per_step, static_cast<std::int64_t>(768 * kib));
  EXPECT_EQ(result.leaks[2].bytes_per_step, static_cast<std::int64_t>(640 * kib));
}

TEST(leak_causes, a_line_that_began_growing_later_is_another_leak) {
  inspection result = five_leaky_steps();
  ASSERT_EQ(result.leaks.size(), 4u) << labels(result);
  const leak& late = result.leaks[3];
  EXPECT_EQ(late.site.label, "rl/metrics.py:52 entropy_of");
  EXPECT_EQ(late.first_step, 3u);
  EXPECT_EQ(late.bytes_per_step, static_cast<std::int64_t>(256 * kib));
}

TEST(leak_causes, the_leaks_explain_all_of_the_step_end_growth) {
  const leak_summary& growth = five_leaky_steps().summary_of_leaks;
  ASSERT_TRUE(growth.measured);
  // From step 1 to step 5: 2 MiB + 768 KiB + 640 KiB each step, and 256 KiB from step 3.
  std::int64_t expected = static_cast<std::int64_t>((4 * (2 * mib + 768 * kib + 640 * kib) + 3 * 256 * kib) / 4);
  EXPECT_EQ(growth.growth_per_step_bytes, expected);
  EXPECT_EQ(growth.explained_per_step_bytes, expected);
  EXPECT_EQ(growth.step_ends_grown, 4u);
  EXPECT_FALSE(growth.growth_without_named_leak);
}

}  // namespace rlmem
