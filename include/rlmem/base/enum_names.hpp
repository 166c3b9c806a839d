// SPDX-License-Identifier: MIT
#pragma once
// One table of names per enum, read both ways: what a report prints and what an option or a
// config parses come from the same entries, so a value cannot be spelled two ways.

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace rlmem {

/// One spelling of one value of `Enum`: an entry of an enum_names table.
template <class Enum>
struct enum_name {
  std::string_view name;  ///< as printed or parsed: "fsdp"
  Enum value;             ///< the value it spells
};

/// A value's names, the first entry for each value being the one printed; later entries for a
/// value are other spellings a parser takes ("zero3" for fsdp).
template <class Enum, std::size_t N>
using enum_names = std::array<enum_name<Enum>, N>;

/// The printed name of `value`: its first entry in `table`, or "?" when it has none.
template <class Enum, std::size_t N>
constexpr std::string_view name_of(const enum_names<Enum, N>& table, Enum value) noexcept {
  for (const enum_name<Enum>& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

/// The value `name` spells in `table`, or nothing.
template <class Enum, std::size_t N>
constexpr std::optional<Enum> value_named(const enum_names<Enum, N>& table, std::string_view name) noexcept {
  for (const enum_name<Enum>& entry : table) {
    if (entry.name == name) return entry.value;
  }
  return std::nullopt;
}

/// Every name of `table`, in order, joined by ", " (for a refusal's "expected one of ...").
template <class Enum, std::size_t N>
std::string names_list(const enum_names<Enum, N>& table) {
  std::string out;
  for (const enum_name<Enum>& entry : table) {
    if (!out.empty()) out += ", ";
    out += entry.name;
  }
  return out;
}

}  // namespace rlmem
