// SPDX-License-Identifier: MIT
// The snapshot reader's table of error names and messages, checked at compile time to follow errc.

#include <rlmem/base/error.hpp>

#include <array>

namespace rlmem {

namespace {

constexpr error_rows<errc, static_cast<std::size_t>(errc::count_)> error_table = {{
    {errc::ok, "OK", "no error"},
    {errc::io_error, "IO_ERROR", "the file cannot be read"},
    {errc::empty_input, "EMPTY_INPUT", "the file is empty"},
    {errc::unknown_format, "UNKNOWN_FORMAT", "not a pickle, gzip or zstd file"},
    {errc::decompress_error, "DECOMPRESS_ERROR", "the compressed data is corrupt or cut short"},
    {errc::truncated, "TRUNCATED", "the pickle ends before its STOP opcode (cut short?)"},
    {errc::unsupported_protocol, "UNSUPPORTED_PROTOCOL", "only pickle protocols 2 to 5 are read"},
    {errc::forbidden_opcode, "FORBIDDEN_OPCODE", "the pickle wants to import or call code, which rlmem never does"},
    {errc::unsupported_opcode, "UNSUPPORTED_OPCODE", "an opcode memory snapshots never contain"},
    {errc::invalid_opcode, "INVALID_OPCODE", "a byte that is not a pickle opcode"},
    {errc::stack_underflow, "STACK_UNDERFLOW", "an opcode needs values the pickle never pushed"},
    {errc::missing_mark, "MISSING_MARK", "an opcode needs a MARK that is not there"},
    {errc::bad_memo_reference, "BAD_MEMO_REFERENCE", "a memo lookup of an entry never stored"},
    {errc::type_mismatch, "TYPE_MISMATCH", "an opcode applied to the wrong kind of value"},
    {errc::invalid_value, "INVALID_VALUE", "a malformed opcode argument"},
    {errc::container_reused, "CONTAINER_REUSED", "a container changed after it was used (recursive data)"},
    {errc::trailing_data, "TRAILING_DATA", "bytes follow the pickle's STOP opcode"},
    {errc::limit_input_bytes, "LIMIT_INPUT_BYTES", "the input is larger than the limit"},
    {errc::limit_string_bytes, "LIMIT_STRING_BYTES", "a string is longer than the limit"},
    {errc::limit_depth, "LIMIT_DEPTH", "the pickle nests deeper than the limit"},
    {errc::limit_memo_entries, "LIMIT_MEMO_ENTRIES", "the pickle stores more memo entries than the limit"},
    {errc::limit_integer_width, "LIMIT_INTEGER_WIDTH", "an integer wider than 64 bits"},
    {errc::limit_event_tags, "LIMIT_EVENT_TAGS",
     "more distinct (stream, compile context, user metadata, action) combinations than the limit"},
    {errc::not_a_snapshot, "NOT_A_SNAPSHOT", "a valid pickle, but not a PyTorch memory snapshot"},
    {errc::limit_stack_values, "LIMIT_STACK_VALUES", "the pickle holds more values on its stack at once than the limit"},
    {errc::limit_held_values, "LIMIT_HELD_VALUES",
     "the pickle would make the reader hold more values than its size allows (shared structure expanded?)"},
    {errc::limit_compression_ratio, "LIMIT_COMPRESSION_RATIO",
     "the compressed data expands more than the limit allows (a decompression bomb?)"},
    {errc::not_a_regular_file, "NOT_A_REGULAR_FILE", "not a regular file (a FIFO, device or socket)"},
    {errc::invalid_size, "INVALID_SIZE", "a size no allocator produces (negative, or 2^63 bytes and more)"},
}};

static_assert(rows_follow_codes(error_table), "error_table rows must follow errc order");

}  // namespace

std::string_view error_name(errc code) noexcept { return name_in(error_table, code); }

std::string_view error_message(errc code) noexcept { return message_in(error_table, code); }

std::string describe(const error& failure) {
  std::string line(error_name(failure.code));
  if (failure.code != errc::io_error && failure.code != errc::empty_input && failure.code != errc::not_a_regular_file) {
    line += " at byte " + std::to_string(failure.offset);
  }
  line += ": ";
  line += error_message(failure.code);
  if (!failure.detail.empty()) line += " (" + failure.detail + ")";
  return line;
}

}  // namespace rlmem
