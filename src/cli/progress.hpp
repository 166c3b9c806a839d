// SPDX-License-Identifier: MIT
#pragma once
// Reading snapshots for the subcommands, with a progress line on stderr for large files on a
// terminal.

#include <rlmem/snapshot/snapshot_reader.hpp>

#include <string>

namespace rlmem::cli {

/// A progress callback for read_options, or an empty one when progress would be noise.
progress_fn make_progress(const std::string& label, bool enabled);
/// Clears the progress line if one was drawn.
void end_progress();

/// Reads a snapshot for a subcommand, with progress on a terminal; on failure prints the one
/// line (file: CODE at byte N: ...) and returns false.
bool load_snapshot(const std::string& path, bool quiet, snapshot& out);

}  // namespace rlmem::cli
