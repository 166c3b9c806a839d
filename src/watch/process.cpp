// SPDX-License-Identifier: MIT
// Command lines of the processes NVML lists, from /proc, with the reason when there is none.

#include <rlmem/watch/watch.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace rlmem {

std::string_view command_line_status_name(command_line_status status) noexcept {
  switch (status) {
    case command_line_status::visible: return "visible";
    case command_line_status::no_such_process: return "no_such_process";
    case command_line_status::not_permitted: return "not_permitted";
    case command_line_status::empty: return "empty";
    case command_line_status::count_: break;
  }
  return "unknown";
}

process_command_line read_command_line(std::uint32_t pid, const std::string& proc_root, std::size_t max_bytes) {
  process_command_line result;
  std::string path = proc_root + "/" + std::to_string(pid) + "/cmdline";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    // ENOENT: no such PID in this namespace (or hidden by hidepid); anything else: it is there
    // but may not be read.
    result.status = errno == ENOENT || errno == ESRCH ? command_line_status::no_such_process : command_line_status::not_permitted;
    return result;
  }
  std::array<char, 4096> buffer;
  while (result.text.size() < max_bytes) {
    std::size_t want = std::min(buffer.size(), max_bytes - result.text.size());
    ssize_t got = ::read(fd, buffer.data(), want);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      // ESRCH: the process exited between open and read.
      result.status = errno == ESRCH ? command_line_status::no_such_process : command_line_status::not_permitted;
      ::close(fd);
      result.text.clear();
      return result;
    }
    if (got == 0) break;
    result.text.append(buffer.data(), static_cast<std::size_t>(got));
  }
  ::close(fd);
  // Arguments are separated (and ended) by NUL bytes.
  for (char& c : result.text) {
    if (c == '\0') c = ' ';
  }
  while (!result.text.empty() && result.text.back() == ' ') result.text.pop_back();
  result.status = result.text.empty() ? command_line_status::empty : command_line_status::visible;
  return result;
}

}  // namespace rlmem
