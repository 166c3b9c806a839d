// SPDX-License-Identifier: MIT
// libFuzzer target: for any snapshot, inspect's live set and replay's caching allocator model
// agree on allocated bytes after every event where both apply (model_agreement.hpp).

#include "model_agreement.hpp"

#include <rlmem/snapshot_reader.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // An exact-size copy, so AddressSanitizer sees any read past the end.
  auto copy = std::make_unique<std::byte[]>(size);
  if (size > 0) std::memcpy(copy.get(), data, size);
  rlmem::read_options options;
  options.limits.max_input_bytes = std::uint64_t{64} << 20;
  options.limits.max_string_bytes = std::uint64_t{1} << 20;
  options.limits.max_depth = 256;
  options.limits.max_stack_values = std::uint64_t{1} << 14;
  options.limits.max_held_values = std::uint64_t{1} << 16;
  auto read = rlmem::read_snapshot_bytes({copy.get(), size}, options);
  if (!read.ok()) return 0;
  if (!rlmem::testing::check_model_agreement(read.value()).disagreement.empty()) __builtin_trap();
  return 0;
}
