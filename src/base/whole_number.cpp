// SPDX-License-Identifier: MIT
// Whole numbers of options, and the wording of a refusal.

#include <rlmem/base/format.hpp>
#include <rlmem/base/whole_number.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

namespace rlmem {

bool parse_whole_number(std::string_view text, std::uint64_t& number) {
  if (text.empty() || !std::all_of(text.begin(), text.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; })) {
    return false;
  }
  auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), number);
  return status == std::errc{} && end == text.data() + text.size();
}

std::string whole_number_refusal(std::string_view text, std::uint64_t min, std::uint64_t max) {
  std::uint64_t number = 0;
  if (parse_whole_number(text, number) && number >= min && number <= max) return {};
  const std::string shown = printable_text(text.substr(0, 40));
  if (max == std::numeric_limits<std::uint64_t>::max()) return fmt::format("'{}' is not a whole number of {} or more", shown, min);
  return fmt::format("'{}' is not a whole number from {} to {}", shown, min, max);
}

}  // namespace rlmem
