// SPDX-License-Identifier: MIT
#pragma once
// Human number formats shared by every report and explanation, and the one escaping of
// untrusted text (file names, frames, settings, metadata) before it reaches a terminal.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace rlmem {

namespace detail {
/// `magnitude` bytes in binary units, with a minus sign when `negative`.
std::string format_byte_magnitude(std::uint64_t magnitude, bool negative);
}  // namespace detail

/// "512 B", "46.9 MiB", "1.25 GiB", up to "16.0 EiB": binary units, three significant digits or
/// so. Defined for every value of every integer type (INT64_MIN and UINT64_MAX included).
template <std::integral Bytes>
std::string format_bytes(Bytes bytes) {
  if constexpr (std::is_signed_v<Bytes>) {
    // The magnitude in unsigned arithmetic: negating INT64_MIN as a signed value is undefined.
    if (bytes < 0) return detail::format_byte_magnitude(std::uint64_t{0} - static_cast<std::uint64_t>(bytes), true);
  }
  return detail::format_byte_magnitude(static_cast<std::uint64_t>(bytes), false);
}

/// Frame strings, site labels and user frames longer than this many bytes keep their start and
/// end and lose the middle, so a report stays proportional to the snapshot whatever one frame
/// string holds.
inline constexpr std::size_t max_label_bytes = 512;

/// `text` cut to `max_bytes` by replacing its middle with "...", at UTF-8 character boundaries.
std::string elide_middle(std::string_view text, std::size_t max_bytes = max_label_bytes);

/// "188,494".
std::string format_count(std::uint64_t count);

/// A range of bytes, both ends included, as every command states the limit a recording shows:
/// "2.61 GiB to 2.65 GiB", in exact bytes ("2,803,892,224 B to 2,805,590,496 B") when the two
/// ends would print alike, and one figure when they are equal.
std::string format_byte_range(std::uint64_t low, std::uint64_t high);

/// Untrusted text made safe to print: C0 controls (newline and tab included), DEL, C1 controls
/// and the bidirectional overrides become \xNN or \uNNNN, bytes that are not UTF-8 become \xNN,
/// and a backslash stays a backslash. The result holds no byte below 0x20, no 0x7F and no C1
/// control, so a frame name cannot move the cursor, retitle the terminal or forge a line.
std::string printable_text(std::string_view text);

}  // namespace rlmem
