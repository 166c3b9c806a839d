// SPDX-License-Identifier: MIT
#pragma once
// The caching allocator's settings that change its decisions: parsed from a
// PYTORCH_CUDA_ALLOC_CONF string, or read from the settings a snapshot recorded. Part of the
// model layer (include/rlmem/model/model.hpp), which inspect and replay both read.

#include <rlmem/model/model_errors.hpp>
#include <rlmem/snapshot/snapshot.hpp>

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace rlmem {

/// The caching allocator's settings that change its decisions (CUDAAllocatorConfig).
struct allocator_settings {
  bool expandable_segments = false;  ///< pages mapped into reserved ranges as needed, instead of cudaMalloc'd segments
  std::uint64_t max_split_size = UINT64_MAX;                          ///< max_split_size_mb
  std::uint64_t max_non_split_rounding = std::uint64_t{20} << 20;     ///< max_non_split_rounding_mb
  std::array<std::uint32_t, 16> roundup_power2_divisions{};           ///< per 2^k MiB bucket; 0 = off
  /// garbage_collection_threshold, a fraction of the capacity: above it, freed segments that
  /// waited longest go back. 0 = off; applies only under a capacity.
  double garbage_collection_threshold = 0.0;

  /// Field by field: two runs under equal settings decide alike.
  bool operator==(const allocator_settings&) const = default;
};

/// The largest values parse_alloc_conf accepts. The defaults are also the most the settings can
/// hold: a larger limit is read as the default.
struct alloc_conf_limits {
  /// Sizes in MB (max_split_size_mb, max_non_split_rounding_mb): at most the MB whose bytes an
  /// int64 holds, so that multiplying out never wraps.
  std::uint64_t max_megabytes = ((std::uint64_t{1} << 63) - 1) >> 20;
  /// roundup_power2_divisions per bucket: kept as 32-bit counts.
  std::uint64_t max_divisions = std::numeric_limits<std::uint32_t>::max();
};

/// Parses a PYTORCH_CUDA_ALLOC_CONF string ("expandable_segments:True,max_split_size_mb:128").
/// Keys for the host allocator or other backends are accepted and ignored; `backend:cudaMallocAsync`,
/// unknown keys and values out of `limits` fail with a model_errc and, in `detail`, the line
/// printed ("unknown allocator setting 'frobnicate'").
result<allocator_settings, model_errc> parse_alloc_conf(std::string_view conf, const alloc_conf_limits& limits = {});

/// The settings as a PYTORCH_CUDA_ALLOC_CONF string, "" for the defaults.
std::string to_alloc_conf(const allocator_settings& settings);

/// The settings a snapshot was recorded under, defaults when absent. The recorded
/// PYTORCH_CUDA_ALLOC_CONF string decides when it parses (it is what the user set); otherwise
/// the snapshot's own allocator_settings keys (expandable_segments, max_split_size,
/// garbage_collection_threshold, roundup_power2_divisions).
allocator_settings settings_of(const snapshot& snap);

}  // namespace rlmem
