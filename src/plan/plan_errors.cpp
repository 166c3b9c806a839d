// SPDX-License-Identifier: MIT
// plan's table of error names and messages, checked at compile time to follow plan_errc.

#include <rlmem/plan/plan_errors.hpp>

namespace rlmem {

namespace {

constexpr error_rows<plan_errc, static_cast<std::size_t>(plan_errc::count_)> plan_error_table = {{
    {plan_errc::ok, "OK", "no error"},
    {plan_errc::not_json, "NOT_JSON", "the config is not JSON, or not a JSON object"},
    {plan_errc::not_yaml, "NOT_YAML", "the config is not YAML that can be read"},
    {plan_errc::unsupported_architecture, "UNSUPPORTED_ARCHITECTURE", "the model's layers are not modelled"},
    {plan_errc::missing_field, "MISSING_FIELD", "the config lacks a field the architecture needs"},
    {plan_errc::invalid_field, "INVALID_FIELD", "a field of the wrong type or value, or fields that contradict each other"},
    {plan_errc::limit_exceeded, "LIMIT_EXCEEDED", "a size, a dimension or a knob beyond its limit"},
    {plan_errc::invalid_knob, "INVALID_KNOB", "a knob outside the values it takes"},
    {plan_errc::missing_knob, "MISSING_KNOB", "a knob the others need is not given"},
    {plan_errc::knob_conflict, "KNOB_CONFLICT", "knobs that contradict each other, the phase or the model"},
    {plan_errc::invalid_buffer_spec, "INVALID_BUFFER_SPEC", "a --buffer that is not NAME=DIMS:DTYPE[@PHASES]"},
    {plan_errc::invalid_quantiles, "INVALID_QUANTILES", "response-length percentiles malformed, repeated or out of order"},
    {plan_errc::unknown_search_knob, "UNKNOWN_SEARCH_KNOB", "not a knob --vary opens"},
    {plan_errc::not_a_trainer_config, "NOT_A_TRAINER_CONFIG", "neither a TRL GRPOConfig nor a verl config"},
}};

static_assert(rows_follow_codes(plan_error_table), "plan_error_table rows must follow plan_errc order");

}  // namespace

std::string_view error_name(plan_errc code) noexcept { return name_in(plan_error_table, code); }

std::string_view error_message(plan_errc code) noexcept { return message_in(plan_error_table, code); }

}  // namespace rlmem
