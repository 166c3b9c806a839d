// SPDX-License-Identifier: MIT
// The inspect part's table of error names and messages, checked at compile time to follow inspect_errc.

#include <rlmem/inspect/inspect_errors.hpp>

namespace rlmem {

namespace {

constexpr error_rows<inspect_errc, static_cast<std::size_t>(inspect_errc::count_)> inspect_error_table = {{
    {inspect_errc::ok, "OK", "no error"},
    {inspect_errc::option_out_of_range, "OPTION_OUT_OF_RANGE", "an option's value is outside its range"},
    {inspect_errc::step_marker_too_long, "STEP_MARKER_TOO_LONG", "the step marker is longer than the limit"},
    {inspect_errc::invalid_step_marker, "INVALID_STEP_MARKER", "the step marker is not a valid regular expression"},
    {inspect_errc::no_such_device, "NO_SUCH_DEVICE", "the snapshot has no such device"},
    {inspect_errc::limit_below_recording, "LIMIT_BELOW_RECORDING", "the limit is below what the recording reserved"},
    {inspect_errc::limit_above_recording, "LIMIT_ABOVE_RECORDING",
     "the limit is above the bound an OOM of the recording sets (its request would have fit)"},
    {inspect_errc::unknown_category, "UNKNOWN_CATEGORY", "a rule names no memory category"},
    {inspect_errc::category_not_assignable, "CATEGORY_NOT_ASSIGNABLE",
     "a rule gives before_recording, the category of blocks allocated before recording began"},
    {inspect_errc::missing_pattern, "MISSING_PATTERN", "a rule has no pattern after its category"},
    {inspect_errc::folder_unreadable, "FOLDER_UNREADABLE", "the folder cannot be read"},
    {inspect_errc::no_snapshot_files, "NO_SNAPSHOT_FILES", "the folder holds no snapshot files"},
    {inspect_errc::two_ranks_in_name, "TWO_RANKS_IN_NAME", "a file name names two different ranks"},
    {inspect_errc::file_without_rank, "FILE_WITHOUT_RANK", "a snapshot file name carries no rank"},
    {inspect_errc::duplicate_rank, "DUPLICATE_RANK", "two snapshot files carry the same rank"},
    {inspect_errc::timeline_size_mismatch, "TIMELINE_SIZE_MISMATCH",
     "the timeline's arrays do not hold one figure per event"},
}};

static_assert(rows_follow_codes(inspect_error_table), "inspect_error_table rows must follow inspect_errc order");

}  // namespace

std::string_view error_name(inspect_errc code) noexcept { return name_in(inspect_error_table, code); }

std::string_view error_message(inspect_errc code) noexcept { return message_in(inspect_error_table, code); }

}  // namespace rlmem
