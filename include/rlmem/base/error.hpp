// SPDX-License-Identifier: MIT
#pragma once
// One error model for every part: a `<part>_errc` enum whose codes have one {code, NAME, message}
// row each in the part's table (checked at compile time), `basic_error<Code>` and `result<T, Code>`.
// Every parser returns a result; nothing in a parser throws. The snapshot reader's codes are here.

#include <array>
#include <cstddef>
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

/// The snapshot reader's code's name in upper case ("TRUNCATED"); "UNKNOWN" out of range.
std::string_view error_name(errc code) noexcept;
/// A sentence saying what the reader's code means for the user.
std::string_view error_message(errc code) noexcept;

/// One row of a part's error table: the code, its NAME for programs (the C ABI, Python, logs) and
/// a sentence for people. Each part keeps one table for its own `<part>_errc` enum, in its .cpp,
/// and checks it at compile time with `rows_follow_codes`.
template <class Code>
struct error_row {
  Code code;                 ///< the enum value this row describes
  std::string_view name;     ///< upper case, stable: "TRUNCATED", "UNKNOWN_KEY"
  std::string_view message;  ///< what the code means, without the specifics of one failure
};

/// A part's error table: one row per code of `Code`, in the enum's order.
template <class Code, std::size_t N>
using error_rows = std::array<error_row<Code>, N>;

/// True when the enum starts at `ok = 0` and ends with `count_`, the table has one row per code and
/// row i holds code i: `static_assert(rows_follow_codes(rows))` makes a new code without its row
/// fail to compile.
template <class Code, std::size_t N>
constexpr bool rows_follow_codes(const error_rows<Code, N>& rows) noexcept {
  if (static_cast<std::size_t>(Code::ok) != 0 || N != static_cast<std::size_t>(Code::count_)) return false;
  for (std::size_t i = 0; i < N; ++i) {
    if (static_cast<std::size_t>(rows[i].code) != i) return false;
  }
  return true;
}

/// The row of `code` in a table that follows its codes, or nothing for a value out of range.
template <class Code, std::size_t N>
constexpr const error_row<Code>* row_of(const error_rows<Code, N>& rows, Code code) noexcept {
  auto index = static_cast<std::size_t>(code);
  return index < N ? &rows[index] : nullptr;
}

/// `code`'s NAME in `rows`, or "UNKNOWN" for a value out of range.
template <class Code, std::size_t N>
constexpr std::string_view name_in(const error_rows<Code, N>& rows, Code code) noexcept {
  const error_row<Code>* row = row_of(rows, code);
  return row != nullptr ? row->name : "UNKNOWN";
}

/// `code`'s sentence in `rows`, or "unknown error" for a value out of range.
template <class Code, std::size_t N>
constexpr std::string_view message_in(const error_rows<Code, N>& rows, Code code) noexcept {
  const error_row<Code>* row = row_of(rows, code);
  return row != nullptr ? row->message : "unknown error";
}

/// A failure of any part: what went wrong (`code`, whose NAME and sentence come from the part's
/// table through `error_name`/`error_message`), where in the input, and the specifics.
template <class Code>
struct basic_error {
  Code code{};               ///< never the part's `ok` in a failed result
  std::uint64_t offset = 0;  ///< where in the input: the byte of the decompressed stream for the
                             ///< snapshot reader; 0 where a part's inputs have no position
  std::string detail;        ///< specifics: the opcode's name, the limit, the key; for parts whose
                             ///< refusals a person reads, the whole sentence printed
};

/// The snapshot reader's failure.
using error = basic_error<errc>;

/// One line for a person: "TRUNCATED at byte 1,234: <message> (<detail>)".
std::string describe(const error& failure);

/// A value or a failure, never both; every parser of every part returns one and never throws.
/// Use `get(value)` to move the value out and learn the code.
template <class T, class Code = errc>
class [[nodiscard]] result {
 public:
  /// A success holding `value`; implicit, so that a parser returns its value as it is.
  result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  /// A failure; implicit, so that a parser returns `basic_error<Code>{...}` as it is.
  result(basic_error<Code> failure) : error_(std::move(failure)) {}  // NOLINT: implicit by design

  /// True when there is a value.
  bool ok() const noexcept { return value_.has_value(); }
  /// The part's `ok` code with a value, else the failure's code.
  Code code() const noexcept { return value_ ? Code{} : error_.code; }
  /// The failure; a default one (code `ok`, no detail) when there is a value.
  const basic_error<Code>& failure() const noexcept { return error_; }
  /// The value. Precondition: ok().
  T& value() & { return *value_; }
  /// The value. Precondition: ok().
  const T& value() const& { return *value_; }
  /// The value, moved out. Precondition: ok().
  T&& value() && { return std::move(*value_); }

  /// Moves the value into `out` when there is one; returns the code either way.
  Code get(T& out) && {
    if (value_) out = std::move(*value_);
    return code();
  }

 private:
  std::optional<T> value_;
  basic_error<Code> error_;
};

/// Success or a failure, for checks and actions that make no value.
template <class Code>
class [[nodiscard]] result<void, Code> {
 public:
  /// Success.
  result() = default;
  /// A failure; implicit, so that a check returns `basic_error<Code>{...}` as it is.
  result(basic_error<Code> failure) : error_(std::move(failure)), failed_(true) {}  // NOLINT: implicit by design

  /// True on success.
  bool ok() const noexcept { return !failed_; }
  /// The part's `ok` code on success, else the failure's code.
  Code code() const noexcept { return failed_ ? error_.code : Code{}; }
  /// The failure; a default one (code `ok`, no detail) on success.
  const basic_error<Code>& failure() const noexcept { return error_; }

 private:
  basic_error<Code> error_;
  bool failed_ = false;
};

}  // namespace rlmem
