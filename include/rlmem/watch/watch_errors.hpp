// SPDX-License-Identifier: MIT
#pragma once
// The watch part's error codes: why a line of a StepMonitor log is no record. Their NAMEs and
// sentences are one table in src/watch/watch_errors.cpp.

#include <rlmem/base/error.hpp>

#include <cstdint>
#include <string_view>

namespace rlmem {

/// Every way parse_steplog_line refuses a line. The failure's `detail` is the reason watch shows
/// for a skipped line ("'reserved' is not a non-negative integer").
enum class watch_errc : std::uint8_t {
  ok = 0,
  not_json,            ///< the line does not parse as JSON
  not_an_object,       ///< JSON, but not an object
  not_a_steplog_line,  ///< an object without a 'schema' string
  unknown_schema,      ///< a 'schema' other than steplog_schema
  missing_key,         ///< a key the schema requires is absent
  wrong_type,          ///< a key holds the wrong kind of value (a string for a number, ...)
  not_a_count,         ///< a count that is not an integer from 0 to 2^63 - 1
  invalid_value,       ///< the right type but a value no monitor writes: world_size 0, an empty alert kind
  count_
};

/// The code's NAME in upper case ("MISSING_KEY"); "UNKNOWN" out of range.
std::string_view error_name(watch_errc code) noexcept;
/// A sentence saying what the code means, without the specifics of one line.
std::string_view error_message(watch_errc code) noexcept;

}  // namespace rlmem
