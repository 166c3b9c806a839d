// SPDX-License-Identifier: MIT
#pragma once
// Streams of input bytes (file, memory, gzip, zstd) and the window the pickle machine reads from.

#include <rlmem/error.hpp>

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

/// A sliding window over a source: the parser asks for N contiguous bytes and gets a pointer.
/// Bytes before the cursor are dropped as the window refills, so memory stays bounded by the
/// largest single argument, never by the input size.
class input_window {
 public:
  input_window(byte_source& source, std::uint64_t max_input_bytes);

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
  std::uint64_t offset() const noexcept { return base_offset_ + static_cast<std::uint64_t>(cursor_ - buffer_.data()); }
  const error& failure() const noexcept { return failure_; }
  /// True when no byte is left at all (reads more to find out).
  bool at_end();

 private:
  bool refill(std::size_t count);

  byte_source& source_;
  std::uint64_t max_input_bytes_;
  std::vector<std::byte> buffer_;
  std::byte* cursor_ = nullptr;
  std::byte* end_ = nullptr;
  std::uint64_t base_offset_ = 0;  // stream offset of buffer_[0]
  error failure_;
};

}  // namespace rlmem::detail
