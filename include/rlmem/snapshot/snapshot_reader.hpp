// SPDX-License-Identifier: MIT
#pragma once
// Reads a memory snapshot written by torch.cuda.memory._dump_snapshot (pickle protocol 2..5,
// plain, gzip or zstd) without executing anything: only data opcodes are accepted.

#include <rlmem/base/error.hpp>
#include <rlmem/snapshot/snapshot.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>

namespace rlmem {

/// Bounds on what a reader will accept; each has its own error code when exceeded (LIMIT_*).
/// With them, the reader's memory is at most about 16 bytes per decompressed input byte plus
/// 256 MiB (the held-value budget, its vectors' growth, the stack), and its work is linear in
/// the decompressed bytes, which themselves are at most max_compression_ratio times the file.
struct read_limits {
  std::uint64_t max_input_bytes = std::uint64_t{1} << 40;    ///< decompressed bytes (1 TiB)
  std::uint64_t max_string_bytes = std::uint64_t{1} << 28;   ///< one string or bytes (256 MiB)
  std::uint32_t max_depth = 1024;                            ///< nested MARKs
  std::uint64_t max_memo_entries = std::uint64_t{1} << 31;  ///< entries of the pickle's memo (LIMIT_MEMO_ENTRIES)
  /// Values on the pickle stack at once (LIMIT_STACK_VALUES). Python's pickler keeps under a
  /// few thousand there (it writes lists in batches of 1,000); 2^25 values are 256 MiB.
  std::uint64_t max_stack_values = std::uint64_t{1} << 25;
  /// What the reader holds, in 8-byte units (LIMIT_HELD_VALUES): containers and their items,
  /// records, memo entries, interned strings and frames, and every copy made when shared
  /// structure is expanded (a list or dict the pickle references more than once). The budget
  /// is this base (2^24 units: 128 MiB) plus one unit per `input_bytes_per_held_value` bytes
  /// read. The bundled real snapshots need under one unit per 4 bytes (a test reads them so).
  std::uint64_t max_held_values = std::uint64_t{1} << 24;
  std::uint32_t input_bytes_per_held_value = 2;  ///< input bytes per unit the budget grows by; 0 counts as 1
  /// Decompressed bytes per compressed byte read, once past the first 64 MiB
  /// (LIMIT_COMPRESSION_RATIO). Real snapshots compress 15 to 40 times; gzip cannot pass 1,032.
  std::uint32_t max_compression_ratio = 1024;
};

/// Called now and then while reading: bytes consumed of the input file, and its size.
using progress_fn = std::function<void(std::uint64_t consumed, std::uint64_t total)>;

/// How read_snapshot_file and read_snapshot_bytes read: what they refuse, whom they tell of their
/// progress, and four settings of speed that never change the snapshot read.
struct read_options {
  read_limits limits;    ///< past any of these, reading fails with its LIMIT_* error
  progress_fn progress;  ///< may be empty
  /// Reads trace entries laid out as torch writes them by a direct path (about twice as fast);
  /// anything else takes the general path. The snapshot and every error are the same either
  /// way: off leaves only the general path, which tests and a fuzzer compare it with.
  bool trace_entry_shortcut = true;
  /// Reads (and decompresses) the input on a second thread, in blocks of this many bytes, up to
  /// three blocks (plus one held) ahead of the parser; 0 reads it on the calling thread. The
  /// snapshot is the same either way. Of two errors, one of the input's decoding (corrupt or
  /// over-ratio compressed data, LIMIT_INPUT_BYTES) and one of the parse further on, which is
  /// met first may differ, since the input is read further ahead. An input (file or buffer,
  /// compressed or not) smaller than one block, or one for which no thread can be started, is
  /// read on the calling thread.
  std::size_t read_ahead_block_bytes = std::size_t{1} << 20;
  /// With read-ahead and the shortcut, the read-ahead thread also decodes each block's trace
  /// entries (where every key and value lies, and what it is) and the parse builds their
  /// records from that, so the two cores share the parse. The snapshot and every error are the
  /// same either way: off leaves the parse thread to decode the bytes, which tests and a fuzzer
  /// compare it with. Where the process may use one core only (its CPU affinity), it is off.
  bool scan_entries_ahead = true;
  /// For an input of at least this many (uncompressed, where known) bytes, a second thread
  /// faults in the pages just ahead of the reader's two largest arrays (the trace entries and
  /// the memo), so the parse does not stop for the kernel to map and zero them; at most 2 MiB
  /// of each is resident before it is written. It only maps pages: the snapshot and every error
  /// are the same either way. UINT64_MAX turns it off; on kernels older than Linux 5.14 it
  /// does nothing.
  std::uint64_t prefault_from_bytes = std::uint64_t{32} << 20;
};

/// Reads the snapshot in `path`. The format (pickle, gzip, zstd) is detected from the content.
/// @return the snapshot, or an error: IO_ERROR, EMPTY_INPUT, UNKNOWN_FORMAT, DECOMPRESS_ERROR,
///   TRUNCATED, UNSUPPORTED_PROTOCOL, FORBIDDEN_OPCODE, UNSUPPORTED_OPCODE, INVALID_OPCODE,
///   STACK_UNDERFLOW, MISSING_MARK, BAD_MEMO_REFERENCE, TYPE_MISMATCH, INVALID_VALUE,
///   CONTAINER_REUSED, TRAILING_DATA, LIMIT_*, NOT_A_SNAPSHOT, INVALID_SIZE, and for a path
///   that is no regular file (a FIFO, /dev/zero), NOT_A_REGULAR_FILE.
result<snapshot> read_snapshot_file(const std::filesystem::path& path, const read_options& options = {});

/// Reads a snapshot held in memory; same formats and errors as read_snapshot_file.
/// IMPORTANT: `bytes` must stay valid until the call returns; nothing refers to it after.
result<snapshot> read_snapshot_bytes(std::span<const std::byte> bytes, const read_options& options = {});

}  // namespace rlmem
