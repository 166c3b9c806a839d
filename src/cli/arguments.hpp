// SPDX-License-Identifier: MIT
#pragma once
// Parsing of option values shared by subcommands: byte sizes, whole numbers, category files.

#include <rlmem/inspect/inspect.hpp>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rlmem::cli {

/// Ranges of the text report's options that more than one subcommand has: a stack longer than
/// this is no report. --device and --top are inspect's options (device_option, top_option in
/// rlmem/inspect/inspect.hpp), which the C ABI and Python check alike.
inline constexpr std::uint64_t max_frames = 10'000;
inline constexpr std::uint64_t min_width = 60;
inline constexpr std::uint64_t max_width = 1000;

/// The largest size an option takes: what an int64 byte count holds (8 EiB).
inline constexpr std::uint64_t max_size_bytes = (std::uint64_t{1} << 63) - 1;

/// "2805590497", "2.5GiB", "512 MiB", "80GB" -> bytes, from 1 B to max_size_bytes. Without a
/// unit (or with B) only decimal digits; with a larger unit a decimal fraction, rounded to the
/// nearest byte. No sign, exponent, hex, NaN or infinity, nothing after the unit. On anything
/// else false, with a message naming the value and the accepted forms and range.
bool parse_size(std::string_view text, std::int64_t& bytes, std::string& message);

/// A whole number in decimal digits (no sign, fraction, exponent, space or trailing text) from
/// `min` to `max`: the check for every count, index and width option. Its message names the
/// value and the range; CLI11 puts the option's name in front.
CLI::Validator whole_number_in(std::uint64_t min, std::uint64_t max);
/// whole_number_in over one of inspect's options, in the words its other callers get.
CLI::Validator whole_number_in(const whole_number_option& option);

/// A decimal number like 0.1 or 2 (no sign, exponent, hex, NaN or infinity, no trailing text)
/// from `min` to `max`, both included: the check for seconds and ratios.
CLI::Validator decimal_in(double min, double max);

/// Reads a category rules file; on failure returns false with a one-line message.
bool load_category_rules(const std::string& path, std::vector<category_rule>& rules, std::string& message);

}  // namespace rlmem::cli
