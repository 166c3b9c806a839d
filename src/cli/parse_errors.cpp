// SPDX-License-Identifier: MIT
// CLI11's parse errors rewritten to one plain line.

#include "parse_errors.hpp"

#include <fmt/format.h>

#include <regex>
#include <string>
#include <vector>

namespace rlmem::cli {

namespace {

// "rlmem plan --help" when the error came from a subcommand, else "rlmem --help".
std::string help_of(const CLI::App& app) {
  for (const CLI::App* command : app.get_subcommands()) return fmt::format("rlmem {} --help", command->get_name());
  return "rlmem --help";
}

}  // namespace

std::string plain_parse_error(const CLI::ParseError& error, const CLI::App& app) {
  const std::string what = error.what();
  const std::string help = help_of(app);
  std::smatch match;
  static const std::regex repeated(R"(^(\S+): At Most (\d+) required but received (\d+)$)");
  static const std::regex missing_value(R"(^(\S+): \d+ required \S+ missing$)");
  static const std::regex unexpected(R"(^The following arguments? (?:was|were) not expected: (.*)$)");
  if (std::regex_match(what, match, repeated)) {
    return fmt::format("{} is given {} times; give it once (see {})", match[1].str(), match[3].str(), help);
  }
  if (std::regex_match(what, match, missing_value)) return fmt::format("{} needs a value (see {})", match[1].str(), help);
  if (std::regex_match(what, match, unexpected)) {
    return fmt::format("unknown option or extra argument: {} (see {})", match[1].str().substr(0, 200), help);
  }
  // `rlmem frobnicate`: CLI11 says only that a subcommand is required; name the word it got.
  const std::vector<std::string> left = app.remaining();
  if (what == "A subcommand is required" && !left.empty() && app.get_subcommands().empty()) {
    if (left.front().starts_with("-")) {
      return fmt::format("unknown option or extra argument: {} (see {})", left.front().substr(0, 200), help);
    }
    std::string commands;
    for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; })) {
      commands += (commands.empty() ? "" : ", ") + command->get_name();
    }
    return fmt::format("unknown command '{}' (one of {}; see {})", left.front().substr(0, 200), commands, help);
  }
  return fmt::format("{} (see {})", what, help);
}

std::string empty_value_refusal(const CLI::App& app) {
  for (const CLI::App* command : app.get_subcommands()) {
    for (const CLI::Option* option : command->get_options()) {
      // Flags take no value; an option given '' would otherwise read as an option not given.
      if (option->get_type_size() == 0 || option->count() == 0) continue;
      // An empty PYTORCH_CUDA_ALLOC_CONF is a setting of its own: torch's defaults, rather than
      // the settings the snapshot recorded.
      if (option->get_name() == "--alloc-conf") continue;
      for (const std::string& value : option->results()) {
        if (value.empty()) return fmt::format("{} is given an empty value; give it a value or leave it out (see {})", option->get_name(), help_of(app));
      }
    }
  }
  return {};
}

}  // namespace rlmem::cli
