// SPDX-License-Identifier: MIT
// How deep a JSON text nests, read before nlohmann's parser (which keeps a frame per level) sees it.
#pragma once

#include <cstdint>
#include <string_view>

namespace rlmem::detail {

/// Whether `text` opens more than `max_depth` objects or arrays inside one another, strings and
/// their escapes skipped. Linear in the text; a malformed text is left to the parser.
bool json_nests_deeper(std::string_view text, std::uint32_t max_depth) noexcept;

}  // namespace rlmem::detail
