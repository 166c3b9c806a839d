// SPDX-License-Identifier: MIT
// `rlmem plan --from FILE`: which trainer wrote the config, then that trainer's mapping.

#include "config_document.hpp"
#include "trainer_mappings.hpp"

#include <rlmem/plan/trainer_config.hpp>

#include <fmt/format.h>

#include <new>

namespace rlmem {

namespace {

using json = nlohmann::json;

bool has_object(const json& document, const char* key) {
  auto it = document.find(key);
  return it != document.end() && it->is_object();
}

// Keys only a GRPOConfig (or the TrainingArguments under it) writes.
bool looks_like_trl(const json& document) {
  for (const char* key : {"num_generations", "max_completion_length", "per_device_train_batch_size", "use_vllm", "beta",
                          "generation_batch_size", "steps_per_generation"}) {
    if (document.contains(key)) return true;
  }
  return false;
}

}  // namespace

bool read_trainer_config(std::string_view text, const trainer_config_limits& limits, const trainer_config_context& context,
                         trainer_config_mapping& mapping, std::string& message) {
  try {
    json document;
    detail::document_syntax syntax{};
    if (!detail::parse_config_document(text, limits, document, syntax, message)) return false;
    if (!document.is_object()) {
      message = "is not a mapping of settings (neither a TRL GRPOConfig nor a verl config)";
      return false;
    }
    trainer_config_mapping parsed;
    detail::settings_reader read(document, parsed, message);
    if (has_object(document, "actor_rollout_ref")) {
      parsed.format = trainer_config_format::verl_yaml;
      if (!detail::map_verl_config(read, context, parsed)) return false;
    } else if (looks_like_trl(document)) {
      parsed.format = syntax == detail::document_syntax::json ? trainer_config_format::trl_json : trainer_config_format::trl_yaml;
      if (!detail::map_trl_config(read, context, parsed)) return false;
    } else {
      message = "is neither a TRL GRPOConfig (per_device_train_batch_size, num_generations, ...) nor a verl config "
                "(actor_rollout_ref, data, trainer)";
      return false;
    }
    mapping = std::move(parsed);
    return true;
  } catch (const std::bad_alloc&) {
    message = "is too large to hold in memory";
    return false;
  } catch (const json::exception& failure) {  // a mapping step met a value of another type than it checked
    message = fmt::format("has a value we cannot read ({})", failure.what());
    return false;
  }
}

}  // namespace rlmem
