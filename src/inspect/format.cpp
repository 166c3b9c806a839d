// SPDX-License-Identifier: MIT
// Human number formats shared by every text report.

#include <rlmem/format.hpp>

#include <fmt/format.h>

#include <array>

namespace rlmem {

std::string format_bytes(std::int64_t bytes) {
  static constexpr std::array<const char*, 5> units = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  // Negated in unsigned arithmetic: llabs(INT64_MIN) is undefined.
  std::uint64_t magnitude = bytes < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(bytes) : static_cast<std::uint64_t>(bytes);
  const char* sign = bytes < 0 ? "-" : "";
  if (magnitude < 1024) return fmt::format("{}{} B", sign, magnitude);
  double scaled = static_cast<double>(magnitude) / 1024.0;
  std::size_t unit = 0;
  while (scaled >= 1024.0 && unit + 1 < units.size()) {
    scaled /= 1024.0;
    ++unit;
  }
  return scaled < 10.0 ? fmt::format("{}{:.2f} {}", sign, scaled, units[unit]) : fmt::format("{}{:.1f} {}", sign, scaled, units[unit]);
}

std::string format_count(std::uint64_t count) {
  std::string digits = std::to_string(count);
  std::string grouped;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return grouped;
}

}  // namespace rlmem
