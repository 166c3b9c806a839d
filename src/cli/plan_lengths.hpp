// SPDX-License-Identifier: MIT
#pragma once
// `rlmem plan`'s options for the responses' lengths as a distribution (docs/plan.md, "Response
// lengths"): the longest the data allows, its percentiles or a file of observed lengths.

#include <rlmem/report/report.hpp>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace rlmem::cli {

struct length_arguments {
  std::uint64_t max_length = 0;  ///< --response-len-max (0: --new-tokens)
  std::string percentiles;       ///< --response-len-percentiles p50=...,p90=...
  std::string lengths_file;      ///< --response-lens FILE: one observed length per line
};

void add_length_options(CLI::App* command, length_arguments& lengths);

/// Whether any of the options was given.
bool length_view_asked(const CLI::App& command);

/// Plans the step along the lengths into report.response_lengths, the longest that fits found on
/// `card` (usable_bytes 0: no card). False after printing one line when the options are wrong.
bool plan_length_view(const length_arguments& lengths, plan_report& report, std::uint64_t usable_bytes, const std::string& card);

}  // namespace rlmem::cli
