// SPDX-License-Identifier: MIT
// libFuzzer target for what `rlmem plan` reads from users: config.json (then every phase is
// planned on the parsed model) and --buffer specs. The first byte picks the parser.

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
  rlmem::resident_buffer scaled;
  std::string buffer_message;
  if (rlmem::parse_buffer_spec("traj=rows*epochs*3:fp32", scaled, buffer_message)) knobs.buffers.push_back(scaled);
  for (auto phase : {rlmem::plan_phase::generate, rlmem::plan_phase::train, rlmem::plan_phase::grpo_step}) {
    knobs.phase = phase;
    knobs.batch = phase == rlmem::plan_phase::train ? 0 : 1 + seed % 7;  // train generates nothing: --batch is refused there
    std::string message;
    if (!rlmem::validate_knobs(model, knobs, message)) {
      if (message.empty()) __builtin_trap();
      continue;
    }
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
  std::string message;
  if ((data[0] & 1) == 0) {
    rlmem::model_architecture model;
    if (rlmem::parse_hf_config(text, model, message)) {
      plan_everything(model, data[0]);
    } else if (message.empty()) {
      __builtin_trap();
    }
  } else {
    rlmem::resident_buffer buffer;
    if (rlmem::parse_buffer_spec(text, buffer, message)) {
      if (buffer.fixed_bytes == 0 || buffer.name.empty()) __builtin_trap();
    } else if (message.empty()) {
      __builtin_trap();
    }
  }
  return 0;
}
