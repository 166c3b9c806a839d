// SPDX-License-Identifier: MIT
// Byte sources and the refilling window over them.

#include "byte_source.hpp"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

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

input_window::input_window(byte_source& source, std::uint64_t max_input_bytes)
    : source_(source), max_input_bytes_(max_input_bytes), buffer_(chunk_bytes) {
  cursor_ = end_ = buffer_.data();
}

bool input_window::at_end() { return !ensure(1) && failure_.code == errc::ok; }

bool input_window::refill(std::size_t count) {
  if (failure_.code != errc::ok) return false;
  // Drop consumed bytes, then grow only as real data arrives: a huge length prefix in a tiny
  // file never allocates more than the file holds plus one chunk.
  std::size_t kept = static_cast<std::size_t>(end_ - cursor_);
  std::size_t dropped = static_cast<std::size_t>(cursor_ - buffer_.data());
  std::memmove(buffer_.data(), cursor_, kept);
  base_offset_ += dropped;
  cursor_ = buffer_.data();
  end_ = cursor_ + kept;
  while (kept < count) {
    if (kept == buffer_.size()) {
      buffer_.resize(std::max(buffer_.size() * 2, std::min(count, buffer_.size() + chunk_bytes)));
      cursor_ = buffer_.data();
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
