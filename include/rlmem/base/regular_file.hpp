// SPDX-License-Identifier: MIT
#pragma once
// Opening a file that rlmem reads whole (a snapshot, a rules file, a config.json): only a
// regular file, opened without waiting on a FIFO's writer, so /dev/zero, sockets and pipes
// nobody writes to are refused instead of read forever or waited on.

#include <cstdint>
#include <string>

namespace rlmem {

/// What open_regular_file found. Exactly one holds: `descriptor` >= 0 (a regular file, open
/// for blocking reads, the caller closes it), `error_number` != 0 (open or fstat failed), or
/// `not_regular` names what the path is ("a FIFO (pipe)", "a directory", ...).
struct regular_file {
  int descriptor = -1;             ///< open for reading, the caller closes it; -1 when not open
  std::uint64_t size = 0;          ///< bytes, when open
  int error_number = 0;            ///< errno of the failed call
  const char* not_regular = nullptr;  ///< a static string naming what the path is; nullptr when regular or failed
};

/// Opens `path` read-only (O_NONBLOCK while opening, then fstat on the descriptor).
regular_file open_regular_file(const char* path) noexcept;

/// The largest file rlmem reads as an option file (a --categories rules file, a --model config.json).
inline constexpr std::uint64_t max_option_file_bytes = std::uint64_t{16} << 20;

/// Reads a small option file whole: only a regular file (open_regular_file), at most
/// max_option_file_bytes. The one reader of option files, for the CLI and the C ABI alike, so
/// both refuse a FIFO, /dev/zero or a huge file with the same line. On failure returns false
/// with a one-line message that starts with the path: "PATH: cannot be read (<strerror>)",
/// "PATH: not a regular file (a FIFO, a device or a folder)", "PATH: larger than 16 MiB; not an
/// option file".
bool read_option_file(const std::string& path, std::string& text, std::string& message);

}  // namespace rlmem
