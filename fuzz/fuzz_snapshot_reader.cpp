// SPDX-License-Identifier: MIT
// libFuzzer target: any byte string must give a snapshot or an error, never a crash.

#include <rlmem/inspect.hpp>
#include <rlmem/replay.hpp>
#include <rlmem/snapshot_reader.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // An exact-size copy, so AddressSanitizer sees any read past the end.
  auto copy = std::make_unique<std::byte[]>(size);
  if (size > 0) std::memcpy(copy.get(), data, size);
  rlmem::read_options options;
  options.limits.max_input_bytes = std::uint64_t{64} << 20;
  options.limits.max_string_bytes = std::uint64_t{1} << 20;
  options.limits.max_depth = 256;
  // Tight budgets, so that inputs reach them in a few KB and each run stays small.
  options.limits.max_stack_values = std::uint64_t{1} << 14;
  options.limits.max_held_values = std::uint64_t{1} << 16;
  auto read = rlmem::read_snapshot_bytes({copy.get(), size}, options);
  if (read.ok()) {
    // Whatever parsed must also survive the analyses and the replay (with and without a cap).
    rlmem::inspection result = rlmem::inspect(read.value());
    // And with a step marker, which runs RE2 over every distinct frame, however long.
    rlmem::inspect_options marked;
    marked.step_marker = "(step|train)[^/]*$";
    std::string problem;
    if (!rlmem::inspect_checked(read.value(), marked, result, problem)) __builtin_trap();
    rlmem::replay_options options;
    (void)rlmem::replay(read.value(), options);
    options.capacity_bytes = std::uint64_t{64} << 20;
    (void)rlmem::replay(read.value(), options);
  }
  return 0;
}
