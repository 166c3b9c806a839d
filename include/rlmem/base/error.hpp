// SPDX-License-Identifier: MIT
#pragma once
// Error codes and the result type that every rlmem parser returns; nothing in a parser throws.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace rlmem {

/// Every way reading a snapshot can fail. Each code has one entry in the message table
/// (src/base/error.cpp); a test checks the table matches this list.
enum class errc : std::uint8_t {
  ok = 0,
  io_error,               ///< the file cannot be opened or read
  empty_input,            ///< zero bytes
  unknown_format,         ///< not a pickle, gzip or zstd stream
  decompress_error,       ///< gzip or zstd data is corrupt
  truncated,              ///< input ends before the pickle's STOP opcode
  unsupported_protocol,   ///< pickle protocol outside 2..5
  forbidden_opcode,       ///< an opcode that imports or calls code (GLOBAL, REDUCE, ...)
  unsupported_opcode,     ///< a valid opcode that snapshots never contain (text opcodes, buffers)
  invalid_opcode,         ///< a byte that is no pickle opcode
  stack_underflow,        ///< an opcode needs more values than the stack holds
  missing_mark,           ///< an opcode needs a MARK that is not there
  bad_memo_reference,     ///< BINGET of an index never stored
  type_mismatch,          ///< e.g. SETITEMS applied to a list, odd number of dict items
  invalid_value,          ///< malformed argument: bad UTF-8 length, negative length, ...
  container_reused,       ///< a container changed after it was used (recursive structures)
  trailing_data,          ///< bytes after STOP
  limit_input_bytes,      ///< more (decompressed) bytes than read_limits::max_input_bytes
  limit_string_bytes,     ///< a string longer than read_limits::max_string_bytes
  limit_depth,            ///< more nested MARKs than read_limits::max_depth
  limit_memo_entries,     ///< more memo entries than read_limits::max_memo_entries
  limit_integer_width,    ///< an integer wider than 64 bits
  limit_event_tags,       ///< more distinct (stream, context, metadata, action) than max_event_tags
  not_a_snapshot,         ///< a valid pickle that is not a PyTorch memory snapshot
  limit_stack_values,     ///< more values on the pickle stack than read_limits::max_stack_values
  limit_held_values,      ///< the reader would hold more values than the input's size allows
  limit_compression_ratio,  ///< compressed data expands more than read_limits::max_compression_ratio
  not_a_regular_file,     ///< a FIFO, device or socket: a snapshot is a file of known size
  invalid_size,           ///< a size no allocator produces: negative, or 2^63 bytes and more
  count_
};

/// The code's name in upper case ("TRUNCATED"); "UNKNOWN" for values out of range.
std::string_view errc_name(errc code) noexcept;
/// A sentence saying what the code means for the user.
std::string_view errc_message(errc code) noexcept;

/// A failure: what went wrong, and where in the (decompressed) input.
struct error {
  errc code = errc::ok;
  std::uint64_t offset = 0;  ///< byte offset in the decompressed stream
  std::string detail;        ///< specifics: the opcode's name, the limit, the key
};

/// One line for a person: "TRUNCATED at byte 1,234: <message> (<detail>)".
std::string describe(const error& failure);

/// A value or an error. Use `get(value)` to move the value out and learn the code.
template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  result(error failure) : error_(std::move(failure)) {}  // NOLINT: implicit by design

  bool ok() const noexcept { return value_.has_value(); }
  errc code() const noexcept { return value_ ? errc::ok : error_.code; }
  const error& failure() const noexcept { return error_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }

  /// Moves the value into `out` when there is one; returns the code either way.
  errc get(T& out) && {
    if (value_) out = std::move(*value_);
    return code();
  }

 private:
  std::optional<T> value_;
  error error_;
};

}  // namespace rlmem
