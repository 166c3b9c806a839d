// SPDX-License-Identifier: MIT
// `rlmem plan`: per-phase peak memory of an RL step from the architecture and the knobs; --fit.

#include "arguments.hpp"
#include "commands.hpp"
#include "output.hpp"
#include "output_format.hpp"
#include "plan_handoff_options.hpp"
#include "plan_lengths.hpp"

#include <rlmem/base/regular_file.hpp>
#include <rlmem/report/report.hpp>
#include <rlmem/plan/trainer_config.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>

namespace rlmem::cli {

namespace {

// --rollout and the engines' own knobs, apart from the rest (docs/plan.md, "Rollout engines").
struct rollout_arguments {
  std::string rollout = "hf";
  std::string card;          ///< --card: the GPU the engine sizes itself from
  std::string graph_memory;  ///< --engine-graph-memory: the CUDA graph pool the engine logs
};

struct plan_arguments {
  std::string model;
  std::string phase;
  plan_knobs knobs;
  std::string optimizer = "adamw";
  std::string precision = "bf16";
  std::string kv_rows;         ///< --kv-rows: a number, gen-batch or group
  std::uint64_t params = 0;    ///< --params: a policy known by its parameter count
  std::string logprob_impl_name = "full";
  std::string kv_cache = "grow";
  std::string shard = "none";
  std::string offload = "none";
  std::string lora_targets;
  std::vector<std::string> buffers;
  std::string reference;  ///< --ref-model's value; "auto" when given bare
  std::string fit;
  std::string vary;
  double margin = 0.10;
  std::size_t width = 100;
  bool keep_shape = false;
  bool all = false;  ///< --all: every fitting configuration in the text
  output_choice output;
  bool list = false;
  rollout_arguments rollout;
  handoff_arguments handoff;
  std::uint64_t host_memory_bytes = 0;  ///< --host-memory
  std::string from;                 ///< --from FILE: a TRL or verl config
  std::set<std::string> from_file;  ///< the options --from gave values (the command line's win)
  std::string unreadable_model;     ///< --from's model when it names nothing plan can read
  std::optional<trainer_config_mapping> mapping;
  length_arguments lengths;
};

// Counts of the shape and the search: whole numbers (CLI11 would read "-1" into an unsigned
// option as 2^64 - 1); validate_knobs then checks each against what a GPU can hold.
const CLI::Validator whole_number = whole_number_in(0, std::numeric_limits<std::uint64_t>::max());

// The options that set a knob, in one table: the command line registers them from it and --from
// sets them through it, so each knob has one flag and one destination.
enum class value_check : std::uint8_t { none, whole, fraction };
using knob_target = std::variant<std::uint64_t*, std::uint32_t*, double*, std::string*, std::vector<std::string>*, bool*>;
struct knob_option {
  const char* flag;
  knob_target target;
  const char* group;
  const char* help;
  value_check check = value_check::none;
  bool value_optional = false;  ///< given bare, the option reads "auto" (--ref-model)
};

constexpr const char* shape_group = "Shape";
constexpr const char* training_group = "Training";
constexpr const char* memory_group = "Memory";
constexpr const char* engine_group = "Rollout engine";

std::vector<knob_option> knob_options(plan_arguments& args) {
  plan_knobs& knobs = args.knobs;
  rollout_engine_knobs& engine = knobs.engine;
  constexpr value_check whole = value_check::whole;
  return {
      {"--batch", &knobs.batch, shape_group, "generate: rows generated together", whole},
      {"--gen-batch", &knobs.batch, shape_group, "grpo-step: rollout rows generated together (default all of a GPU's)", whole},
      {"--prompt-len", &knobs.prompt_len, shape_group, "Prompt tokens per row", whole},
      {"--new-tokens", &knobs.new_tokens, shape_group, "Tokens generated per row", whole},
      {"--micro-batch", &knobs.micro_batch, shape_group, "Rows per forward/backward", whole},
      {"--seq-len", &knobs.seq_len, shape_group, "train: tokens per row", whole},
      {"--logprob-tokens", &knobs.logprob_tokens, shape_group, "train: response tokens per row scored (default: half of --seq-len)", whole},
      {"--grad-accum", &knobs.grad_accum, shape_group, "train: micro-batches per optimizer step (default 1)", whole},
      {"--prompts", &knobs.prompts, shape_group, "grpo-step: prompts per step (all GPUs)", whole},
      {"--group", &knobs.group, shape_group, "grpo-step: samples per prompt", whole},
      {"--epochs", &knobs.epochs, shape_group, "grpo-step: update passes over the rollout (PPO; default 1)", whole},
      {"--ref-model", &args.reference, training_group, "grpo-step: copy | adapter-disabled (LoRA; bare: it with --lora-r)",
       value_check::none, true},
      {"--old-logprobs", &knobs.old_logprobs, training_group, "grpo-step: a no-grad pass of the policy before the update (PPO)"},
      {"--grad-ckpt", &knobs.grad_ckpt, training_group, "Gradient checkpointing (transformers' gradient_checkpointing_enable)"},
      {"--optimizer", &args.optimizer, training_group, "adamw (default) | sgd | muon (matrices; AdamW for the rest)"},
      {"--precision", &args.precision, training_group,
       "bf16 (default: weights, gradients, AdamW state) | fp32-master |\n"
       "nanochat (fp32, bf16 embedding, autocast; nanochat's default)"},
      {"--lora-r", &knobs.lora_rank, training_group, "LoRA rank (peft; frozen base, fp32 adapters); 0: full fine-tuning", whole},
      {"--lora-targets", &args.lora_targets, training_group, "Comma list of q_proj ... down_proj (default: all seven)"},
      {"--logprob-impl", &args.logprob_impl_name, training_group,
       "full (default: fp32 response logits) | chunked (verl) | fused (Liger)\n"
       "| softcap (nanochat's default: all positions' softcapped logits)\n"
       "| softcap-fp32 (nanochat's gpt.py since 2025-11-23: fp32 first)"},
      {"--logprob-chunk", &knobs.logprob_chunk, training_group, "Rows per chunk for chunked and fused (default 1024)", whole},
      {"--kv-cache", &args.kv_cache, memory_group, "grow (default: DynamicCache) | prealloc (one buffer, nanochat)"},
      {"--kv-rows", &args.kv_rows, memory_group, "prealloc: rows the cache holds: N, gen-batch (default) or group"},
      {"--kv-len", &knobs.kv_len, memory_group, "prealloc: positions per row (default: prompt + new tokens)", whole},
      {"--buffer", &args.buffers, memory_group,
       "A resident tensor NAME=DIMS:DTYPE[@phases] (repeatable); a dim is a\n"
       "number, rows (a GPU's rows) or epochs, joined by x or *; without\n"
       "@phases it lives in every phase. e.g. traj=rows*epochs*50*263*196:fp32"},
      {"--gpus", &knobs.gpus, memory_group, "Data-parallel GPUs (default 1)", whole},
      {"--shard", &args.shard, memory_group, "none (DDP) | zero1 (optimizer) | zero2 (+gradients) | fsdp (+weights)"},
      {"--offload", &args.offload, memory_group, "none | optimizer (state and step on the CPU) | all (fsdp: weights too)"},
      // The engines' options, named as vLLM and SGLang name them.
      {"--rollout", &args.rollout.rollout, engine_group,
       "hf (default: transformers' generate) | vllm | sglang (the engine\n"
       "reserves its memory up front on the trainer's GPU)"},
      {"--card", &args.rollout.card, engine_group, "vllm, sglang: the GPU the engine sizes itself from (default: --fit's)"},
      {"--gpu-memory-utilization", &engine.gpu_memory_utilization, engine_group, "vllm: share of the card's total (default 0.9)",
       value_check::fraction},
      {"--max-model-len", &engine.max_model_len, engine_group, "vllm: tokens per request (default: prompt + new tokens)", whole},
      {"--max-num-seqs", &engine.max_num_seqs, engine_group, "vllm: requests run together (default 256)", whole},
      {"--max-num-batched-tokens", &engine.max_num_batched_tokens, engine_group, "vllm: tokens of the profile run (default 8192)", whole},
      {"--block-size", &engine.block_size, engine_group, "vllm: tokens per KV block (default 16)", whole},
      {"--sleep-level", &engine.sleep_level, engine_group,
       "vllm, sglang: through training the engine is 0 awake (default),\n"
       "1 asleep with its weights in host memory, 2 asleep, all dropped"},
      {"--mem-fraction-static", &engine.mem_fraction_static, engine_group, "sglang: share of the memory free at init (required)",
       value_check::fraction},
      {"--chunked-prefill-size", &engine.chunked_prefill_size, engine_group, "sglang: tokens per prefill chunk (default 8192)", whole},
      {"--engine-graph-memory", &args.rollout.graph_memory, engine_group, "vllm, sglang: its CUDA graph pool, from its log (not estimated)"},
  };
}

// Registers the table's options of `groups`, in the table's order.
void add_knob_options(CLI::App* command, const std::vector<knob_option>& options, std::initializer_list<std::string_view> groups) {
  for (const knob_option& entry : options) {
    if (std::find(groups.begin(), groups.end(), std::string_view(entry.group)) == groups.end()) continue;
    CLI::Option* option = std::visit(
        [&](auto* target) -> CLI::Option* {
          if constexpr (std::is_same_v<decltype(target), bool*>) {
            return command->add_flag(entry.flag, *target, entry.help);
          } else {
            return command->add_option(entry.flag, *target, entry.help);
          }
        },
        entry.target);
    if (entry.check == value_check::whole) option->check(whole_number);
    if (entry.check == value_check::fraction) option->check(decimal_in(0, 1));
    if (entry.value_optional) option->expected(0, 1)->default_str("auto");
    option->group(entry.group);
  }
}

bool load_model(const std::string& name, model_architecture& model) {
  const bool looks_like_file = name.ends_with(".json") || name.find('/') != std::string::npos;
  std::error_code ignored;
  if (std::filesystem::exists(name, ignored)) {  // a path that exists is a config.json, whatever its name
    auto file = read_option_file(name);
    if (!file.ok()) return refuse(file.failure().detail);
    auto parsed = parse_hf_config(file.value());
    if (!parsed.ok()) return refuse(fmt::format("{}: {}", name, parsed.failure().detail));
    model = std::move(parsed).value();
    return true;
  }
  if (const model_architecture* preset = find_preset(name)) {
    model = *preset;
    return true;
  }
  if (looks_like_file && name.ends_with(".json")) return refuse(fmt::format("{}: cannot open the file", name));
  const auto similar = similar_preset_names(name);
  return refuse(fmt::format("unknown model '{}'; did you mean {}? (or give a config.json; rlmem plan --list-models)",
                          name.substr(0, 100), fmt::join(similar, ", ")));
}

template <class Enum, std::size_t N>
bool choose(const std::string& flag, const std::string& value, const enum_names<Enum, N>& choices, Enum& out) {
  std::optional<Enum> found = value_named(choices, value);
  if (!found) return refuse(fmt::format("{} '{}': expected one of {}", flag, value.substr(0, 40), names_list(choices)));
  out = *found;
  return true;
}

// --ref-model's values: the reference kinds less none, which is leaving the option out.
constexpr enum_names<reference_kind, 2> given_references{{reference_kind_names[1], reference_kind_names[2]}};
static_assert(given_references[0].value == reference_kind::copy && given_references[1].value == reference_kind::adapter_disabled);

// What each phase needs from the command line, named the way the user types it.
// A policy given only as --params generates no tokens: its rows are what its buffers scale with.
bool require_phase_knobs(plan_knobs& knobs, const CLI::App& command, bool opaque, const std::set<std::string>& from_file) {
  std::vector<const char*> needed;
  switch (knobs.phase) {
    case plan_phase::generate: needed = {"--batch", "--prompt-len", "--new-tokens"}; break;
    case plan_phase::train: needed = {"--micro-batch", "--seq-len"}; break;
    case plan_phase::grpo_step: needed = {"--prompts", "--group", "--prompt-len", "--new-tokens", "--micro-batch"}; break;
  }
  if (opaque) {
    std::erase_if(needed, [](const char* flag) { return std::string_view(flag) != "--batch" && std::string_view(flag) != "--prompts" &&
                                                        std::string_view(flag) != "--group" && std::string_view(flag) != "--micro-batch"; });
    if (knobs.prompt_len == 0) knobs.prompt_len = 1;
    if (knobs.new_tokens == 0) knobs.new_tokens = 1;
    if (knobs.seq_len == 0) knobs.seq_len = 2;
    if (knobs.logprob_tokens == 0) knobs.logprob_tokens = 1;
  }
  std::vector<std::string> missing;
  for (const char* flag : needed) {
    if (command.count(flag) == 0 && !from_file.contains(flag)) missing.emplace_back(flag);
  }
  if (missing.empty()) return true;
  return refuse(fmt::format("--phase {} needs {} (all of: {}){}", to_string(knobs.phase), fmt::join(missing, " "), fmt::join(needed, " "),
                          from_file.empty() ? "" : "; the --from file does not give it"));
}

// Options that shape one phase only, and the phases they belong to; any other phase refuses them
// rather than ignore them.
bool refuse_other_phases_options(plan_phase phase, const CLI::App& command) {
  struct shape_option {
    const char* flag;
    std::array<bool, 3> in;  ///< generate, train, grpo-step
    const char* meaning;
  };
  static constexpr std::array<shape_option, 11> options = {{
      {"--batch", {true, false, true}, "is the rows generated together; train generates nothing (its rows are --micro-batch)"},
      {"--gen-batch", {false, false, true}, "is grpo-step's rows generated together; generate's are --batch"},
      {"--epochs", {false, false, true}, "repeats grpo-step's update; train's passes are --grad-accum"},
      {"--prompt-len", {true, false, true}, "is the prompt of a generation; train's rows are --seq-len long"},
      {"--new-tokens", {true, false, true}, "is a generation's length; train's rows are --seq-len long"},
      {"--micro-batch", {false, true, true}, "is the rows of a training pass; generate trains nothing (its rows are --batch)"},
      {"--seq-len", {false, true, false}, "is train's row length; other phases' rows are --prompt-len + --new-tokens"},
      {"--logprob-tokens", {false, true, false}, "is train's scored tokens; grpo-step scores the --new-tokens"},
      {"--grad-accum", {false, true, false}, "is train's; grpo-step accumulates over its rows / --micro-batch"},
      {"--prompts", {false, false, true}, "is grpo-step's; use --batch for the rows of generate, --micro-batch for train"},
      {"--group", {false, false, true}, "is grpo-step's samples per prompt"},
  }};
  for (const shape_option& option : options) {
    if (command.count(option.flag) > 0 && !option.in[static_cast<std::size_t>(phase)]) {
      return refuse(fmt::format("{} does not apply to --phase {}: it {}", option.flag, to_string(phase), option.meaning));
    }
  }
  if (phase == plan_phase::generate) {
    for (const char* flag : {"--grad-ckpt", "--optimizer", "--precision", "--lora-r", "--lora-targets", "--logprob-impl", "--offload"}) {
      // (nanochat's precision still sets the weights a generation holds: it follows the model)
      if (command.count(flag) > 0) return refuse(fmt::format("{} does not apply to --phase generate: it trains nothing", flag));
    }
  }
  return true;
}

// --fit's options without --fit, and other options that mean nothing as given.
bool refuse_options_that_do_not_apply(const plan_arguments& args, const CLI::App& command) {
  if (args.fit.empty()) {
    for (const char* flag : {"--margin", "--vary", "--keep-shape", "--all"}) {
      if (command.count(flag) > 0) return refuse(fmt::format("{} shapes the search of --fit; give --fit CARD", flag));
    }
  }
  if (command.count("--vary") > 0 && command.count("--keep-shape") > 0) {
    return refuse("--keep-shape keeps the algorithm's settings and --vary opens some: give one (keeping them is the default)");
  }
  if (command.count("--logprob-chunk") > 0 && !chunked_logprobs(args.knobs)) {
    return refuse(fmt::format("--logprob-chunk is the rows per chunk of --logprob-impl chunked or fused; {} has no chunks",
                            to_string(args.knobs.logprob)));
  }
  return true;
}

// "group,new-tokens" -> search_bit()s, each checked against the phase.
bool parse_vary(const std::string& list, const plan_knobs& knobs, unsigned& vary) {
  std::stringstream names(list);
  for (std::string name; std::getline(names, name, ',');) {
    const auto parsed = parse_search_knob(name);
    if (!parsed.ok()) return refuse(parsed.failure().detail);
    const search_knob knob = parsed.value();
    if (const std::string why = why_not_varied(knob, knobs); !why.empty()) return refuse(why);
    vary |= search_bit(knob);
  }
  if (vary == 0) return refuse("--vary needs at least one of group, new-tokens, prompt-len, lora-r, batch");
  return true;
}

// --kv-rows: a number, or the knob the cache follows as it changes (the search moves both).
bool parse_kv_rows(const std::string& text, plan_knobs& knobs) {
  if (text.empty()) return true;
  if (text == "gen-batch") {
    knobs.kv_rows_follow = kv_rows_kind::generation_batch;
    return true;
  }
  if (text == "group") {
    knobs.kv_rows_follow = kv_rows_kind::group;
    return true;
  }
  std::uint64_t rows = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), rows);
  if (ec != std::errc() || end != text.data() + text.size() || rows == 0) {
    return refuse(fmt::format("--kv-rows '{}': expected a number of rows, gen-batch or group", text.substr(0, 40)));
  }
  knobs.kv_rows = rows;
  return true;
}

// --fit's card: a preset, or a size read as written (GB decimal, GiB binary). A bare number is
// bytes; one under 1 MiB is far more likely a size in GB than a card.
bool parse_card(const std::string& text, std::uint64_t& budget) {
  budget = gpu_memory_bytes(text);
  if (budget != 0) return true;
  std::int64_t bytes = 0;
  std::string message;
  if (!parse_size(text, bytes, message)) {
    return refuse(fmt::format("--fit '{}': not a card ({}) nor a size like 80GiB or 32GB", text.substr(0, 40), fmt::join(gpu_names(), ", ")));
  }
  const bool bare = !text.empty() && std::isdigit(static_cast<unsigned char>(text.back())) != 0;
  if (bare && bytes < (std::int64_t{1} << 20)) {
    return refuse(fmt::format("--fit {}: a bare number is bytes, and {} bytes is under 1 MiB; give the unit (e.g. {}GB or {}GiB) or a card",
                            text.substr(0, 40), text.substr(0, 40), text.substr(0, 20), text.substr(0, 20)));
  }
  budget = static_cast<std::uint64_t>(bytes);
  return true;
}

// --rollout hf|vllm|sglang: the engine, its card (--card, else --fit's) and its knobs; each
// engine's knobs are refused with the other rollouts rather than ignored.
bool build_rollout_knobs(const plan_arguments& args, const model_architecture& model, plan_knobs& knobs, const CLI::App& command) {
  rollout_engine_knobs& engine = knobs.engine;
  if (!choose("--rollout", args.rollout.rollout, rollout_kind_names, engine.rollout)) {
    return false;
  }
  static constexpr std::array<const char*, 5> vllm_only = {"--gpu-memory-utilization", "--max-model-len", "--max-num-seqs",
                                                           "--max-num-batched-tokens", "--block-size"};
  static constexpr std::array<const char*, 2> sglang_only = {"--mem-fraction-static", "--chunked-prefill-size"};
  for (const char* flag : vllm_only) {
    if (command.count(flag) > 0 && engine.rollout != rollout_kind::vllm) return refuse(fmt::format("{} is vLLM's; give --rollout vllm", flag));
  }
  for (const char* flag : sglang_only) {
    if (command.count(flag) > 0 && engine.rollout != rollout_kind::sglang) return refuse(fmt::format("{} is SGLang's; give --rollout sglang", flag));
  }
  if (engine.rollout == rollout_kind::hf) {
    for (const char* flag : {"--card", "--sleep-level", "--engine-graph-memory"}) {
      if (command.count(flag) > 0) return refuse(fmt::format("{} shapes a rollout engine; give --rollout vllm or sglang", flag));
    }
    return true;
  }
  if (model.opaque_params > 0) return refuse("--rollout vllm or sglang needs the policy's architecture (--model), not --params");
  if (!args.rollout.card.empty()) {
    engine.device_bytes = gpu_memory_bytes(args.rollout.card);
    std::int64_t bytes = 0;
    std::string message;
    if (engine.device_bytes == 0 && (!parse_size(args.rollout.card, bytes, message) || bytes < (std::int64_t{1} << 20))) {
      return refuse(fmt::format("--card '{}': not a card ({}) nor a size like 80GiB", args.rollout.card.substr(0, 40), fmt::join(gpu_names(), ", ")));
    }
    if (engine.device_bytes == 0) engine.device_bytes = static_cast<std::uint64_t>(bytes);
  } else if (!args.fit.empty() && !parse_card(args.fit, engine.device_bytes)) {
    return false;
  }
  if (!args.rollout.graph_memory.empty()) {
    std::int64_t graph = 0;
    std::string message;
    if (!parse_size(args.rollout.graph_memory, graph, message) || graph < 0) {
      return refuse(fmt::format("--engine-graph-memory '{}': expected a size like 0.5GiB", args.rollout.graph_memory.substr(0, 40)));
    }
    engine.graph_bytes = static_cast<std::uint64_t>(graph);
  }
  return true;
}

// ---------------------------------------------------------------- --from FILE
// A trainer's config (TRL's GRPOConfig as JSON or YAML, a verl config) gives the knobs the
// command line leaves out; each setting's knob and each ignored setting go into the report.

// Whether the command line or the --from file gave `flag`.
bool given(const plan_arguments& args, const CLI::App& command, const char* flag) {
  return command.count(flag) > 0 || args.from_file.contains(flag);
}

// --from's model: a local model folder's config.json (from_pretrained reads a folder before the
// Hub), a config.json itself, or a preset (Hub ids such as Qwen/Qwen2.5-1.5B-Instruct match theirs).
bool resolve_config_model(plan_arguments& args, const std::string& name) {
  std::error_code ignored;
  if (std::filesystem::is_regular_file(std::filesystem::path(name) / "config.json", ignored)) {
    args.model = (std::filesystem::path(name) / "config.json").string();
  } else if (std::filesystem::is_regular_file(name, ignored) || find_preset(name) != nullptr) {
    args.model = name;
  } else {
    args.unreadable_model = name;
    return false;
  }
  return true;
}

// One setting into the option it maps to, as if typed; false when no option of the table takes
// it or its value is not one the option reads.
bool apply_config_setting(plan_arguments& args, const mapped_setting& setting) {
  const std::string& text = setting.flag_value;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  for (const knob_option& entry : knob_options(args)) {
    if (setting.flag != entry.flag) continue;
    return std::visit(
        [&](auto* target) {
          using target_type = std::remove_pointer_t<decltype(target)>;
          if constexpr (std::is_same_v<target_type, bool>) {
            *target = text == "on";
            return text == "on" || text == "off";
          } else if constexpr (std::is_same_v<target_type, std::string>) {
            if (entry.value_optional) *target = text == "on" ? "auto" : "";
            else *target = text;
            return true;
          } else if constexpr (std::is_same_v<target_type, std::vector<std::string>>) {
            return false;  // no trainer setting is a --buffer
          } else {
            target_type value{};
            const auto [end, ec] = std::from_chars(first, last, value);
            if (ec != std::errc() || end != last) return false;
            *target = value;
            return true;
          }
        },
        entry.target);
  }
  return false;
}

// The file's rollout engine and its settings are planned only on a card the engine sizes itself
// from (--card or --fit), and not when the command line's --rollout names another engine: then
// they are left out, named once with the reason.
void drop_unplanned_engine(plan_arguments& args, const CLI::App& command, trainer_config_mapping& mapping, std::vector<ignored_setting>& unread) {
  const auto engine = std::find_if(mapping.mapped.begin(), mapping.mapped.end(), [](const mapped_setting& s) { return s.flag == "--rollout"; });
  if (engine == mapping.mapped.end() || engine->flag_value == "hf") return;
  const std::string name = engine->flag_value == "vllm" ? "vLLM" : "SGLang";
  std::string reason;
  if (command.count("--rollout") > 0 && args.rollout.rollout != engine->flag_value) {
    reason = fmt::format("the command line's --rollout {} replaces the file's {} and its settings", args.rollout.rollout, name);
  } else if (command.count("--card") == 0 && command.count("--fit") == 0) {
    reason = fmt::format("{} sizes itself from the card it runs on: give --card CARD (or --fit CARD) to plan its rollout with the "
                         "file's engine settings; the rollout planned is transformers' generate",
                         name);
  }
  if (reason.empty()) return;
  unread.push_back({engine->key, engine->value, reason});
  std::vector<std::string> engine_flags;
  for (const knob_option& entry : knob_options(args)) {
    if (std::string_view(entry.group) == engine_group) engine_flags.emplace_back(entry.flag);
  }
  const std::string engine_key = engine->key;
  std::erase_if(mapping.mapped, [&](const mapped_setting& setting) {
    if (std::find(engine_flags.begin(), engine_flags.end(), setting.flag) == engine_flags.end()) return false;
    // The file's own engine keys, named; values derived from other keys or defaults go unsaid.
    if (!setting.from_default && setting.key != engine_key && setting.key.find(' ') == std::string::npos) {
      unread.push_back({setting.key, setting.value, fmt::format("configures the {} rollout, not planned (above)", name)});
    }
    return true;
  });
}

// --from FILE: reads the config and sets every option the command line does not give.
bool apply_trainer_config(plan_arguments& args, const CLI::App& command) {
  auto file = read_option_file(args.from);
  if (!file.ok()) return refuse(file.failure().detail);
  trainer_config_context context;
  if (command.count("--gpus") > 0) context.gpus = args.knobs.gpus;
  auto read = read_trainer_config(file.value(), trainer_config_limits{}, context);
  if (!read.ok()) return refuse(fmt::format("{}: {}", args.from, read.failure().detail));
  trainer_config_mapping mapping = std::move(read).value();
  if (args.phase.empty()) args.phase = "grpo-step";
  if (args.phase != "grpo-step") {
    return refuse(fmt::format("--from {} describes an RL step: give --phase grpo-step or leave --phase out", args.from));
  }
  std::vector<ignored_setting> unread;
  drop_unplanned_engine(args, command, mapping, unread);
  std::erase_if(mapping.mapped, [&](mapped_setting& setting) {
    if (command.count(setting.flag) > 0) {
      setting.overridden = true;
      return false;
    }
    if (setting.flag == "--model" && !resolve_config_model(args, setting.flag_value)) {
      unread.push_back({setting.key, setting.value, "neither a preset (rlmem plan --list-models) nor a local model folder with a config.json"});
      return true;
    }
    if (setting.flag != "--model" && !apply_config_setting(args, setting)) {
      unread.push_back({setting.key, setting.value, "no option of this build takes " + setting.flag});
      return true;
    }
    // An off switch gives nothing: the option stays as not given.
    if (setting.flag_value != "off") args.from_file.insert(setting.flag);
    return false;
  });
  mapping.ignored.insert(mapping.ignored.begin(), unread.begin(), unread.end());
  args.mapping = std::move(mapping);
  return true;
}

bool build_knobs(plan_arguments& args, const model_architecture& model, const CLI::App& command) {
  plan_knobs& knobs = args.knobs;
  if (args.phase.empty()) return refuse("--phase is required: generate, train or grpo-step");
  if (!choose("--phase", args.phase, plan_phase_names, knobs.phase) ||
      !choose("--optimizer", args.optimizer, optimizer_kind_names, knobs.optimizer) ||
      !choose("--precision", args.precision, precision_kind_names, knobs.precision) ||
      !choose("--logprob-impl", args.logprob_impl_name, logprob_impl_names, knobs.logprob) ||
      !choose("--kv-cache", args.kv_cache, kv_cache_kind_names, knobs.kv_cache) ||
      !choose("--shard", args.shard, shard_kind_names, knobs.shard)) {
    return false;
  }
  // nanochat trains and samples with fp32 matrices and a bf16 embedding under autocast.
  if (model.model_type == "nanochat" && !given(args, command, "--precision")) knobs.precision = precision_kind::nanochat;
  // nanochat's model computes its own loss (GPT.forward with targets), not transformers' log-probs.
  if (model.model_type == "nanochat" && !given(args, command, "--logprob-impl")) knobs.logprob = logprob_impl::softcap;
  // nanochat's Engine.generate runs under torch.inference_mode.
  if (model.model_type == "nanochat") knobs.generate_inference_mode = true;
  if (!parse_kv_rows(args.kv_rows, knobs)) return false;
  offload_level offload = offload_level::none;
  if (!choose("--offload", args.offload, offload_level_names, offload)) return false;
  set_offload(knobs, offload);
  if (given(args, command, "--ref-model")) {
    if (args.reference == "auto") {
      // Bare --ref-model: what trainers do, a LoRA policy's own base with the adapter off, else a copy.
      knobs.reference = knobs.lora_rank > 0 ? reference_kind::adapter_disabled : reference_kind::copy;
    } else if (!choose("--ref-model", args.reference, given_references, knobs.reference)) {
      return false;
    }
  }
  if (!refuse_other_phases_options(knobs.phase, command) || !refuse_options_that_do_not_apply(args, command)) return false;
  if (command.count("--gen-batch") > 0 && command.count("--batch") > 0) {
    return refuse("--gen-batch and --batch both give grpo-step's generation batch; give --gen-batch");
  }
  if (knobs.phase == plan_phase::train && command.count("--seq-len") > 0 && knobs.seq_len < 2) {
    return refuse("--seq-len must be at least 2: a prompt token and a scored one");
  }
  if (knobs.phase == plan_phase::train && knobs.logprob_tokens == 0) knobs.logprob_tokens = knobs.seq_len / 2;
  std::stringstream targets(args.lora_targets);
  for (std::string target; std::getline(targets, target, ',');) {
    if (!target.empty()) knobs.lora_targets.push_back(target);
  }
  for (const std::string& spec : args.buffers) {
    auto buffer = parse_buffer_spec(spec);
    if (!buffer.ok()) return refuse(buffer.failure().detail);
    knobs.buffers.push_back(std::move(buffer).value());
  }
  if (!require_phase_knobs(knobs, command, model.opaque_params > 0, args.from_file)) return false;
  if (!build_rollout_knobs(args, model, knobs, command)) return false;
  if (!build_handoff_knobs(args.handoff, command, knobs, args.host_memory_bytes)) return false;
  if (const auto checked = validate_knobs(model, knobs); !checked.ok()) return refuse(checked.failure().detail);
  if (const auto engine_checked = validate_engine_knobs(knobs); !engine_checked.ok()) return refuse(engine_checked.failure().detail);
  return true;
}

int run_plan(plan_arguments& args, const CLI::App& command) {
  if (!output_available(args.output)) return exit_internal;
  if (args.list) {
    std::string names;
    for (const std::string& name : preset_names()) names += name + "\n";
    return write_report(names);
  }
  plan_report report;
  if (!args.from.empty()) {
    if (!apply_trainer_config(args, command)) return exit_bad_input;
    report.from_config = args.mapping;
    report.from_file = args.from;
  }
  if (command.count("--params") > 0) {
    // A policy that is no transformer the planner knows (a diffusion policy, ...): its state from
    // the parameter count, its activations and rollout as --buffer tensors.
    if (!args.model.empty()) return refuse("--params describes a policy given without --model; with --model the count comes from it"), exit_bad_input;
    if (args.params == 0) return refuse("--params must be at least 1"), exit_bad_input;
    if (args.buffers.empty()) {
      return refuse("--params without --model needs the policy's tensors as --buffer NAME=DIMS:DTYPE (e.g. traj=rows*50*263*1*196:fp32)"),
             exit_bad_input;
    }
    report.model.name = report.model.model_type = "params-only";
    report.model.opaque_params = args.params;
  } else if (args.model.empty() && !args.unreadable_model.empty()) {
    return refuse(fmt::format("--from {}: its model '{}' is neither a preset nor a local config.json; give --model (a preset or a config.json)",
                            args.from, args.unreadable_model.substr(0, 100))),
           exit_bad_input;
  } else if (args.model.empty() && !args.from.empty()) {
    return refuse(fmt::format("--from {} names no model (model_name_or_path, actor_rollout_ref.model.path); give --model "
                            "(a preset or a config.json)",
                            args.from)),
           exit_bad_input;
  } else if (args.model.empty()) {
    return refuse("--model is required: a preset (rlmem plan --list-models) or a config.json (or --params N with --buffer)"), exit_bad_input;
  } else if (!load_model(args.model, report.model)) {
    return exit_bad_input;
  }
  if (!build_knobs(args, report.model, command)) return exit_bad_input;
  report.knobs = args.knobs;
  report.host_memory_bytes = args.host_memory_bytes;
  report.plan = plan_memory(report.model, report.knobs);
  if (!report.plan.engine.refusal.empty()) return refuse(report.plan.engine.refusal), exit_bad_input;
  if (report.plan.out_of_range) {
    return refuse(fmt::format("the {} phase would need more than 8 PiB per GPU; check the knobs", report.plan.peak_phase)), exit_bad_input;
  }
  if (!args.fit.empty()) {
    std::uint64_t budget = 0;
    if (!parse_card(args.fit, budget)) return exit_bad_input;
    if (!(args.margin >= 0 && args.margin < 1)) return refuse("--margin must be between 0 and 1, e.g. 0.1"), exit_bad_input;
    fit_options options;
    options.budget_bytes = budget;
    options.fragmentation_margin = args.margin;
    options.host_memory_bytes = args.host_memory_bytes;
    if (command.count("--vary") > 0 && !parse_vary(args.vary, report.knobs, options.vary)) return exit_bad_input;
    const auto started = std::chrono::steady_clock::now();
    fit_result fit = fit_configuration(report.model, report.knobs, options);
    report.fit_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const bool some_change_fits =
        fit.found || std::any_of(fit.what_if.begin(), fit.what_if.end(), [](const what_if_row& row) { return row.fits; });
    if (fit.usable_bytes == 0) {
      return refuse(fmt::format("--fit {}: {}", args.fit.substr(0, 40), fit.reason)), exit_bad_input;
    }
    if (!some_change_fits && report.plan.weights_bytes > fit.usable_bytes) {
      // Nothing the report could show fits: one line with what would have to change.
      const char* remedy = report.knobs.shard == shard_kind::fsdp ? "shard over more GPUs, offload them (--offload all)"
                                                                  : "shard them (--gpus N --shard fsdp)";
      return refuse(fmt::format("--fit {}: the weights alone ({}{}) exceed the {} usable on the card; {} or pick a larger card",
                              args.fit.substr(0, 40), format_bytes(static_cast<std::int64_t>(report.plan.weights_bytes)),
                              report.knobs.reference == reference_kind::copy ? ", policy and reference" : "",
                              format_bytes(static_cast<std::int64_t>(fit.usable_bytes)), remedy)),
             exit_bad_input;
    }
    report.fit = std::move(fit);
    report.fit_card = args.fit;
    report.fit_budget_bytes = budget;
    report.fit_margin = args.margin;
    report.fit_vary = options.vary;
    report.fit_all = args.all;
  }
  if (length_view_asked(command)) {
    // The card the longest fitting response is found on: --fit's, else the engine's --card.
    std::uint64_t usable = report.fit ? report.fit->usable_bytes : 0;
    const runtime_overhead& overhead = report.plan.overhead;
    const std::uint64_t outside = overhead.cuda_context_bytes + overhead.cublas_workspace_bytes;
    if (!report.fit && report.knobs.engine.device_bytes > outside) {
      usable = static_cast<std::uint64_t>(static_cast<double>(report.knobs.engine.device_bytes - outside) / (1.0 + args.margin));
    }
    if (!plan_length_view(args.lengths, report, usable, report.fit ? args.fit : args.rollout.card)) return exit_bad_input;
  }
  report.width = args.width;
  switch (args.output.format) {
    case output_format::text: return write_output(args.output, render_plan_text(report));
    case output_format::json: return write_output(args.output, render_plan_json(report));
    case output_format::html: break;
  }
  return write_output(args.output, render_plan_html(report));
}

// The card presets for the help's footer, a line of at most 100 columns each.
std::string card_list() {
  std::string lines;
  std::size_t column = 99;  // "Cards:" stands on a line of its own
  for (const std::string& name : gpu_names()) {
    if (column + name.size() + 2 > 100) {
      lines += "\n ";
      column = 1;
    }
    lines += " " + name;
    column += name.size() + 1;
  }
  return lines;
}

}  // namespace

void add_plan_command(CLI::App& app, command_body& run) {
  auto args = std::make_shared<plan_arguments>();
  CLI::App* command = app.add_subcommand("plan", "Peak GPU memory of each phase of an RL step, from the architecture and the knobs");
  command->add_option("--model", args->model, "A preset (--list-models), a config.json or nanochat's model config");
  command->add_option("--params", args->params, "Without --model: the policy's parameter count; its tensors as --buffer")
      ->check(whole_number);
  command->add_flag("--list-models", args->list, "List the built-in presets");
  command->add_option("--from", args->from,
                      "A trainer's config: TRL's GRPOConfig (JSON or YAML recipe) or a verl\n"
                      "config (YAML); its settings give the knobs the command line leaves out");
  command->add_option("--phase", args->phase, "generate | train | grpo-step");
  const std::vector<knob_option> options = knob_options(*args);
  add_knob_options(command, options, {shape_group, training_group, memory_group});
  auto* search = "Fit";
  command->add_option("--fit", args->fit, "Your config against a card (below) or a size (32GB, 80GiB)")
      ->group(search);
  command->add_option("--vary", args->vary,
                      "--fit: KNOB[,KNOB] the algorithm may change: group, new-tokens,\n"
                      "prompt-len (only shorter), lora-r, batch (train's effective batch).\n"
                      "Without it they stay yours; with it none goes under a quarter of\n"
                      "yours (each range: docs/plan.md).\n"
                      "e.g. --vary new-tokens,group")
      ->group(search);
  command->add_flag("--keep-shape", args->keep_shape, "--fit: keep the algorithm's settings (the default)")
      ->group(search);
  command->add_flag("--all", args->all, "--fit: list every configuration that fits, not only the shortlist")->group(search);
  command->add_option("--margin", args->margin, "--fit: fragmentation margin on top of the peak (default 0.10)")
      ->check(decimal_in(0, 1))
      ->group(search);
  add_knob_options(command, options, {engine_group});
  add_handoff_options(command, args->handoff);
  add_length_options(command, args->lengths);
  command->add_option("--width", args->width, "Columns of the text report")
      ->capture_default_str()
      ->check(whole_number_in(min_width, max_width));
  add_output_options(*command, args->output,
                     {"Print JSON (schema: docs/schema/plan.schema.json)",
                      "Write the plan as one self-contained HTML page to this file\n"
                      "('-': standard output): each phase's peak as bars of its parts,\n"
                      "and with --fit the what-ifs"});
  command->footer("Peaks are bytes allocated through PyTorch's caching allocator (max_memory_allocated), derived from\n"
                  "what each step of the code path keeps: transformers with SDPA (or nanochat's GPT), full bf16\n"
                  "logits, the response's log-probs in fp32, torch AdamW (or Muon).\n"
                  "--fit starts from your config: its peak, each knob changed alone (one notch each way, and the least\n"
                  "change that fits), then the combinations that fit, ranked by tokens per step, then speed. It moves\n"
                  "micro-batch, generation batch (--gen-batch), checkpointing, offload and chunked log-probs, and keeps\n"
                  "the algorithm's settings (group, lengths, effective batch, LoRA rank) unless --vary opens them:\n"
                  "  --vary prompt-len,new-tokens   may shorten prompts to 1/4 and move the generation 1/4 to 4x\n"
                  "  --all                          every fitting configuration (--json always has them all)\n"
                  "Cards:" +
                  card_list() +
                  "\nExamples:\n"
                  "  rlmem plan --model qwen2.5-7b --phase generate --batch 64 --prompt-len 512 --new-tokens 1024\n"
                  "  rlmem plan --model config.json --phase train --micro-batch 8 --seq-len 1024 --grad-ckpt\n"
                  "  rlmem plan --model qwen2.5-0.5b --phase grpo-step --prompts 8 --group 8 --prompt-len 512 \\\n"
                  "             --new-tokens 512 --micro-batch 16 --ref-model --fit h100-80g\n"
                  "  rlmem plan --model qwen2.5-7b --phase grpo-step --prompts 4 --group 4 --prompt-len 896 \\\n"
                  "             --new-tokens 128 --micro-batch 16 --lora-r 16 --ref-model --fit a100-40g\n"
                  "  rlmem plan --model nanochat_d20.json --phase grpo-step --prompts 16 --group 16 --gen-batch 8 \\\n"
                  "             --prompt-len 256 --new-tokens 256 --micro-batch 8 --kv-cache prealloc --optimizer muon\n"
                  "  rlmem plan --model qwen2.5-7b --phase grpo-step --prompts 16 --group 8 --prompt-len 1024 \\\n"
                  "             --new-tokens 1024 --micro-batch 4 --grad-ckpt --gpus 8 --shard fsdp --rollout vllm \\\n"
                  "             --card h100-80g --gpu-memory-utilization 0.7 --sleep-level 1 --handoff offload \\\n"
                  "             --wake-order together --host-memory 1TB   (each hand-off transition a phase)\n"
                  "  rlmem plan --from recipe.yaml --fit h100-80g   (TRL's GRPOConfig or a verl config; docs/plan.md)\n"
                  "  rlmem plan --params 3000000 --phase grpo-step --prompts 8 --group 4 --micro-batch 8 --epochs 4 \\\n"
                  "             --buffer traj=rows*epochs*50*263*1*196:fp32 --fit rtx5090-32g");
  command->callback([&run, args, command] { run = [args, command] { return run_plan(*args, *command); }; });
}

}  // namespace rlmem::cli
