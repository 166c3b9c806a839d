// SPDX-License-Identifier: MIT
// The nesting check config.json and the trainers' configs share before they are parsed.

#include "json_nesting.hpp"

namespace rlmem::detail {

bool json_nests_deeper(std::string_view text, std::uint32_t max_depth) noexcept {
  std::uint32_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) return true;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return false;
}

}  // namespace rlmem::detail
