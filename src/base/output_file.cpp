// SPDX-License-Identifier: MIT
// write_output_file: the one place that writes a file rlmem produces whole.

#include <rlmem/base/output_file.hpp>

#include <fcntl.h>
#include <sys/random.h>  // getrandom, for temporary names nobody can guess ahead
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <new>  // std::bad_alloc
#include <optional>

namespace rlmem {

namespace {

// Linux follows at most 40 links in one path; a longer chain is a loop.
constexpr int max_link_hops = 40;

// The descriptor a name stands for, as shells treat these names: /dev/stdout is descriptor 1 of
// this process, whatever it is open on (a pipe, a terminal, a file opened for appending).
std::optional<int> descriptor_named(std::string_view path) {
  if (path == "/dev/stdout") return STDOUT_FILENO;
  if (path == "/dev/stderr") return STDERR_FILENO;
  for (std::string_view folder : {std::string_view("/dev/fd/"), std::string_view("/proc/self/fd/")}) {
    if (!path.starts_with(folder)) continue;
    std::string_view digits = path.substr(folder.size());
    int descriptor = -1;
    auto [end, status] = std::from_chars(digits.data(), digits.data() + digits.size(), descriptor);
    if (status == std::errc{} && end == digits.data() + digits.size() && descriptor >= 0) return descriptor;
  }
  return std::nullopt;
}

// What a path names once its symbolic links are followed.
struct output_target {
  std::string path;        // the last name in the chain of links
  int descriptor = -1;     // >= 0: a descriptor name (descriptor_named)
  bool exists = false;
  mode_t mode = 0;         // of what exists
  int error_number = 0;
};

std::string folder_of(const std::string& path) {
  std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

output_target follow_links(const std::string& path) {
  output_target target;
  target.path = path;
  for (int hop = 0; hop <= max_link_hops; ++hop) {
    if (std::optional<int> descriptor = descriptor_named(target.path)) {
      target.descriptor = *descriptor;
      return target;
    }
    struct stat status {};
    if (::lstat(target.path.c_str(), &status) != 0) {
      if (errno != ENOENT) target.error_number = errno;
      return target;
    }
    if (!S_ISLNK(status.st_mode)) {
      target.exists = true;
      target.mode = status.st_mode;
      return target;
    }
    std::string link(static_cast<std::size_t>(status.st_size > 0 ? status.st_size : 0) + 256, '\0');
    ssize_t length = ::readlink(target.path.c_str(), link.data(), link.size());
    if (length < 0 || static_cast<std::size_t>(length) == link.size()) {
      // A link that changed length between lstat and readlink: refuse rather than guess.
      target.error_number = length < 0 ? errno : EAGAIN;
      return target;
    }
    link.resize(static_cast<std::size_t>(length));
    target.path = link.starts_with('/') ? link : folder_of(target.path) + link;
  }
  target.error_number = ELOOP;
  return target;
}

// Closes a descriptor this file opened; EINTR leaves it closed on Linux, with the data written.
int close_checked(int descriptor) { return ::close(descriptor) != 0 && errno != EINTR ? errno : 0; }

std::uint64_t unpredictable_number() {
  std::uint64_t number = 0;
  if (::getrandom(&number, sizeof number, GRND_NONBLOCK) == static_cast<ssize_t>(sizeof number)) return number;
  // No entropy yet (early boot): O_EXCL still keeps the name unique, only guessable.
  timespec now {};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_nsec) ^ (static_cast<std::uint64_t>(now.tv_sec) << 30) ^
         static_cast<std::uint64_t>(::getpid());
}

// A new file of a unique name in `folder`. O_EXCL (which with O_CREAT never follows a link)
// refuses whatever is already there under the name: a planted symlink is never written through.
int create_temporary(const std::string& folder, std::string& name) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    char suffix[17];
    std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(unpredictable_number()));
    name = folder + ".rlmem-" + suffix + ".partial";
    int descriptor = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (descriptor >= 0 || errno != EEXIST) return descriptor;
  }
  errno = EEXIST;
  return -1;
}

int replace_regular_file(const output_target& target, std::string_view contents) {
  std::string temporary;
  int descriptor = create_temporary(folder_of(target.path), temporary);
  if (descriptor < 0) return errno;
  int error = 0;
  // The page takes the place of the file it replaces, permissions included.
  if (target.exists && ::fchmod(descriptor, target.mode & 07777) != 0) error = errno;
  if (error == 0) error = write_all_to(descriptor, contents);
  int closed = close_checked(descriptor);
  if (error == 0) error = closed;
  if (error == 0 && std::rename(temporary.c_str(), target.path.c_str()) != 0) error = errno;
  if (error != 0) ::unlink(temporary.c_str());
  return error;
}

int write_in_place(const output_target& target, std::string_view contents) {
  int descriptor = ::open(target.path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (descriptor < 0) return errno;
  int error = write_all_to(descriptor, contents);
  int closed = close_checked(descriptor);
  return error != 0 ? error : closed;
}

}  // namespace

output_written write_output_file(const std::string& path, std::string_view contents) noexcept {
  output_written written;
  try {
    output_target target = follow_links(path);
    if (target.error_number != 0) {
      written.error_number = target.error_number;
    } else if (target.descriptor >= 0) {
      written.error_number = write_all_to(target.descriptor, contents);
    } else if (!target.exists || S_ISREG(target.mode)) {
      written.error_number = replace_regular_file(target, contents);
    } else {
      written.error_number = write_in_place(target, contents);
    }
  } catch (const std::bad_alloc&) {
    written.error_number = ENOMEM;
  }
  if (written.error_number != 0) {
    try {
      written.problem = "cannot write " + path + ": " + std::strerror(written.error_number);
    } catch (const std::bad_alloc&) {
      // The error number alone still tells the caller what failed.
    }
  }
  return written;
}

int write_all_to(int descriptor, std::string_view contents) noexcept {
  while (!contents.empty()) {
    ssize_t done = ::write(descriptor, contents.data(), contents.size());
    if (done < 0 && errno == EINTR) continue;
    if (done < 0) return errno;
    contents.remove_prefix(static_cast<std::size_t>(done));
  }
  return 0;
}

}  // namespace rlmem
