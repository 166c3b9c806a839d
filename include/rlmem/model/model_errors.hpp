// SPDX-License-Identifier: MIT
#pragma once
// The model part's error codes: why a PYTORCH_CUDA_ALLOC_CONF string is refused. Their NAMEs and
// sentences are one table in src/model/model_errors.cpp.

#include <rlmem/base/error.hpp>

#include <cstdint>
#include <string_view>

namespace rlmem {

/// Every way parse_alloc_conf refuses a string. The failure's `detail` is the line printed.
enum class model_errc : std::uint8_t {
  ok = 0,
  missing_value,                   ///< an item without ':' ("expandable_segments")
  not_true_or_false,               ///< expandable_segments is neither True nor False
  size_out_of_range,               ///< a *_mb size that is no whole number in its range
  divisions_out_of_range,          ///< roundup_power2_divisions above alloc_conf_limits::max_divisions
  malformed_divisions,             ///< roundup_power2_divisions neither a number nor a [size_mb:divisions,...] list
  divisions_key_not_power_of_two,  ///< a [size_mb:...] key that is not a power of two
  threshold_out_of_range,          ///< garbage_collection_threshold not a number strictly between 0 and 1
  unsupported_backend,             ///< backend:cudaMallocAsync, or any backend but native
  unknown_key,                     ///< a key the caching allocator does not know
  count_
};

/// The code's NAME in upper case ("UNKNOWN_KEY"); "UNKNOWN" out of range.
std::string_view error_name(model_errc code) noexcept;
/// A sentence saying what the code means, without the specifics of one string.
std::string_view error_message(model_errc code) noexcept;

}  // namespace rlmem
