// SPDX-License-Identifier: MIT
// The table of docs/monitor.md ("Synthetic series"): the growth rule over thousands of synthetic
// series per shape and noise profile (synthetic_series.hpp), judged as the monitor judges them,
// at every step end over the newest 64. Not a test: it prints, and the tests hold the targets.
//
//   build/tests/leak_rule_synthetic [SERIES_PER_CELL]

#include "step_rules/synthetic_series.hpp"

#include <rlmem/step_rules/step_rules.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

using namespace rlmem;
using namespace rlmem::testing;

int main(int argc, char** argv) {
  const int per_cell = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1000;
  constexpr std::size_t steps = 48;
  std::mt19937_64 rng(20261126);
  std::printf("| noise | shape | series | alerts on samples that must not alert | leaks alerted within 5 step ends |"
              " median / p99 step end of the first alert | start within 2 steps | rate within 20%% at 5 step ends |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  long judged = 0;
  const auto started = std::chrono::steady_clock::now();
  for (const noise_profile& noise : recorded_noise_profiles()) {
    for (int kind = 0; kind <= static_cast<int>(synthetic_shape::leak_slow); ++kind) {
      const auto shape = static_cast<synthetic_shape>(kind);
      long wrong = 0, must_not = 0, caught5 = 0, start_ok = 0, rate_ok = 0, leaks = 0;
      std::vector<int> delays;
      for (int n = 0; n < per_cell; ++n) {
        synthetic_series series = make_series(shape, noise, steps, rng);
        int first_alert = -1;
        for (std::size_t end = 2; end < series.allocated.size(); ++end) {
          const std::size_t from = end + 1 > 64 ? end + 1 - 64 : 0;
          growth_verdict verdict = judge_growth(std::span(series.allocated).subspan(from, end + 1 - from));
          ++judged;
          const bool before_leak = !series.leaking || end < series.start;
          // Caches and buffers may be alerted while they still grow (within 3 step ends).
          bool growing_lately = false;
          for (std::size_t back = end > 2 ? end - 2 : 1; back <= end; ++back) growing_lately |= series.held[back] > series.held[back - 1];
          if (before_leak) {
            const bool allowed = !series.leaking && growing_lately;
            must_not += !allowed;
            wrong += verdict.growing && !allowed;
            continue;
          }
          if (verdict.growing && first_alert < 0) {
            first_alert = static_cast<int>(end);
            const std::size_t first = verdict.first + from;
            start_ok += (first > series.start ? first - series.start : series.start - first) <= 2;
          }
          if (end == series.start + 4 && verdict.growing) {
            rate_ok += std::fabs(static_cast<double>(verdict.bytes_per_step) - series.rate_at(end)) <= 0.2 * series.rate_at(end);
          }
        }
        if (!series.leaking) continue;
        ++leaks;
        if (first_alert >= 0) {
          const int delay = first_alert - static_cast<int>(series.start) + 1;
          delays.push_back(delay);
          caught5 += delay <= 5;
        } else {
          delays.push_back(1000);
        }
      }
      std::sort(delays.begin(), delays.end());
      auto cell = [](long part, long whole) {
        const double percent = whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
        // Room for any double in %.2f (up to 309 digits) and two longs.
        char text[384];
        std::snprintf(text, sizeof text, "%.2f%% (%ld of %ld)", percent, part, whole);
        return std::string(text);
      };
      auto at = [&](double q) {
        if (delays.empty()) return std::string("-");
        int value = delays[std::min(delays.size() - 1, static_cast<std::size_t>(q * static_cast<double>(delays.size())))];
        return value >= 1000 ? std::string("never") : std::to_string(value);
      };
      std::printf("| %s | %s | %d | %s | %s | %s / %s | %s | %s |\n", noise.name, shape_name(shape), per_cell,
                  cell(wrong, must_not).c_str(), leaks ? cell(caught5, leaks).c_str() : "-", at(0.5).c_str(), at(0.99).c_str(),
                  leaks ? cell(start_ok, leaks).c_str() : "-", leaks ? cell(rate_ok, leaks).c_str() : "-");
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("\n%ld judgments of up to 48 step ends, %.0f us each\n", judged, 1e6 * seconds / static_cast<double>(judged));
}
