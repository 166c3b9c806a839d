// SPDX-License-Identifier: MIT
// Planner speed: one plan of a GRPO step, and --fit searches (configurations per second; the
// issue's target is 10,000 configurations within a second).

#include <rlmem/plan/plan.hpp>

#include <benchmark/benchmark.h>

namespace {

rlmem::plan_knobs grpo_step(std::uint64_t gpus, std::uint64_t lora_rank) {
  rlmem::plan_knobs knobs;
  knobs.phase = rlmem::plan_phase::grpo_step;
  knobs.prompts = 32 * gpus;
  knobs.group = 8;
  knobs.prompt_len = 512;
  knobs.new_tokens = 1024;
  knobs.micro_batch = 8;
  knobs.reference = lora_rank > 0 ? rlmem::reference_kind::adapter_disabled : rlmem::reference_kind::copy;
  knobs.gpus = gpus;
  knobs.shard = gpus > 1 ? rlmem::shard_kind::fsdp : rlmem::shard_kind::none;
  knobs.lora_rank = lora_rank;
  return knobs;
}

void plan_one_step(benchmark::State& state) {
  const rlmem::model_architecture& model = *rlmem::find_preset("qwen2.5-7b");
  const rlmem::plan_knobs knobs = grpo_step(8, 0);
  for (auto _ : state) benchmark::DoNotOptimize(rlmem::plan_memory(model, knobs));
  state.counters["plans_per_second"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// --fit over micro-batch, generation batch, checkpointing, offload, log-probs, and with --vary
// group, generation length and (with LoRA) rank: the largest search the CLI runs.
void fit_search(benchmark::State& state, const char* model_name, std::uint64_t gpus, std::uint64_t lora_rank) {
  const rlmem::model_architecture& model = *rlmem::find_preset(model_name);
  rlmem::fit_options options;
  options.budget_bytes = rlmem::gpu_memory_bytes("h100-80g");
  options.vary = rlmem::search_bit(rlmem::search_knob::group) | rlmem::search_bit(rlmem::search_knob::new_tokens) |
                 (lora_rank > 0 ? rlmem::search_bit(rlmem::search_knob::lora_rank) : 0u);
  const rlmem::plan_knobs base = grpo_step(gpus, lora_rank);
  std::uint64_t configurations = 0;
  for (auto _ : state) {
    const rlmem::fit_result fit = rlmem::fit_configuration(model, base, options);
    configurations += fit.configurations;
    state.counters["configurations"] = static_cast<double>(fit.configurations);
    benchmark::DoNotOptimize(fit);
  }
  state.counters["configurations_per_second"] = benchmark::Counter(static_cast<double>(configurations), benchmark::Counter::kIsRate);
}

int register_all() {
  benchmark::RegisterBenchmark("plan/grpo_step_qwen2.5-7b", plan_one_step)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("fit/qwen2.5-7b_full_1gpu", fit_search, "qwen2.5-7b", 1, 0)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("fit/qwen2.5-7b_lora_8gpus_fsdp", fit_search, "qwen2.5-7b", 8, 16)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("fit/qwen3-30b-a3b_lora_8gpus_fsdp", fit_search, "qwen3-30b-a3b", 8, 16)->Unit(benchmark::kMillisecond);
  return 0;
}

const int registered = register_all();

}  // namespace
