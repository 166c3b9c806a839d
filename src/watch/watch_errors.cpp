// SPDX-License-Identifier: MIT
// The watch part's table of error names and messages, checked at compile time to follow watch_errc.

#include <rlmem/watch/watch_errors.hpp>

namespace rlmem {

namespace {

constexpr error_rows<watch_errc, static_cast<std::size_t>(watch_errc::count_)> watch_error_table = {{
    {watch_errc::ok, "OK", "no error"},
    {watch_errc::not_json, "NOT_JSON", "the line is not JSON"},
    {watch_errc::not_an_object, "NOT_AN_OBJECT", "the line is JSON but not an object"},
    {watch_errc::not_a_steplog_line, "NOT_A_STEPLOG_LINE", "the line has no 'schema' key: not a StepMonitor line"},
    {watch_errc::unknown_schema, "UNKNOWN_SCHEMA", "the line's schema is not one watch reads"},
    {watch_errc::missing_key, "MISSING_KEY", "a key the schema requires is missing"},
    {watch_errc::wrong_type, "WRONG_TYPE", "a key holds the wrong kind of value"},
    {watch_errc::not_a_count, "NOT_A_COUNT", "a count is not a non-negative integer that fits 64 bits"},
    {watch_errc::invalid_value, "INVALID_VALUE", "a value no StepMonitor writes"},
}};

static_assert(rows_follow_codes(watch_error_table), "watch_error_table rows must follow watch_errc order");

}  // namespace

std::string_view error_name(watch_errc code) noexcept { return name_in(watch_error_table, code); }

std::string_view error_message(watch_errc code) noexcept { return message_in(watch_error_table, code); }

}  // namespace rlmem
