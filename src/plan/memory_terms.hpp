// SPDX-License-Identifier: MIT
#pragma once
// What the default code path allocates, term by term: bytes each tensor takes, derived from the
// architecture and from which tensors autograd, transformers and peft keep (see docs/plan.md).

#include <rlmem/plan/plan.hpp>

#include <cstdint>

namespace rlmem::plan_detail {

/// Byte counts are computed in double: every realistic figure is an integer below 2^53, so the
/// sums are exact, and absurd knobs cannot overflow.
using bytes = double;

/// Persistent per-GPU state, after sharding and offload.
struct state_terms {
  bytes weights = 0;            ///< the policy's weights (LoRA: frozen base + adapters)
  bytes gradients = 0;          ///< all gradients, once backward has run
  bytes optimizer = 0;          ///< optimizer state
  bytes optimizer_step = 0;     ///< transient of one optimizer step (foreach AdamW's sqrt of v)
  bytes head_gradient = 0;      ///< the tied embedding's second gradient, summed at the end of backward
  bytes layer_gradient = 0;     ///< one decoder layer's gradients
  bytes autocast_copies = 0;    ///< fp32 master: autocast's bf16 copies of the matmul weights
  bytes weights_in_flight = 0;  ///< fsdp: unsharded root and two layers (current, prefetched)
  bytes gradients_in_flight = 0;  ///< zero2/fsdp: one layer's unsharded gradients before reduce-scatter
  bytes ddp_buckets = 0;        ///< replicated data parallel: DDP's flat gradient buckets, from construction
  bytes host = 0;               ///< offloaded to host memory
  std::uint64_t trainable_params = 0;
};

/// Device memory in use outside the caching allocator once torch 2.11 (cu130) has initialised CUDA
/// and run a bf16 matmul on an H200 (total - free - reserved; tools/planner/measure_more.py).
inline constexpr std::uint64_t cuda_context = 718077952;

state_terms state_of(const model_architecture& model, const plan_knobs& knobs);

/// Bytes autograd keeps per token for one decoder layer through a forward with gradients.
bytes saved_per_token_per_layer(const model_architecture& model, const plan_knobs& knobs);
/// Bytes kept per token outside the layers (final norm, the head's input, input ids).
bytes saved_per_token_outside_layers(const model_architecture& model, const plan_knobs& knobs);
/// Live bytes per token at the largest moment of one layer in a forward without gradients
/// (embedding output, layer input, residual, normalised input, MLP intermediates).
bytes no_grad_layer_per_token(const model_architecture& model, const plan_knobs& knobs);
/// MoE decode: expert weights batched_mm gathers for one row's routed copies (0 when dense).
bytes gathered_expert_weights_per_row(const model_architecture& model);
/// Bytes per element of the residual stream (fp32 under fp32 master weights): checkpointed inputs.
bytes residual_per_token(const plan_knobs& knobs);
/// Bytes per parameter of the output head (nanochat: fp32 head beside a bf16 embedding).
bytes head_bytes_per_param(const plan_knobs& knobs);
/// KV cache bytes per token (all layers, k and v, bf16).
bytes kv_per_token(const model_architecture& model);
/// Rotary cos and sin (bf16) per position of a pass (0 when the model keeps them as buffers).
bytes rotary_per_position(const model_architecture& model);
/// Rotary tables a model keeps as buffers (nanochat: 10 x sequence_len positions).
bytes rotary_table_bytes(const model_architecture& model);

/// The log-prob head's instants for a micro-batch of `tokens` positions, `logprob_tokens` of which
/// are scored: the largest of them as parts (name, bytes).
struct head_instant {
  const char* at = "";
  const char* names[3] = {"", "", ""};
  bytes parts[3] = {0, 0, 0};
  bytes total() const { return parts[0] + parts[1] + parts[2]; }
};
head_instant head_with_grad(const model_architecture& model, const plan_knobs& knobs, bytes tokens, bytes logprob_tokens);
head_instant head_no_grad(const model_architecture& model, const plan_knobs& knobs, bytes tokens, bytes logprob_tokens);

}  // namespace rlmem::plan_detail
