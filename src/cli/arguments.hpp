// SPDX-License-Identifier: MIT
#pragma once
// Parsing of option values shared by subcommands: byte sizes, category files.

#include <rlmem/inspect.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace rlmem::cli {

/// "2805590497", "2.5GiB", "512 MiB", "80GB" -> bytes. False on anything else.
bool parse_size(const std::string& text, std::int64_t& bytes);

/// Reads a category rules file; on failure returns false with a one-line message.
bool load_category_rules(const std::string& path, std::vector<category_rule>& rules, std::string& message);

}  // namespace rlmem::cli
