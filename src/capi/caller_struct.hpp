// SPDX-License-Identifier: MIT
#pragma once
// Structs that cross the C ABI with a struct_size: the header's promise that a caller built
// against an older rlmem.h (a smaller struct) still works. Each struct has a list of the sizes at
// which its published layouts end, oldest first. A caller's struct_size must be one of them:
// anything else (smaller than the first layout, between two, or larger than this library knows:
// a header newer than the library) is refused with one line saying which sizes are accepted.
// The library then reads and writes only the caller's struct_size bytes: fields past it take
// their defaults (mimalloc's mi_stats_get(size, ...) writes only `size` bytes the same way).
// Bytes move with memcpy, never through the caller's pointer as the library's type, so a
// smaller struct is never read or written past its end.

#include <rlmem/rlmem.h>
#include <rlmem/version.h>

#include <array>
#include <cstddef>
#include <cstring>  // std::memcpy
#include <string>
#include <string_view>
#include <type_traits>

namespace rlmem::capi {

/// The sizes at which a struct's layouts end, oldest first; the last is sizeof the struct.
template <std::size_t Count>
struct struct_layouts {
  std::string_view name;  ///< "rlmem_runtime_options"
  std::string_view hint;  ///< how a caller sets struct_size: "call rlmem_runtime_options_init() first"
  std::array<std::size_t, Count> sizes;
};

/// sizeof a struct whose last field ends at `end`: an older layout of `Struct` (each older
/// layout is a prefix of the newer ones, padded to the same alignment: size_t and uint64_t
/// fields set it in every such struct).
template <typename Struct>
constexpr std::size_t layout_ending_at(std::size_t end) noexcept {
  return (end + alignof(Struct) - 1) / alignof(Struct) * alignof(Struct);
}

/// Whether `given` is one of `layouts`' sizes; otherwise `why` gets the one-line reason.
template <std::size_t Count>
bool known_layout(const struct_layouts<Count>& layouts, std::size_t given, std::string& why) {
  for (std::size_t size : layouts.sizes) {
    if (size == given) return true;
  }
  std::string accepted;
  for (std::size_t i = 0; i < Count; ++i) {
    if (i > 0) accepted += i + 1 == Count ? " or " : ", ";
    accepted += std::to_string(layouts.sizes[i]);
  }
  why = std::string(layouts.name) + ".struct_size is " + std::to_string(given) + ": this librlmem (" RLMEM_VERSION_STRING
        ") reads " + accepted + (Count == 1 ? " bytes" : " bytes (its layouts, oldest first)");
  if (given > layouts.sizes.back()) why += "; a header newer than the library";
  why += ": " + std::string(layouts.hint);
  return false;
}

/// The caller's struct_size, read without reading past it (struct_size comes
/// first in every such struct).
inline std::size_t caller_struct_size(const void* given) noexcept {
  std::size_t size = 0;
  std::memcpy(&size, given, sizeof size);
  return size;
}

/// The caller's struct as this library's whole one (struct_size = sizeof): `defaults`, then the
/// caller's first struct_size bytes over them. Pre: known_layout() accepted given->struct_size.
template <typename Struct>
Struct read_caller_struct(const Struct* given, const Struct& defaults) noexcept {
  static_assert(std::is_trivially_copyable_v<Struct>);
  Struct whole = defaults;
  std::memcpy(&whole, given, caller_struct_size(given));
  whole.struct_size = sizeof(Struct);
  return whole;
}

/// Writes the first `caller_size` bytes of `whole` to the caller's struct, struct_size included
/// (as the caller's size). Pre: known_layout() accepted caller_size.
template <typename Struct>
void write_caller_struct(Struct* out, Struct whole, std::size_t caller_size) noexcept {
  static_assert(std::is_trivially_copyable_v<Struct>);
  whole.struct_size = caller_size;
  std::memcpy(out, &whole, caller_size);
}

/// The body of the *_init_sized functions: the defaults into the caller's struct_size bytes.
/// A size of no layout writes only struct_size (when it fits), so that the calls taking the
/// struct refuse it with their reason.
template <typename Struct, std::size_t Count>
int init_caller_struct(Struct* out, std::size_t caller_size, const struct_layouts<Count>& layouts, const Struct& defaults) noexcept {
  if (out == nullptr) return RLMEM_E_INVALID_ARGUMENT;
  bool known = false;
  for (std::size_t size : layouts.sizes) known = known || size == caller_size;
  if (!known) {
    if (caller_size >= sizeof caller_size) std::memcpy(out, &caller_size, sizeof caller_size);
    return RLMEM_E_INVALID_ARGUMENT;
  }
  write_caller_struct(out, defaults, caller_size);
  return RLMEM_OK;
}

}  // namespace rlmem::capi
