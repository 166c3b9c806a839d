// SPDX-License-Identifier: MIT
// Per-phase peaks: each phase is a set of instants (resident state plus what is live at that
// moment of the code path); its peak is the largest instant.

#include "handoff.hpp"
#include "host_memory.hpp"
#include "memory_terms.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

namespace rlmem {

namespace {

using plan_detail::bytes;

// One moment of a phase and what is live then.
class instant {
 public:
  explicit instant(const char* at) : at_(at) {}
  instant& add(const char* name, bytes amount) {
    if (amount > 0) parts_.push_back({name, amount});
    return *this;
  }
  instant& add_all(const std::vector<std::pair<std::string, bytes>>& parts) {
    for (const auto& [name, amount] : parts) {
      if (amount > 0) named_.push_back({name, amount});
    }
    return *this;
  }
  bytes total() const {
    bytes sum = 0;
    for (const auto& part : parts_) sum += part.amount;
    for (const auto& part : named_) sum += part.amount;
    return sum;
  }
  phase_estimate to_phase(std::string name, std::vector<std::string> resident) const {
    phase_estimate phase;
    phase.name = std::move(name);
    phase.peak_at = at_;
    phase.resident = std::move(resident);
    for (const auto& part : parts_) phase.components.push_back({part.name, to_bytes(part.amount)});
    for (const auto& part : named_) phase.components.push_back({"buffer " + part.name, to_bytes(part.amount)});
    // Each part is clamped below 2^53, so the sum of at most a few dozen stays inside 64 bits;
    // plan_memory flags a peak that large as out of range.
    for (const memory_component& component : phase.components) phase.peak_bytes += component.bytes;
    return phase;
  }

 private:
  static std::uint64_t to_bytes(bytes amount) { return static_cast<std::uint64_t>(std::llround(std::min(amount, beyond_any_gpu))); }
  static constexpr bytes beyond_any_gpu = 9007199254740992.0;  // 2^53
  struct literal_part {
    const char* name;
    bytes amount;
  };
  struct named_part {
    std::string name;
    bytes amount;
  };
  const char* at_;
  std::vector<literal_part> parts_;
  std::vector<named_part> named_;
};

const instant& largest(const std::vector<instant>& instants) {
  return *std::max_element(instants.begin(), instants.end(),
                           [](const instant& a, const instant& b) { return a.total() < b.total(); });
}

// What stays on the GPU in a phase, as components and as a list for the report.
struct residency {
  std::vector<std::pair<const char*, bytes>> parts;
  std::vector<std::pair<std::string, bytes>> buffers;
  std::vector<std::string> names;

  void add(const char* name, bytes amount) {
    if (amount <= 0) return;
    parts.emplace_back(name, amount);
    names.emplace_back(name);
  }
  instant start(const char* at) const {
    instant moment(at);
    for (const auto& [name, amount] : parts) moment.add(name, amount);
    moment.add_all(buffers);
    return moment;
  }
};

void add_buffers(residency& resident, const plan_knobs& knobs, unsigned phase_bit) {
  for (const resident_buffer& buffer : knobs.buffers) {
    if ((buffer.phases & phase_bit) == 0) continue;
    resident.buffers.emplace_back(buffer.name, static_cast<bytes>(buffer_bytes(buffer, knobs)));
    resident.names.push_back("buffer " + buffer.name);
  }
}

struct shapes {
  bytes rows = 0;        ///< sequences generated together
  bytes prompt = 0;
  bytes new_tokens = 0;
};

// Hugging Face generate with a DynamicCache (or a preallocated cache): the prefill's largest
// layer moment, the last sampling step, and the last cache growth (torch.cat per layer).
std::vector<instant> generation_instants(const model_architecture& model, const plan_knobs& knobs,
                                         const residency& resident, const plan_detail::state_terms& state, shapes shape) {
  const auto vocab = static_cast<bytes>(model.vocab_size);
  const bytes kv_token = plan_detail::kv_per_token(model);
  const bytes prompt_tokens = shape.rows * shape.prompt;
  const bytes final_length = shape.prompt + shape.new_tokens;
  const bool prealloc = knobs.kv_cache == kv_cache_kind::prealloc;
  const bytes prealloc_rows = static_cast<bytes>(kv_cache_rows(knobs));
  const bytes prealloc_len = knobs.kv_len != 0 ? static_cast<bytes>(knobs.kv_len) : final_length;
  const bytes cache_at_prefill = prealloc ? prealloc_rows * prealloc_len * kv_token : prompt_tokens * kv_token;
  // The last token sampled is never fed back: the cache ends one position short.
  const bytes cache_at_end = prealloc ? cache_at_prefill : shape.rows * (final_length - 1) * kv_token;
  const char* cache_name = prealloc ? "KV cache (preallocated)" : "KV cache";
  // input_ids, attention_mask and position ids (int64) for each position.
  const bytes ids_per_position = 24;
  // Under autocast (fp32 weights) each matmul weight's bf16 copy is cached until the generation's
  // autocast region ends: the layers' by the prefill's last layer, the head's from its first call.
  const bytes head_copy = state.autocast_copies > 0 ? 2 * static_cast<bytes>(model.vocab_size * model.hidden_size) : 0;
  // Under inference_mode none is kept: only the head's, alive while its matmul runs (a snapshot of
  // nanochat's Engine.generate: the cache, the head's copy and the sampling buffers).
  const bytes kept_copies = knobs.generate_inference_mode ? 0 : state.autocast_copies;
  const bytes copies_at_sampling = knobs.generate_inference_mode ? head_copy : state.autocast_copies;

  std::vector<instant> instants;
  instants.push_back(resident.start("prefill, last layer's MLP")
                         .add("unsharded layers in flight", state.weights_in_flight)
                         .add("autocast bf16 weight copies", kept_copies - (kept_copies > 0 ? head_copy : 0))
                         .add(cache_name, cache_at_prefill)
                         .add("prefill activations", prompt_tokens * plan_detail::no_grad_layer_per_token(model, knobs))
                         .add("positions, masks and rotary tables",
                              prompt_tokens * (ids_per_position + plan_detail::rotary_per_position(model))));
  // Last-token logits (bf16), their fp32 copy, top-k's mask and filtered scores, softmax's
  // probabilities, and multinomial's draw: 19 bytes per row and vocabulary entry.
  instants.push_back(resident.start("last sampling step")
                         .add("unsharded layers in flight", state.weights_in_flight)
                         .add(knobs.generate_inference_mode ? "head weight's bf16 copy (per call)" : "autocast bf16 weight copies",
                              copies_at_sampling)
                         .add(cache_name, cache_at_end)
                         .add("last-token logits and sampling", 19 * shape.rows * vocab)
                         .add("token ids and attention mask", shape.rows * final_length * ids_per_position));
  if (model.num_experts > 0) {
    // A decode forward of an MoE model: batched_mm's gathered expert weights, beside the previous
    // step's fp32 logits, filtered scores and probabilities (still bound in generate's loop).
    instants.push_back(resident.start("last decode step's experts (batched_mm)")
                           .add("unsharded layers in flight", state.weights_in_flight)
                           .add(cache_name, cache_at_end)
                           .add("expert weights gathered per routed token", shape.rows * plan_detail::gathered_expert_weights_per_row(model))
                           .add("previous step's sampling buffers", 12 * shape.rows * vocab)
                           .add("token ids and attention mask", shape.rows * final_length * ids_per_position));
  }
  if (!prealloc) {
    const bytes one_layer_keys = shape.rows * (final_length - 2) * kv_token / (2 * static_cast<bytes>(model.num_layers));
    instants.push_back(resident.start("last cache growth (torch.cat)")
                           .add("unsharded layers in flight", state.weights_in_flight)
                           .add("autocast bf16 weight copies", kept_copies)
                           .add(cache_name, cache_at_end)
                           .add("cache growth copy (one layer's keys)", one_layer_keys)
                           .add("token ids and attention mask", shape.rows * final_length * ids_per_position));
  }
  return instants;
}

struct micro_batch_shape {
  bytes rows = 0;
  bytes seq = 0;
  bytes logprob_per_row = 0;
  bool accumulating = false;  ///< gradients of earlier micro-batches are already there
};

// Forward with gradients, log-prob head, backward, for one micro-batch.
std::vector<instant> update_instants(const model_architecture& model, const plan_knobs& knobs, const residency& resident,
                                     const plan_detail::state_terms& state, micro_batch_shape shape) {
  const bytes tokens = shape.rows * shape.seq;
  const bytes logprob_tokens = shape.rows * shape.logprob_per_row;
  const auto layers = static_cast<bytes>(model.num_layers);
  const auto h = static_cast<bytes>(model.hidden_size);
  const bytes layer_input = plan_detail::residual_per_token(knobs) * h * tokens;
  const bytes layer_saved = plan_detail::saved_per_token_per_layer(model, knobs) * tokens;
  const bytes outside_saved = plan_detail::saved_per_token_outside_layers(model, knobs) * tokens;
  const bytes rotary = plan_detail::rotary_per_position(model) * shape.seq;
  const bytes earlier_gradients = shape.accumulating ? state.gradients : 0;
  // Gradient of the hidden states and of the residual stream flowing back.
  const bytes gradient_flow = 2 * 2 * h * tokens;

  auto base = [&](const char* at) {
    instant moment = resident.start(at);
    moment.add("gradients (earlier micro-batches)", earlier_gradients)
        .add("autocast bf16 weight copies", state.autocast_copies)
        .add("unsharded layers in flight", state.weights_in_flight);
    return moment;
  };

  std::vector<instant> instants;
  const plan_detail::head_instant head = plan_detail::head_with_grad(model, knobs, tokens, logprob_tokens);
  instant at_head = base(head.at);
  if (knobs.grad_ckpt) {
    at_head.add("checkpointed layer inputs", layer_input * layers);
  } else {
    at_head.add("activations", layer_saved * layers);
  }
  at_head.add("final norm and head input", outside_saved).add("rotary tables", rotary);
  for (int i = 0; i < 3; ++i) at_head.add(head.names[i], head.parts[i]);
  instants.push_back(std::move(at_head));

  // The head's backward: the logits' bf16 gradient is the matmul's input while the head's weight
  // gradient is made, every layer's activations still held. A tied head's gradient then waits for
  // the embedding's; accumulating, an untied one is a fresh tensor before it is added to .grad.
  if (knobs.lora_rank == 0 && knobs.logprob != logprob_impl::fused) {
    const bytes head_weight_gradient = model.tied_embeddings ? state.head_gradient
                                                             : static_cast<bytes>(model.vocab_size * model.hidden_size) * plan_detail::head_bytes_per_param(knobs);
    instant at_head_backward = base("head backward");
    at_head_backward.add(knobs.grad_ckpt ? "checkpointed layer inputs" : "activations", knobs.grad_ckpt ? layer_input * layers : layer_saved * layers)
        .add("final norm and head input", outside_saved)
        .add("gradient of logits (bf16)", 2 * tokens * static_cast<bytes>(model.vocab_size))
        .add("head weight gradient", head_weight_gradient);
    instants.push_back(std::move(at_head_backward));
  }

  // Later in backward the head's buffers are gone and gradients take their place.
  const bytes gradients_so_far = shape.accumulating ? state.gradients : state.gradients - state.layer_gradient;
  if (knobs.grad_ckpt) {
    instants.push_back(base("recompute of the last layer")
                           .add("checkpointed layer inputs", layer_input * layers)
                           .add("recomputed layer activations", layer_saved)
                           .add("gradient flow", gradient_flow)
                           .add("head gradient", shape.accumulating ? 0 : state.head_gradient));
  }
  instants.push_back(base("backward of the first layer")
                         .add("gradients", shape.accumulating ? 0 : gradients_so_far)
                         .add(knobs.grad_ckpt ? "recomputed layer activations" : "first layer activations", layer_saved)
                         .add("checkpointed layer inputs", knobs.grad_ckpt ? layer_input : 0)
                         .add("gradient flow", gradient_flow)
                         .add("gradients in flight", state.gradients_in_flight));
  instants.push_back(base("end of backward")
                         .add("gradients", shape.accumulating ? 0 : state.gradients)
                         .add("embedding gradient summed into the tied head", state.head_gradient)
                         .add("gradients in flight", state.gradients_in_flight));
  return instants;
}

// A forward without gradients for log-probs (reference model, old policy).
std::vector<instant> no_grad_logprob_instants(const model_architecture& model, const plan_knobs& knobs,
                                              const residency& resident, const plan_detail::state_terms& state,
                                              micro_batch_shape shape) {
  const bytes tokens = shape.rows * shape.seq;
  std::vector<instant> instants;
  // model(seq) builds a DynamicCache too (use_cache defaults to True): k and v of every layer.
  instants.push_back(resident.start("last layer's MLP")
                         .add("gradients (earlier micro-batches)", shape.accumulating ? state.gradients : 0)
                         .add("unsharded layers in flight", state.weights_in_flight)
                         .add("KV cache of the forward", tokens * plan_detail::kv_per_token(model))
                         .add("layer activations", tokens * plan_detail::no_grad_layer_per_token(model, knobs)));
  const plan_detail::head_instant head = plan_detail::head_no_grad(model, knobs, tokens, shape.rows * shape.logprob_per_row);
  instant at_head = resident.start(head.at);
  at_head.add("gradients (earlier micro-batches)", shape.accumulating ? state.gradients : 0)
      .add("unsharded layers in flight", state.weights_in_flight);
  for (int i = 0; i < 3; ++i) at_head.add(head.names[i], head.parts[i]);
  instants.push_back(std::move(at_head));
  return instants;
}

// The engine's reservation while it generates: its weights, its KV pool (all it can take), its
// activation workspace and the graph pool, instead of transformers' generate.
instant engine_rollout_instant(const residency& resident, const engine_budget& engine) {
  instant moment = resident.start(engine.rollout == rollout_kind::vllm ? "vLLM's reservation (gpu_memory_utilization x card)"
                                                                       : "SGLang's reservation (mem_fraction_static x free at init)");
  moment.add("engine weights (its bf16 copy)", static_cast<bytes>(engine.weights_bytes))
      .add("engine KV cache pool", static_cast<bytes>(std::max<std::int64_t>(engine.kv_bytes, 0)))
      .add("engine activation workspace (estimated)", static_cast<bytes>(engine.activation_bytes))
      .add("engine CUDA graph pool (as given)", static_cast<bytes>(engine.graph_bytes));
  return moment;
}

// What the engine keeps allocated through the trainer's phases: all of it awake (sleep level 0),
// else its graph pool only.
void add_sleeping_engine(residency& resident, const plan_knobs& knobs, const engine_budget& engine) {
  if (engine.rollout == rollout_kind::hf) return;
  if (knobs.engine.sleep_level == 0) {
    resident.add("engine weights (awake, sleep level 0)", static_cast<bytes>(engine.weights_bytes));
    resident.add("engine KV cache pool (awake, sleep level 0)", static_cast<bytes>(std::max<std::int64_t>(engine.kv_bytes, 0)));
  }
  resident.add("engine CUDA graph pool (kept asleep)", static_cast<bytes>(engine.graph_bytes));
}

instant optimizer_instant(const residency& resident, const plan_detail::state_terms& state) {
  return resident.start("optimizer step").add("gradients", state.gradients).add("optimizer step temporaries", state.optimizer_step);
}

void finish(plan_result& result) {
  for (const phase_estimate& phase : result.phases) {
    if (phase.peak_bytes >= (1ull << 53)) result.out_of_range = true;
    if (phase.peak_bytes >= result.peak_bytes) {
      result.peak_bytes = phase.peak_bytes;
      result.peak_phase = phase.name;
    }
  }
}

// PyTorch gives each thread that runs matmuls a cuBLAS workspace: 32 MiB on Hopper and newer
// (CUBLAS_WORKSPACE_CONFIG :4096:8); backward runs on autograd's own thread.
constexpr std::uint64_t cublas_workspace_per_thread = 32ull << 20;

// A policy known only by its parameter count: each phase is its state and its buffers (what a
// forward of an unknown network keeps cannot be derived; give it as --buffer).
void opaque_phases(const plan_knobs& knobs, const plan_detail::state_terms& state, plan_result& result) {
  auto resident_for = [&](unsigned phase_bits) {
    residency resident;
    resident.add("weights", state.weights);
    if (knobs.phase != plan_phase::generate) resident.add("optimizer state", state.optimizer);
    resident.add("DDP gradient buckets", state.ddp_buckets);
    add_buffers(resident, knobs, phase_bits);
    return resident;
  };
  if (knobs.phase != plan_phase::train) {
    const residency rollout = resident_for(phase_rollout);
    result.phases.push_back(rollout.start("buffers").to_phase(knobs.phase == plan_phase::generate ? "generate" : "rollout", rollout.names));
    if (knobs.phase == plan_phase::generate) return;
  }
  const residency update = resident_for(knobs.phase == plan_phase::train ? phase_update | phase_optimizer : phase_update);
  result.phases.push_back(update.start("end of backward").add("gradients", state.gradients).to_phase(
      knobs.phase == plan_phase::train ? "train" : "update", update.names));
  if (knobs.phase == plan_phase::train) return;
  const residency optimizer = resident_for(phase_optimizer);
  result.phases.push_back(optimizer_instant(optimizer, state).to_phase("optimizer", optimizer.names));
}

// Each phase's peak (the body of plan_memory, before the host's view).
plan_result phases_of(const model_architecture& model, const plan_knobs& knobs) {
  const plan_detail::state_terms state = plan_detail::state_of(model, knobs);
  plan_result result;
  result.params = count_parameters(model);
  result.trainable_params = state.trainable_params;
  result.host_bytes = static_cast<std::uint64_t>(std::llround(state.host));
  result.weights_bytes = static_cast<std::uint64_t>(std::llround(state.weights));
  result.overhead.cuda_context_bytes = plan_detail::cuda_context;
  result.overhead.cublas_workspace_bytes = cublas_workspace_per_thread * (knobs.phase == plan_phase::generate ? 1 : 2);

  if (model.opaque_params > 0) {
    opaque_phases(knobs, state, result);
    finish(result);
    return result;
  }

  if (knobs.phase == plan_phase::generate && knobs.engine.rollout != rollout_kind::hf) {
    // The engine holds the weights; the trainer's process holds only the job's buffers.
    result.engine = plan_rollout_engine(model, knobs, 0);
    result.weights_bytes = result.engine.weights_bytes;
    result.host_bytes += result.engine.host_bytes;
    residency resident;
    add_buffers(resident, knobs, phase_rollout);
    result.phases.push_back(engine_rollout_instant(resident, result.engine).to_phase("generate", resident.names));
    finish(result);
    return result;
  }

  if (knobs.phase == plan_phase::generate) {
    residency resident;
    resident.add("weights", state.weights);
    resident.add("rotary tables (buffers)", plan_detail::rotary_table_bytes(model));
    add_buffers(resident, knobs, phase_rollout);
    const shapes shape{static_cast<bytes>(knobs.batch), static_cast<bytes>(knobs.prompt_len), static_cast<bytes>(knobs.new_tokens)};
    result.phases.push_back(largest(generation_instants(model, knobs, resident, state, shape)).to_phase("generate", resident.names));
    finish(result);
    return result;
  }

  if (knobs.phase == plan_phase::train) {
    residency resident;
    resident.add("weights", state.weights);
    resident.add("rotary tables (buffers)", plan_detail::rotary_table_bytes(model));
    resident.add("optimizer state", state.optimizer);
    resident.add("DDP gradient buckets", state.ddp_buckets);
    add_buffers(resident, knobs, phase_update | phase_optimizer);
    const micro_batch_shape shape{static_cast<bytes>(knobs.micro_batch), static_cast<bytes>(knobs.seq_len),
                                  static_cast<bytes>(knobs.logprob_tokens), knobs.grad_accum > 1};
    std::vector<instant> instants = update_instants(model, knobs, resident, state, shape);
    instants.push_back(optimizer_instant(resident, state));
    result.phases.push_back(largest(instants).to_phase("train", resident.names));
    finish(result);
    return result;
  }

  // grpo_step: rollout, reference log-probs, policy update by micro-batches, optimizer step.
  const bytes rows = static_cast<bytes>(knobs.prompts * knobs.group) / static_cast<bytes>(knobs.gpus);
  const bytes seq = static_cast<bytes>(knobs.prompt_len + knobs.new_tokens);
  // Only a copy adds weights: an adapter-disabled reference runs on the policy's own base weights.
  const bytes reference_weights = knobs.reference == reference_kind::copy
                                      ? static_cast<bytes>(result.params.total) * 2 / (knobs.shard == shard_kind::fsdp ? static_cast<bytes>(knobs.gpus) : 1)
                                      : 0;
  result.weights_bytes += static_cast<std::uint64_t>(std::llround(reference_weights));
  const bytes sequences = rows * seq * 8;
  const bool accumulating = rows > static_cast<bytes>(knobs.micro_batch);
  plan_detail::trainer_resident trainer{state.weights, plan_detail::rotary_table_bytes(model), reference_weights, state.optimizer,
                                       state.ddp_buckets, {}, sequences};
  for (const resident_buffer& buffer : knobs.buffers) {
    if ((buffer.phases & phase_rollout) != 0) trainer.buffers.emplace_back(buffer.name, static_cast<bytes>(buffer_bytes(buffer, knobs)));
  }
  // Colocated: the engine starts beside the trainer, which holds its weights (and DDP's buckets)
  // by then, unless the hand-off has moved them; its optimizer state comes at the first step.
  result.engine = plan_rollout_engine(model, knobs, static_cast<std::uint64_t>(std::llround(plan_detail::trainer_at_engine_init(knobs.handoff, trainer))));
  result.host_bytes += result.engine.host_bytes;
  auto resident_for = [&](unsigned phase_bit, bool with_sequences) {
    residency resident;
    resident.add("policy weights", state.weights);
    resident.add("rotary tables (buffers)", plan_detail::rotary_table_bytes(model));
    resident.add("reference weights", reference_weights);
    resident.add("optimizer state", state.optimizer);
    resident.add("DDP gradient buckets", state.ddp_buckets);
    if (with_sequences) resident.add("rollout sequences", sequences);
    if (phase_bit != phase_rollout) add_sleeping_engine(resident, knobs, result.engine);
    add_buffers(resident, knobs, phase_bit);
    return resident;
  };
  const auto generate_rows = static_cast<bytes>(generation_rows(knobs));
  const residency rollout = resident_for(phase_rollout, false);
  std::optional<plan_detail::colocated_step> colocated;
  if (knobs.handoff != handoff_kind::unmodelled && knobs.engine.rollout != rollout_kind::hf) {
    // The hand-off's transitions, the rollout among them, in step order.
    colocated = plan_detail::plan_colocated_step(knobs, trainer, result.engine);
    result.phases.insert(result.phases.end(), colocated->phases.begin(), colocated->phases.end());
    result.handoff = colocated->summary;
    result.host_bytes += result.handoff.moved_bytes;
  } else if (knobs.engine.rollout != rollout_kind::hf) {
    result.phases.push_back(engine_rollout_instant(rollout, result.engine).to_phase("rollout", rollout.names));
  } else {
    result.phases.push_back(
        largest(generation_instants(model, knobs, rollout,
                                    state, {generate_rows, static_cast<bytes>(knobs.prompt_len), static_cast<bytes>(knobs.new_tokens)}))
            .to_phase("rollout", rollout.names));
  }
  const micro_batch_shape shape{static_cast<bytes>(knobs.micro_batch), seq, static_cast<bytes>(knobs.new_tokens), accumulating};
  if (knobs.old_logprobs) {
    // All micro-batches are scored before the update starts: no gradients yet.
    micro_batch_shape before_update = shape;
    before_update.accumulating = false;
    const residency old = resident_for(phase_old_logprobs, true);
    result.phases.push_back(largest(no_grad_logprob_instants(model, knobs, old, state, before_update)).to_phase("old-logprobs", old.names));
  }
  if (knobs.reference != reference_kind::none) {
    // Either reference scores without adapters: a copy has none, and peft's disable_adapter()
    // makes each LoRA layer call its base layer alone, so no fp32 input casts or lora_A outputs.
    plan_knobs without_adapters = knobs;
    without_adapters.lora_rank = 0;
    without_adapters.lora_targets.clear();
    const residency reference = resident_for(phase_reference, true);
    result.phases.push_back(
        largest(no_grad_logprob_instants(model, without_adapters, reference, state, shape)).to_phase("reference", reference.names));
  }
  const residency update = resident_for(phase_update, true);
  result.phases.push_back(largest(update_instants(model, knobs, update, state, shape)).to_phase("update", update.names));
  const residency optimizer = resident_for(phase_optimizer, true);
  result.phases.push_back(optimizer_instant(optimizer, state).to_phase("optimizer", optimizer.names));
  finish(result);
  if (colocated) plan_detail::compare_wake_orders(result, *colocated);
  return result;
}

}  // namespace

plan_result plan_memory(const model_architecture& model, const plan_knobs& knobs) {
  plan_result result = phases_of(model, knobs);
  if (knobs.gpus_per_node != 0) {
    result.host = plan_detail::host_memory_of(knobs, plan_detail::state_of(model, knobs), result.engine,
                                              static_cast<bytes>(result.handoff.moved_bytes));
  }
  return result;
}

}  // namespace rlmem
