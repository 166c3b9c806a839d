// SPDX-License-Identifier: MIT
#pragma once
// One convention for what every command writes and where: --format text|json|html (the formats
// the command makes), -o/--output FILE, and the shorthands scripts already use, --json and
// --html FILE.

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>

namespace rlmem::cli {

enum class output_format { text, json, html };

/// What the user chose; parsing the options fills it.
struct output_choice {
  output_format format = output_format::text;
  std::string path = "-";  ///< where it goes: "-" is standard output
};

/// What a command makes besides text, and how its JSON and page are described in --help.
struct output_offer {
  std::string json_help;   ///< --json's line, naming the schema
  std::string html_help;   ///< --html's line; empty: the command makes no page
  bool to_file = true;     ///< -o/--output FILE (a stream, as watch's, goes to standard output only)
};

/// Adds --format, --json, --html FILE (where a page is offered) and -o/--output FILE (where
/// offered) to `command`; any two that choose a format exclude each other.
void add_output_options(CLI::App& command, output_choice& choice, const output_offer& offer);

/// Writes `text` where `choice` says: standard output as write_report does, a file as
/// write_whole_file does. Returns exit_ok, or exit_cannot_write after the one line.
int write_output(const output_choice& choice, std::string_view text);

/// Whether the chosen format can be written by this build (a page needs the browser assets);
/// when not, the one line is said and the caller exits with exit_internal.
bool output_available(const output_choice& choice);

}  // namespace rlmem::cli
