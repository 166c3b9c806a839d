// SPDX-License-Identifier: MIT
#pragma once
// How the snapshot fuzzers read their input: an exact-size copy and tight reader limits.

#include <rlmem/snapshot/snapshot_reader.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

namespace rlmem::fuzzing {

/// An exact-size copy of the input, so AddressSanitizer sees any read past the end.
inline std::unique_ptr<std::byte[]> exact_copy(const std::uint8_t* data, std::size_t size) {
  auto copy = std::make_unique<std::byte[]>(size);
  if (size > 0) std::memcpy(copy.get(), data, size);
  return copy;
}

/// Tight budgets, so inputs reach every limit in a few KB and each run stays small.
inline read_options tight_read_options() {
  read_options options;
  options.limits.max_input_bytes = std::uint64_t{64} << 20;
  options.limits.max_string_bytes = std::uint64_t{1} << 20;
  options.limits.max_depth = 256;
  options.limits.max_stack_values = std::uint64_t{1} << 14;
  options.limits.max_held_values = std::uint64_t{1} << 16;
  return options;
}

}  // namespace rlmem::fuzzing
