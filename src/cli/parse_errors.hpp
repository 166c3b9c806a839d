// SPDX-License-Identifier: MIT
#pragma once
// CLI11's parse errors in the words of the rest of rlmem's messages: one plain line.

#include <CLI/CLI.hpp>

#include <string>

namespace rlmem::cli {

/// The one line printed for `error`, raised while parsing `app`: CLI11's wording rewritten where
/// it reads as its internals ("At Most 1 required but received 2", "1 required TEXT missing"),
/// with the help of the subcommand that failed to parse.
std::string plain_parse_error(const CLI::ParseError& error, const CLI::App& app);

/// The one line refusing an option of the parsed subcommand given an empty value (`--fit ''`,
/// `--html ''`): without it '' reads as the option left out and the command runs without it.
/// Empty when every value given is non-empty.
std::string empty_value_refusal(const CLI::App& app);

}  // namespace rlmem::cli
