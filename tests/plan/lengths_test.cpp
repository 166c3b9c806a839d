// SPDX-License-Identifier: MIT
// Response lengths as a distribution: the longest response that fits is the largest (the plan at
// L fits, at L + 1 it does not), each percentile's peak is the plan at that length, and the
// chance per step follows from the percentiles as documented.

#include "byte_units.hpp"
#include "planner_support.hpp"

#include <rlmem/plan/plan.hpp>

#include <gtest/gtest.h>

#include <cmath>

namespace rlmem {
namespace {

std::uint64_t peak_at(const model_architecture& model, plan_knobs knobs, std::uint64_t new_tokens) {
  knobs.new_tokens = new_tokens;
  const auto checked = validate_knobs(model, knobs);
  EXPECT_TRUE(checked.ok()) << checked.failure().detail;
  return plan_memory(model, knobs).peak_bytes;
}

using testing::sizes::gib;

TEST(Lengths, TheFittingLengthIsTheLargestThatFitsOnRealConfigs) {
  struct row {
    const char* config;
    plan_knobs knobs;
    std::uint64_t usable;
  };
  plan_knobs lora = testing::grpo_knobs(8, 8, 512, 8192, 8);
  lora.lora_rank = 16;
  lora.reference = reference_kind::adapter_disabled;
  plan_knobs checkpointed = testing::grpo_knobs(4, 16, 1024, 16384, 16);
  checkpointed.grad_ckpt = true;
  for (const row& r : {row{"llama3.2-1b.json", testing::grpo_knobs(8, 8, 512, 4096, 16), 40 * gib},
                       row{"qwen2.5-0.5b.json", lora, 20 * gib},
                       row{"qwen2.5-0.5b.json", checkpointed, 71 * gib},
                       row{"llama3.2-1b.json", testing::generate_knobs(64, 256, 8192), 10 * gib}}) {
    const model_architecture model = testing::config_model(r.config);
    length_view_options options;
    options.max_length = r.knobs.new_tokens;
    options.usable_bytes = r.usable;
    const length_view view = plan_response_lengths(model, r.knobs, options);
    const std::uint64_t fitting = view.fitting_length;
    ASSERT_GT(fitting, 0u) << r.config;
    ASSERT_LT(fitting, options.max_length) << r.config << ": expected a length in between, so the test can see both sides";
    EXPECT_LE(peak_at(model, r.knobs, fitting), r.usable) << r.config << " at " << fitting << " tokens";
    EXPECT_GT(peak_at(model, r.knobs, fitting + 1), r.usable) << r.config << " at " << fitting + 1 << " tokens";
    EXPECT_EQ(view.peak_after_fitting_bytes, peak_at(model, r.knobs, fitting + 1)) << r.config;
    // Both ends, a bisection over [1, max] and the peak one token past: log2(max) + 3 plans, not one per length.
    EXPECT_LE(view.plans_evaluated, 3 + static_cast<std::uint64_t>(std::ceil(std::log2(static_cast<double>(options.max_length)))))
        << r.config;
  }
}

TEST(Lengths, EachPercentilesPeakIsThePlanAtItsLength) {
  const model_architecture model = testing::config_model("qwen2.5-0.5b.json");
  const plan_knobs knobs = testing::grpo_knobs(8, 8, 512, 4096, 16);
  length_view_options options;
  options.max_length = 3000;  // the data's longest, under the generation's cap
  const auto quantiles = parse_length_quantiles("p50=400,p90=1200,p99=2500");
  ASSERT_TRUE(quantiles.ok()) << quantiles.failure().detail;
  options.quantiles = quantiles.value();
  const length_view view = plan_response_lengths(model, knobs, options);
  ASSERT_EQ(view.points.size(), 4u);
  const std::uint64_t lengths[] = {400, 1200, 2500, 3000};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(view.points[i].length, lengths[i]);
    EXPECT_EQ(view.points[i].peak_bytes, peak_at(model, knobs, lengths[i])) << view.points[i].label;
    if (i > 0) {
      EXPECT_GT(view.points[i].peak_bytes, view.points[i - 1].peak_bytes) << "the peak grows with the length";
    }
  }
  EXPECT_EQ(view.points.back().label, "max");
  EXPECT_FALSE(view.has_card);
  EXPECT_EQ(view.samples_per_step, 64u);
  // 1 - F(L)^64 with F at the percentiles: 1 - 0.5^64, 1 - 0.9^64, 1 - 0.99^64, and 0 at the max.
  EXPECT_DOUBLE_EQ(view.points[1].step_draws_longer, 1 - std::pow(0.9, 64));
  EXPECT_NEAR(view.points[2].step_draws_longer, 1 - std::pow(0.99, 64), 1e-12);
  EXPECT_EQ(view.points[3].step_draws_longer, 0);
}

TEST(Lengths, TheShareOfShorterSamplesIsLinearBetweenThePercentiles) {
  const auto parsed = parse_length_quantiles("p50=400,p90=1200,p99.9=2500");
  ASSERT_TRUE(parsed.ok()) << parsed.failure().detail;
  const std::vector<length_quantile>& quantiles = parsed.value();
  EXPECT_DOUBLE_EQ(quantiles[2].fraction, 0.999);
  EXPECT_DOUBLE_EQ(length_cdf(quantiles, 3000, 200), 0.25);    // half way from (0, 0) to (400, 0.5)
  EXPECT_DOUBLE_EQ(length_cdf(quantiles, 3000, 400), 0.5);
  EXPECT_DOUBLE_EQ(length_cdf(quantiles, 3000, 800), 0.7);     // half way to (1200, 0.9)
  EXPECT_DOUBLE_EQ(length_cdf(quantiles, 3000, 2750), 0.9995);  // half way from (2500, 0.999) to (3000, 1)
  EXPECT_DOUBLE_EQ(length_cdf(quantiles, 3000, 3000), 1);
}

TEST(Lengths, EveryLengthFitsOrNoneDoes) {
  const model_architecture model = testing::config_model("qwen2.5-0.5b.json");
  const plan_knobs knobs = testing::grpo_knobs(4, 4, 256, 512, 4);
  length_view_options options;
  options.max_length = 512;
  options.usable_bytes = 80 * gib;
  EXPECT_EQ(plan_response_lengths(model, knobs, options).fitting_length, 512u);
  options.usable_bytes = 1 * gib;  // less than the weights and AdamW state
  const length_view none = plan_response_lengths(model, knobs, options);
  EXPECT_EQ(none.fitting_length, 0u);
  EXPECT_EQ(none.peak_after_fitting_bytes, peak_at(model, knobs, 1));
}

TEST(Lengths, MalformedPercentilesAreRefusedInOneLine) {
  for (const char* text : {"p50", "p50=", "50=300", "p0=3", "p100=3", "p50=0", "p50=3x", "p90=800,p50=300", "p50=300,p50=400",
                           "p50=800,p90=300", ""}) {
    const auto parsed = parse_length_quantiles(text);
    EXPECT_EQ(parsed.code(), plan_errc::invalid_quantiles) << "expected '" << text << "' refused";
    EXPECT_EQ(parsed.failure().detail.find('\n'), std::string::npos) << parsed.failure().detail;
  }
  EXPECT_EQ(parse_length_quantiles("p50=800,p90=300").failure().detail,
            "p90=300 is shorter than p50=800: a higher percentile cannot be a shorter length");
}

}  // namespace
}  // namespace rlmem
