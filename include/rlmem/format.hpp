// SPDX-License-Identifier: MIT
#pragma once
// Human number formats shared by every report and explanation.

#include <cstdint>
#include <string>

namespace rlmem {

/// "512 B", "46.9 MiB", "1.25 GiB": binary units, three significant digits or so.
std::string format_bytes(std::int64_t bytes);
/// "188,494".
std::string format_count(std::uint64_t count);

}  // namespace rlmem
