// SPDX-License-Identifier: MIT
#pragma once
// A reading-progress line on stderr, shown only for large files on a terminal.

#include <rlmem/snapshot_reader.hpp>

#include <string>

namespace rlmem::cli {

/// A progress callback for read_options, or an empty one when progress would be noise.
progress_fn make_progress(const std::string& label, bool enabled);
/// Clears the progress line if one was drawn.
void end_progress();

}  // namespace rlmem::cli
