// SPDX-License-Identifier: MIT
// libFuzzer target for `rlmem plan --from FILE`: a trainer config (JSON or YAML, TRL or verl)
// read within small limits. It must accept with knobs that name a flag, or refuse with a named
// code and one line (plan_contract.hpp).

#include "plan_contract.hpp"

#include <rlmem/plan/trainer_config.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  rlmem::trainer_config_limits limits;
  limits.max_bytes = 1u << 16;
  limits.max_depth = 16;
  limits.max_nodes = 4096;
  rlmem::trainer_config_context context;
  context.gpus = size % 3;  // 0: not given on the command line
  const auto read = rlmem::read_trainer_config(text, limits, context);
  rlmem::fuzzing::expect_plan_contract(read);
  if (!read.ok()) return 0;
  const rlmem::trainer_config_mapping& mapping = read.value();
  for (const rlmem::mapped_setting& setting : mapping.mapped) {
    if (setting.key.empty() || !setting.flag.starts_with("--") || setting.flag_value.empty()) __builtin_trap();
  }
  for (const rlmem::ignored_setting& setting : mapping.ignored) {
    if (setting.key.empty() || setting.reason.empty()) __builtin_trap();
  }
  return 0;
}
