// SPDX-License-Identifier: MIT
// The timing adaptor: each primitive forwarded, counted and timed.

#include <rlmem/device/timed_device.hpp>

#include <chrono>

namespace rlmem {

template <typename Call>
device_errc timed_device::timed(device_op op, Call call) noexcept {
  auto start = std::chrono::steady_clock::now();
  device_errc code = call();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard hold(lock_);
  auto& of_op = totals_.by_op[static_cast<std::size_t>(op)];
  ++of_op.calls;
  of_op.seconds += seconds;
  return code;
}

device_call_totals timed_device::totals() const {
  std::lock_guard hold(lock_);
  return totals_;
}

device_errc timed_device::reserve(std::uint64_t size, std::uint64_t requested, std::uint64_t& address) noexcept {
  return timed(device_op::reserve, [&] { return inner_.reserve(size, requested, address); });
}
device_errc timed_device::free_reservation(std::uint64_t address, std::uint64_t size) noexcept {
  return timed(device_op::free_reservation, [&] { return inner_.free_reservation(address, size); });
}
device_errc timed_device::create(std::uint64_t size, physical_handle& handle) noexcept {
  return timed(device_op::create, [&] { return inner_.create(size, handle); });
}
device_errc timed_device::release(physical_handle handle) noexcept {
  return timed(device_op::release, [&] { return inner_.release(handle); });
}
device_errc timed_device::map(std::uint64_t address, std::uint64_t size, physical_handle handle) noexcept {
  return timed(device_op::map, [&] { return inner_.map(address, size, handle); });
}
device_errc timed_device::set_access(std::uint64_t address, std::uint64_t size) noexcept {
  return timed(device_op::set_access, [&] { return inner_.set_access(address, size); });
}
device_errc timed_device::unmap(std::uint64_t address, std::uint64_t size) noexcept {
  return timed(device_op::unmap, [&] { return inner_.unmap(address, size); });
}
device_errc timed_device::copy_to_host(void* destination, std::uint64_t source, std::uint64_t size) noexcept {
  return timed(device_op::copy_to_host, [&] { return inner_.copy_to_host(destination, source, size); });
}
device_errc timed_device::copy_from_host(std::uint64_t destination, const void* source, std::uint64_t size) noexcept {
  return timed(device_op::copy_from_host, [&] { return inner_.copy_from_host(destination, source, size); });
}
device_errc timed_device::synchronize() noexcept {
  return timed(device_op::synchronize, [&] { return inner_.synchronize(); });
}
device_errc timed_device::host_allocate(std::uint64_t size, void*& host) noexcept {
  return timed(device_op::host_allocate, [&] { return inner_.host_allocate(size, host); });
}
device_errc timed_device::host_free(void* host) noexcept {
  return timed(device_op::host_free, [&] { return inner_.host_free(host); });
}
device_errc timed_device::copy_to_host_async(void* destination, std::uint64_t source, std::uint64_t size) noexcept {
  return timed(device_op::copy_to_host_async, [&] { return inner_.copy_to_host_async(destination, source, size); });
}
device_errc timed_device::copy_from_host_async(std::uint64_t destination, const void* source, std::uint64_t size) noexcept {
  return timed(device_op::copy_from_host_async, [&] { return inner_.copy_from_host_async(destination, source, size); });
}
device_errc timed_device::fill_async(std::uint64_t destination, std::uint64_t size, std::uint8_t value) noexcept {
  return timed(device_op::fill, [&] { return inner_.fill_async(destination, size, value); });
}
device_errc timed_device::wait_copies() noexcept {
  return timed(device_op::wait_copies, [&] { return inner_.wait_copies(); });
}
device_errc timed_device::mark_copies(std::uint64_t& mark) noexcept {
  return timed(device_op::mark_copies, [&] { return inner_.mark_copies(mark); });
}
device_errc timed_device::wait_mark(std::uint64_t mark) noexcept {
  return timed(device_op::wait_mark, [&] { return inner_.wait_mark(mark); });
}

}  // namespace rlmem
