// SPDX-License-Identifier: MIT
// Byte sources and the refilling window over them.

#include "byte_source.hpp"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace rlmem::detail {

namespace {

constexpr std::size_t chunk_bytes = std::size_t{256} << 10;
// Output below this is never held against the compression ratio: small files of repeated
// bytes are harmless, and the first compressed chunk is read in one go.
constexpr std::uint64_t ratio_free_bytes = std::uint64_t{64} << 20;

// A decompression bomb: far more output than any real snapshot makes from this much input.
bool over_ratio(std::uint64_t produced, std::uint64_t consumed, std::uint32_t max_ratio, error& failure) {
  if (produced <= ratio_free_bytes || produced / max_ratio <= consumed) return false;
  failure = {errc::limit_compression_ratio, produced,
             std::to_string(produced) + " bytes from " + std::to_string(consumed) +
                 " compressed, more than read_limits::max_compression_ratio " + std::to_string(max_ratio) + " to 1"};
  return true;
}

class gzip_source final : public byte_source {
 public:
  gzip_source(std::unique_ptr<byte_source> compressed, std::uint32_t max_ratio)
      : compressed_(std::move(compressed)), input_(chunk_bytes), max_ratio_(std::max<std::uint32_t>(max_ratio, 1)) {
    // 15 + 32: a window of 32 KiB, and accept both gzip and zlib headers.
    initialised_ = inflateInit2(&stream_, 15 + 32) == Z_OK;
  }
  ~gzip_source() override {
    if (initialised_) inflateEnd(&stream_);
  }
  gzip_source(const gzip_source&) = delete;
  gzip_source& operator=(const gzip_source&) = delete;

  std::size_t read(std::span<std::byte> dst, error& failure) override {
    if (!initialised_) {
      failure = {errc::decompress_error, 0, "zlib could not start"};
      return 0;
    }
    stream_.next_out = reinterpret_cast<Bytef*>(dst.data());
    stream_.avail_out = static_cast<uInt>(std::min<std::size_t>(dst.size(), UINT32_MAX));
    while (stream_.avail_out > 0 && !finished_) {
      if (stream_.avail_in == 0) {
        std::size_t got = compressed_->read(input_, failure);
        if (failure.code != errc::ok) return 0;
        if (got == 0) {
          failure = {errc::decompress_error, produced_, "gzip stream ends early"};
          return 0;
        }
        stream_.next_in = reinterpret_cast<Bytef*>(input_.data());
        stream_.avail_in = static_cast<uInt>(got);
      }
      int status = inflate(&stream_, Z_NO_FLUSH);
      if (status == Z_STREAM_END) {
        // Concatenated gzip members are valid gzip: continue with the next one if bytes follow.
        if (stream_.avail_in == 0) {
          std::size_t got = compressed_->read(input_, failure);
          if (failure.code != errc::ok) return 0;
          if (got == 0) {
            finished_ = true;
            break;
          }
          stream_.next_in = reinterpret_cast<Bytef*>(input_.data());
          stream_.avail_in = static_cast<uInt>(got);
        }
        inflateReset(&stream_);
      } else if (status != Z_OK && status != Z_BUF_ERROR) {
        failure = {errc::decompress_error, produced_, stream_.msg ? stream_.msg : "corrupt gzip data"};
        return 0;
      }
    }
    std::size_t count = dst.size() - stream_.avail_out;
    produced_ += count;
    if (over_ratio(produced_, compressed_->raw_consumed(), max_ratio_, failure)) return 0;
    return count;
  }
  std::uint64_t raw_consumed() const override { return compressed_->raw_consumed(); }

 private:
  std::unique_ptr<byte_source> compressed_;
  std::vector<std::byte> input_;
  std::uint32_t max_ratio_;
  z_stream stream_{};
  bool initialised_ = false;
  bool finished_ = false;
  std::uint64_t produced_ = 0;
};

class zstd_source final : public byte_source {
 public:
  zstd_source(std::unique_ptr<byte_source> compressed, std::uint32_t max_ratio)
      : compressed_(std::move(compressed)),
        input_(ZSTD_DStreamInSize()),
        max_ratio_(std::max<std::uint32_t>(max_ratio, 1)),
        context_(ZSTD_createDCtx()) {}
  ~zstd_source() override { ZSTD_freeDCtx(context_); }
  zstd_source(const zstd_source&) = delete;
  zstd_source& operator=(const zstd_source&) = delete;

  std::size_t read(std::span<std::byte> dst, error& failure) override {
    if (context_ == nullptr) {
      failure = {errc::decompress_error, 0, "zstd could not start"};
      return 0;
    }
    ZSTD_outBuffer out{dst.data(), dst.size(), 0};
    while (out.pos < out.size) {
      if (in_.pos == in_.size) {
        std::size_t got = compressed_->read(input_, failure);
        if (failure.code != errc::ok) return 0;
        if (got == 0) {
          if (frame_open_) {
            failure = {errc::decompress_error, produced_ + out.pos, "zstd stream ends early"};
            return 0;
          }
          break;
        }
        in_ = {input_.data(), got, 0};
      }
      std::size_t hint = ZSTD_decompressStream(context_, &out, &in_);
      if (ZSTD_isError(hint)) {
        failure = {errc::decompress_error, produced_ + out.pos, ZSTD_getErrorName(hint)};
        return 0;
      }
      frame_open_ = hint != 0;
    }
    produced_ += out.pos;
    if (over_ratio(produced_, compressed_->raw_consumed(), max_ratio_, failure)) return 0;
    return out.pos;
  }
  std::uint64_t raw_consumed() const override { return compressed_->raw_consumed(); }

 private:
  std::unique_ptr<byte_source> compressed_;
  std::vector<std::byte> input_;
  std::uint32_t max_ratio_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  ZSTD_DCtx* context_;
  bool frame_open_ = false;
  std::uint64_t produced_ = 0;
};

}  // namespace

void block_notes::grow(std::size_t needed) {
  std::size_t capacity = std::max({needed, capacity_ * 2, std::size_t{4096}});
  auto bigger = std::make_unique_for_overwrite<std::uint64_t[]>(capacity);
  if (size_ > 0) std::memcpy(bigger.get(), data_.get(), size_ * sizeof(std::uint64_t));
  data_ = std::move(bigger);
  capacity_ = capacity;
}

file_source::~file_source() {
  if (file_ != nullptr) std::fclose(file_);
}

std::size_t file_source::read(std::span<std::byte> dst, error& failure) {
  std::size_t got = std::fread(dst.data(), 1, dst.size(), file_);
  if (got == 0 && std::ferror(file_)) {
    failure = {errc::io_error, consumed_, "read failed"};
    return 0;
  }
  consumed_ += got;
  return got;
}

std::size_t memory_source::read(std::span<std::byte> dst, error&) {
  std::size_t count = std::min(dst.size(), bytes_.size() - position_);
  if (count == 0) return 0;  // an empty span may have a null data()
  std::memcpy(dst.data(), bytes_.data() + position_, count);
  position_ += count;
  return count;
}

std::unique_ptr<byte_source> make_gzip_source(std::unique_ptr<byte_source> compressed, std::uint32_t max_ratio) {
  return std::make_unique<gzip_source>(std::move(compressed), max_ratio);
}

std::unique_ptr<byte_source> make_zstd_source(std::unique_ptr<byte_source> compressed, std::uint32_t max_ratio) {
  return std::make_unique<zstd_source>(std::move(compressed), max_ratio);
}

input_format detect_format(std::span<const std::byte> head) noexcept {
  auto starts_with = [&](std::initializer_list<unsigned> magic) {
    if (head.size() < magic.size()) return false;
    std::size_t i = 0;
    for (unsigned byte : magic) {
      if (std::to_integer<unsigned>(head[i++]) != byte) return false;
    }
    return true;
  };
  if (starts_with({0x1f, 0x8b})) return input_format::gzip;
  if (starts_with({0x28, 0xb5, 0x2f, 0xfd})) return input_format::zstd;
  if (starts_with({0x80})) return input_format::pickle;
  return input_format::unknown;
}

// Reads a source on a thread of its own into a few blocks, each with room before its data
// for the bytes the window still needs of the block before it.
class read_ahead {
 public:
  static constexpr std::size_t headroom = std::size_t{64} << 10;
  static constexpr std::size_t blocks_ahead = 3;
  // With a scanner, blocks wait between the two stages too.
  static constexpr std::size_t blocks_ahead_scanned = 5;

  struct block {
    std::unique_ptr<std::byte[]> storage;
    std::size_t size = 0;
    block_notes notes;  // the scanner's; its room is kept as blocks go round
    std::byte* data() { return storage.get() + headroom; }
  };

  read_ahead(byte_source& source, std::size_t block_bytes, block_scanner* scanner)
      : source_(source), block_bytes_(block_bytes), scanner_(scanner) {
    // One block more than are read ahead: the window holds one while the threads fill the rest.
    for (std::size_t i = 0; i <= (scanner_ ? blocks_ahead_scanned : blocks_ahead); ++i) {
      auto made = std::make_unique<block>();
      made->storage = std::make_unique_for_overwrite<std::byte[]>(headroom + block_bytes_);
      free_.push_back(std::move(made));
    }
    // Reading (the copy out of the page cache, or decompression) and scanning each take a
    // thread: the two stages run side by side. Either may fail to start (this throws): the
    // window then reads by itself.
    if (scanner_ != nullptr) scanning_thread_ = std::thread([this] { scan_blocks(); });
    try {
      thread_ = std::thread([this] { run(); });
    } catch (...) {
      stop();
      throw;
    }
  }
  ~read_ahead() { stop(); }
  read_ahead(const read_ahead&) = delete;
  read_ahead& operator=(const read_ahead&) = delete;

  /// The next block of the stream, in order; null at its end or on the source's error (then
  /// `failure` says which).
  std::unique_ptr<block> next(error& failure) {
    std::unique_lock lock(mutex_);
    data_ready_.wait(lock, [&] { return !ready_.empty() || ended_; });
    if (ready_.empty()) {
      failure = failure_;
      return nullptr;
    }
    auto taken = std::move(ready_.front());
    ready_.pop_front();
    lock.unlock();
    return taken;
  }
  /// Hands a block back to be filled again.
  void recycle(std::unique_ptr<block> used) {
    {
      std::lock_guard lock(mutex_);
      free_.push_back(std::move(used));
    }
    free_ready_.notify_one();
  }
  std::uint64_t raw_consumed() const { return consumed_.load(std::memory_order_relaxed); }

 private:
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    free_ready_.notify_one();
    read_ready_.notify_one();
    if (thread_.joinable()) thread_.join();
    if (scanning_thread_.joinable()) scanning_thread_.join();
  }

  // The scanning stage: blocks from the reading stage, in order, on to the window.
  void scan_blocks() {
    for (;;) {
      std::unique_ptr<block> scanning;
      {
        std::unique_lock lock(mutex_);
        read_ready_.wait(lock, [&] { return stopping_ || !read_.empty() || read_ended_; });
        if (stopping_) return;
        if (read_.empty()) {
          ended_ = true;
          failure_ = read_failure_;
          lock.unlock();
          data_ready_.notify_one();
          return;
        }
        scanning = std::move(read_.front());
        read_.pop_front();
      }
      scanning->notes.clear();
      scanner_->scan({scanning->data(), scanning->size}, scanned_, scanning->notes);
      scanned_ += scanning->size;
      {
        std::lock_guard lock(mutex_);
        ready_.push_back(std::move(scanning));
      }
      data_ready_.notify_one();
    }
  }

  // The reading stage.
  void run() {
    for (;;) {
      std::unique_ptr<block> filling;
      {
        std::unique_lock lock(mutex_);
        free_ready_.wait(lock, [&] { return stopping_ || !free_.empty(); });
        if (stopping_) return;
        filling = std::move(free_.front());
        free_.pop_front();
      }
      error failure;
      bool ended = false;
      std::size_t size = 0;
      try {
        while (size < block_bytes_) {
          std::size_t got = source_.read({filling->data() + size, block_bytes_ - size}, failure);
          if (failure.code != errc::ok || got == 0) {
            ended = true;
            break;
          }
          size += got;
        }
      } catch (...) {  // the sources do not throw; should one, its stream ends in an error here
        failure = {errc::io_error, 0, "the input could not be read"};
        ended = true;
      }
      consumed_.store(source_.raw_consumed(), std::memory_order_relaxed);
      filling->size = size;
      filling->notes.clear();
      {
        std::lock_guard lock(mutex_);
        if (size > 0) (scanner_ ? read_ : ready_).push_back(std::move(filling));
        if (ended && scanner_) {
          read_ended_ = true;
          read_failure_ = failure;
        } else if (ended) {
          ended_ = true;
          failure_ = failure;
        }
      }
      (scanner_ ? read_ready_ : data_ready_).notify_one();
      if (ended) return;
    }
  }

  byte_source& source_;
  std::size_t block_bytes_;
  block_scanner* scanner_;
  std::uint64_t scanned_ = 0;  // stream offset of the block being scanned
  std::mutex mutex_;
  std::condition_variable data_ready_;
  std::condition_variable read_ready_;
  std::condition_variable free_ready_;
  std::deque<std::unique_ptr<block>> ready_;  // filled (and scanned), in stream order
  std::deque<std::unique_ptr<block>> read_;   // filled, waiting for the scanner
  std::deque<std::unique_ptr<block>> free_;
  bool ended_ = false;       // ready_ has the stream's last block (failure_ says why)
  bool read_ended_ = false;  // read_ has the stream's last block (read_failure_ says why)
  bool stopping_ = false;
  error failure_;
  error read_failure_;
  std::atomic<std::uint64_t> consumed_{0};
  std::thread scanning_thread_;
  std::thread thread_;
  // The block the window's cursor is in, kept here so the window needs no block type.
  friend class input_window;
  std::unique_ptr<block> held_;
};

input_window::input_window(byte_source& source, std::uint64_t max_input_bytes, std::size_t read_ahead_block_bytes,
                           block_scanner* scanner)
    : source_(source), max_input_bytes_(max_input_bytes), buffer_(chunk_bytes) {
  base_ = cursor_ = end_ = buffer_.data();
  if (read_ahead_block_bytes > 0) {
    try {
      ahead_ = std::make_unique<read_ahead>(source_, read_ahead_block_bytes, scanner);
    } catch (...) {  // no thread or no memory for the blocks: read here
      ahead_.reset();
    }
  }
}

input_window::~input_window() = default;

std::uint64_t input_window::raw_consumed() const { return ahead_ ? ahead_->raw_consumed() : source_.raw_consumed(); }

bool input_window::within_limit() {
  std::uint64_t seen = base_offset_ + static_cast<std::uint64_t>(end_ - base_);
  if (seen <= max_input_bytes_) return true;
  failure_ = {errc::limit_input_bytes, seen, "more than " + std::to_string(max_input_bytes_) + " bytes"};
  return false;
}

// The window over read-ahead blocks. Usually the bytes left of the block the cursor is in
// (fewer than the headroom) are copied in front of the next block's data and the cursor
// moves there. A request longer than that (a long string) gathers blocks into buffer_ by
// copying, growing it only as data arrives, as refill() does.
bool input_window::refill_ahead(std::size_t count) {
  for (;;) {
    auto kept = static_cast<std::size_t>(end_ - cursor_);
    if (kept >= count) return true;
    if (failure_.code != errc::ok || ahead_ended_) return false;
    std::unique_ptr<read_ahead::block> next = ahead_->next(failure_);
    if (next == nullptr) {
      ahead_ended_ = true;
      return false;  // a clean end leaves failure_ ok; the caller decides what that means
    }
    base_offset_ += static_cast<std::uint64_t>(cursor_ - base_);
    ++notes_serial_;
    if (kept <= read_ahead::headroom && count - kept <= next->size) {
      std::byte* start = next->data() - kept;
      if (kept > 0) std::memcpy(start, cursor_, kept);
      if (ahead_->held_) ahead_->recycle(std::move(ahead_->held_));
      ahead_->held_ = std::move(next);
      base_ = cursor_ = start;
      end_ = ahead_->held_->data() + ahead_->held_->size;
      notes_ = ahead_->held_->notes.words();
    } else {
      if (base_ == buffer_.data()) {
        std::memmove(buffer_.data(), cursor_, kept);
      } else {
        if (buffer_.size() < kept) buffer_.resize(kept);
        std::memcpy(buffer_.data(), cursor_, kept);
        if (ahead_->held_) ahead_->recycle(std::move(ahead_->held_));
      }
      if (buffer_.size() < kept + next->size) buffer_.resize(std::max(buffer_.size() * 2, kept + next->size));
      std::memcpy(buffer_.data() + kept, next->data(), next->size);
      base_ = cursor_ = buffer_.data();
      end_ = cursor_ + kept + next->size;
      ahead_->recycle(std::move(next));
      notes_ = {};
    }
    if (!within_limit()) return false;
  }
}

bool input_window::at_end() { return !ensure(1) && failure_.code == errc::ok; }

bool input_window::refill(std::size_t count) {
  if (ahead_) return refill_ahead(count);
  if (failure_.code != errc::ok) return false;
  // Drop consumed bytes, then grow only as real data arrives: a huge length prefix in a tiny
  // file never allocates more than the file holds plus one chunk.
  std::size_t kept = static_cast<std::size_t>(end_ - cursor_);
  std::size_t dropped = static_cast<std::size_t>(cursor_ - buffer_.data());
  std::memmove(buffer_.data(), cursor_, kept);
  base_offset_ += dropped;
  base_ = cursor_ = buffer_.data();
  end_ = cursor_ + kept;
  while (kept < count) {
    if (kept == buffer_.size()) {
      buffer_.resize(std::max(buffer_.size() * 2, std::min(count, buffer_.size() + chunk_bytes)));
      base_ = cursor_ = buffer_.data();
      end_ = cursor_ + kept;
    }
    std::size_t room = buffer_.size() - kept;
    std::size_t got = source_.read({buffer_.data() + kept, room}, failure_);
    if (failure_.code != errc::ok) return false;
    if (got == 0) return false;  // clean end of input; the caller decides what that means
    kept += got;
    end_ = cursor_ + kept;
    if (base_offset_ + kept > max_input_bytes_) {
      failure_ = {errc::limit_input_bytes, base_offset_ + kept,
                  "more than " + std::to_string(max_input_bytes_) + " bytes"};
      return false;
    }
  }
  return true;
}

}  // namespace rlmem::detail
