// SPDX-License-Identifier: MIT
#pragma once
// Whole numbers as options take them, and the one wording of a refusal: what every count, index
// and width option of the CLI and the limits of the C ABI (and so of Python) say of a bad value.

#include <cstdint>
#include <string>
#include <string_view>

namespace rlmem {

/// `text` as a number when it is decimal digits only (no sign, fraction, exponent, space or
/// trailing text) and fits a uint64; false otherwise.
bool parse_whole_number(std::string_view text, std::uint64_t& number);

/// Empty when `text` is a whole number (parse_whole_number) from `min` to `max`; else the reason,
/// the value escaped and cut to 40 bytes: "'2000000' is not a whole number from 1 to 1000000"
/// ("... of 0 or more" when `max` is UINT64_MAX: twenty digits teach nothing).
std::string whole_number_refusal(std::string_view text, std::uint64_t min, std::uint64_t max);

}  // namespace rlmem
