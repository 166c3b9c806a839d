// SPDX-License-Identifier: MIT
// Checked writes to standard output and the one escaped error line.

#include "output.hpp"

#include "commands.hpp"

#include <rlmem/base/format.hpp>
#include <rlmem/base/output_file.hpp>
#include <rlmem/report/report.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <unistd.h>

namespace rlmem::cli {

void hold_standard_descriptors() noexcept {
  for (int descriptor = 0; descriptor <= 2; ++descriptor) {
    if (::fcntl(descriptor, F_GETFD) != -1 || errno != EBADF) continue;
    // open() returns the lowest free descriptor, which is this one.
    (void)::open("/dev/null", descriptor == STDOUT_FILENO ? O_RDONLY : O_RDWR);
  }
}

int write_all(std::string_view text) noexcept { return write_all_to(STDOUT_FILENO, text); }

// EPIPE means the reader has gone (`rlmem inspect x | head -c1`): the output is incomplete, so
// the exit code says so, but the reader chose to leave and needs no message.
int report_write_failure(int error) {
  if (error != EPIPE) print_error(std::string("cannot write the report: ") + std::strerror(error));
  return exit_cannot_write;
}

int write_report(std::string_view text) {
  int error = write_all(text);
  return error == 0 ? exit_ok : report_write_failure(error);
}

int finish_output(int code) {
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) return report_write_failure(errno);
  // EBADF here means descriptor 1 was never open for writing and nothing was written to it
  // (the report itself would already have failed); EINTR leaves the descriptor closed on Linux.
  if (::close(STDOUT_FILENO) != 0 && errno != EBADF && errno != EINTR && code == exit_ok) return report_write_failure(errno);
  return code;
}

void print_error(std::string_view message) { std::fprintf(stderr, "rlmem: %s\n", printable_text(message).c_str()); }

bool refuse(std::string_view message) {
  print_error(message);
  return false;
}

int write_whole_file(const std::string& path, std::string_view page) {
  if (path == "-") return write_report(page);
  output_written written = write_output_file(path, page);
  if (written.error_number == 0) return exit_ok;
  if (written.error_number != EPIPE) print_error(written.problem);
  return exit_cannot_write;
}

bool html_pages_available() {
  if (html_report_available()) return true;
  print_error("this rlmem was built without the HTML page's browser assets (node and npm were not found when it was "
              "configured): install nodejs and npm, configure and build again");
  return false;
}

}  // namespace rlmem::cli
