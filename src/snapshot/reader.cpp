// SPDX-License-Identifier: MIT
// read_snapshot_*: picks the decoder from the content and runs the pickle machine over it.

#include "byte_source.hpp"
#include "entry_scanner.hpp"
#include "pickle_machine.hpp"
#include "snapshot_builder.hpp"

#include <rlmem/base/regular_file.hpp>
#include <rlmem/snapshot/snapshot_reader.hpp>
#include <rlmem/base/usable_cores.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace rlmem {

namespace {

// Peeks at the first bytes of `raw` to choose a decoder, then parses.
result<snapshot> read_from(std::unique_ptr<detail::byte_source> raw, std::uint64_t raw_size, const read_options& options) {
  std::byte head[4] = {};
  error failure;
  std::size_t got = 0;
  while (got < sizeof head) {
    std::size_t more = raw->read({head + got, sizeof head - got}, failure);
    if (failure.code != errc::ok) return failure;
    if (more == 0) break;
    got += more;
  }
  if (got == 0) return error{errc::empty_input, 0, {}};

  // Put the peeked bytes back in front of the stream.
  class prefixed final : public detail::byte_source {
   public:
    prefixed(std::span<const std::byte> head, std::unique_ptr<detail::byte_source> rest)
        : head_(head.begin(), head.end()), rest_(std::move(rest)) {}
    std::size_t read(std::span<std::byte> dst, error& failure) override {
      if (position_ < head_.size()) {
        std::size_t count = std::min(dst.size(), head_.size() - position_);
        std::memcpy(dst.data(), head_.data() + position_, count);
        position_ += count;
        return count;
      }
      return rest_->read(dst, failure);
    }
    std::uint64_t raw_consumed() const override { return rest_->raw_consumed(); }

   private:
    std::vector<std::byte> head_;
    std::size_t position_ = 0;
    std::unique_ptr<detail::byte_source> rest_;
  };

  std::span<const std::byte> peeked(head, got);
  std::unique_ptr<detail::byte_source> source = std::make_unique<prefixed>(peeked, std::move(raw));
  detail::input_format format = detail::detect_format(peeked);
  std::uint64_t size_hint = format == detail::input_format::pickle ? raw_size : 0;
  switch (format) {
    case detail::input_format::gzip:
      source = detail::make_gzip_source(std::move(source), options.limits.max_compression_ratio);
      break;
    case detail::input_format::zstd:
      source = detail::make_zstd_source(std::move(source), options.limits.max_compression_ratio);
      break;
    case detail::input_format::pickle: break;
    case detail::input_format::unknown: {
      bool looks_json = std::to_integer<char>(head[0]) == '{' || std::to_integer<char>(head[0]) == '[';
      return error{errc::unknown_format, 0,
                   looks_json ? "this looks like JSON; rlmem reads the pickle torch writes"
                              : "expected a pickle (0x80), gzip (1f 8b) or zstd (28 b5 2f fd) header"};
    }
  }

  // A thread and its blocks cost more than they save on an input smaller than one block.
  std::size_t ahead = raw_size >= options.read_ahead_block_bytes ? options.read_ahead_block_bytes : 0;
  // Declared before the window, whose read-ahead thread uses it until the window is gone.
  detail::entry_scanner scanner;
  bool scan = options.trace_entry_shortcut && options.scan_entries_ahead && several_cores_usable();
  detail::input_window window(*source, options.limits.max_input_bytes, ahead, scan ? &scanner : nullptr);
  detail::snapshot_builder builder;
  detail::value root;
  auto on_progress = [&] {
    if (options.progress) options.progress(window.raw_consumed(), raw_size);
  };
  if (!detail::run_pickle(window, options.limits, builder, root, failure, on_progress, size_hint,
                         options.trace_entry_shortcut, options.prefault_from_bytes)) {
    return failure;
  }
  snapshot made;
  if (!builder.finish(root, made, failure)) {
    failure.offset = window.offset();
    return failure;
  }
  if (const error* over = builder.budget_failure()) return *over;  // a last charge while finishing
  if (options.progress) options.progress(raw_size, raw_size);
  return made;
}

}  // namespace

result<snapshot> read_snapshot_file(const std::filesystem::path& path, const read_options& options) {
  regular_file opened = open_regular_file(path.c_str());
  if (opened.error_number != 0) return error{errc::io_error, 0, path.string() + ": " + std::strerror(opened.error_number)};
  if (opened.not_regular != nullptr) {
    return error{errc::not_a_regular_file, 0, path.string() + " is " + opened.not_regular + "; save the snapshot to a file first"};
  }
  int descriptor = opened.descriptor;
  std::FILE* file = ::fdopen(descriptor, "rb");
  if (file == nullptr) {
    int saved = errno;
    ::close(descriptor);
    return error{errc::io_error, 0, path.string() + ": " + std::strerror(saved)};
  }
  return read_from(std::make_unique<detail::file_source>(file), opened.size, options);
}

result<snapshot> read_snapshot_bytes(std::span<const std::byte> bytes, const read_options& options) {
  return read_from(std::make_unique<detail::memory_source>(bytes), bytes.size(), options);
}

}  // namespace rlmem
