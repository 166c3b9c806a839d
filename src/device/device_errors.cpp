// SPDX-License-Identifier: MIT
// The device seam's table of error names and messages, checked at compile time to follow device_errc.

#include <rlmem/device/device_errors.hpp>

#include <rlmem/base/error.hpp>

namespace rlmem {

namespace {

constexpr error_rows<device_errc, static_cast<std::size_t>(device_errc::count_)> device_error_table = {{
    {device_errc::ok, "OK", "no error"},
    {device_errc::out_of_memory, "OUT_OF_MEMORY", "the device's physical memory or address space is exhausted"},
    {device_errc::invalid_argument, "INVALID_ARGUMENT", "a precondition of the device call does not hold"},
    {device_errc::not_supported, "NOT_SUPPORTED", "the device cannot do this"},
    {device_errc::unavailable, "UNAVAILABLE", "no driver, no such device, or the driver is not initialised"},
    {device_errc::driver_error, "DRIVER_ERROR", "the driver failed"},
}};

static_assert(rows_follow_codes(device_error_table), "device_error_table rows must follow device_errc order");

}  // namespace

std::string_view error_name(device_errc code) noexcept { return name_in(device_error_table, code); }

std::string_view error_message(device_errc code) noexcept { return message_in(device_error_table, code); }

}  // namespace rlmem
