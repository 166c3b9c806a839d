// SPDX-License-Identifier: MIT
#pragma once
// Opening a file that rlmem reads whole (a snapshot, a rules file, a config.json): only a
// regular file, opened without waiting on a FIFO's writer, so /dev/zero, sockets and pipes
// nobody writes to are refused instead of read forever or waited on.

#include <cstdint>

namespace rlmem {

/// What open_regular_file found. Exactly one holds: `descriptor` >= 0 (a regular file, open
/// for blocking reads, the caller closes it), `error_number` != 0 (open or fstat failed), or
/// `not_regular` names what the path is ("a FIFO (pipe)", "a directory", ...).
struct regular_file {
  int descriptor = -1;
  std::uint64_t size = 0;          ///< bytes, when open
  int error_number = 0;            ///< errno of the failed call
  const char* not_regular = nullptr;
};

/// Opens `path` read-only (O_NONBLOCK while opening, then fstat on the descriptor).
regular_file open_regular_file(const char* path) noexcept;

}  // namespace rlmem
