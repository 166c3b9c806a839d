// SPDX-License-Identifier: MIT
// The names of the device seam's primitives, and memory mapped in one step.

#include <rlmem/device/device.hpp>

namespace rlmem {

std::string_view device_op_name(device_op op) noexcept {
  switch (op) {
    case device_op::reserve: return "reserve";
    case device_op::free_reservation: return "free_reservation";
    case device_op::create: return "create";
    case device_op::release: return "release";
    case device_op::map: return "map";
    case device_op::set_access: return "set_access";
    case device_op::unmap: return "unmap";
    case device_op::copy_to_host: return "copy_to_host";
    case device_op::copy_from_host: return "copy_from_host";
    case device_op::synchronize: return "synchronize";
    case device_op::host_allocate: return "host_allocate";
    case device_op::host_free: return "host_free";
    case device_op::copy_to_host_async: return "copy_to_host_async";
    case device_op::copy_from_host_async: return "copy_from_host_async";
    case device_op::fill: return "fill";
    case device_op::wait_copies: return "wait_copies";
    case device_op::mark_copies: return "mark_copies";
    case device_op::wait_mark: return "wait_mark";
    case device_op::count_: break;
  }
  return "unknown";
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
