// SPDX-License-Identifier: MIT
#pragma once
// A trainer's config file (JSON or YAML) as one JSON value, read within limits: the trainer
// mappings (trl_config.cpp, verl_config.cpp) see typed values whichever syntax the file used.

#include <rlmem/plan/plan_errors.hpp>
#include <rlmem/plan/trainer_config.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace rlmem::detail {

enum class document_syntax : std::uint8_t { json, yaml };

/// A config file's settings as one JSON value, and the syntax the file used.
struct config_document {
  nlohmann::json settings;                         ///< the file's tree, YAML's scalars typed
  document_syntax syntax = document_syntax::json;  ///< which syntax the file was read as
};

/// JSON when the text starts with '{', else YAML, whose plain scalars are typed as PyYAML and
/// OmegaConf type them (null, true/false/yes/no/on/off, integers, floats; quoted ones stay
/// strings). Refused with one line past a limit (LIMIT_EXCEEDED), on a syntax error (NOT_JSON,
/// NOT_YAML) or on binary text (NOT_A_TRAINER_CONFIG).
result<config_document, plan_errc> parse_config_document(std::string_view text, const trainer_config_limits& limits);

}  // namespace rlmem::detail
