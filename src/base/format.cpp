// SPDX-License-Identifier: MIT
// Human number formats shared by every text report, and the escaping of untrusted text.

#include <rlmem/base/format.hpp>

#include <fmt/format.h>

#include <array>

namespace rlmem {

namespace detail {

std::string format_byte_magnitude(std::uint64_t magnitude, bool negative) {
  static constexpr std::array<const char*, 6> units = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  const char* sign = negative ? "-" : "";
  if (magnitude < 1024) return fmt::format("{}{} B", sign, magnitude);
  double scaled = static_cast<double>(magnitude) / 1024.0;
  std::size_t unit = 0;
  while (scaled >= 1024.0 && unit + 1 < units.size()) {
    scaled /= 1024.0;
    ++unit;
  }
  return scaled < 10.0 ? fmt::format("{}{:.2f} {}", sign, scaled, units[unit]) : fmt::format("{}{:.1f} {}", sign, scaled, units[unit]);
}

}  // namespace detail

std::string format_count(std::uint64_t count) {
  std::string digits = std::to_string(count);
  std::string grouped;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return grouped;
}

namespace {

// Code points that would let a string move the cursor, recolour, retitle or reorder the
// terminal: C0 and C1 controls, DEL, and the bidirectional overrides (Trojan Source).
bool is_control(std::uint32_t code) {
  return code < 0x20 || (code >= 0x7F && code <= 0x9F) || code == 0x200E || code == 0x200F || (code >= 0x202A && code <= 0x202E) ||
         (code >= 0x2066 && code <= 0x2069);
}

}  // namespace

std::string printable_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    auto byte = static_cast<unsigned char>(text[i]);
    std::size_t length = byte < 0x80 ? 1 : (byte >> 5) == 0x6 ? 2 : (byte >> 4) == 0xE ? 3 : (byte >> 3) == 0x1E ? 4 : 0;
    std::uint32_t code = length == 1 ? byte : length == 2 ? byte & 0x1Fu : length == 3 ? byte & 0x0Fu : byte & 0x07u;
    bool valid = length > 0 && i + length <= text.size();
    for (std::size_t k = 1; valid && k < length; ++k) {
      auto next = static_cast<unsigned char>(text[i + k]);
      valid = (next & 0xC0) == 0x80;
      code = (code << 6) | (next & 0x3Fu);
    }
    // Overlong forms and surrogates are not UTF-8 either.
    static constexpr std::array<std::uint32_t, 5> smallest = {0, 0, 0x80, 0x800, 0x10000};
    valid = valid && code >= smallest[length] && code <= 0x10FFFF && (code < 0xD800 || code > 0xDFFF);
    if (!valid) {
      out += fmt::format("\\x{:02x}", byte);
      ++i;
      continue;
    }
    if (is_control(code)) {
      out += code < 0x100 ? fmt::format("\\x{:02x}", code) : fmt::format("\\u{:04x}", code);
    } else {
      out.append(text.substr(i, length));
    }
    i += length;
  }
  return out;
}

namespace {
bool continues_character(char byte) { return (static_cast<unsigned char>(byte) & 0xC0) == 0x80; }
}  // namespace

std::string elide_middle(std::string_view text, std::size_t max_bytes) {
  constexpr std::string_view marker = "...";
  if (text.size() <= max_bytes || max_bytes <= marker.size()) return std::string(text);
  std::size_t head = (max_bytes - marker.size()) / 2;
  std::size_t tail_start = text.size() - (max_bytes - marker.size() - head);
  while (head > 0 && continues_character(text[head])) --head;
  while (tail_start < text.size() && continues_character(text[tail_start])) ++tail_start;
  std::string elided(text.substr(0, head));
  elided += marker;
  elided += text.substr(tail_start);
  return elided;
}

std::string format_byte_range(std::uint64_t low, std::uint64_t high) {
  std::string from = format_bytes(low);
  std::string to = format_bytes(high);
  if (low == high) return from;
  if (from != to) return from + " to " + to;
  return format_count(low) + " B to " + format_count(high) + " B";
}

}  // namespace rlmem
