// SPDX-License-Identifier: MIT
// The ranges of inspect's options, checked alike for the CLI, the C ABI and Python.

#include <rlmem/inspect/inspect.hpp>
#include <rlmem/base/whole_number.hpp>

#include <string>

namespace rlmem {

std::string check_option(const whole_number_option& option, std::string_view text) {
  std::string refusal = whole_number_refusal(text, option.min, option.max);
  return refusal.empty() ? refusal : std::string(option.flag) + ": " + refusal;
}

std::string check_inspect_options(const inspect_options& options) {
  if (options.device != -1) {
    if (std::string refusal = check_option(device_option, std::to_string(options.device)); !refusal.empty()) return refusal;
  }
  if (std::string refusal = check_option(top_option, std::to_string(options.top)); !refusal.empty()) return refusal;
  return check_option(limit_option, std::to_string(options.limit_bytes));
}

}  // namespace rlmem
