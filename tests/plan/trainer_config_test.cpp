// SPDX-License-Identifier: MIT
// `rlmem plan --from FILE` on the trainer configs as published (testdata/trainer_configs/README.md):
// every setting's knob exactly, every ignored key, and the bad-input contract of the reader.

#include <rlmem/plan/trainer_config.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace rlmem {
namespace {

std::string read_testdata(const std::string& name) {
  std::ifstream file(std::string(RLMEM_TESTDATA_DIR) + "/trainer_configs/" + name, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// "key value -> flag value", "(default)" when the trainer's default filled it.
std::vector<std::string> mapped_lines(const trainer_config_mapping& mapping) {
  std::vector<std::string> lines;
  for (const mapped_setting& setting : mapping.mapped) {
    lines.push_back(setting.key + " " + setting.value + (setting.from_default ? " (default)" : "") + " -> " + setting.flag + " " +
                    setting.flag_value);
  }
  return lines;
}

std::vector<std::string> ignored_keys(const trainer_config_mapping& mapping) {
  std::vector<std::string> keys;
  for (const ignored_setting& setting : mapping.ignored) keys.push_back(setting.key + " " + setting.value);
  return keys;
}

trainer_config_mapping read_ok(const std::string& text, std::uint64_t gpus = 0) {
  trainer_config_context context;
  context.gpus = gpus;
  auto read = read_trainer_config(text, {}, context);
  EXPECT_TRUE(read.ok()) << read.failure().detail;
  return read.ok() ? std::move(read).value() : trainer_config_mapping{};
}

std::string read_error(const std::string& text, const trainer_config_limits& limits = {}) {
  const auto read = read_trainer_config(text, limits);
  EXPECT_FALSE(read.ok()) << "expected a refusal of: " << text.substr(0, 80);
  const std::string& message = read.failure().detail;
  EXPECT_NE(error_name(read.code()), "UNKNOWN") << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "a one-line message, saw: " << message;
  return message;
}

TEST(TrainerConfigTest, OpenR1GrpoRecipeAsPublished) {
  const trainer_config_mapping mapping = read_ok(read_testdata("trl_open_r1_qwen2.5-1.5b_grpo.yaml"));
  EXPECT_EQ(mapping.format, trainer_config_format::trl_yaml);
  const std::vector<std::string> expected = {
      "model_name_or_path Qwen/Qwen2.5-1.5B-Instruct -> --model Qwen/Qwen2.5-1.5B-Instruct",
      "per_device_train_batch_size 16 -> --micro-batch 16",
      "num_generations 16 -> --group 16",
      // 16 rows x 1 GPU x 4 steps per generation / 16 generations
      "gradient_accumulation_steps 4 -> --prompts 4",
      "max_prompt_length 512 -> --prompt-len 512",
      "max_completion_length 1024 -> --new-tokens 1024",
      "gradient_checkpointing true -> --grad-ckpt on",
      "beta 0.0 (default) -> --ref-model off",
      "num_iterations 1 (default) -> --epochs 1",
      // use_vllm with TRL's default importance-sampling correction scores the samples again
      "vllm_importance_sampling_correction true (default) -> --old-logprobs on",
      "torch_dtype bfloat16 -> --precision bf16",
      // use_vllm in colocate mode (f2cd577's default): vLLM on each training GPU, started by
      // trl/generation/vllm_generation.py with these knobs
      "use_vllm true -> --rollout vllm",
      "vllm_gpu_memory_utilization 0.3 (default) -> --gpu-memory-utilization 0.3",
      "per_device_train_batch_size x vllm_tensor_parallel_size x steps_per_generation 16 x 1 x 4 -> --max-num-seqs 64",
      "use_vllm true -> --max-num-batched-tokens 4096",
      "vllm_enable_sleep_mode false (default) -> --sleep-level 0",
  };
  EXPECT_EQ(mapped_lines(mapping), expected);
  EXPECT_EQ(ignored_keys(mapping), std::vector<std::string>{});
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "expected '" << from << "' in the published config";
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

std::vector<std::string> engine_lines(const trainer_config_mapping& mapping) {
  std::vector<std::string> lines;
  for (const std::string& line : mapped_lines(mapping)) {
    for (const char* flag : {"--rollout", "--gpu-memory-utilization", "--max-model-len", "--max-num-seqs", "--max-num-batched-tokens",
                             "--sleep-level", "--mem-fraction-static"}) {
      if (line.find(std::string("-> ") + flag + " ") != std::string::npos) lines.push_back(line);
    }
  }
  return lines;
}

TEST(TrainerConfigTest, OpenR1RecipeWithTrlsVllmKnobs) {
  const std::string recipe = read_testdata("trl_open_r1_qwen2.5-1.5b_grpo.yaml");
  // Sleep mode (TRL sleeps the engine at level 2), a context and a utilization, 2-way tensor parallelism.
  const trainer_config_mapping colocated = read_ok(replaced(recipe, "use_vllm: true\n",
                                                             "use_vllm: true\nvllm_mode: colocate\nvllm_gpu_memory_utilization: 0.45\n"
                                                             "vllm_max_model_length: 2048\nvllm_enable_sleep_mode: true\n"
                                                             "vllm_tensor_parallel_size: 2\n"));
  const std::vector<std::string> expected = {
      "use_vllm true -> --rollout vllm",
      "vllm_gpu_memory_utilization 0.45 -> --gpu-memory-utilization 0.45",
      "vllm_max_model_length 2048 -> --max-model-len 2048",
      "per_device_train_batch_size x vllm_tensor_parallel_size x steps_per_generation 16 x 2 x 4 -> --max-num-seqs 128",
      "use_vllm true -> --max-num-batched-tokens 4096",
      "vllm_enable_sleep_mode true -> --sleep-level 2",
  };
  EXPECT_EQ(engine_lines(colocated), expected);
  EXPECT_EQ(ignored_keys(colocated), std::vector<std::string>{"vllm_tensor_parallel_size 2"});
  // Server mode: the engine is on other GPUs; its colocate knobs are named, not planned.
  const trainer_config_mapping server =
      read_ok(replaced(recipe, "use_vllm: true\n", "use_vllm: true\nvllm_mode: server\nvllm_gpu_memory_utilization: 0.45\n"));
  EXPECT_EQ(engine_lines(server), std::vector<std::string>{});
  EXPECT_EQ(ignored_keys(server), (std::vector<std::string>{"use_vllm true", "vllm_gpu_memory_utilization 0.45"}));
  EXPECT_EQ(read_error(replaced(recipe, "use_vllm: true\n", "use_vllm: true\nvllm_mode: remote\n")),
            "vllm_mode must be server or colocate, not remote");
  EXPECT_EQ(read_error(replaced(recipe, "use_vllm: true\n", "use_vllm: true\nvllm_gpu_memory_utilization: 1.5\n")),
            "vllm_gpu_memory_utilization = 1.5 must be in (0, 1]");
}

TEST(TrainerConfigTest, VerlRolloutEnginesAsVerlStartsThem) {
  const std::string example = read_testdata("verl_grpo_qwen2.5-3b_lora.yaml");
  // SGLang: verl passes gpu_memory_utilization as mem_fraction_static; without CUDA graphs
  // (enforce_eager) nothing is said of them; free_cache_engine false keeps the engine awake.
  const trainer_config_mapping sglang = read_ok(replaced(
      replaced(example, "    name: vllm\n", "    name: sglang\n    enforce_eager: true\n    free_cache_engine: false\n    max_num_seqs: 64\n"),
      "    tensor_model_parallel_size: 2\n", "    tensor_model_parallel_size: 1\n"));
  const std::vector<std::string> expected = {
      "actor_rollout_ref.rollout.name sglang -> --rollout sglang",
      "actor_rollout_ref.rollout.gpu_memory_utilization 0.6 -> --mem-fraction-static 0.6",
      "actor_rollout_ref.rollout.free_cache_engine false -> --sleep-level 0",
  };
  EXPECT_EQ(engine_lines(sglang), expected);
  const std::vector<std::string> sglang_ignored = {"actor_rollout_ref.model.use_remove_padding true",
                                                   "actor_rollout_ref.actor.ppo_mini_batch_size 16",
                                                   "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu 40",
                                                   "actor_rollout_ref.ref.fsdp_config.param_offload true",
                                                   "actor_rollout_ref.rollout.max_num_seqs 64"};
  EXPECT_EQ(ignored_keys(sglang), sglang_ignored);
  // vLLM without layered_summon sleeps at level 2; max_model_len is passed when set.
  const trainer_config_mapping vllm =
      read_ok(replaced(replaced(example, "    layered_summon: true\n", ""), "    name: vllm\n", "    name: vllm\n    max_model_len: 1536\n"));
  const std::vector<std::string> vllm_expected = {
      "actor_rollout_ref.rollout.name vllm -> --rollout vllm",
      "actor_rollout_ref.rollout.gpu_memory_utilization 0.6 -> --gpu-memory-utilization 0.6",
      "actor_rollout_ref.rollout.max_num_seqs 256 (default) -> --max-num-seqs 256",
      "actor_rollout_ref.rollout.max_num_batched_tokens 8192 (default) -> --max-num-batched-tokens 8192",
      "actor_rollout_ref.rollout.max_model_len 1536 -> --max-model-len 1536",
      "actor_rollout_ref.rollout.free_cache_engine true (default) -> --sleep-level 2",
  };
  EXPECT_EQ(engine_lines(vllm), vllm_expected);
  // An engine verl has that plan does not model, and verl's required name left unset.
  EXPECT_EQ(engine_lines(read_ok(replaced(example, "    name: vllm\n", "    name: trtllm\n"))), std::vector<std::string>{});
  const trainer_config_mapping defaults = read_ok(read_testdata("verl_ppo_trainer_defaults.yaml"));
  EXPECT_EQ(engine_lines(defaults), std::vector<std::string>{});
}

TEST(TrainerConfigTest, TrainingArgumentsJsonWithDeepSpeed) {
  const std::string text = read_testdata("trl_grpo_training_args.json");
  const trainer_config_mapping mapping = read_ok(text);
  EXPECT_EQ(mapping.format, trainer_config_format::trl_json);
  const std::vector<std::string> expected = {
      "per_device_train_batch_size 4 -> --micro-batch 4",
      "num_generations 8 -> --group 8",
      // __post_init__ filled both in: 32 / (4 x 4) is the run's 2 processes
      "generation_batch_size / (per_device_train_batch_size x steps_per_generation) 32 / (4 x 4) -> --gpus 2",
      "steps_per_generation 4 -> --prompts 4",  // 4 rows x 2 GPUs x 4 steps / 8 generations
      "max_completion_length 256 -> --new-tokens 256",
      "gradient_checkpointing true -> --grad-ckpt on",
      "beta 0.04 -> --ref-model on",
      "num_iterations 2 -> --epochs 2",
      "gradient_accumulation_steps % (steps_per_generation x num_iterations) 8 % (4 x 2) -> --old-logprobs off",
      "model_init_kwargs.dtype bfloat16 -> --precision bf16",
      "optim adamw_torch_fused -> --optimizer adamw",
      "deepspeed.zero_optimization.stage 2 -> --shard zero2",
      "deepspeed.zero_optimization.offload_optimizer.device cpu -> --offload optimizer",
  };
  EXPECT_EQ(mapped_lines(mapping), expected);
  EXPECT_EQ(ignored_keys(mapping), (std::vector<std::string>{"gradient_accumulation_steps 8", "torch_empty_cache_steps 4"}));
  // The generation batch counts accelerate's processes: on 4 GPUs (--gpus 4) it holds twice the prompts.
  EXPECT_EQ(mapped_lines(read_ok(text, 4))[3], "steps_per_generation 4 -> --prompts 8");
  // A recipe that sets both is refused, as TRL refuses it.
  EXPECT_EQ(read_error("generation_batch_size: 32\nsteps_per_generation: 4\nnum_generations: 8\n"),
            "generation_batch_size and steps_per_generation are both set; TRL refuses that (give one)");
}

TEST(TrainerConfigTest, VerlGrpoLoraExampleOverVerlDefaults) {
  const trainer_config_mapping mapping = read_ok(read_testdata("verl_grpo_qwen2.5-3b_lora.yaml"));
  EXPECT_EQ(mapping.format, trainer_config_format::verl_yaml);
  const std::vector<std::string> expected = {
      "trainer.n_gpus_per_node x trainer.nnodes 2 x 1 -> --gpus 2",
      "data.train_batch_size 16 -> --prompts 16",
      "actor_rollout_ref.rollout.n 5 -> --group 5",
      "data.max_prompt_length 512 -> --prompt-len 512",
      "data.max_response_length 1024 -> --new-tokens 1024",
      "actor_rollout_ref.actor.ppo_epochs 1 (default) -> --epochs 1",
      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu 40 -> --micro-batch 40",
      "actor_rollout_ref.actor.strategy fsdp (default) -> --shard fsdp",
      "actor_rollout_ref.actor.fsdp_config.model_dtype fp32 (default) -> --precision fp32-master",
      "actor_rollout_ref.model.path Qwen/Qwen2.5-3B-Instruct -> --model Qwen/Qwen2.5-3B-Instruct",
      "actor_rollout_ref.model.enable_gradient_checkpointing true -> --grad-ckpt on",
      "actor_rollout_ref.model.lora_rank 64 -> --lora-r 64",
      "actor_rollout_ref.model.target_modules all-linear (default) -> --lora-targets q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj",
      "actor_rollout_ref.model.use_fused_kernels false (default) -> --logprob-impl chunked",
      "algorithm.rollout_correction.bypass_mode false (default) -> --old-logprobs on",
      "actor_rollout_ref.actor.use_kl_loss true -> --ref-model on",
      "actor_rollout_ref.actor.optim.optimizer AdamW (default) -> --optimizer adamw",
      // verl's vLLM on the actor's GPUs, with the knobs vllm_async_server.py passes it
      "actor_rollout_ref.rollout.name vllm -> --rollout vllm",
      "actor_rollout_ref.rollout.gpu_memory_utilization 0.6 -> --gpu-memory-utilization 0.6",
      "actor_rollout_ref.rollout.max_num_seqs 256 (default) -> --max-num-seqs 256",
      "actor_rollout_ref.rollout.max_num_batched_tokens 8192 (default) -> --max-num-batched-tokens 8192",
      // layered_summon: vllm_rollout.py sleeps at level 1
      "actor_rollout_ref.rollout.layered_summon true -> --sleep-level 1",
  };
  EXPECT_EQ(mapped_lines(mapping), expected);
  const std::vector<std::string> ignored = {
      "actor_rollout_ref.model.use_remove_padding true",
      "actor_rollout_ref.actor.ppo_mini_batch_size 16",
      "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu 40",
      "actor_rollout_ref.ref.fsdp_config.param_offload true",
      "actor_rollout_ref.rollout.enforce_eager false",
      "actor_rollout_ref.rollout.tensor_model_parallel_size 2",
  };
  EXPECT_EQ(ignored_keys(mapping), ignored);
}

TEST(TrainerConfigTest, VerlPublishedDefaultsNameTheCriticAndTheMissingMicroBatch) {
  const trainer_config_mapping mapping = read_ok(read_testdata("verl_ppo_trainer_defaults.yaml"));
  const std::vector<std::string> lines = mapped_lines(mapping);
  const std::vector<std::string> expected_start = {
      "trainer.n_gpus_per_node x trainer.nnodes 8 x 1 -> --gpus 8",
      "data.train_batch_size 1024 -> --prompts 1024",
      "actor_rollout_ref.rollout.n 1 -> --group 1",
      "data.max_prompt_length 512 -> --prompt-len 512",
      "data.max_response_length 512 -> --new-tokens 512",
      "actor_rollout_ref.actor.ppo_epochs 1 -> --epochs 1",
      // ppo_micro_batch_size_per_gpu is null in verl's defaults: no --micro-batch
      "actor_rollout_ref.actor.strategy fsdp -> --shard fsdp",
  };
  ASSERT_GE(lines.size(), expected_start.size());
  EXPECT_EQ(std::vector<std::string>(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(expected_start.size())), expected_start);
  const std::vector<std::string> ignored = ignored_keys(mapping);
  EXPECT_NE(std::find(ignored.begin(), ignored.end(), "algorithm.adv_estimator gae"), ignored.end()) << "the PPO critic is named";
  EXPECT_NE(std::find(ignored.begin(), ignored.end(), "actor_rollout_ref.rollout.name ???"), ignored.end());
}

TEST(TrainerConfigTest, RefusesBadInputWithOneLine) {
  EXPECT_EQ(read_error(std::string("abc\0def", 7)), "is binary, not a JSON or YAML config");
  EXPECT_NE(read_error("{\"per_device_train_batch_size\": 4,").find("is not JSON"), std::string::npos);
  EXPECT_NE(read_error("a: [1, 2\nb: }").find("is not YAML"), std::string::npos);
  EXPECT_EQ(read_error("- 1\n- 2\n"), "is not a mapping of settings (neither a TRL GRPOConfig nor a verl config)");
  EXPECT_NE(read_error("learning_rate: 1.0e-6\n").find("neither a TRL GRPOConfig"), std::string::npos);
  EXPECT_EQ(read_error("per_device_train_batch_size: four\n"), "per_device_train_batch_size must be a whole number, not \"four\"");
  EXPECT_EQ(read_error("per_device_train_batch_size: \"4\"\n"), "per_device_train_batch_size must be a whole number, not \"4\"");
  EXPECT_EQ(read_error("num_generations: 1\n"), "num_generations = 1 is outside 2 to 1048576");
  EXPECT_EQ(read_error("gradient_checkpointing: 3\nnum_generations: 8\n"), "gradient_checkpointing must be true or false, not 3");
  EXPECT_EQ(read_error("actor_rollout_ref: {rollout: {n: -2}}\n"), "actor_rollout_ref.rollout.n = -2 is outside 1 to 1048576");
  EXPECT_EQ(read_error("per_device_train_batch_size: 3\nnum_generations: 8\n"),
            "the generation batch of 3 completions (per_device_train_batch_size 3 x 1 GPU(s) x 1 steps) is not divisible by "
            "num_generations 8");
}

TEST(TrainerConfigTest, LimitsStopDeepNestingAliasBombsAndSize) {
  std::string deep_flow = "a: " + std::string(100, '[') + std::string(100, ']') + "\n";
  EXPECT_EQ(read_error(deep_flow), "nests deeper than 32 levels");
  std::string deep_json = "{\"a\": " + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_EQ(read_error(deep_json), "nests deeper than 32 levels");
  // Ten levels of nine aliases each: 9^10 values once expanded, from a file of a few hundred bytes.
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level <= 10; ++level) {
    const std::string previous = "*a" + std::to_string(level - 1);
    bomb += "a" + std::to_string(level) + ": &a" + std::to_string(level) + " [";
    for (int i = 0; i < 9; ++i) bomb += (i == 0 ? "" : ", ") + previous;
    bomb += "]\n";
  }
  EXPECT_EQ(read_error(bomb), "holds more than 20000 values (or aliases that expand to as many)");
  trainer_config_limits small;
  small.max_bytes = 64;
  EXPECT_EQ(read_error(std::string(65, ' '), small), "is larger than 64 bytes; not a trainer config");
  trainer_config_limits few_rows;
  few_rows.max_rows = 4;
  EXPECT_EQ(read_error("per_device_train_batch_size: 8\nnum_generations: 2\n", few_rows),
            "per_device_train_batch_size = 8 is outside 1 to 4");
}

// Programs tell the refusals apart by their code; the line stays the one printed.
TEST(TrainerConfigTest, RefusalsCarryTheirCode) {
  const std::pair<std::string, plan_errc> cases[] = {
      {std::string("abc\0def", 7), plan_errc::not_a_trainer_config},
      {"{\"per_device_train_batch_size\": 4,", plan_errc::not_json},
      {"a: [1, 2\nb: }", plan_errc::not_yaml},
      {"learning_rate: 1.0e-6\n", plan_errc::not_a_trainer_config},
      {"per_device_train_batch_size: four\n", plan_errc::invalid_field},
      {"num_generations: 1\n", plan_errc::invalid_field},
      {"num_generations: 4194304\n", plan_errc::limit_exceeded},
      {"a: " + std::string(100, '[') + std::string(100, ']') + "\n", plan_errc::limit_exceeded},
  };
  for (const auto& [text, code] : cases) {
    const auto read = read_trainer_config(text);
    EXPECT_EQ(error_name(read.code()), error_name(code)) << text.substr(0, 40) << ": " << read.failure().detail;
  }
}

}  // namespace
}  // namespace rlmem
