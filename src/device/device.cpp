// SPDX-License-Identifier: MIT
// The names of the device seam's error codes, and memory mapped in one step.

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

device_errc map_new_memory(device& gpu, std::uint64_t address, std::uint64_t bytes, physical_handle& handle) noexcept {
  handle = 0;
  physical_handle made = 0;
  device_errc code = gpu.create(bytes, made);
  if (code != device_errc::ok) return code;
  code = gpu.map(address, bytes, made);
  if (code == device_errc::ok) {
    code = gpu.set_access(address, bytes);
    if (code != device_errc::ok) gpu.unmap(address, bytes);
  }
  if (code != device_errc::ok) {
    gpu.release(made);
    return code;
  }
  handle = made;
  return device_errc::ok;
}

}  // namespace rlmem
