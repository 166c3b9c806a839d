// SPDX-License-Identifier: MIT
// Option values: sizes with units, rules files.

#include "arguments.hpp"

#include <array>
#include <cctype>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string_view>

namespace rlmem::cli {

bool parse_size(const std::string& text, std::int64_t& bytes) {
  std::size_t used = 0;
  double number = 0;
  try {
    number = std::stod(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  std::string unit = text.substr(used);
  unit.erase(0, unit.find_first_not_of(' '));
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  struct unit_scale {
    std::string_view name;
    double scale;
  };
  static constexpr std::array<unit_scale, 11> units = {{{"", 1.0}, {"b", 1.0}, {"kib", 1024.0}, {"mib", 1048576.0},
                                                        {"gib", 1073741824.0}, {"tib", 1099511627776.0}, {"kb", 1e3},
                                                        {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12}, {"k", 1024.0}}};
  for (const unit_scale& candidate : units) {
    if (unit == candidate.name) {
      double value = number * candidate.scale;
      if (!std::isfinite(value) || value <= 0 || value > 9.0e18) return false;
      bytes = static_cast<std::int64_t>(value);
      return true;
    }
  }
  return false;
}

bool load_category_rules(const std::string& path, std::vector<category_rule>& rules, std::string& message) {
  std::ifstream input(path, std::ios::binary);
  if (!input) {
    message = path + ": cannot be read";
    return false;
  }
  std::string text((std::istreambuf_iterator<char>(input)), std::istreambuf_iterator<char>());
  if (!parse_category_rules(text, rules, message)) {
    message = path + ": " + message;
    return false;
  }
  if (rules.empty()) {
    message = path + ": no rules";
    return false;
  }
  return true;
}

}  // namespace rlmem::cli
