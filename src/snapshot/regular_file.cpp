// SPDX-License-Identifier: MIT
// open_regular_file: the one place that opens a file rlmem reads whole.

#include <rlmem/regular_file.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace rlmem {

regular_file open_regular_file(const char* path) noexcept {
  regular_file opened;
  // O_NONBLOCK: opening a FIFO nobody writes to must not wait for a writer. fstat on the open
  // descriptor (not on the path, which may change in between) then decides.
  int descriptor = ::open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (descriptor < 0) {
    opened.error_number = errno;
    return opened;
  }
  struct stat status {};
  if (::fstat(descriptor, &status) != 0) {
    opened.error_number = errno;
    ::close(descriptor);
    return opened;
  }
  if (!S_ISREG(status.st_mode)) {
    ::close(descriptor);
    opened.not_regular = S_ISDIR(status.st_mode)    ? "a directory"
                         : S_ISFIFO(status.st_mode) ? "a FIFO (pipe)"
                         : S_ISCHR(status.st_mode)  ? "a character device"
                         : S_ISBLK(status.st_mode)  ? "a block device"
                         : S_ISSOCK(status.st_mode) ? "a socket"
                                                    : "not a regular file";
    return opened;
  }
  ::fcntl(descriptor, F_SETFL, ::fcntl(descriptor, F_GETFL) & ~O_NONBLOCK);
  opened.descriptor = descriptor;
  opened.size = static_cast<std::uint64_t>(status.st_size);
  return opened;
}

}  // namespace rlmem
