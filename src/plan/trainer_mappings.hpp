// SPDX-License-Identifier: MIT
#pragma once
// Each trainer's settings onto plan's knobs: one function per trainer, one file each.

#include "config_settings.hpp"

#include <rlmem/plan/trainer_config.hpp>

#include <string>

namespace rlmem::detail {

/// TRL's GRPOConfig (and ModelConfig), from a JSON or YAML document. Each mapper returns false
/// once `read` has recorded a refusal (settings_reader::failure).
bool map_trl_config(settings_reader& read, const trainer_config_context& context, trainer_config_mapping& mapping);
/// A verl Hydra config (ppo_trainer.yaml's tree).
bool map_verl_config(settings_reader& read, const trainer_config_context& context, trainer_config_mapping& mapping);

/// LoRA target modules as plan's --lora-targets ("all-linear" or a list of the seven names);
/// empty with `unknown` set when some name is not one of the seven.
std::string lora_targets_value(const nlohmann::json& modules, std::string& unknown);

}  // namespace rlmem::detail
