// SPDX-License-Identifier: MIT
#pragma once
// Each subcommand registers itself on the app and sets `run` to its body when chosen.

#include <CLI/CLI.hpp>

#include <functional>

namespace rlmem::cli {

/// Exit codes: 0 success, 2 bad input or usage (one line on stderr), 1 internal error (out of
/// memory included), 3 the report could not be written (disk full, stdout closed, its reader gone).
inline constexpr int exit_ok = 0;
inline constexpr int exit_internal = 1;
inline constexpr int exit_bad_input = 2;
inline constexpr int exit_cannot_write = 3;

using command_body = std::function<int()>;

void add_inspect_command(CLI::App& app, command_body& run);
void add_diff_command(CLI::App& app, command_body& run);
void add_replay_command(CLI::App& app, command_body& run);
void add_plan_command(CLI::App& app, command_body& run);
void add_watch_command(CLI::App& app, command_body& run);
void add_report_command(CLI::App& app, command_body& run);

}  // namespace rlmem::cli
