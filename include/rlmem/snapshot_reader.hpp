// SPDX-License-Identifier: MIT
#pragma once
// Reads a memory snapshot written by torch.cuda.memory._dump_snapshot (pickle protocol 2..5,
// plain, gzip or zstd) without executing anything: only data opcodes are accepted.

#include <rlmem/error.hpp>
#include <rlmem/snapshot.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>

namespace rlmem {

/// Bounds on what a reader will accept; each has its own error code when exceeded.
struct read_limits {
  std::uint64_t max_input_bytes = std::uint64_t{1} << 40;    ///< decompressed bytes (1 TiB)
  std::uint64_t max_string_bytes = std::uint64_t{1} << 28;   ///< one string or bytes (256 MiB)
  std::uint32_t max_depth = 1024;                            ///< nested MARKs
  std::uint64_t max_memo_entries = std::uint64_t{1} << 31;
};

/// Called now and then while reading: bytes consumed of the input file, and its size.
using progress_fn = std::function<void(std::uint64_t consumed, std::uint64_t total)>;

struct read_options {
  read_limits limits;
  progress_fn progress;  ///< may be empty
};

/// Reads the snapshot in `path`. The format (pickle, gzip, zstd) is detected from the content.
/// @return the snapshot, or an error: IO_ERROR, EMPTY_INPUT, UNKNOWN_FORMAT, DECOMPRESS_ERROR,
///   TRUNCATED, UNSUPPORTED_PROTOCOL, FORBIDDEN_OPCODE, UNSUPPORTED_OPCODE, INVALID_OPCODE,
///   STACK_UNDERFLOW, MISSING_MARK, BAD_MEMO_REFERENCE, TYPE_MISMATCH, INVALID_VALUE,
///   CONTAINER_REUSED, TRAILING_DATA, LIMIT_*, NOT_A_SNAPSHOT.
result<snapshot> read_snapshot_file(const std::filesystem::path& path, const read_options& options = {});

/// Reads a snapshot held in memory; same formats and errors as read_snapshot_file.
/// IMPORTANT: `bytes` must stay valid until the call returns; nothing refers to it after.
result<snapshot> read_snapshot_bytes(std::span<const std::byte> bytes, const read_options& options = {});

}  // namespace rlmem
