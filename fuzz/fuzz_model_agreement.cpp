// SPDX-License-Identifier: MIT
// libFuzzer target: for any snapshot, inspect's live set and replay's caching allocator model
// agree on allocated bytes after every event where both apply (model_agreement.hpp).

#include "fuzz_reading.hpp"
#include "model_agreement.hpp"

#include <rlmem/snapshot/snapshot_reader.hpp>

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto copy = rlmem::fuzzing::exact_copy(data, size);
  rlmem::read_options options = rlmem::fuzzing::tight_read_options();
  auto read = rlmem::read_snapshot_bytes({copy.get(), size}, options);
  if (!read.ok()) return 0;
  if (!rlmem::testing::check_model_agreement(read.value()).disagreement.empty()) __builtin_trap();
  return 0;
}
