// SPDX-License-Identifier: MIT
#pragma once
// Reading one trainer's settings out of a config document by dotted key, typed and bounded, and
// recording each as mapped to a knob or ignored with its reason (trl_config.cpp, verl_config.cpp).

#include <rlmem/plan/plan_errors.hpp>
#include <rlmem/plan/trainer_config.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rlmem::detail {

/// One key's value: the file's, or the trainer's default when the file leaves it out (or null).
struct setting {
  std::string key;
  nlohmann::json value;     ///< null when neither the file nor a default gives one
  bool in_file = false;
  bool interpolated = false;  ///< an OmegaConf "${...}" the file leaves for Hydra to resolve
  bool set() const { return !value.is_null() && !interpolated; }
};

/// Reads typed settings into a mapping until the first refusal, which it keeps.
class settings_reader {
 public:
  settings_reader(const nlohmann::json& document, trainer_config_mapping& mapping, const trainer_config_limits& limits)
      : document_(document), mapping_(mapping), limits_(limits) {}

  /// The bounds on counts (rows, lengths, GPUs) a setting may give.
  const trainer_config_limits& limits() const { return limits_; }

  /// The value at `path` ("actor_rollout_ref.rollout.n"); `fallback` (the trainer's default) when absent or null.
  setting get(std::string_view path, nlohmann::json fallback = nullptr) const;
  /// Whether the file has the key at all.
  bool has(std::string_view path) const;

  /// A whole number in [minimum, limit]; nullopt (and the failure recorded: INVALID_FIELD, or
  /// LIMIT_EXCEEDED above `limit`) when of another type or out of range.
  std::optional<std::uint64_t> count(const setting& value, std::uint64_t limit, std::uint64_t minimum = 1);
  std::optional<bool> flag(const setting& value);
  std::optional<double> number(const setting& value);
  std::optional<std::string> text(const setting& value);

  void map(const setting& from, std::string flag, std::string flag_value, std::string note = {});
  void ignore(const setting& from, std::string reason);
  /// A file value left for Hydra to resolve: named as ignored (it cannot be read here).
  void ignore_interpolation(const setting& from);

  bool failed() const { return failed_; }
  /// Records the first refusal, whose `sentence` is printed after the file's name; returns false.
  bool fail(std::string sentence, plan_errc code = plan_errc::invalid_field);
  /// The first refusal. Precondition: failed().
  const plan_error& failure() const { return failure_; }

 private:
  const nlohmann::json& document_;
  trainer_config_mapping& mapping_;
  const trainer_config_limits& limits_;
  plan_error failure_;
  bool failed_ = false;
};

/// A value as the user wrote it: strings bare, the rest as JSON, at most 80 characters.
std::string value_text(const nlohmann::json& value);

}  // namespace rlmem::detail
