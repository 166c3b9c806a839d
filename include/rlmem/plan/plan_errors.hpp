// SPDX-License-Identifier: MIT
#pragma once
// How plan's readers and checks refuse their input: config.json, --buffer specs, the knobs, the
// response-length percentiles, --vary's names and a trainer's config file. One code each, one row
// each in the table of src/plan/plan_errors.cpp.

#include <rlmem/base/error.hpp>

#include <cstdint>
#include <string_view>

namespace rlmem {

/// Every way plan refuses what a user gives it. The failure's detail is the one-line sentence the
/// command line prints (after the file's name, or the flag, where it adds one).
enum class plan_errc : std::uint8_t {
  ok = 0,
  not_json,                  ///< a config that is not JSON, or not a JSON object
  not_yaml,                  ///< a trainer's YAML config that YAML cannot read
  unsupported_architecture,  ///< a model family whose layers the memory terms do not describe
  missing_field,             ///< a field the architecture needs is absent
  invalid_field,             ///< a field of the wrong type or value, or fields that contradict each other
  limit_exceeded,            ///< beyond a limit: the input's size or nesting, a dimension, a knob, a pass's tokens
  invalid_knob,              ///< a knob outside what it may be (zero, a fraction beyond 1, an unknown module)
  missing_knob,              ///< a knob the others need is not given (--card for an engine, ...)
  knob_conflict,             ///< knobs that contradict each other, the phase or the model
  invalid_buffer_spec,       ///< a --buffer that is not `NAME=DIMS:DTYPE[@PHASES]`
  invalid_quantiles,         ///< response-length percentiles malformed, repeated or out of order
  unknown_search_knob,       ///< a name that is not a knob --vary opens
  not_a_trainer_config,      ///< neither a TRL GRPOConfig nor a verl config (binary, not a mapping, other keys)
  count_
};

/// plan's failure: the code, and the sentence printed in `detail` (offset is always 0).
using plan_error = basic_error<plan_errc>;

/// The code's NAME in upper case ("KNOB_CONFLICT"); "UNKNOWN" out of range.
std::string_view error_name(plan_errc code) noexcept;
/// A sentence saying what the code means, without the specifics of one refusal.
std::string_view error_message(plan_errc code) noexcept;

}  // namespace rlmem
