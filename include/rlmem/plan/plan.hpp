// SPDX-License-Identifier: MIT
#pragma once
// rlmem plan: peak GPU memory of each phase of an RL step, derived from the architecture and the
// code path (what each step allocates and keeps), and the search for the best configuration.

#include <rlmem/base/enum_names.hpp>
#include <rlmem/plan/plan_errors.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rlmem {

// ---------------------------------------------------------------- models

/// The MLP of a decoder layer.
enum class mlp_kind : std::uint8_t {
  gated,  ///< act(gate(x)) * up(x), then down (SwiGLU, GeGLU: Llama, Qwen, Gemma)
  relu2,  ///< relu(up(x))^2, then down (nanochat)
  gelu,   ///< gelu(up(x)), then down
};

/// A decoder-only transformer as its Hugging Face config.json (or nanochat's model config) describes it.
struct model_architecture {
  std::string name;        ///< preset name, or the config's model_type
  std::string model_type;  ///< llama, qwen2, qwen3, mistral, gemma, qwen2_moe, qwen3_moe, mixtral, nanochat, ...
  std::uint64_t hidden_size = 0;   ///< width of the residual stream (hidden_size, n_embd)
  std::uint64_t num_layers = 0;    ///< decoder layers (num_hidden_layers, n_layer)
  std::uint64_t num_heads = 0;     ///< query heads (num_attention_heads, n_head)
  std::uint64_t num_kv_heads = 0;  ///< key and value heads (num_key_value_heads; = num_heads without GQA)
  std::uint64_t head_dim = 0;  ///< the config's head_dim, else hidden_size / num_heads
  std::uint64_t intermediate_size = 0;  ///< width of a dense MLP's hidden layer
  std::uint64_t vocab_size = 0;         ///< rows of the embedding and of the output head
  bool tied_embeddings = false;         ///< the output head is the input embedding (tie_word_embeddings)
  bool qkv_bias = false;       ///< q, k and v projections have biases (Qwen2)
  bool output_bias = false;    ///< o_proj has a bias
  bool mlp_bias = false;       ///< the MLP's linears have biases
  bool qk_norm = false;        ///< RMSNorm over each head of q and k (Qwen3)
  std::uint32_t norms_per_layer = 2;  ///< 4 for Gemma 2/3 (pre and post norms)
  bool norm_weights = true;    ///< false: norms without parameters (nanochat's F.rms_norm)
  bool layer_norm = false;     ///< LayerNorm (weight and bias) instead of RMSNorm (GPT-2, GPT-NeoX)
  std::uint64_t learned_positions = 0;  ///< rows of a learned position embedding (GPT-2's wpe)
  bool residual_dropout = false;  ///< dropout on the residual branches and the embeddings in training (GPT-2's default 0.1)
  mlp_kind mlp = mlp_kind::gated;  ///< the MLP's shape
  std::uint64_t rotary_positions = 0;  ///< a rotary table held as a buffer (nanochat: 10 x sequence_len); 0: computed per pass
  /// Only a parameter count (--params without --model): the policy is not a transformer the
  /// planner knows, so its phases are its state and its --buffer tensors.
  std::uint64_t opaque_params = 0;
  std::uint64_t num_experts = 0;        ///< routed experts per layer (num_experts, num_local_experts); 0: dense
  std::uint64_t experts_per_token = 0;  ///< experts each token is routed to (num_experts_per_tok)
  std::uint64_t expert_intermediate_size = 0;         ///< one expert's MLP width (moe_intermediate_size, else intermediate_size)
  std::uint64_t shared_expert_intermediate_size = 0;  ///< the shared expert's MLP width; 0: none
  bool shared_expert_gate = false;  ///< Qwen2-MoE's sigmoid gate on the shared expert
};

/// A model's parameters, in elements (not bytes).
struct parameter_count {
  std::uint64_t total = 0;          ///< every parameter, all experts included
  std::uint64_t embedding = 0;      ///< input embedding (also the output head when tied)
  std::uint64_t lm_head = 0;        ///< 0 when tied
  std::uint64_t per_layer = 0;      ///< one decoder layer, all experts included
  std::uint64_t active_per_token = 0;  ///< MoE: parameters one token passes through; = total when dense
  /// total less the embedding and the head: the layers, the final norm and any learned positions.
  std::uint64_t non_embedding() const noexcept { return total - embedding - lm_head; }
};

/// Exact parameter count, as `sum(p.numel() for p in model.parameters())` gives it.
parameter_count count_parameters(const model_architecture& model);

/// Bounds on what parse_hf_config accepts: a field beyond one refuses the config (LIMIT_EXCEEDED).
/// The defaults keep every parameter count inside 64 bits.
struct hf_config_limits {
  std::uint64_t max_dimension = 1u << 20;  ///< hidden size, heads, head_dim, intermediate sizes, positions; heads x head_dim
  std::uint64_t max_vocab = 1u << 24;      ///< vocab_size
  std::uint64_t max_layers = 4096;         ///< num_hidden_layers, n_layer
  std::uint64_t max_experts = 4096;        ///< num_experts, num_local_experts
  std::uint64_t max_expert_width = 1u << 24;  ///< experts x each expert's intermediate size
  std::uint32_t max_nesting = 64;          ///< objects and arrays inside one another (configs nest 2 or 3 levels)
};

/// Reads a Hugging Face config.json, or nanochat's model config (n_layer, n_head, n_kv_head,
/// n_embd, vocab_size, sequence_len at the top level or under "model_config", without
/// "model_type"). A refusal's detail is one line naming the field, which the command line prints
/// after the file's name: NOT_JSON, UNSUPPORTED_ARCHITECTURE, MISSING_FIELD, INVALID_FIELD or
/// LIMIT_EXCEEDED.
result<model_architecture, plan_errc> parse_hf_config(std::string_view json_text, const hf_config_limits& limits = {});

/// Built-in architectures (Qwen2.5, Qwen3, Llama 3.x, Mistral, Gemma): nullptr when unknown.
const model_architecture* find_preset(std::string_view name);
/// Every built-in architecture's name, as find_preset takes it.
std::vector<std::string> preset_names();
/// Up to `count` preset names closest to `name` (edit distance), best first.
std::vector<std::string> similar_preset_names(std::string_view name, std::size_t count = 3);

// ---------------------------------------------------------------- knobs

/// What is planned.
enum class plan_phase : std::uint8_t {
  generate,   ///< one generation: prompts in, new tokens out
  train,      ///< one training step: micro-batches of forward and backward, then the optimizer step
  grpo_step,  ///< a whole GRPO step: rollout, old and reference log-probs, update, optimizer step
};
/// Each enum of the knobs has one table of names: --phase, the reports and the configs read it.
inline constexpr enum_names<plan_phase, 3> plan_phase_names{
    {{"generate", plan_phase::generate}, {"train", plan_phase::train}, {"grpo-step", plan_phase::grpo_step}}};
/// The optimizer, for the state it keeps and what its step allocates.
enum class optimizer_kind : std::uint8_t {
  adamw,  ///< torch's AdamW: exp_avg and exp_avg_sq per trainable parameter, in its dtype
  sgd,    ///< no state
  /// Momentum per 2-D matrix of the decoder layers (Newton-Schulz orthogonalised, one matrix at a
  /// time), fused AdamW for the rest (embeddings, head, norms, biases), as nanochat trains.
  muon,
};
/// --optimizer's names.
inline constexpr enum_names<optimizer_kind, 3> optimizer_kind_names{
    {{"adamw", optimizer_kind::adamw}, {"sgd", optimizer_kind::sgd}, {"muon", optimizer_kind::muon}}};
/// The dtypes of the parameters, gradients, optimizer state and compute.
enum class precision_kind : std::uint8_t {
  bf16,         ///< parameters, gradients and optimizer state in bf16 (torch AdamW keeps the parameter's dtype)
  fp32_master,  ///< fp32 parameters, gradients and state, bf16 compute through autocast
  /// fp32 parameters but a bf16 embedding, bf16 autocast around the forward; the residual stream
  /// is bf16 (it starts at the embedding) and autocast's fp32 pow keeps ReLU^2's input in fp32.
  nanochat,
};
/// --precision's names.
inline constexpr enum_names<precision_kind, 3> precision_kind_names{
    {{"bf16", precision_kind::bf16}, {"fp32-master", precision_kind::fp32_master}, {"nanochat", precision_kind::nanochat}}};
/// How the log-probs (or the loss) come from the hidden states.
enum class logprob_impl : std::uint8_t {
  /// bf16 logits of every position, response rows upcast to fp32, log_softmax, gather
  /// (transformers; OpenRLHF).
  full,
  /// bf16 logits kept, fp32 log-softmax one chunk of rows at a time, gradient written into the
  /// logits (verl with flash-attn's cross entropy).
  chunked,
  fused,  ///< the head and the log-prob fused chunk by chunk, no full logits (Liger, verl use_fused_kernels)
  /// nanochat's GPT.forward with targets: the logits of every position softcapped in bf16
  /// (15 * tanh(logits / 15), tanh's output saved) and cast to fp32 for the cross-entropy over
  /// every position (gpt.py until 2025-11-23, commit 16788ee).
  softcap,
  softcap_fp32,  ///< as softcap, but cast to fp32 first, then softcapped in fp32 (gpt.py since that commit)
};
/// --logprob-impl's names.
inline constexpr enum_names<logprob_impl, 5> logprob_impl_names{{{"full", logprob_impl::full},
                                                                  {"chunked", logprob_impl::chunked},
                                                                  {"fused", logprob_impl::fused},
                                                                  {"softcap", logprob_impl::softcap},
                                                                  {"softcap-fp32", logprob_impl::softcap_fp32}}};
/// How the generation's KV cache is held.
enum class kv_cache_kind : std::uint8_t {
  grow,      ///< Hugging Face DynamicCache, one torch.cat per layer and token
  prealloc,  ///< one buffer of kv_rows x kv_len positions allocated before the prompt (nanochat's engine)
};
/// --kv-cache's names.
inline constexpr enum_names<kv_cache_kind, 2> kv_cache_kind_names{{{"grow", kv_cache_kind::grow}, {"prealloc", kv_cache_kind::prealloc}}};
/// What is divided over the GPUs.
enum class shard_kind : std::uint8_t {
  none,   ///< nothing: replicated (DDP's gradient buckets when gpus > 1)
  zero1,  ///< the optimizer state
  zero2,  ///< the optimizer state and the gradients
  fsdp,   ///< ZeRO-3, FULL_SHARD: state, gradients and weights, with unsharded layers in flight
};
/// --shard's names; zero3 is another name of fsdp, parsed but never printed.
inline constexpr enum_names<shard_kind, 5> shard_kind_names{{{"none", shard_kind::none},
                                                             {"zero1", shard_kind::zero1},
                                                             {"zero2", shard_kind::zero2},
                                                             {"fsdp", shard_kind::fsdp},
                                                             {"zero3", shard_kind::fsdp}}};
/// Where the optimizer state (and, with all, the weights) live between uses: the GPU, or the
/// CPU (plan_knobs::offload_optimizer and offload_weights).
enum class offload_level : std::uint8_t {
  none,       ///< everything on the GPU
  optimizer,  ///< the optimizer state on the CPU
  all,        ///< the optimizer state, the gradients and the weights on the CPU (FSDP's CPU offload)
};
/// --offload's names.
inline constexpr enum_names<offload_level, 3> offload_level_names{
    {{"none", offload_level::none}, {"optimizer", offload_level::optimizer}, {"all", offload_level::all}}};
/// Where grpo-step's reference log-probs come from.
enum class reference_kind : std::uint8_t {
  none,  ///< no reference pass (a KL weight of 0)
  copy,  ///< a frozen bf16 copy of the base weights
  /// The policy's own base weights with the LoRA adapter switched off (peft's disable_adapter(), as
  /// TRL and verl do with LoRA), so no second copy; needs a LoRA rank.
  adapter_disabled,
};
/// --ref-model's names.
inline constexpr enum_names<reference_kind, 3> reference_kind_names{
    {{"none", reference_kind::none}, {"copy", reference_kind::copy}, {"adapter-disabled", reference_kind::adapter_disabled}}};

/// Phase bits of resident_buffer::phases: the phases a buffer is on the GPU through.
inline constexpr unsigned phase_rollout = 1u << 0;       ///< the rollout, and generate's generation
inline constexpr unsigned phase_reference = 1u << 1;     ///< grpo-step's reference log-probs
inline constexpr unsigned phase_update = 1u << 2;        ///< the policy update's forward and backward, and train's
inline constexpr unsigned phase_optimizer = 1u << 3;     ///< the optimizer step
inline constexpr unsigned phase_old_logprobs = 1u << 4;  ///< grpo-step's no-grad pass before the update
inline constexpr unsigned all_phases = 0x1fu;            ///< every phase above

/// A named tensor the job keeps on the GPU (e.g. a diffusion policy's latents for every step).
/// Its dims may name `rows` (the rows of a step on one GPU) and `epochs`, so that it scales as
/// the knobs (and --fit's search) change them.
struct resident_buffer {
  std::string name;               ///< as given before `=`: the name the reports list it under
  std::uint64_t fixed_bytes = 0;  ///< the element size times the numeric dims
  std::uint32_t rows_dims = 0;    ///< dims named `rows`
  std::uint32_t epochs_dims = 0;  ///< dims named `epochs`
  std::string shape;        ///< as given: "rows*50*263*1*196:fp32"
  unsigned phases = all_phases;  ///< phase_ bits; without `@phases`: every phase, the optimizer step included
};

/// Bounds on single knobs, on the tokens a pass handles and on --buffer tensors, beyond which
/// parse_buffer_spec and validate_knobs refuse (LIMIT_EXCEEDED); plan_memory still flags any
/// estimate beyond a double's exact range (plan_result::out_of_range).
struct knob_limits {
  std::uint64_t max_rows = 1u << 20;              ///< --batch, --micro-batch, --prompts, --group, --grad-accum, --epochs, --kv-rows
  std::uint64_t max_length = 1u << 24;            ///< --prompt-len, --new-tokens, --seq-len, --logprob-tokens, --kv-len, --logprob-chunk
  std::uint64_t max_gpus = 1u << 16;              ///< --gpus
  std::uint64_t max_tokens_per_pass = 1ull << 32;  ///< rows x length of a generation, a micro-batch, a rollout or a KV cache
  std::size_t max_buffers = 64;                   ///< --buffer options
  std::uint32_t max_buffer_dims = 16;             ///< dims of one --buffer
  std::uint64_t max_buffer_bytes = 1ull << 50;    ///< one --buffer's bytes (1 PiB), as given and with the knobs' rows and epochs
};

/// "traj=rows*50*263*1*196:fp32", "latents=8x50x263x196:bf16@rollout,update": dims are numbers,
/// `rows` or `epochs`, joined by x or *. A refusal (INVALID_BUFFER_SPEC, LIMIT_EXCEEDED) carries
/// the line printed.
result<resident_buffer, plan_errc> parse_buffer_spec(std::string_view spec, const knob_limits& limits = {});

/// What generates the rollout. vllm and sglang are inference engines on the same GPU that reserve
/// their memory up front (their weights, a KV pool sized from a memory fraction, activation workspace).
enum class rollout_kind : std::uint8_t {
  hf,      ///< transformers' generate in the trainer's process (the cache grows token by token)
  vllm,    ///< vLLM, its budget a share of the card's total (gpu_memory_utilization)
  sglang,  ///< SGLang, its budget a share of the memory free when it starts (mem_fraction_static)
};
/// --rollout's names.
inline constexpr enum_names<rollout_kind, 3> rollout_kind_names{
    {{"hf", rollout_kind::hf}, {"vllm", rollout_kind::vllm}, {"sglang", rollout_kind::sglang}}};

/// The engine's own knobs, named as the engines name them. Only read when rollout != hf.
struct rollout_engine_knobs {
  rollout_kind rollout = rollout_kind::hf;   ///< what generates the rollout
  std::uint64_t device_bytes = 0;            ///< the card's total memory (torch.cuda.mem_get_info()[1])
  double gpu_memory_utilization = 0.9;       ///< vLLM: the budget's share of the card's total
  std::uint64_t max_model_len = 0;           ///< vLLM: tokens per request (0: prompt + new tokens)
  std::uint64_t max_num_seqs = 256;          ///< vLLM: requests scheduled together
  std::uint64_t max_num_batched_tokens = 8192;  ///< vLLM: tokens of the profile run's forward
  std::uint64_t block_size = 16;             ///< vLLM: tokens per KV block
  std::uint32_t sleep_level = 0;             ///< 0: awake through training; 1: weights to host, KV dropped; 2: both dropped
  double mem_fraction_static = 0;            ///< SGLang: share of the memory free at init for weights and KV
  std::uint64_t chunked_prefill_size = 8192;  ///< SGLang: tokens of one prefill chunk
  std::uint64_t graph_bytes = 0;             ///< CUDA graph pool as the engine logs it (0: not given)
};

/// How a colocated step hands the GPU between the trainer and its rollout engine (docs/plan.md,
/// "Colocated hand-offs").
enum class handoff_kind : std::uint8_t {
  /// No transitions are planned (the trainer stays resident and the engine's wake-ups are not phases).
  unmodelled,
  /// The trainer keeps its state on the GPU through the rollout (TRL colocate, OpenRLHF without
  /// --ds.enable_sleep).
  keep,
  /// Its weights, the reference copy and the optimizer state go to host memory before the engine
  /// wakes and come back after it sleeps (verl's param_offload and optimizer_offload).
  offload,
  /// rlmem.runtime's pause("train", keep="host") of the same state and of DDP's buckets (the whole tag).
  rlmem_pause,
};
/// The order the engine comes back in.
enum class wake_order_kind : std::uint8_t {
  /// Its weights, then the weight sync, then (the sync's copy freed) its KV pool (vLLM
  /// wake_up(tags=["weights"]) then ["kv_cache"]; SGLang's resume_memory_occupation(tags); verl, TRL).
  staged,
  /// Weights and KV at once, then the sync (vLLM's wake_up() without tags: the old weights, the new
  /// ones and the KV at once).
  together,
};
/// --handoff's names; unmodelled prints only: --handoff takes the other three.
inline constexpr enum_names<handoff_kind, 4> handoff_kind_names{{{"unmodelled", handoff_kind::unmodelled},
                                                                 {"keep", handoff_kind::keep},
                                                                 {"offload", handoff_kind::offload},
                                                                 {"rlmem-pause", handoff_kind::rlmem_pause}}};
/// --wake-order's names.
inline constexpr enum_names<wake_order_kind, 2> wake_order_kind_names{{{"staged", wake_order_kind::staged},
                                                                       {"together", wake_order_kind::together}}};

/// How a preallocated KV cache's rows follow the knobs.
enum class kv_rows_kind : std::uint8_t {
  fixed,             ///< a number: plan_knobs::kv_rows (0: the generation batch)
  generation_batch,  ///< the rows generated together
  group,             ///< the group (nanochat's engine sizes it for num_samples)
};

/// Everything about how the model is run that shapes its memory, one field per option of `rlmem
/// plan`. Only the fields of `phase` are read; validate_knobs says which must be set.
struct plan_knobs {
  plan_phase phase = plan_phase::train;  ///< what is planned
  // generate (and the rollout of grpo_step)
  std::uint64_t batch = 0;  ///< generate: rows generated together; grpo_step: 0 = all rows of the GPU
  std::uint64_t prompt_len = 0;  ///< generate, grpo_step: tokens of each prompt
  std::uint64_t new_tokens = 0;  ///< generate, grpo_step: tokens generated after each prompt
  kv_cache_kind kv_cache = kv_cache_kind::grow;  ///< how the generation's KV cache is held
  std::uint64_t kv_rows = 0;  ///< prealloc, kv_rows_kind::fixed: rows the buffer is sized for (0: the generation batch)
  kv_rows_kind kv_rows_follow = kv_rows_kind::fixed;  ///< prealloc: what the buffer's rows follow
  std::uint64_t kv_len = 0;   ///< prealloc: positions per row (0: prompt + new tokens)
  /// The generation runs under torch.inference_mode (nanochat's Engine), where autocast caches
  /// no weight copies (each matmul casts its weight and frees the copy); else under torch.no_grad
  /// (transformers' generate), where autocast keeps every fp32 weight's bf16 copy until its region ends.
  bool generate_inference_mode = false;
  // train (and the policy update of grpo_step)
  std::uint64_t micro_batch = 0;     ///< sequences per forward and backward
  std::uint64_t seq_len = 0;         ///< train: tokens per sequence
  std::uint64_t logprob_tokens = 0;  ///< train: response tokens per sequence whose log-probs are taken
  std::uint64_t grad_accum = 1;      ///< train: micro-batches per optimizer step
  bool grad_ckpt = false;            ///< activation checkpointing: each decoder layer recomputed in the backward
  optimizer_kind optimizer = optimizer_kind::adamw;  ///< what the optimizer keeps per parameter
  precision_kind precision = precision_kind::bf16;   ///< dtypes of parameters, gradients, state and compute
  std::uint64_t lora_rank = 0;  ///< 0: full fine-tuning
  std::vector<std::string> lora_targets;  ///< empty: every linear of the layers (q k v o gate up down)
  logprob_impl logprob = logprob_impl::full;  ///< how the log-probs (or the loss) come from the logits
  std::uint64_t logprob_chunk = 1024;  ///< rows per chunk for chunked and fused
  // grpo_step
  std::uint64_t prompts = 0;  ///< prompts per step over all GPUs (a multiple of gpus)
  std::uint64_t group = 0;    ///< samples generated per prompt
  reference_kind reference = reference_kind::none;  ///< where the reference log-probs come from
  bool old_logprobs = false;  ///< a no-grad pass of the policy before the update (PPO epochs, verl's old_log_prob)
  std::uint64_t epochs = 1;   ///< grpo-step: passes of the update (and optimizer step) over the rollout (PPO epochs)
  // distribution
  std::uint64_t gpus = 1;               ///< data-parallel ranks the step is divided over
  shard_kind shard = shard_kind::none;  ///< what is divided over the GPUs
  bool offload_optimizer = false;       ///< the optimizer state lives in host memory (--offload optimizer)
  bool offload_weights = false;         ///< ... and the weights and gradients too (--offload all; FSDP only)
  std::vector<resident_buffer> buffers;  ///< --buffer: the job's own tensors kept on the GPU
  rollout_engine_knobs engine;          ///< the rollout engine's knobs (read when engine.rollout != hf)
  // colocated hand-off (with an engine, grpo-step) and host memory
  handoff_kind handoff = handoff_kind::unmodelled;       ///< how the trainer hands the GPU to the engine
  wake_order_kind wake_order = wake_order_kind::staged;  ///< the order the engine comes back in
  std::uint64_t sync_bucket_bytes = 0;  ///< the weight sync streams buckets of this size (0: the full weights at once)
  std::uint64_t gpus_per_node = 0;      ///< GPUs sharing a host's memory (0: not given; the host view is not reported)
};

/// The offload the knobs' two switches make.
constexpr offload_level offload_of(const plan_knobs& knobs) noexcept {
  if (knobs.offload_weights) return offload_level::all;
  return knobs.offload_optimizer ? offload_level::optimizer : offload_level::none;
}
/// Sets the knobs' two switches to `level`.
constexpr void set_offload(plan_knobs& knobs, offload_level level) noexcept {
  knobs.offload_optimizer = level != offload_level::none;
  knobs.offload_weights = level == offload_level::all;
}

/// The rows of one step on one GPU that `rows` in a --buffer stands for: grpo-step's prompts x
/// group / gpus, train's micro-batch x accumulation, generate's batch.
std::uint64_t buffer_rows(const plan_knobs& knobs);
/// A buffer's bytes for these knobs.
std::uint64_t buffer_bytes(const resident_buffer& buffer, const plan_knobs& knobs);
/// Rows generated together in grpo-step's rollout (the generation batch, at most a GPU's rows).
std::uint64_t generation_rows(const plan_knobs& knobs);
/// Rows a preallocated KV cache holds.
std::uint64_t kv_cache_rows(const plan_knobs& knobs);

/// Checks an engine's knobs (fractions in (0, 1], block size, sleep level, the card); success for
/// hf. A refusal (INVALID_KNOB, MISSING_KNOB, KNOB_CONFLICT) carries the line printed.
result<void, plan_errc> validate_engine_knobs(const plan_knobs& knobs);

/// Checks the knobs against the phase, the model and `limits` (zero lengths, divisibility, LoRA
/// targets...). A refusal (INVALID_KNOB, KNOB_CONFLICT, LIMIT_EXCEEDED) carries the line printed.
result<void, plan_errc> validate_knobs(const model_architecture& model, const plan_knobs& knobs, const knob_limits& limits = {});

// ---------------------------------------------------------------- estimates

/// One named part of a figure (a phase's peak, a host's memory): "weights", "KV cache", ...
struct memory_component {
  std::string name;         ///< what the bytes are, as the reports print it
  std::uint64_t bytes = 0;  ///< per GPU
};

/// One phase: its peak allocated bytes and what they are at the instant of the peak.
struct phase_estimate {
  std::string name;        ///< generate, train; rollout, old-logprobs, reference, update, optimizer
  std::string peak_at;     ///< the instant: "log_softmax backward", "prefill MLP", ...
  std::uint64_t peak_bytes = 0;  ///< allocated bytes per GPU at the phase's peak (outside the overhead)
  std::vector<memory_component> components;  ///< they add up to peak_bytes
  std::vector<std::string> resident;         ///< what stays on the GPU through the phase
};

/// Memory outside the caching allocator's peak, one line in the report.
struct runtime_overhead {
  std::uint64_t cuda_context_bytes = 0;     ///< context, kernels and libraries' modules
  std::uint64_t cublas_workspace_bytes = 0;  ///< one workspace per thread that runs matmuls
};

/// vLLM's KV cache from the memory left for it (vllm/v1/core/kv_cache_utils.py: get_num_blocks,
/// get_max_concurrency_for_kv_cache_config): whole blocks of every layer, and how many requests
/// of max_model_len tokens they hold.
struct vllm_kv_cache {
  std::uint64_t page_bytes = 0;  ///< one block of one layer: 2 x block_size x kv_heads x head_dim x 2
  std::uint64_t blocks = 0;      ///< available // page_bytes // layers
  std::uint64_t tokens = 0;      ///< blocks x block_size ("GPU KV cache size: N tokens")
  double max_concurrency = 0;    ///< blocks / ceil(max_model_len / block_size) ("Maximum concurrency")
};
/// vLLM's KV cache in `available_bytes` (0 blocks when not positive) for blocks of `block_size`
/// tokens and requests of `max_model_len` tokens. `block_size`, the layers and the KV heads must not be 0.
vllm_kv_cache vllm_kv_cache_of(const model_architecture& model, std::int64_t available_bytes, std::uint64_t block_size,
                               std::uint64_t max_model_len);

/// An engine's reservation and KV pool on one GPU, and what it keeps while asleep.
struct engine_budget {
  rollout_kind rollout = rollout_kind::hf;  ///< the engine; hf: no engine, the rest is 0
  std::uint64_t device_bytes = 0;           ///< the card's total memory, from the knobs
  std::uint64_t trainer_at_init_bytes = 0;  ///< what the trainer holds when the engine starts
  std::uint64_t free_at_init_bytes = 0;     ///< device less the CUDA context and the trainer
  std::uint64_t requested_bytes = 0;        ///< vLLM: utilization x device; SGLang: fraction x free at init
  std::uint64_t weights_bytes = 0;          ///< the engine's own bf16 copy
  std::uint64_t activation_bytes = 0;       ///< vLLM: the profile run's peak; SGLang: one prefill chunk (estimated)
  std::uint64_t graph_bytes = 0;            ///< CUDA graph pool as given (outside the budget)
  std::int64_t kv_bytes = 0;                ///< the KV pool (negative: nothing left for it)
  std::uint64_t bytes_per_token = 0;        ///< layers x 2 x kv_heads x head_dim x 2 (bf16)
  std::uint64_t block_bytes = 0;            ///< vLLM: one block of every layer
  std::uint64_t blocks = 0;                 ///< vLLM
  std::uint64_t kv_tokens = 0;              ///< tokens the KV pool holds (vLLM: blocks x block_size)
  std::uint64_t sequence_tokens = 0;        ///< the run's prompt + new tokens
  std::uint64_t max_model_len = 0;          ///< vLLM
  double max_concurrency = 0;               ///< vLLM's log line, for max_model_len
  std::uint64_t concurrent_sequences = 0;   ///< sequences of the run's length the pool holds at once
  std::uint64_t rollout_rows = 0;           ///< rows the rollout generates on this GPU
  std::uint64_t reserved_bytes = 0;         ///< allocated while generating: weights + KV + activation
  std::uint64_t asleep_bytes = 0;           ///< allocated while asleep (sleep level 0: weights and KV)
  std::uint64_t host_bytes = 0;             ///< sleep level 1: the weights' backup in host memory
  std::string refusal;                      ///< non-empty: the engine refuses to start, in its words
  std::string warning;                      ///< non-empty: it starts, but what it leaves outside its budget is short
};

/// The engine's budget for these knobs; `trainer_at_init` is what the trainer holds on the GPU
/// when the engine starts (its weights in a colocated step).
engine_budget plan_rollout_engine(const model_architecture& model, const plan_knobs& knobs, std::uint64_t trainer_at_init);

/// Host memory one GPU's process holds, part by part (the pinned backups and offloaded state),
/// and the node's: the parts add up, as they do when the backups' host memory is kept between
/// uses (PyTorch's pinned-memory cache, rlmem's keep_host_buffers).
struct host_memory {
  std::vector<memory_component> parts;  ///< per GPU; they add up to per_gpu_bytes
  std::uint64_t per_gpu_bytes = 0;      ///< host bytes one GPU's process holds
  std::uint64_t gpus_per_node = 0;      ///< from the knobs (0: not given, per_node_bytes is 0)
  std::uint64_t per_node_bytes = 0;     ///< per_gpu_bytes x gpus_per_node
};

/// The colocated hand-off: the transitions (phases of plan_result, in step order) and what the
/// other wake-up order would give.
struct handoff_plan {
  handoff_kind mode = handoff_kind::unmodelled;     ///< the knobs' hand-off
  wake_order_kind order = wake_order_kind::staged;  ///< the knobs' wake-up order: the one plan_result's phases follow
  std::vector<std::string> transitions;      ///< the phases that are transitions, in order
  std::uint64_t sync_source_bytes = 0;       ///< the weights the sync reads beside the engine's copy (0: the trainer's own, in place)
  std::uint64_t moved_bytes = 0;             ///< trainer state off the GPU while the engine is awake
  std::uint64_t step_peak_staged = 0;        ///< the step's peak when the engine wakes weights, sync, then KV
  std::uint64_t step_peak_together = 0;      ///< ... when it wakes weights and KV together before the sync
  std::string peak_transition_staged;        ///< the phase that sets each of those peaks
  std::string peak_transition_together;      ///< ... together
  std::uint64_t wake_peak_staged = 0;        ///< the largest wake-up or sync transition, staged
  std::uint64_t wake_peak_together = 0;      ///< ... together
};

/// What plan_memory gives: each phase's peak per GPU and what the step holds beside them.
struct plan_result {
  parameter_count params;              ///< the policy's, as count_parameters gives them
  std::uint64_t trainable_params = 0;  ///< the LoRA adapters' parameters, else every parameter
  std::uint64_t peak_bytes = 0;  ///< the largest phase peak, per GPU
  std::string peak_phase;        ///< the name of the phase with that peak
  std::vector<phase_estimate> phases;  ///< in the step's order
  runtime_overhead overhead;     ///< outside peak_bytes: the card holds both
  std::uint64_t host_bytes = 0;  ///< offloaded state per GPU, in host memory
  std::uint64_t weights_bytes = 0;  ///< policy and reference weights resident per GPU in every phase
  bool out_of_range = false;     ///< some estimate passed 2^53 bytes (8 PiB): the knobs are beyond any GPU
  engine_budget engine;          ///< rollout by vLLM or SGLang (engine.rollout == hf: none)
  handoff_plan handoff;          ///< knobs.handoff != unmodelled: the hand-off's transitions
  host_memory host;              ///< knobs.gpus_per_node != 0: host memory per GPU and per node
};

/// The per-phase peaks. The knobs must have passed validate_knobs.
plan_result plan_memory(const model_architecture& model, const plan_knobs& knobs);

// ---------------------------------------------------------------- fit

/// A card by name (h100-80g, a100-40g, h200-141g, rtx4090-24g, ...): its memory in bytes, or 0.
std::uint64_t gpu_memory_bytes(std::string_view name);
/// Every card gpu_memory_bytes knows, by name.
std::vector<std::string> gpu_names();

/// Knobs --fit may move beyond the memory knobs. By default the search keeps the algorithm as
/// given (group size, lengths, effective batch, LoRA rank) and moves only how it is run; neither
/// the what-if table nor the search changes these unless --vary opens them, and then never below
/// a quarter of the user's value (a group never below 2): a prompt cut to 3 tokens is no advice.
enum class search_knob : std::uint8_t {
  group,       ///< grpo-step: samples per prompt
  new_tokens,  ///< generate, grpo-step: generation length
  prompt_len,  ///< generate, grpo-step: prompt length (only shorter: a longer prompt adds no work)
  lora_rank,   ///< train, grpo-step with --lora-r
  batch,       ///< train: the effective batch (micro-batch x accumulation); generate: rows beyond the given
};
/// The bit of `knob` in fit_options::vary.
inline constexpr unsigned search_bit(search_knob knob) noexcept { return 1u << static_cast<unsigned>(knob); }
/// "group" -> search_knob::group; UNKNOWN_SEARCH_KNOB, with the line --vary prints, for a name
/// that is not a knob --vary opens.
result<search_knob, plan_errc> parse_search_knob(std::string_view name);
/// The name --vary takes for `knob` ("new-tokens", "lora-r", ...).
std::string_view to_string(search_knob knob) noexcept;
/// Why `knob` cannot be varied in `knobs`' phase, or empty when it can.
std::string why_not_varied(search_knob knob, const plan_knobs& knobs);

/// What fit_configuration searches within.
struct fit_options {
  std::uint64_t budget_bytes = 0;      ///< the card's memory, in bytes
  double fragmentation_margin = 0.10;  ///< peak allocated x (1 + margin) + overhead must fit
  unsigned vary = 0;                   ///< search_bit()s of the algorithm knobs the search may move
  bool search_offload = true;          ///< the search may offload the optimizer state (and, with FSDP, the weights)
  std::size_t combinations = 5;        ///< fitting configurations to keep, best first
  std::uint64_t host_memory_bytes = 0; ///< a node's host memory; 0: the host is not checked
};

/// One knob changed alone from the user's configuration, with the exact peak it gives.
struct what_if_row {
  std::string knob;              ///< as the report names it: "micro-batch", "offload", "grad checkpointing", ...
  std::string from;              ///< the user's value, as text
  std::string to;                ///< the value tried
  std::uint64_t peak_bytes = 0;  ///< the peak per GPU with `to`
  std::int64_t saved_bytes = 0;  ///< the user's peak less this one (negative: it costs memory)
  bool fits = false;             ///< peak_bytes within fit_result::usable_bytes, and the host memory fits
  /// The furthest this knob alone goes and fits: when the user's configuration does not fit, the
  /// smallest change that fits; when it does, the largest value that still fits.
  bool limit = false;
};

/// A knob of a configuration that differs from the user's.
struct knob_change {
  std::string knob;  ///< as the report names it: "micro-batch", "group", "offload", ...
  std::string from;  ///< the user's value, as text ("4 x 8" for micro-batch x accumulation)
  std::string to;    ///< this configuration's value, as text
};

/// A configuration the search found to fit, as changes from the user's.
struct fit_candidate {
  plan_knobs knobs;                  ///< the configuration
  std::uint64_t peak_bytes = 0;      ///< its peak per GPU
  std::vector<knob_change> changes;  ///< the knobs it changes, from the user's
};

/// What fit_configuration found: the user's configuration, each knob changed alone, and the search.
struct fit_result {
  std::uint64_t usable_bytes = 0;  ///< budget less overhead, divided by (1 + margin)
  std::uint64_t your_peak_bytes = 0;  ///< the configuration as given
  bool yours_fits = false;            ///< the configuration as given fits the card and the host
  std::vector<what_if_row> what_if;  ///< each knob alone, from the configuration as given
  bool found = false;  ///< some configuration of the searched knobs fits
  plan_knobs best;                    ///< found: the first of the shortlist
  plan_result best_plan;              ///< found: plan_memory of `best`
  /// The shortlist, best first (the best first of all): the best configuration of each set of
  /// changed knobs, less those that change more knobs than another that does as well.
  std::vector<fit_candidate> combinations;
  std::vector<fit_candidate> every_fitting;  ///< every configuration that fits, ranked as the shortlist is
  std::uint64_t configurations = 0;  ///< explored
  std::uint64_t fitting = 0;          ///< of those explored, the configurations that fit
  std::string reason;  ///< when nothing fits: why (the card is smaller than the overhead, ...)
  plan_knobs smallest;  ///< when nothing fits: the configuration with the smallest peak
  std::uint64_t smallest_peak_bytes = 0;  ///< when nothing fits: that configuration's peak per GPU
  std::uint64_t host_memory_bytes = 0;  ///< fit_options' host memory per node (0: not checked)
  std::uint64_t your_host_bytes = 0;    ///< the configuration's host memory per node
  bool yours_fits_card = false;         ///< the card alone: yours_fits also needs the host
};

/// Whether a plan's host memory per node fits `host_memory_bytes` (always, when 0).
bool host_fits(const plan_result& plan, std::uint64_t host_memory_bytes) noexcept;

/// Tokens produced and trained on per step: the search's objective.
std::uint64_t work_per_step(const plan_knobs& knobs);

/// How fit_result's combinations are ranked, as one sentence for a person.
std::string_view fit_ranking_rule() noexcept;

/// The least --fit proposes for an algorithm knob the user set to `value`: a quarter of it,
/// rounded up (at least 1).
std::uint64_t least_proposed(std::uint64_t value) noexcept;

/// Starts from `base`: its peak, then each knob changed alone (one notch each way, and the smallest
/// change that fits), then the search for the most work per step within the budget over the
/// memory knobs (micro-batch with accumulation keeping the batch, generation batch,
/// checkpointing, offload, chunked log-probs) and the algorithm knobs `options.vary` opens.
fit_result fit_configuration(const model_architecture& model, const plan_knobs& base, const fit_options& options);

// ---------------------------------------------------------------- response lengths

/// A point of the responses' length distribution: `fraction` of the samples are at most `length`
/// tokens long ("p90=800": fraction 0.9, 800 tokens).
struct length_quantile {
  std::string label;  ///< as given: "p90"
  double fraction = 0;        ///< the share of samples at most `length` long, in (0, 1)
  std::uint64_t length = 0;   ///< tokens
};

/// "p50=312,p90=810,p99=1500" into quantiles of ascending fraction and length; INVALID_QUANTILES
/// with a one-line detail (printed after --response-len-percentiles) when a point is malformed,
/// repeated or out of order.
result<std::vector<length_quantile>, plan_errc> parse_length_quantiles(std::string_view text);

/// The share of samples at most `length` tokens long: piecewise linear through (0, 0), the
/// quantiles and (max_length, 1); 1 from max_length on.
double length_cdf(const std::vector<length_quantile>& quantiles, std::uint64_t max_length, std::uint64_t length);

/// What plan_response_lengths is asked.
struct length_view_options {
  std::uint64_t max_length = 0;              ///< the longest response the data allows (at most --new-tokens)
  std::vector<length_quantile> quantiles;    ///< empty: no distribution given
  std::uint64_t usable_bytes = 0;            ///< what a step may peak at on the card (--fit's usable); 0: no card
};

/// The step planned with every response `length` tokens long (a padded pass is as long as its
/// longest sample).
struct length_point {
  std::string label;              ///< the quantile's ("p90"), or "max"
  double fraction = 0;            ///< the quantile's fraction; 1 for the max
  std::uint64_t length = 0;       ///< tokens of every response
  std::uint64_t peak_bytes = 0;   ///< the step's peak per GPU; 0 when the knobs are invalid at this length
  std::string peak_phase;         ///< the phase with that peak; "" when the knobs are invalid at this length
  bool fits = false;              ///< peak within the usable memory (only with a card)
  double step_draws_longer = 0;   ///< P(a step draws a sample longer than length) (only with quantiles)
};

/// What plan_response_lengths gives.
struct length_view {
  std::uint64_t max_length = 0;        ///< length_view_options' max_length
  std::uint64_t samples_per_step = 0;  ///< responses one step draws over all GPUs (any of them may set a pass's length)
  std::vector<length_point> points;    ///< each quantile, then the max
  bool has_card = false;               ///< a usable memory was given: fits and fitting_length are found
  bool has_quantiles = false;          ///< quantiles were given: the probabilities are computed
  std::uint64_t usable_bytes = 0;      ///< length_view_options' usable_bytes
  /// The longest response whose step fits (0: not even one token); max_length when every length fits.
  std::uint64_t fitting_length = 0;
  std::uint64_t peak_after_fitting_bytes = 0;  ///< the step's peak one token past fitting_length
  double step_draws_longer_than_fitting = 0;   ///< P(a step draws a sample longer than fitting_length)
  std::uint64_t plans_evaluated = 0;           ///< by the bisection
};

/// The step's peak at each quantile's length and at the max, and with a card the longest
/// response that fits, found by bisection on the response length to the token (the peak grows
/// with it). A vLLM max_model_len or a preallocated cache left to follow the lengths is fixed at
/// prompt + max_length, as the engine or cache was sized before the run. Samples are taken as
/// independent: P(a step of N samples draws one longer than L) = 1 - F(L)^N.
length_view plan_response_lengths(const model_architecture& model, const plan_knobs& knobs, const length_view_options& options);

/// The printed name of a --phase value, from plan_phase_names.
constexpr std::string_view to_string(plan_phase phase) noexcept { return name_of(plan_phase_names, phase); }
/// The printed name of a --optimizer value, from optimizer_kind_names.
constexpr std::string_view to_string(optimizer_kind kind) noexcept { return name_of(optimizer_kind_names, kind); }
/// The printed name of a --logprob-impl value, from logprob_impl_names.
constexpr std::string_view to_string(logprob_impl impl) noexcept { return name_of(logprob_impl_names, impl); }
/// Whether the log-prob path works in chunks of `logprob_chunk` rows (chunked, fused).
bool chunked_logprobs(const plan_knobs& knobs) noexcept;
/// Whether the loss is computed over every position's logits (nanochat's softcapped loss).
bool scores_every_position(const plan_knobs& knobs) noexcept;
/// The printed name of a --shard value, from shard_kind_names.
constexpr std::string_view to_string(shard_kind kind) noexcept { return name_of(shard_kind_names, kind); }
/// The printed name of a --precision value, from precision_kind_names.
constexpr std::string_view to_string(precision_kind kind) noexcept { return name_of(precision_kind_names, kind); }
/// The printed name of a --kv-cache value, from kv_cache_kind_names.
constexpr std::string_view to_string(kv_cache_kind kind) noexcept { return name_of(kv_cache_kind_names, kind); }
/// The printed name of a --ref-model value, from reference_kind_names.
constexpr std::string_view to_string(reference_kind kind) noexcept { return name_of(reference_kind_names, kind); }
/// The printed name of a --rollout value, from rollout_kind_names.
constexpr std::string_view to_string(rollout_kind kind) noexcept { return name_of(rollout_kind_names, kind); }
/// The printed name of a --offload value, from offload_level_names.
constexpr std::string_view to_string(offload_level level) noexcept { return name_of(offload_level_names, level); }
/// The printed name of a --handoff value, from handoff_kind_names.
constexpr std::string_view to_string(handoff_kind kind) noexcept { return name_of(handoff_kind_names, kind); }
/// The printed name of a --wake-order value, from wake_order_kind_names.
constexpr std::string_view to_string(wake_order_kind kind) noexcept { return name_of(wake_order_kind_names, kind); }
/// Checks the hand-off knobs against the phase and the rollout (an engine, grpo-step). A refusal
/// (MISSING_KNOB, KNOB_CONFLICT) carries the line printed.
result<void, plan_errc> validate_handoff_knobs(const plan_knobs& knobs);

}  // namespace rlmem
