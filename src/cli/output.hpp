// SPDX-License-Identifier: MIT
#pragma once
// Everything rlmem prints: the report on standard output, every write checked, and the one line
// on standard error, escaped so that a file name or a frame cannot write terminal controls.

#include <string>
#include <string_view>

namespace rlmem::cli {

/// Puts /dev/null on descriptors 0, 1 and 2 where the caller closed them (`rlmem ... >&-`), so
/// that no file opened later becomes standard output; descriptor 1 is opened read-only there,
/// so the report's write fails (EBADF) and is reported instead of vanishing.
void hold_standard_descriptors() noexcept;

/// Writes all of `text` to standard output, short writes and EINTR retried. Returns 0, or the
/// errno of the write that failed.
int write_all(std::string_view text) noexcept;

/// The one line for a write that failed with `error` ("rlmem: cannot write the report: No space
/// left on device"; none for EPIPE, a reader that went away). Returns exit_cannot_write.
int report_write_failure(int error);

/// Writes all of `text` to standard output (short writes and EINTR retried). Returns exit_ok,
/// or exit_cannot_write after saying why on standard error: "rlmem: cannot write the report:
/// No space left on device". A reader that went away (EPIPE, SIGPIPE ignored) gets no message.
int write_report(std::string_view text);

/// Writes `page` to `path` ("-": standard output, as write_report) with write_output_file: a
/// regular file is replaced whole (a reader never finds half a file under the name), a device,
/// a FIFO or /dev/stdout is written in place, a symbolic link is followed to its target. Returns
/// exit_ok, or exit_cannot_write after the one line ("rlmem: cannot write PATH: ..."; none for
/// EPIPE, a reader that went away).
int write_whole_file(const std::string& path, std::string_view page);

/// Whether this build can write HTML pages; when not, says so in the one line ("install nodejs
/// and npm, configure and build again") and the caller exits with exit_internal.
bool html_pages_available();

/// What main does last when the command succeeded: flushes stdio's standard output (CLI11's
/// help) and closes descriptor 1, checking both, since some errors surface only at close.
/// Returns `code`, or exit_cannot_write after the one line.
int finish_output(int code);

/// "rlmem: <message>\n" on standard error with every control character and non-UTF-8 byte of
/// `message` escaped: always one line.
void print_error(std::string_view message);
/// print_error(message), then false: the refusal of a check that returns whether options hold.
bool refuse(std::string_view message);

}  // namespace rlmem::cli
