// SPDX-License-Identifier: MIT
#pragma once
// Writing a file rlmem produces whole (an HTML page): a regular file is replaced at once, so a
// reader never finds half a page under its name; anything else (a device, a FIFO, a terminal,
// a descriptor named by /dev/stdout or /dev/fd/N) is written in place, never replaced.

#include <string>
#include <string_view>

namespace rlmem {

/// How write_output_file wrote, or why it could not.
struct output_written {
  int error_number = 0;  ///< 0 on success; otherwise the errno of the call that failed
  std::string problem;   ///< on failure, one line: "cannot write PATH: <strerror>" (PATH unescaped)
};

/// Writes `contents` to `path`, following symbolic links to the file they name (the links stay):
/// - a regular file, or no file yet: written to a new temporary of a unique name in the same
///   folder (created with O_EXCL, so no planted file or link is ever followed), then renamed over
///   the target; the target keeps its permissions, a new file gets 0666 less the umask. On
///   failure the target is as it was and no temporary remains.
/// - a descriptor name (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N): written to that
///   descriptor of this process, as a shell's `> /dev/stdout` does.
/// - anything else that exists (a character device such as /dev/null, a FIFO, a socket): opened
///   and written in place; a FIFO waits for its reader as a shell's `>` does.
output_written write_output_file(const std::string& path, std::string_view contents) noexcept;

/// Writes all of `contents` to an open descriptor, again after EINTR and after a short write;
/// 0, or the errno of the write that failed (EPIPE when the reader has gone).
int write_all_to(int descriptor, std::string_view contents) noexcept;

}  // namespace rlmem
