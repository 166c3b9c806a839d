// SPDX-License-Identifier: MIT
// libFuzzer target for the category rules parser (`--categories FILE`).

#include <rlmem/base/format.hpp>
#include <rlmem/inspect/inspect.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = rlmem::parse_category_rules(text);
  if (!parsed.ok()) {
    // A named code, and a line that starts by naming the line of the file (one line as printed,
    // the file's own bytes escaped).
    const std::string& message = parsed.failure().detail;
    if (parsed.code() == rlmem::inspect_errc::ok || rlmem::error_name(parsed.code()) == "UNKNOWN") __builtin_trap();
    if (message.rfind("line ", 0) != 0 || rlmem::printable_text(message).find('\n') != std::string::npos) __builtin_trap();
    return 0;
  }
  if (parsed.code() != rlmem::inspect_errc::ok) __builtin_trap();
  for (const auto& rule : parsed.value()) {
    if (rule.pattern.empty()) __builtin_trap();
  }
  return 0;
}
