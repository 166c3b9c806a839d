// SPDX-License-Identifier: MIT
// open_regular_file: the one place that opens a file rlmem reads whole; read_option_file over it.

#include <rlmem/base/regular_file.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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

bool read_option_file(const std::string& path, std::string& text, std::string& message) {
  regular_file opened = open_regular_file(path.c_str());
  if (opened.error_number != 0) {
    message = path + ": cannot be read (" + std::strerror(opened.error_number) + ")";
    return false;
  }
  if (opened.not_regular != nullptr) {
    message = path + ": not a regular file (a FIFO, a device or a folder)";
    return false;
  }
  int descriptor = opened.descriptor;
  if (opened.size > max_option_file_bytes) {
    message = path + ": larger than 16 MiB; not an option file";
    ::close(descriptor);
    return false;
  }
  // The size may change under us: read at most one byte more than the limit and check again.
  text.assign(static_cast<std::size_t>(opened.size) + 1, '\0');
  std::size_t used = 0;
  while (used < text.size()) {
    ssize_t got = ::read(descriptor, text.data() + used, text.size() - used);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      message = path + ": cannot be read (" + std::strerror(errno) + ")";
      ::close(descriptor);
      return false;
    }
    if (got == 0) break;
    used += static_cast<std::size_t>(got);
    if (used == text.size() && used <= max_option_file_bytes) text.resize(std::min<std::size_t>(text.size() * 2, max_option_file_bytes + 1));
  }
  ::close(descriptor);
  if (used > max_option_file_bytes) {
    message = path + ": larger than 16 MiB; not an option file";
    return false;
  }
  text.resize(used);
  return true;
}

}  // namespace rlmem
