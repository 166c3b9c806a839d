// SPDX-License-Identifier: MIT
// The model part's table of error names and messages, checked at compile time to follow model_errc.

#include <rlmem/model/model_errors.hpp>

namespace rlmem {

namespace {

constexpr error_rows<model_errc, static_cast<std::size_t>(model_errc::count_)> model_error_table = {{
    {model_errc::ok, "OK", "no error"},
    {model_errc::missing_value, "MISSING_VALUE", "a setting has no value (key:value)"},
    {model_errc::not_true_or_false, "NOT_TRUE_OR_FALSE", "a setting must be True or False"},
    {model_errc::size_out_of_range, "SIZE_OUT_OF_RANGE", "a size in MB is not a whole number in its range"},
    {model_errc::divisions_out_of_range, "DIVISIONS_OUT_OF_RANGE", "roundup_power2_divisions is above the limit"},
    {model_errc::malformed_divisions, "MALFORMED_DIVISIONS",
     "roundup_power2_divisions is neither a number nor a [size_mb:divisions,...] list"},
    {model_errc::divisions_key_not_power_of_two, "DIVISIONS_KEY_NOT_POWER_OF_TWO",
     "a roundup_power2_divisions size is not a power of two in MB"},
    {model_errc::threshold_out_of_range, "THRESHOLD_OUT_OF_RANGE",
     "garbage_collection_threshold is not a number between 0 and 1 (both excluded)"},
    {model_errc::unsupported_backend, "UNSUPPORTED_BACKEND", "a backend other than the caching allocator rlmem models"},
    {model_errc::unknown_key, "UNKNOWN_KEY", "a setting the caching allocator does not know"},
}};

static_assert(rows_follow_codes(model_error_table), "model_error_table rows must follow model_errc order");

}  // namespace

std::string_view error_name(model_errc code) noexcept { return name_in(model_error_table, code); }

std::string_view error_message(model_errc code) noexcept { return message_in(model_error_table, code); }

}  // namespace rlmem
