// SPDX-License-Identifier: MIT
#pragma once
// What the runtime's files share besides the class: its failures, its messages' MiB and the
// clocks its history and its pause and resume timings read.

#include <rlmem/runtime/runtime_errors.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

namespace rlmem {

// A failed call: `code`, and the one-line reason librlmem reports.
inline runtime_failure fail(runtime_errc code, std::string message) { return {code, 0, std::move(message)}; }

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline std::string mib(std::uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

inline std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace rlmem
