// SPDX-License-Identifier: MIT
#pragma once
// Streams of input bytes (file, memory, gzip, zstd) and the window the pickle machine reads from.

#include <rlmem/base/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <vector>

namespace rlmem::detail {

/// A forward-only stream of bytes. read() returns 0 only at the end of the stream.
class byte_source {
 public:
  virtual ~byte_source() = default;
  /// Reads up to dst.size() bytes; returns how many, or sets `failure` and returns 0.
  virtual std::size_t read(std::span<std::byte> dst, error& failure) = 0;
  /// Bytes consumed from the underlying file or buffer so far (for progress).
  virtual std::uint64_t raw_consumed() const = 0;
};

/// Reads a file. Owns the FILE*.
class file_source final : public byte_source {
 public:
  explicit file_source(std::FILE* file) : file_(file) {}
  ~file_source() override;
  file_source(const file_source&) = delete;
  file_source& operator=(const file_source&) = delete;
  std::size_t read(std::span<std::byte> dst, error& failure) override;
  std::uint64_t raw_consumed() const override { return consumed_; }

 private:
  std::FILE* file_;
  std::uint64_t consumed_ = 0;
};

/// Reads a caller's buffer.
class memory_source final : public byte_source {
 public:
  explicit memory_source(std::span<const std::byte> bytes) : bytes_(bytes) {}
  std::size_t read(std::span<std::byte> dst, error& failure) override;
  std::uint64_t raw_consumed() const override { return position_; }

 private:
  std::span<const std::byte> bytes_;
  std::size_t position_ = 0;
};

/// Decompresses gzip (or zlib) data from another source. Past the first 64 MiB, output more
/// than `max_ratio` times the compressed bytes read fails with LIMIT_COMPRESSION_RATIO.
std::unique_ptr<byte_source> make_gzip_source(std::unique_ptr<byte_source> compressed, std::uint32_t max_ratio);
/// Decompresses zstd data (one or more frames) from another source; `max_ratio` as for gzip.
std::unique_ptr<byte_source> make_zstd_source(std::unique_ptr<byte_source> compressed, std::uint32_t max_ratio);

/// Which decoder a stream needs, from its first bytes.
enum class input_format { pickle, gzip, zstd, unknown };
input_format detect_format(std::span<const std::byte> head) noexcept;

class read_ahead;

/// The words a block_scanner leaves on a block. Room for a note is made once, and its words are
/// then written without a check each.
class block_notes {
 public:
  /// Room for `count` words after the last kept; may throw std::bad_alloc.
  std::uint64_t* room(std::size_t count) {
    if (capacity_ - size_ < count) grow(size_ + count);
    return data_.get() + size_;
  }
  /// Keeps `count` words written at room().
  void add(std::size_t count) noexcept { size_ += count; }
  void clear() noexcept { size_ = 0; }
  std::span<const std::uint64_t> words() const noexcept { return {data_.get(), size_}; }

 private:
  void grow(std::size_t needed);
  std::unique_ptr<std::uint64_t[]> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

/// Looks at each block a read-ahead thread reads, on that thread and in stream order, before
/// the parser gets the block, and leaves notes on it for the parser (the entry scanner decodes
/// trace entries there, so the parse thread does not).
class block_scanner {
 public:
  virtual ~block_scanner() = default;
  /// `data`: the block's bytes, at stream offset `offset`. `notes` is empty on entry; what is
  /// left in it travels with the block to input_window::notes(). Never throws.
  virtual void scan(std::span<const std::byte> data, std::uint64_t offset, block_notes& notes) noexcept = 0;
};

/// A sliding window over a source: the parser asks for N contiguous bytes and gets a pointer.
/// Bytes before the cursor are dropped as the window refills, so memory stays bounded by the
/// largest single argument, never by the input size.
///
/// With `read_ahead_block_bytes` > 0 the source is read (and decompressed) on a thread of its
/// own, in blocks of that size, up to three blocks ahead of the cursor; the window moves from
/// block to block, copying only the few bytes left of the last one, so the parser's core does
/// no copy of the input. The bytes seen are the same; where the source fails (corrupt or
/// over-ratio compressed data), the parser may meet that error before or after an error of
/// its own further on than without, since the source is read further ahead. Where no thread
/// can be started, the window reads the source itself.
/// IMPORTANT: `source` must outlive the window, and nothing else may read it meanwhile.
class input_window {
 public:
  input_window(byte_source& source, std::uint64_t max_input_bytes, std::size_t read_ahead_block_bytes = 0,
               block_scanner* scanner = nullptr);
  ~input_window();
  input_window(const input_window&) = delete;
  input_window& operator=(const input_window&) = delete;

  /// Makes at least `count` bytes available at cursor(); false at end of input or on error
  /// (then failure() says which; a clean end of input leaves it errc::ok).
  [[gnu::always_inline]] bool ensure(std::size_t count) {
    return static_cast<std::size_t>(end_ - cursor_) >= count || refill(count);
  }
  const std::byte* cursor() const noexcept { return cursor_; }
  /// Bytes at cursor() now, without reading more.
  std::size_t available() const noexcept { return static_cast<std::size_t>(end_ - cursor_); }
  void advance(std::size_t count) noexcept { cursor_ += count; }
  /// Offset of cursor() in the whole decompressed stream.
  std::uint64_t offset() const noexcept { return base_offset_ + static_cast<std::uint64_t>(cursor_ - base_); }
  /// The source's raw_consumed() (for progress), also while a thread reads it.
  std::uint64_t raw_consumed() const;
  /// Whether a thread reads the source (read-ahead asked for and started).
  bool reads_ahead() const noexcept { return ahead_ != nullptr; }
  const error& failure() const noexcept { return failure_; }
  /// The scanner's notes on the read-ahead block the cursor is in; empty without read-ahead or
  /// a scanner, and while the cursor is in bytes gathered from several blocks.
  std::span<const std::uint64_t> notes() const noexcept { return notes_; }
  /// Changes whenever notes() does (the cursor moved to another block).
  std::uint64_t notes_serial() const noexcept { return notes_serial_; }
  /// True when no byte is left at all (reads more to find out).
  bool at_end();

 private:
  bool refill(std::size_t count);
  bool refill_ahead(std::size_t count);
  bool within_limit();

  byte_source& source_;
  std::uint64_t max_input_bytes_;
  std::vector<std::byte> buffer_;
  std::byte* base_ = nullptr;  // buffer_.data(), or the read-ahead block the cursor is in
  std::byte* cursor_ = nullptr;
  std::byte* end_ = nullptr;
  std::uint64_t base_offset_ = 0;  // stream offset of base_[0]
  error failure_;
  std::unique_ptr<read_ahead> ahead_;
  bool ahead_ended_ = false;  // the read-ahead delivered its last block (failure_ says why)
  std::span<const std::uint64_t> notes_;
  std::uint64_t notes_serial_ = 0;
};

}  // namespace rlmem::detail
