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

namespace {

// "16 MiB" for the default limit: whole MiB where the limit is, else bytes.
std::string size_words(std::uint64_t bytes) {
  constexpr std::uint64_t mib = std::uint64_t{1} << 20;
  return bytes % mib == 0 && bytes > 0 ? std::to_string(bytes / mib) + " MiB" : std::to_string(bytes) + " bytes";
}

error too_large(const std::string& path, std::uint64_t max_bytes) {
  return {errc::limit_input_bytes, 0, path + ": larger than " + size_words(max_bytes) + "; not an option file"};
}

}  // namespace

result<std::string> read_option_file(const std::string& path, const option_file_limits& limits) {
  regular_file opened = open_regular_file(path.c_str());
  if (opened.error_number != 0) return error{errc::io_error, 0, path + ": cannot be read (" + std::strerror(opened.error_number) + ")"};
  if (opened.not_regular != nullptr) return error{errc::not_a_regular_file, 0, path + ": not a regular file (a FIFO, a device or a folder)"};
  int descriptor = opened.descriptor;
  const std::uint64_t max_bytes = limits.max_bytes;
  if (opened.size > max_bytes) {
    ::close(descriptor);
    return too_large(path, max_bytes);
  }
  // The size may change under us: read at most one byte more than the limit and check again.
  const std::uint64_t past_limit = max_bytes == UINT64_MAX ? max_bytes : max_bytes + 1;
  std::string text(static_cast<std::size_t>(opened.size) + 1, '\0');
  std::size_t used = 0;
  while (used < text.size()) {
    ssize_t got = ::read(descriptor, text.data() + used, text.size() - used);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      error failure{errc::io_error, 0, path + ": cannot be read (" + std::strerror(errno) + ")"};
      ::close(descriptor);
      return failure;
    }
    if (got == 0) break;
    used += static_cast<std::size_t>(got);
    if (used == text.size() && used <= max_bytes) text.resize(static_cast<std::size_t>(std::min<std::uint64_t>(text.size() * 2, past_limit)));
  }
  ::close(descriptor);
  if (used > max_bytes) return too_large(path, max_bytes);
  text.resize(used);
  return text;
}

}  // namespace rlmem
