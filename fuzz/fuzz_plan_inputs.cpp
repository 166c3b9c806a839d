// SPDX-License-Identifier: MIT
// libFuzzer target for what `rlmem plan` reads from users: config.json (then the knobs are checked
// and every phase is planned on the parsed model), and --buffer specs, --response-len-percentiles
// and --vary's names. The first byte picks config.json or the three short texts. Every reader and
// check keeps the error model's contract (plan_contract.hpp).

#include "plan_contract.hpp"

#include <rlmem/plan/plan.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

// Every phase on the parsed model, with knobs chosen from the input: peaks must add up.
void plan_everything(const rlmem::model_architecture& model, std::uint8_t seed) {
  rlmem::plan_knobs knobs;
  knobs.batch = 1 + seed % 7;
  knobs.prompt_len = 1 + seed;
  knobs.new_tokens = 1 + seed % 13;
  knobs.micro_batch = 1 + seed % 3;
  knobs.seq_len = 2 + seed;
  knobs.logprob_tokens = 1 + seed / 2;
  knobs.prompts = 1 + seed % 5;
  knobs.group = 6;
  knobs.reference = (seed & 1) == 0 ? rlmem::reference_kind::none
                    : (seed & 4) != 0  ? rlmem::reference_kind::adapter_disabled
                                       : rlmem::reference_kind::copy;
  knobs.grad_ckpt = (seed & 2) != 0;
  knobs.lora_rank = (seed & 4) != 0 ? 1 : 0;
  knobs.logprob = static_cast<rlmem::logprob_impl>(seed % 3);
  knobs.optimizer = static_cast<rlmem::optimizer_kind>(seed % 3);
  if (model.model_type == "nanochat") knobs.precision = rlmem::precision_kind::nanochat;
  knobs.epochs = 1 + (seed >> 6);  // refused outside grpo-step
  if ((seed & 8) != 0) {
    knobs.kv_cache = rlmem::kv_cache_kind::prealloc;
    knobs.kv_rows_follow = static_cast<rlmem::kv_rows_kind>((seed >> 4) % 3);
  }
  const auto scaled = rlmem::parse_buffer_spec("traj=rows*epochs*3:fp32");
  if (!scaled.ok()) __builtin_trap();
  knobs.buffers.push_back(scaled.value());
  // An engine on some seeds, so that its checks and the hand-off's see both answers.
  if ((seed & 16) != 0) {
    knobs.engine.rollout = (seed & 32) != 0 ? rlmem::rollout_kind::sglang : rlmem::rollout_kind::vllm;
    knobs.engine.device_bytes = (seed & 64) != 0 ? rlmem::gpu_memory_bytes("h100-80g") : 0;
    knobs.engine.mem_fraction_static = (seed & 128) != 0 ? 0.5 : 0;
    knobs.engine.sleep_level = seed % 4;
    knobs.handoff = static_cast<rlmem::handoff_kind>(seed % 4);
  }
  for (auto phase : {rlmem::plan_phase::generate, rlmem::plan_phase::train, rlmem::plan_phase::grpo_step}) {
    knobs.phase = phase;
    knobs.batch = phase == rlmem::plan_phase::train ? 0 : 1 + seed % 7;  // train generates nothing: --batch is refused there
    const auto checked = rlmem::validate_knobs(model, knobs);
    const auto engine_checked = rlmem::validate_engine_knobs(knobs);
    const auto handoff_checked = rlmem::validate_handoff_knobs(knobs);
    rlmem::fuzzing::expect_plan_contract(checked);
    rlmem::fuzzing::expect_plan_contract(engine_checked);
    rlmem::fuzzing::expect_plan_contract(handoff_checked);
    if (!checked.ok() || !engine_checked.ok() || !handoff_checked.ok()) continue;
    const rlmem::plan_result plan = rlmem::plan_memory(model, knobs);
    for (const auto& estimate : plan.phases) {
      std::uint64_t sum = 0;
      for (const auto& part : estimate.components) sum += part.bytes;
      if (sum != estimate.peak_bytes || estimate.peak_bytes > plan.peak_bytes) __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    const auto model = rlmem::parse_hf_config(text);
    rlmem::fuzzing::expect_plan_contract(model);
    if (model.ok()) plan_everything(model.value(), data[0]);
  } else {
    const auto buffer = rlmem::parse_buffer_spec(text);
    rlmem::fuzzing::expect_plan_contract(buffer);
    if (buffer.ok() && (buffer.value().fixed_bytes == 0 || buffer.value().name.empty())) __builtin_trap();
    const auto quantiles = rlmem::parse_length_quantiles(text);
    rlmem::fuzzing::expect_plan_contract(quantiles);
    if (quantiles.ok() && quantiles.value().empty()) __builtin_trap();
    rlmem::fuzzing::expect_plan_contract(rlmem::parse_search_knob(text));
  }
  return 0;
}
