// SPDX-License-Identifier: MIT
#pragma once
// The error model's contract, which every plan reader and check must keep on any input.

#include <rlmem/plan/plan_errors.hpp>

#include <string>

namespace rlmem::fuzzing {

/// Traps unless a refusal has a code other than ok, whose NAME is in plan's table, and a
/// non-empty one-line detail, and a success has the code ok.
template <class Result>
void expect_plan_contract(const Result& outcome) {
  if (outcome.ok()) {
    if (outcome.code() != plan_errc::ok) __builtin_trap();
    return;
  }
  const std::string& detail = outcome.failure().detail;
  if (outcome.code() == plan_errc::ok || error_name(outcome.code()) == "UNKNOWN" || detail.empty() ||
      detail.find('\n') != std::string::npos) {
    __builtin_trap();
  }
}

}  // namespace rlmem::fuzzing
