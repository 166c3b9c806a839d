// SPDX-License-Identifier: MIT
// libFuzzer target: any byte string must give a snapshot or an error, never a crash, and the
// same one with and without the reader's trace-entry shortcut, and with and without reading
// ahead on a second thread.

#include "fuzz_reading.hpp"

#include <rlmem/inspect/inspect.hpp>
#include <rlmem/replay/replay.hpp>
#include <rlmem/snapshot/snapshot_reader.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto copy = rlmem::fuzzing::exact_copy(data, size);
  rlmem::read_options options = rlmem::fuzzing::tight_read_options();
  auto read = rlmem::read_snapshot_bytes({copy.get(), size}, options);
  // Differential: the trace-entry shortcut and the general path must read the same snapshot or
  // fail the same way. Only the held-value budget may differ at its edge: the general path
  // also holds each entry's dict and frame list for a moment.
  options.trace_entry_shortcut = false;
  auto general = rlmem::read_snapshot_bytes({copy.get(), size}, options);
  auto at_budget_edge = [](const auto& outcome) {
    return !outcome.ok() && outcome.failure().code == rlmem::errc::limit_held_values;
  };
  if (!at_budget_edge(read) && !at_budget_edge(general)) {
    if (read.ok() != general.ok()) __builtin_trap();
    if (read.ok() && !(read.value() == general.value())) __builtin_trap();
    if (!read.ok() && rlmem::describe(read.failure()) != rlmem::describe(general.failure())) __builtin_trap();
  }
  // Differential: reading ahead on a second thread, in blocks chosen by the input, reads the same snapshot or fails the same way; only an error of the compressed
  // input's decoding may be met before or after a parse error further on.
  // The same read also faults pages in ahead of the arrays on a third thread (only large inputs
  // do otherwise), which must change nothing, and the read-ahead thread decodes the trace
  // entries it sees whole into notes the parse builds records from (against the parse
  // thread's own decoding of the bytes in the first read).
  options.trace_entry_shortcut = true;
  // Blocks of 1 to 64 bytes cut every opcode somewhere; blocks of 64 to 4,032 bytes (the top
  // bit of the input's last byte) hold whole trace entries for the scanner to note.
  std::size_t last = size == 0 ? 0 : std::to_integer<std::size_t>(copy[size - 1]);
  options.read_ahead_block_bytes = (last & 0x80) != 0 ? 64 * (1 + last % 63) : 1 + last % 64;
  options.prefault_from_bytes = 0;
  auto ahead = rlmem::read_snapshot_bytes({copy.get(), size}, options);
  auto decoding = [](const auto& outcome) {
    if (outcome.ok()) return false;
    rlmem::errc code = outcome.failure().code;
    return code == rlmem::errc::decompress_error || code == rlmem::errc::limit_compression_ratio ||
           code == rlmem::errc::limit_input_bytes;
  };
  if (!decoding(read) && !decoding(ahead)) {
    if (read.ok() != ahead.ok()) __builtin_trap();
    if (read.ok() && !(read.value() == ahead.value())) __builtin_trap();
    if (!read.ok() && rlmem::describe(read.failure()) != rlmem::describe(ahead.failure())) __builtin_trap();
  }
  if (read.ok()) {
    // Whatever parsed must also survive the analyses and the replay (with and without a cap).
    (void)rlmem::inspect(read.value());
    // And with a step marker, which runs RE2 over every distinct frame, however long.
    rlmem::inspect_options marked;
    marked.step_marker = "(step|train)[^/]*$";
    if (!rlmem::inspect_checked(read.value(), marked).ok()) __builtin_trap();
    rlmem::replay_options options;
    (void)rlmem::replay(read.value(), options);
    options.capacity_bytes = std::uint64_t{64} << 20;
    (void)rlmem::replay(read.value(), options);
  }
  return 0;
}
