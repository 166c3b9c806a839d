// SPDX-License-Identifier: MIT
// The fake device: the driver's bookkeeping in host memory, strict about every precondition so
// that a policy tested on it keeps them on the real driver too.

#include <rlmem/device/fake_device.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <new>

namespace rlmem {


fake_device::fake_device(fake_device_options options) : options_(options) {
  config_.ordinal = 0;
  config_.granularity = options.granularity;
  config_.total_bytes = options.total_bytes;
  next_address_ = options.address_base;
}

bool fake_device::injected_failure() noexcept {
  ++calls_;
  return calls_ == options_.fail_call;
}

device_errc fake_device::logged(device_op op, std::uint64_t address, std::uint64_t size, physical_handle handle,
                                device_errc result) noexcept {
  if (result == device_errc::ok) ++succeeded_[static_cast<std::size_t>(op)];
  if (options_.keep_log) {
    try {
      log_.push_back({op, address, size, handle, result});
    } catch (const std::bad_alloc&) {
      // The log is for tests; a call's outcome does not depend on it.
    }
  }
  return result;
}

bool fake_device::unreserved(std::uint64_t address, std::uint64_t size) const {
  if (address + size < address) return false;  // wraps
  auto after = reservations_.lower_bound(address);
  if (after != reservations_.end() && after->first - address < size) return false;
  if (after == reservations_.begin()) return true;
  auto before = std::prev(after);
  return address - before->first >= before->second;
}

device_errc fake_device::reserve(std::uint64_t size, std::uint64_t requested, std::uint64_t& address) noexcept {
  if (injected_failure()) return logged(device_op::reserve, 0, size, 0, device_errc::out_of_memory);
  if (!sized(size)) return logged(device_op::reserve, 0, size, 0, device_errc::invalid_argument);
  std::uint64_t start = requested;
  bool at_requested = requested != 0 && aligned(requested) && unreserved(requested, size);
  if (!at_requested) {
    // Upward from the last address handed out, past reservations made at requested addresses.
    std::uint64_t space_end = options_.address_base + options_.address_space_bytes;
    start = next_address_;
    for (;;) {
      if (start > space_end || size > space_end - start) return logged(device_op::reserve, 0, size, 0, device_errc::out_of_memory);
      if (unreserved(start, size)) break;
      auto blocking = reservations_.upper_bound(start);  // the first to start above `start` ...
      if (blocking != reservations_.begin() && start - std::prev(blocking)->first < std::prev(blocking)->second) --blocking;  // ... or the one holding it
      start = blocking->first + blocking->second;
    }
  }
  try {
    reservations_.emplace(start, size);
  } catch (const std::bad_alloc&) {
    return logged(device_op::reserve, 0, size, 0, device_errc::out_of_memory);
  }
  address = start;
  if (!at_requested) next_address_ = start + size;
  return logged(device_op::reserve, address, size, 0, device_errc::ok);
}

device_errc fake_device::free_reservation(std::uint64_t address, std::uint64_t size) noexcept {
  if (injected_failure()) return logged(device_op::free_reservation, address, size, 0, device_errc::out_of_memory);
  auto found = reservations_.find(address);
  if (found == reservations_.end() || found->second != size) {
    return logged(device_op::free_reservation, address, size, 0, device_errc::invalid_argument);
  }
  auto inside = mappings_.lower_bound(address);
  if (inside != mappings_.end() && inside->first < address + size) {
    return logged(device_op::free_reservation, address, size, 0, device_errc::invalid_argument);
  }
  reservations_.erase(found);
  return logged(device_op::free_reservation, address, size, 0, device_errc::ok);
}

device_errc fake_device::create(std::uint64_t size, physical_handle& handle) noexcept {
  if (injected_failure()) return logged(device_op::create, 0, size, 0, device_errc::out_of_memory);
  if (!sized(size)) return logged(device_op::create, 0, size, 0, device_errc::invalid_argument);
  if (size > config_.total_bytes - used_bytes_) return logged(device_op::create, 0, size, 0, device_errc::out_of_memory);
  handle_state state;
  state.size = size;
  try {
    if (options_.host_backed) {
      state.bytes.reset(new std::byte[size]);
      std::fill_n(state.bytes.get(), size, fresh_page_byte);
    }
    handles_.emplace(next_handle_, std::move(state));
  } catch (const std::bad_alloc&) {
    return logged(device_op::create, 0, size, 0, device_errc::out_of_memory);
  }
  handle = next_handle_++;
  used_bytes_ += size;
  return logged(device_op::create, 0, size, handle, device_errc::ok);
}

void fake_device::drop_if_gone(std::unordered_map<physical_handle, handle_state>::iterator found) noexcept {
  if (!found->second.released || found->second.mappings > 0) return;
  used_bytes_ -= found->second.size;
  handles_.erase(found);
}

device_errc fake_device::release(physical_handle handle) noexcept {
  if (injected_failure()) return logged(device_op::release, 0, 0, handle, device_errc::out_of_memory);
  auto found = handles_.find(handle);
  if (found == handles_.end() || found->second.released) return logged(device_op::release, 0, 0, handle, device_errc::invalid_argument);
  found->second.released = true;
  std::uint64_t size = found->second.size;
  drop_if_gone(found);
  return logged(device_op::release, 0, size, handle, device_errc::ok);
}

std::map<std::uint64_t, std::uint64_t>::const_iterator fake_device::reservation_holding(std::uint64_t address, std::uint64_t size) const {
  auto after = reservations_.upper_bound(address);
  if (after == reservations_.begin()) return reservations_.end();
  auto holder = std::prev(after);
  bool inside = address - holder->first < holder->second && size <= holder->second - (address - holder->first);
  return inside ? holder : reservations_.end();
}

device_errc fake_device::map(std::uint64_t address, std::uint64_t size, physical_handle handle) noexcept {
  if (injected_failure()) return logged(device_op::map, address, size, handle, device_errc::out_of_memory);
  auto found = handles_.find(handle);
  bool usable = found != handles_.end() && !found->second.released && found->second.size == size;
  if (!usable || !aligned(address) || reservation_holding(address, size) == reservations_.end()) {
    return logged(device_op::map, address, size, handle, device_errc::invalid_argument);
  }
  // No mapping may overlap: the one starting below `address` must end by it, the next must
  // start at or after the end.
  auto next = mappings_.lower_bound(address);
  if (next != mappings_.end() && next->first < address + size) return logged(device_op::map, address, size, handle, device_errc::invalid_argument);
  if (next != mappings_.begin()) {
    auto before = std::prev(next);
    if (before->first + before->second.size > address) return logged(device_op::map, address, size, handle, device_errc::invalid_argument);
  }
  try {
    mappings_.emplace_hint(next, address, mapping{size, handle, false});
  } catch (const std::bad_alloc&) {
    return logged(device_op::map, address, size, handle, device_errc::out_of_memory);
  }
  ++found->second.mappings;
  mapped_bytes_ += size;
  return logged(device_op::map, address, size, handle, device_errc::ok);
}

template <typename Each>
bool fake_device::for_each_mapping(std::uint64_t address, std::uint64_t size, bool accessible_only, Each each) {
  if (size == 0 || address + size < address) return false;
  auto at = mappings_.upper_bound(address);
  if (at == mappings_.begin()) return false;
  at = std::prev(at);
  // First check the whole range, so that nothing is done to a range that is not all mapped.
  std::uint64_t cursor = address;
  for (auto it = at; cursor < address + size; ++it) {
    if (it == mappings_.end() || it->first > cursor || it->first + it->second.size <= cursor) return false;
    if (accessible_only && !it->second.accessible) return false;
    cursor = it->first + it->second.size;
  }
  for (auto it = at; it != mappings_.end() && it->first < address + size; ++it) each(it->first, it->second);
  return true;
}

device_errc fake_device::set_access(std::uint64_t address, std::uint64_t size) noexcept {
  if (injected_failure()) return logged(device_op::set_access, address, size, 0, device_errc::out_of_memory);
  if (!aligned(address) || !sized(size)) return logged(device_op::set_access, address, size, 0, device_errc::invalid_argument);
  bool covered = for_each_mapping(address, size, false, [](std::uint64_t, mapping& each) { each.accessible = true; });
  return logged(device_op::set_access, address, size, 0, covered ? device_errc::ok : device_errc::invalid_argument);
}

device_errc fake_device::unmap(std::uint64_t address, std::uint64_t size) noexcept {
  if (injected_failure()) return logged(device_op::unmap, address, size, 0, device_errc::out_of_memory);
  auto found = mappings_.find(address);
  if (found == mappings_.end() || found->second.size != size) return logged(device_op::unmap, address, size, 0, device_errc::invalid_argument);
  physical_handle handle = found->second.handle;
  mappings_.erase(found);
  mapped_bytes_ -= size;
  auto state = handles_.find(handle);
  --state->second.mappings;
  drop_if_gone(state);
  return logged(device_op::unmap, address, size, handle, device_errc::ok);
}

void fake_device::set_free_bytes(std::uint64_t free_bytes) noexcept {
  config_.total_bytes = free_bytes > UINT64_MAX - used_bytes_ ? UINT64_MAX : used_bytes_ + free_bytes;
}

device_errc fake_device::memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) noexcept {
  free_bytes = config_.total_bytes - used_bytes_;
  total_bytes = config_.total_bytes;
  return device_errc::ok;
}

template <typename Move>
device_errc fake_device::copy(device_op op, std::uint64_t address, std::uint64_t size, Move move) noexcept {
  if (injected_failure()) return logged(op, address, size, 0, device_errc::out_of_memory);
  if (!options_.host_backed) return logged(op, address, size, 0, device_errc::not_supported);
  bool covered = for_each_mapping(address, size, true, [&](std::uint64_t start, mapping& each) {
    std::uint64_t from = std::max(start, address);
    std::uint64_t to = std::min(start + each.size, address + size);
    move(from - address, handles_.at(each.handle).bytes.get() + (from - start), to - from);
  });
  return logged(op, address, size, 0, covered ? device_errc::ok : device_errc::invalid_argument);
}

device_errc fake_device::to_host(device_op op, void* destination, std::uint64_t source, std::uint64_t size) noexcept {
  if (destination == nullptr) return logged(op, source, size, 0, device_errc::invalid_argument);
  auto* out = static_cast<std::byte*>(destination);
  return copy(op, source, size, [&](std::uint64_t offset, std::byte* bytes, std::uint64_t length) { std::memcpy(out + offset, bytes, length); });
}

device_errc fake_device::from_host(device_op op, std::uint64_t destination, const void* source, std::uint64_t size) noexcept {
  if (source == nullptr) return logged(op, destination, size, 0, device_errc::invalid_argument);
  const auto* in = static_cast<const std::byte*>(source);
  return copy(op, destination, size, [&](std::uint64_t offset, std::byte* bytes, std::uint64_t length) { std::memcpy(bytes, in + offset, length); });
}

device_errc fake_device::copy_to_host(void* destination, std::uint64_t source, std::uint64_t size) noexcept {
  return to_host(device_op::copy_to_host, destination, source, size);
}

device_errc fake_device::copy_from_host(std::uint64_t destination, const void* source, std::uint64_t size) noexcept {
  return from_host(device_op::copy_from_host, destination, source, size);
}

device_errc fake_device::synchronize() noexcept {
  ++fences_;
  return logged(device_op::synchronize, 0, 0, 0, device_errc::ok);
}

device_errc fake_device::host_allocate(std::uint64_t size, void*& host) noexcept {
  if (injected_failure()) return logged(device_op::host_allocate, 0, size, 0, device_errc::out_of_memory);
  if (size == 0) return logged(device_op::host_allocate, 0, size, 0, device_errc::invalid_argument);
  try {
    std::unique_ptr<std::byte[]> bytes(new std::byte[size]);
    void* made = bytes.get();
    host_buffers_.emplace(made, host_buffer{std::move(bytes), size});
    host = made;
  } catch (const std::bad_alloc&) {
    return logged(device_op::host_allocate, 0, size, 0, device_errc::out_of_memory);
  }
  host_bytes_ += size;
  return logged(device_op::host_allocate, 0, size, 0, device_errc::ok);
}

device_errc fake_device::host_free(void* host) noexcept {
  auto found = host_buffers_.find(host);
  if (found == host_buffers_.end()) return logged(device_op::host_free, 0, 0, 0, device_errc::invalid_argument);
  host_bytes_ -= found->second.size;
  host_buffers_.erase(found);
  return logged(device_op::host_free, 0, 0, 0, device_errc::ok);
}

// Copies on the fake are done when they return: the async ones are the synchronous ones, logged
// as what they were asked to be.
device_errc fake_device::copy_to_host_async(void* destination, std::uint64_t source, std::uint64_t size) noexcept {
  return to_host(device_op::copy_to_host_async, destination, source, size);
}

device_errc fake_device::copy_from_host_async(std::uint64_t destination, const void* source, std::uint64_t size) noexcept {
  return from_host(device_op::copy_from_host_async, destination, source, size);
}

device_errc fake_device::fill_async(std::uint64_t destination, std::uint64_t size, std::uint8_t value) noexcept {
  return copy(device_op::fill, destination, size,
              [&](std::uint64_t, std::byte* bytes, std::uint64_t length) { std::memset(bytes, value, length); });
}

device_errc fake_device::wait_copies() noexcept { return logged(device_op::wait_copies, 0, 0, 0, device_errc::ok); }

// Copies are done when they return; a mark only checks that it is waited for once.
device_errc fake_device::mark_copies(std::uint64_t& mark) noexcept {
  try {
    open_marks_.push_back(next_mark_);
  } catch (const std::bad_alloc&) {
    return logged(device_op::mark_copies, 0, 0, 0, device_errc::out_of_memory);
  }
  mark = next_mark_++;
  return logged(device_op::mark_copies, mark, 0, 0, device_errc::ok);
}

device_errc fake_device::wait_mark(std::uint64_t mark) noexcept {
  auto found = std::find(open_marks_.begin(), open_marks_.end(), mark);
  if (found == open_marks_.end()) return logged(device_op::wait_mark, mark, 0, 0, device_errc::invalid_argument);
  open_marks_.erase(found);
  return logged(device_op::wait_mark, mark, 0, 0, device_errc::ok);
}

void fake_device::set_capturing(std::uint64_t stream, bool capturing) {
  if (capturing) {
    capturing_.insert(stream);
  } else {
    capturing_.erase(stream);
  }
}

}  // namespace rlmem
