// SPDX-License-Identifier: MIT
#pragma once
// The runtime's error codes, with one {code, NAME, message} row each (src/runtime/runtime_errors.cpp),
// and its failure: the code and, in `detail`, the one line librlmem reports.

#include <rlmem/base/error.hpp>

#include <cstdint>
#include <string_view>

namespace rlmem {

/// Why a runtime call failed; librlmem maps each code to a status of rlmem_runtime.h.
enum class runtime_errc : std::uint8_t {
  ok = 0,
  out_of_memory,     ///< no device memory left for the request, even after the cache went back; or no host memory to pin
  paused,            ///< the tag is paused: resume it before allocating in it
  not_paused,        ///< resume of a tag that is not paused (or is being paused by another thread)
  already_paused,    ///< pause of a tag that is paused
  unknown_pointer,   ///< free of an address the runtime did not hand out (or freed twice)
  unknown_tag,       ///< a tag nothing was allocated in
  invalid_argument,  ///< an argument the call refuses: 0 bytes, a grow past max_bytes, the library tag, ...
  device_error,      ///< the device failed otherwise; the detail says which call
  count_
};

/// The runtime code's name in upper case ("OUT_OF_MEMORY"); "UNKNOWN" outside the enum.
std::string_view error_name(runtime_errc code) noexcept;
/// A sentence saying what the runtime code means; "unknown error" outside the enum.
std::string_view error_message(runtime_errc code) noexcept;

/// A failed runtime call: its code, and in `detail` the whole one-line reason ("out of memory:
/// 10485760 bytes requested in tag 'default'; ..."), which librlmem returns as the call's message.
using runtime_failure = basic_error<runtime_errc>;

}  // namespace rlmem
