// SPDX-License-Identifier: MIT
// The names of the device seam's error codes.

#include <rlmem/device.hpp>

#include <array>

namespace rlmem {

namespace {

constexpr std::array<std::string_view, static_cast<std::size_t>(device_errc::count_)> error_names{
    "ok", "out_of_memory", "invalid_argument", "not_supported", "unavailable", "driver_error"};

}  // namespace

std::string_view device_error_name(device_errc code) noexcept {
  auto index = static_cast<std::size_t>(code);
  return index < error_names.size() ? error_names[index] : "unknown";
}

}  // namespace rlmem
