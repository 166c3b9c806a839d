// SPDX-License-Identifier: MIT
// The advice rules, from numbers: each test builds step ends or GPU samples and checks the
// figures the advice computes from them, so a rule that stops computing cannot pass.

#include "watch/steplog_lines.hpp"

#include <rlmem/watch/watch.hpp>

#include <gtest/gtest.h>

namespace rlmem {

namespace {

using testing::gib;
using testing::mib;

constexpr std::int64_t card = 80 * gib;  // round figures keep the expected text readable
constexpr std::int64_t context = 512 * mib;

// A step end on an 80 GiB card; the device's free memory follows from reserved.
steplog_record record_at_step_end(std::int64_t step, std::int64_t allocated, std::int64_t reserved, std::int64_t peak_allocated) {
  steplog_record r;
  r.time = 1717243200.0 + 10.0 * static_cast<double>(step);
  r.step = step;
  r.allocated = allocated;
  r.active = allocated;
  r.reserved = reserved;
  r.step_peak_allocated = peak_allocated;
  r.step_peak_reserved = reserved;
  r.peak_is_per_step = true;
  r.inactive_split = 300 * mib;
  r.device_total = card;
  r.device_free = card - reserved - context;
  return r;
}

watch_frame frame_of(const std::deque<steplog_record>& records, const std::deque<steplog_alert_seen>& alerts = {}) {
  watch_frame frame;
  frame.log.emplace();
  frame.log->state = steplog_file_state::following;
  summarise_steps(records, alerts, 20, 5, *frame.log);
  return frame;
}

// The advice of `kind`, or an empty one (and a failure) when there is none.
watch_advice find(const std::vector<watch_advice>& advice, const std::string& kind) {
  for (const watch_advice& one : advice) {
    if (one.kind == kind) return one;
  }
  std::string kinds;
  for (const watch_advice& one : advice) kinds += one.kind + " ";
  ADD_FAILURE() << "no '" << kind << "' advice; got: " << kinds;
  return {};
}

bool has(const std::vector<watch_advice>& advice, const std::string& kind) {
  return std::any_of(advice.begin(), advice.end(), [&](const watch_advice& one) { return one.kind == kind; });
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE((text).find(part), std::string::npos) << "in: " << (text)

gpu_view gpu(std::uint32_t index, std::int64_t used, std::vector<gpu_process> processes = {}) {
  gpu_view view;
  view.index = index;
  view.name = "NVIDIA H100 80GB HBM3";
  view.memory = {static_cast<std::uint64_t>(card), static_cast<std::uint64_t>(used), static_cast<std::uint64_t>(card - used)};
  for (const gpu_process& process : processes) view.processes.push_back({process, {command_line_status::visible, "python train.py"}});
  return view;
}

}  // namespace

TEST(watch_advice, says_why_healthy_figures_are_fine) {
  std::deque<steplog_record> records;
  for (std::int64_t step = 1; step <= 5; ++step) records.push_back(record_at_step_end(step, 7 * gib, 9 * gib, 8 * gib));
  auto advice = advise(frame_of(records));
  ASSERT_FALSE(advice.empty());
  EXPECT_EQ(advice.front().level, advice_level::info);
  std::string fine = find(advice, "fine").text;
  EXPECT_CONTAINS(fine, "peak reserved 9.00 GiB is 11% of the 80.0 GiB card with 70.5 GiB free at the step's peak");
  EXPECT_CONTAINS(fine, "no alloc retries or OOMs in the last 4 steps");
  EXPECT_CONTAINS(fine, "reserved but unallocated 2.00 GiB (22% of reserved)");
  EXPECT_CONTAINS(find(advice, "under_use").text, "about 71.0 GiB of the card is unused at the step's peak");
}

TEST(watch_advice, measures_fragmentation_against_the_largest_step_peak) {
  std::deque<steplog_record> records;
  for (std::int64_t step = 1; step <= 5; ++step) records.push_back(record_at_step_end(step, 8 * gib, 40 * gib, 30 * gib));
  records.back().inactive_split = 3 * gib;
  auto advice = advise(frame_of(records));
  watch_advice fragmentation = find(advice, "fragmentation");
  EXPECT_EQ(fragmentation.level, advice_level::warning);
  EXPECT_CONTAINS(fragmentation.text, "40.0 GiB reserved is 10.0 GiB (25%) more than the largest step peak of the last 5 steps "
                                      "needed (30.0 GiB allocated)");
  EXPECT_CONTAINS(fragmentation.text, "reserved but unallocated at the step end is 32.0 GiB (80% of reserved), 3.00 GiB of it");
  EXPECT_CONTAINS(fragmentation.text, "expandable_segments:True");
  EXPECT_FALSE(has(advice, "fine"));
}

TEST(watch_advice, a_short_step_after_a_long_one_is_no_fragmentation) {
  std::deque<steplog_record> records;
  for (std::int64_t step = 1; step <= 4; ++step) records.push_back(record_at_step_end(step, 7 * gib, 33 * gib, 30 * gib));
  records.push_back(record_at_step_end(5, 7 * gib, 33 * gib, 18 * gib));  // 15 GiB cached beyond this step's need
  auto advice = advise(frame_of(records));
  EXPECT_FALSE(has(advice, "fragmentation"));
  EXPECT_CONTAINS(find(advice, "fine").text, "peak reserved 33.0 GiB is 41% of the 80.0 GiB card");

  advice_thresholds stricter;
  stricter.rules.fragmentation_fraction = 0.05;  // 3 GiB over 30 is 9%: the threshold is a parameter
  EXPECT_CONTAINS(find(advise(frame_of(records), stricter), "fragmentation").text, "3.00 GiB (9.1%) more than");
}

TEST(watch_advice, rising_retries_name_how_close_the_peak_is_to_the_card) {
  std::deque<steplog_record> records;
  const std::int64_t retries[] = {0, 0, 1, 3, 5, 5};
  for (std::int64_t step = 1; step <= 6; ++step) {
    records.push_back(record_at_step_end(step, 40 * gib, 76 * gib, 70 * gib));
    records.back().num_alloc_retries = retries[step - 1];
  }
  auto advice = advise(frame_of(records));
  watch_advice rising = find(advice, "alloc_retries");
  EXPECT_EQ(rising.level, advice_level::warning);
  EXPECT_CONTAINS(rising.text, "rose by 5 over the last 5 steps (to 5)");
  EXPECT_CONTAINS(rising.text, "peak reserved 76.0 GiB is 95.0% of the 80.0 GiB card, 3.50 GiB free at the step's peak");
  EXPECT_CONTAINS(rising.text, "reuse the 36.0 GiB reserved but unallocated");
  EXPECT_CONTAINS(find(advice, "headroom").text, "about 3.50 GiB (4.4%) of the 80.0 GiB card stays free at the step's peak");
  EXPECT_FALSE(has(advice, "fine"));

  // Retries that stopped rising are history, not a warning.
  for (std::int64_t step = 7; step <= 30; ++step) {
    records.push_back(record_at_step_end(step, 20 * gib, 40 * gib, 30 * gib));
    records.back().num_alloc_retries = 5;
  }
  advice = advise(frame_of(records));
  watch_advice settled = find(advice, "alloc_retries");
  EXPECT_EQ(settled.level, advice_level::info);
  EXPECT_EQ(settled.text, "alloc_retries: 5 earlier in the run, none in the last 20 steps");
}

TEST(watch_advice, headroom_counts_what_the_peak_reserved_beyond_the_step_end) {
  steplog_record r = record_at_step_end(1, 20 * gib, 60 * gib, 70 * gib);
  r.step_peak_reserved = 74 * gib;
  r.device_free = card - 60 * gib - context;  // 19.5 GiB at the step end
  watch_advice headroom = find(advise(frame_of({r})), "headroom");
  EXPECT_CONTAINS(headroom.text, "about 5.50 GiB (6.9%) of the 80.0 GiB card stays free at the step's peak (device free 19.5 GiB "
                                 "at the step end, less the 14.0 GiB the peak reserved beyond it)");
  EXPECT_CONTAINS(headroom.text, "under the 10% margin");
  EXPECT_CONTAINS(headroom.text, "Peak allocated 70.0 GiB, peak reserved 74.0 GiB");

  advice_thresholds looser;
  looser.rules.headroom_fraction = 0.05;
  EXPECT_FALSE(has(advise(frame_of({r}), looser), "headroom"));
}

TEST(watch_advice, a_leak_becomes_a_rate_and_a_forecast_from_the_monitors_rule) {
  std::deque<steplog_record> records;
  for (std::int64_t step = 1; step <= 10; ++step) {
    std::int64_t kept = step >= 5 ? (step - 4) * 48 * mib : 0;
    records.push_back(record_at_step_end(step, 7 * gib + kept, 34 * gib, 30 * gib + kept));
  }
  // watch judges the log itself, with the rule the monitor runs: no alert needed.
  watch_advice leak = find(advise(frame_of(records)), "leak");
  EXPECT_EQ(leak.level, advice_level::warning);
  EXPECT_CONTAINS(leak.text, "step-end allocated grows 48.0 MiB/step since step 5: 6 of the 6 step ends since rose");
  EXPECT_CONTAINS(leak.text, "7.00 GiB -> 7.28 GiB allocated");
  // The allocated peak (30 GiB + 288 MiB) may grow into 80 GiB less 512 MiB outside PyTorch:
  // 49.2 GiB at 48 MiB a step.
  EXPECT_CONTAINS(leak.text, "at this rate the step peak passes the 80.0 GiB card in about 1,050 steps");
  EXPECT_CONTAINS(leak.text, "StepMonitor(record_on_leak=3) names the allocation site");

  steplog_alert alert{"leak", 0, "allocated grows", 48 * mib, 5, "rl/grpo.py:212 compute_logprobs", "runs/leak_step8.pickle"};
  leak = find(advise(frame_of(records, {{8, records[7].time, alert}})), "leak");
  EXPECT_CONTAINS(leak.text, "(the monitor's alert at step 8)");
  EXPECT_CONTAINS(leak.text, "Site: rl/grpo.py:212 compute_logprobs (named by runs/leak_step8.pickle)");

  // A process capped by a memory fraction: the forecast is against the cap.
  records.back().limit = 40 * gib;
  EXPECT_CONTAINS(find(advise(frame_of(records)), "leak").text,
                  "at this rate the step peak passes the 40.0 GiB limit in about 208 steps");  // 9.7 GiB / 48 MiB
}

TEST(watch_advice, the_headroom_warning_comes_with_the_leaks_forecast) {
  std::deque<steplog_record> records;
  for (std::int64_t step = 1; step <= 10; ++step) {
    std::int64_t kept = step >= 5 ? (step - 4) * 512 * mib : 0;
    records.push_back(record_at_step_end(step, 7 * gib + kept, 60 * gib, 50 * gib + kept));
  }
  // 19.5 GiB free at the reserved peak (above the 10% margin); the allocated peak, 53 GiB, passes
  // the 79.5 GiB left beside others in 53 steps at 512 MiB a step.
  watch_advice headroom = find(advise(frame_of(records)), "headroom");
  EXPECT_CONTAINS(headroom.text, "the leak fills it within 500 steps");
  EXPECT_CONTAINS(headroom.text, "at this rate the step peak passes the 80.0 GiB card in about 53 steps");
  advice_thresholds later;
  later.rules.headroom_steps = 20;
  EXPECT_FALSE(has(advise(frame_of(records), later), "headroom"));
}

TEST(watch_advice, a_leak_that_stopped_is_said_to_have_stopped) {
  std::deque<steplog_record> records;
  for (std::int64_t step = 1; step <= 8; ++step) records.push_back(record_at_step_end(step, 7 * gib, 34 * gib, 30 * gib));
  steplog_alert alert{"leak", 0, "allocated grows", 16 * mib, 2, "", ""};
  watch_advice leak = find(advise(frame_of(records, {{3, records[2].time, alert}})), "leak");
  EXPECT_EQ(leak.level, advice_level::info);
  EXPECT_EQ(leak.text, "leak: the alert of step 3 (+16.0 MiB/step since step 2) no longer shows: step-end allocated is 7.00 GiB "
                       "at step 8, 7.00 GiB at step 1");
}

TEST(watch_advice, new_ooms_are_counted_and_pointed_at_their_snapshot) {
  std::deque<steplog_record> records;
  const std::int64_t ooms[] = {0, 0, 1, 2};
  for (std::int64_t step = 1; step <= 4; ++step) {
    records.push_back(record_at_step_end(step, 7 * gib, 34 * gib, 30 * gib));
    records.back().num_ooms = ooms[step - 1];
  }
  watch_advice oom = find(advise(frame_of(records)), "oom");
  EXPECT_EQ(oom.level, advice_level::warning);
  EXPECT_CONTAINS(oom.text, "2 out-of-memory errors in the last 3 steps (2 since the process started)");
  EXPECT_CONTAINS(oom.text, "rlmem.record() dumps a snapshot at the next one");
  steplog_alert alert{"oom", 0, "OOM at step 4", std::nullopt, std::nullopt, "", "runs/oom_step4.pickle"};
  EXPECT_CONTAINS(find(advise(frame_of(records, {{4, records[3].time, alert}})), "oom").text,
                  "rlmem inspect runs/oom_step4.pickle says whether it was fragmentation or capacity");
}

TEST(watch_advice, gpu_rules_from_the_driver_alone) {
  watch_frame frame;
  frame.nvml_available = true;
  frame.gpus.push_back(gpu(0, 76 * gib, {{1234, static_cast<std::uint64_t>(75 * gib)}}));
  frame.gpus.push_back(gpu(1, 529 * mib));
  frame.gpus.push_back(gpu(2, 6 * gib, {{4321, static_cast<std::uint64_t>(5 * gib)}}));
  auto advice = advise(frame);
  ASSERT_FALSE(advice.empty());
  EXPECT_EQ(advice.front().kind, "gpu_full") << "warnings come first";
  EXPECT_EQ(advice.front().text, "gpu_full: GPU 0 has 76.0 GiB of 80.0 GiB in use (95.0%), 4.00 GiB free: whatever asks for more "
                                 "next gets an OOM; pid 1234 holds 75.0 GiB");
  EXPECT_EQ(find(advice, "idle").text, "idle: no compute process on GPU 1");
  EXPECT_CONTAINS(find(advice, "under_use").text, "GPU 2 has 6.00 GiB of 80.0 GiB in use (7.5%) by 1 process");
  EXPECT_FALSE(has(advice, "fine"));

  frame.gpus[0] = gpu(0, 40 * gib, {{1234, static_cast<std::uint64_t>(39 * gib)}});
  EXPECT_EQ(find(advise(frame), "fine").text, "fine: the fullest GPU, 0, has 40.0 GiB of 80.0 GiB in use (50%), 40.0 GiB free");
}

TEST(watch_advice, nothing_to_say_without_figures) {
  watch_frame frame;
  frame.log.emplace();  // a log that has no step end yet, and no NVML
  EXPECT_TRUE(advise(frame).empty());
}

}  // namespace rlmem
