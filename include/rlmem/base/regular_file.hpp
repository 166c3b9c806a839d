// SPDX-License-Identifier: MIT
#pragma once
// Opening a file that rlmem reads whole (a snapshot, a rules file, a config.json): only a
// regular file, opened without waiting on a FIFO's writer, so /dev/zero, sockets and pipes
// nobody writes to are refused instead of read forever or waited on.

#include <rlmem/base/error.hpp>

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

/// How large an option file read_option_file reads.
struct option_file_limits {
  /// The largest file rlmem reads as an option file (a --categories rules file, a --model
  /// config.json): 16 MiB.
  std::uint64_t max_bytes = std::uint64_t{16} << 20;
};

/// Reads a small option file whole: only a regular file (open_regular_file), at most
/// `limits.max_bytes`. The one reader of option files, for the CLI and the C ABI alike, so both
/// refuse a FIFO, /dev/zero or a huge file with the same line. Its codes are the snapshot
/// reader's for the same failures of a file (a file is read the same way whatever it holds):
/// errc::io_error, errc::not_a_regular_file, errc::limit_input_bytes; `detail` is one line that
/// starts with the path: "PATH: cannot be read (<strerror>)", "PATH: not a regular file (a FIFO,
/// a device or a folder)", "PATH: larger than 16 MiB; not an option file".
result<std::string> read_option_file(const std::string& path, const option_file_limits& limits = {});

}  // namespace rlmem
