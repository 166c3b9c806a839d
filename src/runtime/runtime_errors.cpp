// SPDX-License-Identifier: MIT
// The runtime's table of error names and messages, checked at compile time to follow runtime_errc.

#include <rlmem/runtime/runtime_errors.hpp>

namespace rlmem {

namespace {

constexpr error_rows<runtime_errc, static_cast<std::size_t>(runtime_errc::count_)> runtime_error_table = {{
    {runtime_errc::ok, "OK", "no error"},
    {runtime_errc::out_of_memory, "OUT_OF_MEMORY", "not enough device memory for the request, or host memory to pin"},
    {runtime_errc::paused, "PAUSED", "the tag is paused: resume it first"},
    {runtime_errc::not_paused, "NOT_PAUSED", "the tag is not paused"},
    {runtime_errc::already_paused, "ALREADY_PAUSED", "the tag is paused already"},
    {runtime_errc::unknown_pointer, "UNKNOWN_POINTER", "an address the runtime did not hand out, or gave back already"},
    {runtime_errc::unknown_tag, "UNKNOWN_TAG", "no tag of that name"},
    {runtime_errc::invalid_argument, "INVALID_ARGUMENT", "an argument the call refuses"},
    {runtime_errc::device_error, "DEVICE_ERROR", "the device failed"},
}};

static_assert(rows_follow_codes(runtime_error_table), "runtime_error_table rows must follow runtime_errc order");

}  // namespace

std::string_view error_name(runtime_errc code) noexcept { return name_in(runtime_error_table, code); }

std::string_view error_message(runtime_errc code) noexcept { return message_in(runtime_error_table, code); }

}  // namespace rlmem
