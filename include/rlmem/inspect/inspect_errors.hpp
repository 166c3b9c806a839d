// SPDX-License-Identifier: MIT
#pragma once
// The inspect part's error codes: why options, a rules file, a folder of per-rank snapshots or a
// step marker are refused. Their NAMEs and sentences are one table in src/inspect/inspect_errors.cpp.

#include <rlmem/base/error.hpp>

#include <cstdint>
#include <string_view>

namespace rlmem {

/// Every way inspect's parsers and checks refuse what they were given. The failure's `detail` is
/// the line printed.
enum class inspect_errc : std::uint8_t {
  ok = 0,
  option_out_of_range,     ///< --device, --top or --limit outside its range (check_inspect_options)
  step_marker_too_long,    ///< a step marker longer than max_step_marker_bytes
  invalid_step_marker,     ///< a step marker RE2 does not compile
  no_such_device,          ///< --device names a device the snapshot does not have
  limit_below_recording,   ///< --limit below what the recording reserved
  limit_above_recording,   ///< --limit above the bound an OOM of the recording sets
  unknown_category,        ///< a rules file names no memory category
  category_not_assignable, ///< a rules file assigns before_recording, which no rule can
  missing_pattern,         ///< a rule without a pattern after its category
  folder_unreadable,       ///< a folder of per-rank snapshots cannot be listed
  no_snapshot_files,       ///< the folder holds no snapshot file
  two_ranks_in_name,       ///< a file name carries marks of two different ranks
  file_without_rank,       ///< a snapshot file whose name carries no rank
  duplicate_rank,          ///< two files of the same rank
  timeline_size_mismatch,  ///< a live_feed's allocated or reserved array not one figure per event
  count_
};

/// The code's NAME in upper case ("UNKNOWN_CATEGORY"); "UNKNOWN" out of range.
std::string_view error_name(inspect_errc code) noexcept;
/// A sentence saying what the code means, without the specifics of one input.
std::string_view error_message(inspect_errc code) noexcept;

}  // namespace rlmem
