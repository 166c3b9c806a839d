// SPDX-License-Identifier: MIT
// `rlmem plan --from FILE`: which trainer wrote the config, then that trainer's mapping.

#include "config_document.hpp"
#include "plan_refusal.hpp"
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

result<trainer_config_mapping, plan_errc> read_trainer_config(std::string_view text, const trainer_config_limits& limits,
                                                              const trainer_config_context& context) {
  using detail::refuse;
  try {
    const auto parsed_document = detail::parse_config_document(text, limits);
    if (!parsed_document.ok()) return parsed_document.failure();
    const json& document = parsed_document.value().settings;
    if (!document.is_object()) {
      return refuse(plan_errc::not_a_trainer_config, "is not a mapping of settings (neither a TRL GRPOConfig nor a verl config)");
    }
    trainer_config_mapping parsed;
    detail::settings_reader read(document, parsed, limits);
    if (has_object(document, "actor_rollout_ref")) {
      parsed.format = trainer_config_format::verl_yaml;
      if (!detail::map_verl_config(read, context, parsed)) return read.failure();
    } else if (looks_like_trl(document)) {
      parsed.format = parsed_document.value().syntax == detail::document_syntax::json ? trainer_config_format::trl_json
                                                                                        : trainer_config_format::trl_yaml;
      if (!detail::map_trl_config(read, context, parsed)) return read.failure();
    } else {
      return refuse(plan_errc::not_a_trainer_config,
                    "is neither a TRL GRPOConfig (per_device_train_batch_size, num_generations, ...) nor a verl config "
                    "(actor_rollout_ref, data, trainer)");
    }
    return parsed;
  } catch (const std::bad_alloc&) {
    return refuse(plan_errc::limit_exceeded, "is too large to hold in memory");
  } catch (const json::exception& failure) {  // a mapping step met a value of another type than it checked
    return refuse(plan_errc::invalid_field, fmt::format("has a value we cannot read ({})", failure.what()));
  }
}

}  // namespace rlmem
