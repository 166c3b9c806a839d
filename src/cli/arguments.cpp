// SPDX-License-Identifier: MIT
// Option values: sizes with units, whole numbers, category rules files.

#include "arguments.hpp"

#include <rlmem/base/format.hpp>
#include <rlmem/base/regular_file.hpp>
#include <rlmem/base/whole_number.hpp>

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

namespace rlmem::cli {

namespace {

std::string_view digits_prefix(std::string_view text) {
  std::size_t end = 0;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end])) != 0) ++end;
  return text.substr(0, end);
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

bool parse_size(std::string_view text, std::int64_t& bytes, std::string& message) {
  const std::string accepted = fmt::format("a size from 1 B to {} B (8 EiB): whole bytes like 2805590497, or a number and a unit "
                                           "like 2.6GiB, 512 MiB, 80GB",
                                           max_size_bytes);
  message = fmt::format("'{}' is not {}", text.substr(0, 80), accepted);
  std::string_view whole_digits = digits_prefix(text);
  std::string_view rest = text.substr(whole_digits.size());
  std::string_view fraction_digits;
  if (rest.starts_with('.')) {
    fraction_digits = digits_prefix(rest.substr(1));
    rest = rest.substr(1 + fraction_digits.size());
    if (fraction_digits.empty()) return false;
  }
  if (whole_digits.empty() && fraction_digits.empty()) return false;
  while (rest.starts_with(' ')) rest.remove_prefix(1);
  struct unit_scale {
    std::string_view name;
    std::uint64_t scale;
  };
  static constexpr std::array<unit_scale, 11> units = {{{"", 1},
                                                        {"b", 1},
                                                        {"kib", std::uint64_t{1} << 10},
                                                        {"mib", std::uint64_t{1} << 20},
                                                        {"gib", std::uint64_t{1} << 30},
                                                        {"tib", std::uint64_t{1} << 40},
                                                        {"kb", 1'000},
                                                        {"mb", 1'000'000},
                                                        {"gb", 1'000'000'000},
                                                        {"tb", 1'000'000'000'000},
                                                        {"k", std::uint64_t{1} << 10}}};
  const std::string unit = lower(rest);
  const unit_scale* found = nullptr;
  for (const unit_scale& candidate : units) {
    if (unit == candidate.name) found = &candidate;
  }
  if (found == nullptr) return false;
  if (!fraction_digits.empty() && found->scale == 1) {
    message = fmt::format("'{}' is not a whole number of bytes; {}", text.substr(0, 80), accepted);
    return false;
  }
  std::uint64_t whole = 0;
  if (!whole_digits.empty() && !parse_whole_number(whole_digits, whole)) whole = max_size_bytes + 1;  // overflow: out of range below
  std::uint64_t total = 0;
  bool overflow = __builtin_mul_overflow(whole, found->scale, &total);
  if (!fraction_digits.empty()) {
    // The fraction alone is below one unit (at most 2^40 bytes): a double holds it to the byte.
    double fraction = 0;
    std::string decimal = "0." + std::string(fraction_digits.substr(0, 30));
    std::from_chars(decimal.data(), decimal.data() + decimal.size(), fraction);
    auto extra = static_cast<std::uint64_t>(std::llround(fraction * static_cast<double>(found->scale)));
    overflow = overflow || __builtin_add_overflow(total, extra, &total);
  }
  if (overflow || total < 1 || total > max_size_bytes) {
    message = fmt::format("'{}' is out of range: {}", text.substr(0, 80), accepted);
    return false;
  }
  bytes = static_cast<std::int64_t>(total);
  message.clear();
  return true;
}

CLI::Validator whole_number_in(std::uint64_t min, std::uint64_t max) {
  // CLI11 puts the option's name in front of the refusal, as check_option() does.
  return CLI::Validator([min, max](std::string& text) { return whole_number_refusal(text, min, max); },
                        max == std::numeric_limits<std::uint64_t>::max() ? std::string() : fmt::format("{}-{}", min, max));
}

CLI::Validator whole_number_in(const whole_number_option& option) { return whole_number_in(option.min, option.max); }

CLI::Validator decimal_in(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) {
        std::string_view whole = digits_prefix(text);
        std::string_view rest = std::string_view(text).substr(whole.size());
        bool decimal = !whole.empty() && (rest.empty() || (rest.size() > 1 && rest[0] == '.' && digits_prefix(rest.substr(1)).size() == rest.size() - 1));
        double number = 0;
        if (decimal) std::from_chars(text.data(), text.data() + text.size(), number);
        if (decimal && number >= min && number <= max) return std::string();
        return fmt::format("'{}' is not a decimal number from {} to {}", printable_text(std::string_view(text).substr(0, 40)), min, max);
      },
      fmt::format("{}-{}", min, max));
}

bool load_category_rules(const std::string& path, std::vector<category_rule>& rules, std::string& message) {
  auto read = read_option_file(path);
  if (!read.ok()) {
    message = read.failure().detail;
    return false;
  }
  auto parsed = parse_category_rules(read.value());
  if (!parsed.ok()) {
    message = path + ": " + parsed.failure().detail;
    return false;
  }
  rules = std::move(parsed).value();
  if (rules.empty()) {
    message = path + ": no rules";
    return false;
  }
  return true;
}

}  // namespace rlmem::cli
