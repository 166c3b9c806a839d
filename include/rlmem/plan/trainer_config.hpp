// SPDX-License-Identifier: MIT
#pragma once
// `rlmem plan --from FILE`: the trainer configs RL teams already have (TRL's GRPOConfig as JSON or
// YAML, a verl config as YAML) read into plan's knobs, each setting that shapes memory named with
// the flag it became, and each it could not use named with the reason.

#include <rlmem/plan/plan_errors.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rlmem {

/// Which trainer's config a file is, and in which form (recognised from its keys).
enum class trainer_config_format : std::uint8_t {
  trl_json,   ///< TrainingArguments.to_json_string() of a GRPOConfig (with TRL's ModelConfig keys if present)
  trl_yaml,   ///< a `trl grpo --config recipe.yaml` recipe (GRPOConfig and ModelConfig keys)
  verl_yaml,  ///< a verl Hydra config (ppo_trainer.yaml's tree: actor_rollout_ref, data, trainer, ...)
};
/// The format's name in the reports: "trl-grpo-json", "trl-grpo-yaml", "verl-yaml".
/// Inline, so that the report renders a mapping without linking the reader (and yaml-cpp).
inline std::string_view to_string(trainer_config_format format) noexcept {
  switch (format) {
    case trainer_config_format::trl_json: return "trl-grpo-json";
    case trainer_config_format::trl_yaml: return "trl-grpo-yaml";
    case trainer_config_format::verl_yaml: return "verl-yaml";
  }
  return "unknown";
}

/// Bounds on what the reader accepts; beyond any of them it refuses the file (LIMIT_EXCEEDED).
/// validate_knobs then checks the knobs the file gave against the model.
struct trainer_config_limits {
  std::uint64_t max_bytes = std::uint64_t{1} << 20;  ///< a full verl config is about 25 kB
  std::uint32_t max_depth = 32;                      ///< verl nests 5 levels
  std::uint64_t max_nodes = 20000;                   ///< values and keys, aliases counted each time they expand
  std::uint64_t max_rows = std::uint64_t{1} << 20;    ///< a batch, a group, micro-batches or steps a setting gives
  std::uint64_t max_length = std::uint64_t{1} << 24;  ///< a prompt's, a completion's or a model's length in tokens
  std::uint64_t max_gpus = std::uint64_t{1} << 16;    ///< processes, GPUs per node, nodes, tensor-parallel size
};

/// One setting of the file that became a knob: `key value -> flag flag_value`.
struct mapped_setting {
  std::string key;         ///< dotted path in the file ("actor_rollout_ref.rollout.n"), or the keys a value derives from
  std::string value;       ///< as the file gives it (JSON text), or the trainer's default
  std::string flag;        ///< plan's option: "--micro-batch"
  std::string flag_value;  ///< "4"; for on/off options "on" or "off"
  std::string note;        ///< how the value was derived, when not copied
  bool from_default = false;  ///< the file does not set the key: the trainer's default at the cited commit
  bool overridden = false;    ///< the command line gave the flag too, and it wins (set by the caller)
};

/// A setting that shapes memory but does not reach the plan, and why.
struct ignored_setting {
  std::string key;     ///< dotted path in the file, as mapped_setting's
  std::string value;   ///< as the file gives it (strings bare, the rest as JSON, at most 80 characters), or the default
  std::string reason;  ///< why the plan leaves it out, often with what it planned with instead
};

/// What read_trainer_config made of a file: the settings that became knobs and those left out.
struct trainer_config_mapping {
  trainer_config_format format = trainer_config_format::trl_json;  ///< as recognised from the keys
  std::string defaults_from;  ///< the trainer and commit whose defaults fill keys the file leaves out
  std::vector<mapped_setting> mapped;    ///< the settings that became knobs
  std::vector<ignored_setting> ignored;  ///< settings that shape memory but do not reach the plan
};

/// The command line's say in the mapping: TRL's generation batch is per_device_train_batch_size x
/// the number of processes x steps_per_generation, and the number of processes is accelerate's,
/// not the config's.
struct trainer_config_context {
  std::uint64_t gpus = 0;  ///< --gpus as given; 0 when not given
};

/// Reads `text` (JSON or YAML; the format is recognised from the keys) into a mapping; never
/// throws. A refusal's detail is one line, printed after the file's name: NOT_JSON, NOT_YAML,
/// LIMIT_EXCEEDED, INVALID_FIELD (a key of the wrong type or value) or NOT_A_TRAINER_CONFIG.
result<trainer_config_mapping, plan_errc> read_trainer_config(std::string_view text, const trainer_config_limits& limits = {},
                                                              const trainer_config_context& context = {});

}  // namespace rlmem
