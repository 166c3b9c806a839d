// SPDX-License-Identifier: MIT
// Following a StepMonitor log as the job appends to it, like `tail -F`: complete lines only,
// truncation and rotation noticed from the file's size and identity, memory bounded.

#include <rlmem/base/format.hpp>
#include <rlmem/watch/watch.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <deque>
#include <fcntl.h>
#include <memory>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

namespace rlmem {

namespace {

constexpr std::size_t read_chunk_bytes = 64 * 1024;
// Bytes before the read offset remembered to notice a file rewritten beyond where we were.
constexpr std::size_t remembered_bytes = 64;

std::string errno_text(int code) { return std::generic_category().message(code); }

}  // namespace

struct steplog_follower::impl {
  impl(std::string path, steplog_limits limits) : path_(std::move(path)), limits_(limits) {}
  ~impl() { close_file(); }
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  void poll();
  bool open_file(bool from_start);
  void close_file();
  bool read_available(std::uint64_t& budget);
  void take_line(std::string_view line, std::uint64_t offset);
  void skip(std::uint64_t offset, const std::string& reason);

  std::string path_;
  steplog_limits limits_;
  int fd_ = -1;
  std::uint64_t device_ = 0;  ///< st_dev and st_ino of the open file, to notice a replacement
  std::uint64_t inode_ = 0;
  std::uint64_t offset_ = 0;      ///< next byte to read
  std::uint64_t line_start_ = 0;  ///< offset of the first byte of the line being assembled
  bool ever_opened_ = false;
  bool discard_to_newline_ = false;  ///< inside a line that is too long, or cut by the tail start
  std::string pending_;              ///< bytes of an incomplete line
  std::string before_offset_;        ///< the last bytes read, to notice the file was rewritten
  steplog_file_state state_ = steplog_file_state::waiting;
  std::string state_message_;
  std::deque<steplog_record> records_;
  std::deque<steplog_alert_seen> alerts_;
  std::optional<std::int64_t> rank_;
  std::uint64_t lines_parsed_ = 0;
  std::uint64_t lines_skipped_ = 0;
  std::string last_skip_;
  std::uint64_t other_rank_lines_ = 0;
  std::uint64_t reopened_ = 0;
  std::uint64_t series_restarts_ = 0;
};

steplog_follower::steplog_follower(std::string path, steplog_limits limits)
    : impl_(std::make_unique<impl>(std::move(path), limits)) {}

steplog_follower::~steplog_follower() = default;

void steplog_follower::poll() { impl_->poll(); }
const std::string& steplog_follower::path() const noexcept { return impl_->path_; }
steplog_file_state steplog_follower::state() const noexcept { return impl_->state_; }
const std::string& steplog_follower::state_message() const noexcept { return impl_->state_message_; }
const std::deque<steplog_record>& steplog_follower::records() const noexcept { return impl_->records_; }
const std::deque<steplog_alert_seen>& steplog_follower::alerts() const noexcept { return impl_->alerts_; }
std::uint64_t steplog_follower::lines_parsed() const noexcept { return impl_->lines_parsed_; }
std::uint64_t steplog_follower::lines_skipped() const noexcept { return impl_->lines_skipped_; }
const std::string& steplog_follower::last_skip() const noexcept { return impl_->last_skip_; }
std::uint64_t steplog_follower::other_rank_lines() const noexcept { return impl_->other_rank_lines_; }
std::uint64_t steplog_follower::reopened() const noexcept { return impl_->reopened_; }
std::uint64_t steplog_follower::series_restarts() const noexcept { return impl_->series_restarts_; }
std::size_t steplog_follower::pending_bytes() const noexcept { return impl_->pending_.size(); }

void steplog_follower::impl::close_file() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

// Opens the file; false when it is not there or cannot be read (the state says which). The first
// time, a large file is read from `tail_bytes` before its end: a long run's history does not fit
// the bounds anyway, and reading it all would delay the first frame.
bool steplog_follower::impl::open_file(bool from_start) {
  // O_NONBLOCK: opening a FIFO must not hang the refresh; it is refused below as not a file.
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int code = errno;
    state_ = code == ENOENT ? steplog_file_state::waiting : steplog_file_state::unreadable;
    state_message_ = code == ENOENT ? "" : errno_text(code);
    return false;
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    state_ = steplog_file_state::unreadable;
    state_message_ = S_ISDIR(info.st_mode) ? "is a directory" : "not a regular file";
    return false;
  }
  fd_ = fd;
  device_ = static_cast<std::uint64_t>(info.st_dev);
  inode_ = static_cast<std::uint64_t>(info.st_ino);
  offset_ = 0;
  line_start_ = 0;
  pending_.clear();
  before_offset_.clear();
  discard_to_newline_ = false;
  std::uint64_t size = static_cast<std::uint64_t>(info.st_size);
  if (!from_start && size > limits_.tail_bytes) {
    // Start one byte early and drop everything up to the first newline: a line cut by the start
    // is dropped, and a line that begins exactly there is kept.
    offset_ = size - limits_.tail_bytes - 1;
    line_start_ = offset_;
    discard_to_newline_ = true;
  }
  ever_opened_ = true;
  state_ = steplog_file_state::following;
  state_message_.clear();
  return true;
}

void steplog_follower::impl::skip(std::uint64_t offset, const std::string& reason) {
  ++lines_skipped_;
  last_skip_ = "at byte " + format_count(offset) + ": " + reason;
}

void steplog_follower::impl::take_line(std::string_view line, std::uint64_t offset) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.find_first_not_of(" \t") == std::string_view::npos) return;  // blank lines carry nothing
  auto parsed = parse_steplog_line(line, limits_.line);
  if (!parsed.ok()) {
    skip(offset, parsed.failure().detail);
    return;
  }
  steplog_record record = std::move(parsed).value();
  ++lines_parsed_;
  if (!rank_) rank_ = record.rank;
  if (record.rank != *rank_) {
    ++other_rank_lines_;
    return;
  }
  // The monitor counts steps upwards; a step at or below the last one is a restarted job whose
  // figures must not be compared with the old run's.
  if (!records_.empty() && record.step <= records_.back().step) {
    records_.clear();
    alerts_.clear();
    ++series_restarts_;
  }
  for (const steplog_alert& alert : record.alerts) {
    alerts_.push_back({record.step, record.time, alert});
    while (alerts_.size() > limits_.alerts_kept) alerts_.pop_front();
  }
  records_.push_back(std::move(record));
  while (records_.size() > limits_.history_steps) records_.pop_front();
}

// Reads from offset_ to the end of the open file, or until the budget is spent; false on a read
// error (the state says which).
bool steplog_follower::impl::read_available(std::uint64_t& budget) {
  std::array<char, read_chunk_bytes> buffer;
  while (budget > 0) {
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), budget));
    ssize_t got = ::pread(fd_, buffer.data(), want, static_cast<off_t>(offset_));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      state_ = steplog_file_state::unreadable;
      state_message_ = errno_text(errno);
      close_file();
      return false;
    }
    if (got == 0) break;
    std::string_view chunk(buffer.data(), static_cast<std::size_t>(got));
    std::uint64_t chunk_offset = offset_;
    offset_ += static_cast<std::uint64_t>(got);
    budget -= static_cast<std::uint64_t>(got);
    if (chunk.size() >= remembered_bytes) {
      before_offset_.assign(chunk.substr(chunk.size() - remembered_bytes));
    } else {
      before_offset_.append(chunk);
      if (before_offset_.size() > remembered_bytes) before_offset_.erase(0, before_offset_.size() - remembered_bytes);
    }
    std::size_t start = 0;
    while (start < chunk.size()) {
      std::size_t newline = chunk.find('\n', start);
      std::string_view piece = chunk.substr(start, newline == std::string_view::npos ? std::string_view::npos : newline - start);
      if (!discard_to_newline_) {
        if (pending_.size() + piece.size() > limits_.max_line_bytes) {
          skip(line_start_, "a line longer than " + format_bytes(static_cast<std::int64_t>(limits_.max_line_bytes)));
          pending_.clear();
          discard_to_newline_ = true;
        } else if (newline != std::string_view::npos && pending_.empty()) {
          take_line(piece, line_start_);  // the common case: no copy
        } else {
          pending_.append(piece);
          if (newline != std::string_view::npos) {
            take_line(pending_, line_start_);
            pending_.clear();
          }
        }
      }
      if (newline == std::string_view::npos) break;
      discard_to_newline_ = false;
      line_start_ = chunk_offset + newline + 1;
      start = newline + 1;
    }
  }
  return true;
}

void steplog_follower::impl::poll() {
  std::uint64_t budget = limits_.max_bytes_per_poll;
  if (fd_ >= 0) {
    struct stat named {};
    struct stat opened {};
    bool replaced = ::stat(path_.c_str(), &named) != 0 || static_cast<std::uint64_t>(named.st_dev) != device_ ||
                    static_cast<std::uint64_t>(named.st_ino) != inode_;
    // Truncated in place (a new run opened it with "w", or copytruncate rotation): the file is
    // shorter than what was read, or, when the new run already wrote past that point, the bytes
    // just before the offset are no longer the ones read there.
    bool truncated = ::fstat(fd_, &opened) == 0 && static_cast<std::uint64_t>(opened.st_size) < offset_;
    if (!truncated && !before_offset_.empty()) {
      std::string now(before_offset_.size(), '\0');
      ssize_t got = ::pread(fd_, now.data(), now.size(), static_cast<off_t>(offset_ - before_offset_.size()));
      truncated = got != static_cast<ssize_t>(now.size()) || now != before_offset_;
    }
    if (truncated) {
      if (!pending_.empty()) skip(line_start_, "an incomplete line cut off when the file was truncated");
      offset_ = 0;
      line_start_ = 0;
      pending_.clear();
      before_offset_.clear();
      discard_to_newline_ = false;
      ++reopened_;
    }
    // The old file first: the writer may have appended to it before it was renamed away.
    if (!read_available(budget)) return;
    if (!replaced || budget == 0) return;
    if (!pending_.empty()) skip(line_start_, "an incomplete last line of a file that was replaced");
    close_file();
    ++reopened_;
    state_ = steplog_file_state::waiting;
  }
  if (!open_file(ever_opened_)) return;
  read_available(budget);
}

}  // namespace rlmem
