// SPDX-License-Identifier: MIT
#pragma once
// The device seam's error codes, with one {code, NAME, message} row each (src/device/device_errors.cpp).

#include <cstdint>
#include <string_view>

namespace rlmem {

/// What a device primitive returned. A call that returns anything but `ok` changed nothing.
/// The primitives return the bare code, not a result: they are the hot, noexcept seam under
/// every allocation (mimalloc's prim.h), and a result's reason is a string that could allocate.
/// Callers that report a failure name the code with error_name() and add what they were doing.
enum class device_errc : std::uint8_t {
  ok = 0,
  out_of_memory,     ///< physical memory or address space is exhausted
  invalid_argument,  ///< a stated precondition does not hold
  not_supported,     ///< the device cannot do this (a fake without host-backed pages copying)
  unavailable,       ///< no driver, no device, or the driver is not initialised
  driver_error,      ///< the driver failed otherwise
  count_
};

/// The device code's name in upper case ("OUT_OF_MEMORY"); "UNKNOWN" outside the enum.
std::string_view error_name(device_errc code) noexcept;
/// A sentence saying what the device code means; "unknown error" outside the enum.
std::string_view error_message(device_errc code) noexcept;

}  // namespace rlmem
