// SPDX-License-Identifier: MIT
#pragma once
// The one way plan's readers and checks build a refusal: a code and the sentence printed.

#include <rlmem/plan/plan_errors.hpp>

#include <initializer_list>
#include <string>

namespace rlmem::detail {

/// A failure of `code` whose detail is `sentence` (plan's inputs have no byte offsets).
inline plan_error refuse(plan_errc code, std::string sentence) { return {code, 0, std::move(sentence)}; }

/// The first failure of checks made in order, or success.
inline result<void, plan_errc> first_refusal(std::initializer_list<result<void, plan_errc>> checks) {
  for (const result<void, plan_errc>& check : checks) {
    if (!check.ok()) return check;
  }
  return {};
}

}  // namespace rlmem::detail
