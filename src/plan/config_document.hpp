// SPDX-License-Identifier: MIT
#pragma once
// A trainer's config file (JSON or YAML) as one JSON value, read within limits: the trainer
// mappings (trl_config.cpp, verl_config.cpp) see typed values whichever syntax the file used.

#include <rlmem/plan/trainer_config.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace rlmem::detail {

enum class document_syntax : std::uint8_t { json, yaml };

/// JSON when the text starts with '{', else YAML, whose plain scalars are typed as PyYAML and
/// OmegaConf type them (null, true/false/yes/no/on/off, integers, floats; quoted ones stay
/// strings). False with a one-line message past a limit, on a syntax error or on binary text.
bool parse_config_document(std::string_view text, const trainer_config_limits& limits, nlohmann::json& document,
                           document_syntax& syntax, std::string& message);

}  // namespace rlmem::detail
