// SPDX-License-Identifier: MIT
#pragma once
// Prose for the text reports: wrapping explanations and notes to the terminal width.

#include <cstddef>
#include <string>
#include <string_view>

namespace rlmem::detail {

/// Wraps `text` to `width` columns, every line starting with `indent` spaces; a size's unit
/// ("MiB") stays on the line of its number.
std::string wrap(std::string_view text, std::size_t indent, std::size_t width);

}  // namespace rlmem::detail
