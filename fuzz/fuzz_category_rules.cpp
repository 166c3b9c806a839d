// SPDX-License-Identifier: MIT
// libFuzzer target for the category rules parser (`--categories FILE`).

#include <rlmem/inspect/inspect.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<rlmem::category_rule> rules;
  std::string message;
  bool ok = rlmem::parse_category_rules(text, rules, message);
  // Success leaves no message; failure always names the line.
  if (ok && !message.empty()) __builtin_trap();
  if (!ok && message.rfind("line ", 0) != 0) __builtin_trap();
  for (const auto& rule : rules) {
    if (rule.pattern.empty()) __builtin_trap();
  }
  return 0;
}
