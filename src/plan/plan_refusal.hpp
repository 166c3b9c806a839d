// SPDX-License-Identifier: MIT
#pragma once
// The one way plan's readers and checks build a refusal: a code and the sentence printed.

#include <rlmem/base/format.hpp>
#include <rlmem/plan/plan_errors.hpp>

#include <initializer_list>
#include <string_view>

namespace rlmem::detail {

/// A failure of `code` whose detail is `sentence` made printable (plan's inputs have no byte
/// offsets). A sentence quotes what the user gave (a --buffer spec, a config's value), which may
/// hold a newline or a terminal escape; printable_text keeps the detail one line, and as
/// printable_text(printable_text(x)) == printable_text(x) the command line prints the same bytes.
inline plan_error refuse(plan_errc code, std::string_view sentence) { return {code, 0, printable_text(sentence)}; }

/// The first failure of checks made in order, or success.
inline result<void, plan_errc> first_refusal(std::initializer_list<result<void, plan_errc>> checks) {
  for (const result<void, plan_errc>& check : checks) {
    if (!check.ok()) return check;
  }
  return {};
}

}  // namespace rlmem::detail
