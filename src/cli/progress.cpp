// SPDX-License-Identifier: MIT
// Snapshot loading for the subcommands, and its progress line.

#include "progress.hpp"

#include "output.hpp"

#include <rlmem/report/report.hpp>

#include <cstdio>
#include <unistd.h>

namespace rlmem::cli {

namespace {
bool drawn = false;
constexpr std::uint64_t min_bytes_for_progress = std::uint64_t{32} << 20;
}  // namespace

progress_fn make_progress(const std::string& label, bool enabled) {
  if (!enabled || isatty(STDERR_FILENO) == 0) return {};
  return [label](std::uint64_t consumed, std::uint64_t total) {
    if (total < min_bytes_for_progress) return;
    std::fprintf(stderr, "\rreading %s: %3d%% of %s", printable_text(label).c_str(), static_cast<int>(100 * consumed / total),
                 format_bytes(static_cast<std::int64_t>(total)).c_str());
    std::fflush(stderr);
    drawn = true;
  };
}

void end_progress() {
  if (drawn) std::fprintf(stderr, "\r\033[K");
  drawn = false;
}

bool load_snapshot(const std::string& path, bool quiet, snapshot& out) {
  read_options options;
  options.progress = make_progress(path, !quiet);
  auto read = read_snapshot_file(path, options);
  end_progress();
  if (!read.ok()) {
    print_error(path + ": " + describe(read.failure()));
    return false;
  }
  out = std::move(read).value();
  return true;
}

}  // namespace rlmem::cli
