// SPDX-License-Identifier: MIT
#pragma once
// The fake device's records of its handles, mappings and host buffers (fake_device.hpp). Not
// API: the device's data members are typed with them, so they are in a header.

#include <rlmem/device/device.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace rlmem::detail {

/// A physical allocation of the fake device.
struct fake_handle_state {
  std::uint64_t size = 0;
  bool released = false;
  std::uint32_t mappings = 0;  // a handle may be mapped at several addresses, as CUDA allows
  std::unique_ptr<std::byte[]> bytes;  // host_backed only
};

/// A handle mapped into a reservation of the fake device.
struct fake_mapping {
  std::uint64_t size = 0;
  physical_handle handle = 0;
  bool accessible = false;
};

/// Pinned host memory the fake device handed out.
struct fake_host_buffer {
  std::unique_ptr<std::byte[]> bytes;
  std::uint64_t size = 0;
};

}  // namespace rlmem::detail
