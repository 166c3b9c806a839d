// SPDX-License-Identifier: MIT
// libFuzzer target for the step-end rules through the C ABI (rlmem_leak_check, rlmem_judge_step,
// rlmem_judge_imbalance): the input's bytes are int64 figures (a series, then step samples of 12
// figures, then rules decoded from the first bytes), any values at all. Checks what must hold
// whatever the figures: no crash, a verdict that is consistent with itself, and the same
// verdict from the C++ rule the monitor's C call wraps.

#include <rlmem/rlmem.h>
#include <rlmem/step_rules/step_rules.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

void check(bool holds) {
  if (!holds) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::int64_t> figures(size / 8);
  if (!figures.empty()) std::memcpy(figures.data(), data, figures.size() * 8);

  rlmem_leak_verdict verdict{};
  verdict.struct_size = sizeof verdict;
  check(rlmem_leak_check(figures.data(), nullptr, figures.size(), 0, &verdict) == RLMEM_OK);
  check(!(verdict.leaking && verdict.stopped));
  check(figures.size() < 3 || !verdict.leaking || (verdict.first_step >= 1 && verdict.first_step < figures.size()));
  check(!verdict.leaking || (verdict.bytes_per_step > 0 && verdict.events + 0 <= verdict.steps));
  check(!std::isnan(verdict.z) && !std::isnan(verdict.kendall_z));
  const rlmem::growth_verdict direct = rlmem::judge_growth(figures);
  check(direct.growing == (verdict.leaking == 1) && direct.bytes_per_step == verdict.bytes_per_step && direct.first == verdict.first_step);

  // The same bytes as step samples, under rules taken from the first bytes (refused or judged).
  const std::size_t n = figures.size() / 12;
  std::vector<rlmem_step_sample> history(n);
  if (n > 0) std::memcpy(history.data(), figures.data(), n * sizeof(rlmem_step_sample));
  rlmem_step_rules rules;
  rlmem_step_rules_init(&rules);
  if (size > 0) rules.leak_window = 3 + data[0] % 300;  // sometimes past 256: refused
  if (size > 1) rules.headroom_steps = data[1] % 2 == 0 ? 0 : 500;
  rlmem_step_judgment judged{};
  judged.struct_size = sizeof judged;
  const int status = rlmem_judge_step(history.data(), n, n > 0 ? history[0].step : 0, &rules, &judged);
  check(status == RLMEM_OK || (status == RLMEM_E_INVALID_ARGUMENT && rules.leak_window > 256));
  if (status == RLMEM_OK) {
    check(judged.unused_reserved >= 0 && judged.new_alloc_retries >= 0 && judged.new_ooms >= 0);
    check(judged.steps_to_limit >= -1 && (judged.steps_to_limit == -1) == (judged.leak.leaking == 0 || judged.leak.bytes_per_step <= 0));
    check(!judged.fragmentation || judged.fragmented);
  }

  int imbalanced = 0;
  std::size_t high = 0;
  std::size_t low = 0;
  check(rlmem_judge_imbalance(figures.data(), figures.size(), 0.2, 0, &imbalanced, &high, &low) == RLMEM_OK);
  check(figures.empty() || (high < figures.size() && low < figures.size() && figures[high] >= figures[low]));
  return 0;
}
