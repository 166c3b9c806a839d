// SPDX-License-Identifier: MIT
// The bytes of each tensor the default code path allocates. Each term names the line of code that
// allocates it; docs/plan.md shows them checked against snapshots recorded on an H200.

#include "memory_terms.hpp"

#include <algorithm>
#include <array>
#include <string_view>

namespace rlmem::plan_detail {

namespace {

struct linear_shape {
  std::string_view name;
  bytes in = 0;
  bytes out = 0;
  bytes copies = 1;        ///< experts hold `copies` of it
  bytes token_share = 1;   ///< share of the tokens that pass through each copy
};

// The linears of one decoder layer, as peft's target_modules name them.
std::vector<linear_shape> layer_linears(const model_architecture& model) {
  const auto h = static_cast<bytes>(model.hidden_size);
  const auto q = static_cast<bytes>(model.num_heads * model.head_dim);
  const auto kv = static_cast<bytes>(model.num_kv_heads * model.head_dim);
  std::vector<linear_shape> linears = {{"q_proj", h, q}, {"k_proj", h, kv}, {"v_proj", h, kv}, {"o_proj", q, h}};
  if (model.num_experts == 0 && model.mlp != mlp_kind::gated) {
    const auto i = static_cast<bytes>(model.intermediate_size);
    linears.insert(linears.end(), {{"up_proj", h, i}, {"down_proj", i, h}});
  } else if (model.num_experts == 0) {
    const auto i = static_cast<bytes>(model.intermediate_size);
    linears.insert(linears.end(), {{"gate_proj", h, i}, {"up_proj", h, i}, {"down_proj", i, h}});
  } else {
    const auto i = static_cast<bytes>(model.expert_intermediate_size);
    const auto experts = static_cast<bytes>(model.num_experts);
    const bytes share = static_cast<bytes>(model.experts_per_token) / experts;
    linears.insert(linears.end(), {{"gate_proj", h, i, experts, share}, {"up_proj", h, i, experts, share},
                                   {"down_proj", i, h, experts, share}});
    if (model.shared_expert_intermediate_size > 0) {
      const auto s = static_cast<bytes>(model.shared_expert_intermediate_size);
      linears.insert(linears.end(), {{"gate_proj", h, s}, {"up_proj", h, s}, {"down_proj", s, h}});
    }
  }
  return linears;
}

bool is_lora_target(const plan_knobs& knobs, std::string_view name) {
  if (knobs.lora_rank == 0) return false;
  if (knobs.lora_targets.empty()) return true;
  return std::find(knobs.lora_targets.begin(), knobs.lora_targets.end(), name) != knobs.lora_targets.end();
}

// peft keeps adapters in fp32 for bf16 bases (get_peft_model's autocast_adapter_dtype=True).
constexpr bytes adapter_bytes = 4;

bytes weight_bytes_per_param(const plan_knobs& knobs) { return knobs.precision == precision_kind::bf16 ? 2 : 4; }

// nanochat keeps its embedding in bf16 beside fp32 matrices (init_weights casts wte on CUDA).
bytes embedding_bytes_per_param(const plan_knobs& knobs) { return knobs.precision == precision_kind::nanochat ? 2 : weight_bytes_per_param(knobs); }

// nanochat's layer under bf16 autocast, per token, as a snapshot of its training step shows it
// (tools/planner/measure_issue12.py): F.rms_norm runs fused, keeping its input and an fp32
// rstd per row and returning bf16; rotary's output feeds q and k's norms; SDPA keeps q, k, v, its
// output and fp32 logsumexp; ReLU^2 keeps relu's bf16 output, autocast's fp32 copy of it (pow is an
// fp32 op under autocast) and the bf16 cast c_proj takes.
bytes nanochat_saved_per_token_per_layer(const model_architecture& model) {
  const auto h = static_cast<bytes>(model.hidden_size);
  const auto q = static_cast<bytes>(model.num_heads * model.head_dim);
  const auto kv = static_cast<bytes>(model.num_kv_heads * model.head_dim);
  const auto heads = static_cast<bytes>(model.num_heads);
  const auto kv_heads = static_cast<bytes>(model.num_kv_heads);
  const auto i = static_cast<bytes>(model.intermediate_size);
  const bytes norms = 2 * h /* layer input */ + 2 * h + 4 /* attention norm */ + 2 * h /* residual */ + 2 * h + 4 /* MLP norm */;
  const bytes attention = 2 * q + 2 * q + 4 * heads /* q rotated, normed */ + 2 * kv + 2 * kv + 4 * kv_heads /* k */ + 2 * kv /* v */ +
                          2 * q + 4 * heads /* output, logsumexp */;
  return norms + attention + (model.mlp == mlp_kind::relu2 ? 8 * i : 4 * i);
}

}  // namespace

bytes head_bytes_per_param(const plan_knobs& knobs) { return weight_bytes_per_param(knobs); }

bytes kv_per_token(const model_architecture& model) {
  return 2.0 * 2.0 * static_cast<bytes>(model.num_layers * model.num_kv_heads * model.head_dim);
}

bytes rotary_per_position(const model_architecture& model) {
  // A model with rotary tables as buffers slices them, one with learned positions has none.
  return model.rotary_positions > 0 || model.learned_positions > 0 ? 0 : 2.0 * 2.0 * static_cast<bytes>(model.head_dim);
}

bytes rotary_table_bytes(const model_architecture& model) {
  // cos and sin, bf16, head_dim / 2 each per position.
  return static_cast<bytes>(model.rotary_positions) * static_cast<bytes>(model.head_dim) * 2;
}

namespace {

// GPT-2 and GPT-NeoX in bf16, per token, as snapshots of their training steps show them
// (tools/planner/measure_issue12.py ungated): each LayerNorm keeps its bf16 output and fp32 mean
// and rstd; the cache model(seq) builds copies k and v; SDPA keeps its output and logsumexp.
// GPT-2: c_attn's output (q, k, v are views of it), the residual after attention, the dropout
// masks, c_fc's output and NewGELU's four tanh-formula tensors. GPT-NeoX: q after rotary, the
// attention output made contiguous, dense_h_to_4h's output and GELU's.
bytes ungated_family_saved_per_token_per_layer(const model_architecture& model) {
  const auto h = static_cast<bytes>(model.hidden_size);
  const auto i = static_cast<bytes>(model.intermediate_size);
  const auto heads = static_cast<bytes>(model.num_heads);
  const bytes layer_norms = 2 * (2 * h + 8);
  const bytes attention = 2 * 2 * h /* cache's k, v */ + 2 * h + 4 * heads /* SDPA output, logsumexp */;
  const bytes layer_output = 2 * h;
  if (model.model_type == "gpt2") {
    return layer_norms + 6 * h /* c_attn */ + attention + 2 * h /* residual */ + (model.residual_dropout ? 2 * h : 0) + 2 * i + 8 * i +
           layer_output;
  }
  return layer_norms + 2 * h /* q rotated */ + attention + 2 * h /* contiguous */ + 2 * i + 2 * i + layer_output;
}

bool ungated_family(const model_architecture& model) { return model.model_type == "gpt2" || model.model_type == "gpt_neox"; }

}  // namespace

bytes saved_per_token_per_layer(const model_architecture& model, const plan_knobs& knobs) {
  if (knobs.precision == precision_kind::nanochat) return nanochat_saved_per_token_per_layer(model);
  if (ungated_family(model)) return ungated_family_saved_per_token_per_layer(model);
  const auto h = static_cast<bytes>(model.hidden_size);
  const auto q = static_cast<bytes>(model.num_heads * model.head_dim);
  const auto kv = static_cast<bytes>(model.num_kv_heads * model.head_dim);
  const auto heads = static_cast<bytes>(model.num_heads);
  const auto kv_heads = static_cast<bytes>(model.num_kv_heads);
  const bool lora = knobs.lora_rank > 0;
  const bool gemma = model.model_type.starts_with("gemma");
  // RMSNorm upcasts to fp32: pow and mul keep the fp32 input, rsqrt its result; the weight's mul
  // keeps the bf16 normalised input only when the weight trains (Gemma's norm keeps it in fp32).
  // fp32 master weights: the residual stream is fp32 and norms return fp32, so autocast casts each
  // linear's input to bf16 once per linear (q, k and v each), and those copies are what is kept.
  const bool fp32 = knobs.precision == precision_kind::fp32_master && !lora;
  const bytes norm = 4 * h + 4 + (lora ? 0 : (gemma || fp32 ? 4 * h : 2 * h));
  bytes saved = static_cast<bytes>(model.norms_per_layer) * norm;
  // Attention: q after rotary, k and v (the cache's tensors), the output and its fp32 logsumexp,
  // all kept by SDPA's flash kernel; the output is also o_proj's input.
  saved += 2 * q + 2 * 2 * kv + 2 * q + 4 * heads;
  if (model.qk_norm) saved += 4 * q + 4 * heads + 4 * kv + 4 * kv_heads + (lora ? 0 : 2 * q + 2 * kv);
  // A frozen linear keeps nothing (autograd saves the input only for the weight's gradient).
  if (fp32) {
    saved += 3 * 2 * h /* q, k, v input casts */ + 2 * 2 * h /* gate, up input casts */;
  } else if (!lora) {
    saved += 2 * h /* q, k, v input */ + 2 * h /* gate, up input */;
  }
  const auto mlp = [&](bytes intermediate) {
    // Gated: gate output (SiLU's input), SiLU output, up output, and their product (down's input).
    // Plain: up's output (the activation's input) and the activation's output (down's input).
    if (model.mlp != mlp_kind::gated) return (lora ? 2 : 4) * intermediate;
    return (lora ? 6 : 8) * intermediate;
  };
  if (model.num_experts == 0) {
    saved += mlp(static_cast<bytes>(model.intermediate_size));
  } else {
    const auto per_token = static_cast<bytes>(model.experts_per_token);
    const auto experts = static_cast<bytes>(model.num_experts);
    // Router logits (bf16) and routing weights (fp32); each routed copy of the token gathered,
    // through its expert, and weighted.
    saved += 6 * experts + per_token * (2 * h + mlp(static_cast<bytes>(model.expert_intermediate_size)) + 2 * h);
    if (model.shared_expert_intermediate_size > 0) saved += mlp(static_cast<bytes>(model.shared_expert_intermediate_size));
  }
  if (lora) {
    // peft casts each target's input to the adapter's fp32 (one copy per target, kept by lora_A)
    // and lora_B keeps lora_A's fp32 output.
    const auto rank = static_cast<bytes>(knobs.lora_rank);
    for (const linear_shape& linear : layer_linears(model)) {
      if (is_lora_target(knobs, linear.name)) saved += linear.copies * linear.token_share * (4 * linear.in + 4 * rank);
    }
  }
  return saved;
}

bytes saved_per_token_outside_layers(const model_architecture& model, const plan_knobs& knobs) {
  const auto h = static_cast<bytes>(model.hidden_size);
  const bool lora = knobs.lora_rank > 0;
  // nanochat: the embedding's output and its norm's rstd, the last layer's output, the final
  // norm's rstd and bf16 output (the head's input), int64 input ids.
  if (knobs.precision == precision_kind::nanochat) return 2 * h + 4 + 2 * h + 4 + 2 * h + 8;
  // GPT-2 and GPT-NeoX: the first layer's input (GPT-2: embeddings and positions summed, and its
  // dropout mask), the final LayerNorm's output, mean and rstd, ids (and GPT-2's position ids).
  if (ungated_family(model)) return model.model_type == "gpt2" ? 2 * h + (model.residual_dropout ? h : 0) + 2 * h + 8 + 16 : 2 * h + 2 * h + 8 + 8;
  // Final norm as in the layers; the head keeps its input when it trains; int64 input ids.
  if (knobs.precision == precision_kind::fp32_master && !lora) return 4 * h + 4 + 4 * h + 2 * h + 8;
  return 4 * h + 4 + (lora ? 0 : 2 * h + 2 * h) + 8;
}

bytes residual_per_token(const plan_knobs& knobs) {
  // nanochat's stream starts at its bf16 embedding and stays bf16 under autocast.
  return knobs.precision == precision_kind::fp32_master && knobs.lora_rank == 0 ? 4 : 2;
}

bytes no_grad_layer_per_token(const model_architecture& model, const plan_knobs& knobs) {
  const auto h = static_cast<bytes>(model.hidden_size);
  // The model's inputs_embeds, the layer's input (held by the caller), the residual after
  // attention and the normalised MLP input, then SiLU(gate), up and their product together.
  const bytes streams = 8 * h;
  if (model.num_experts == 0 && is_lora_target(knobs, "up_proj")) {
    // peft's up_proj beside SiLU(gate): the base output, the input cast to fp32, lora_B's scaled
    // fp32 output and the fp32 sum (derived from peft's forward, not measured).
    const auto i = static_cast<bytes>(model.intermediate_size);
    return streams + 2 * i + 2 * i + 4 * h + 4 * i + 4 * i;
  }
  if (model.num_experts == 0 && model.mlp == mlp_kind::relu2 && knobs.precision == precision_kind::nanochat) {
    // relu's bf16 output, autocast's fp32 copy of it and pow's fp32 output together.
    return streams + 10 * static_cast<bytes>(model.intermediate_size);
  }
  // GPT-2: its forward also holds the token and position embeddings; NewGELU's tanh formula keeps
  // c_fc's output, half of it and two temporaries at once.
  if (model.model_type == "gpt2") return streams + 4 * h + 8 * static_cast<bytes>(model.intermediate_size);
  // A plain MLP: up's output beside the activation's (then the activation's beside down's input).
  if (model.num_experts == 0 && model.mlp != mlp_kind::gated) return streams + 4 * static_cast<bytes>(model.intermediate_size);
  if (model.num_experts == 0) return streams + 6 * static_cast<bytes>(model.intermediate_size);
  // transformers' grouped_mm experts: at the routing weights' multiply, four [routed copies,
  // hidden] tensors (gathered inputs, down projection before and after masking, weighted), with
  // the router's bf16 logits and fp32 probabilities.
  bytes live = streams + 6 * static_cast<bytes>(model.num_experts) + static_cast<bytes>(model.experts_per_token) * 8 * h;
  if (model.shared_expert_intermediate_size > 0) live += 6 * static_cast<bytes>(model.shared_expert_intermediate_size);
  return live;
}

bytes gathered_expert_weights_per_row(const model_architecture& model) {
  if (model.num_experts == 0) return 0;
  // batched_mm gathers gate_up and down weights for every routed copy of a token.
  return static_cast<bytes>(model.experts_per_token) * 3 * static_cast<bytes>(model.hidden_size) *
         static_cast<bytes>(model.expert_intermediate_size) * 2;
}

namespace {

bytes chunk_rows(const plan_knobs& knobs, bytes logprob_tokens) {
  return std::min(static_cast<bytes>(knobs.logprob_chunk), logprob_tokens);
}

bytes softcap_bytes(const plan_knobs& knobs) { return knobs.logprob == logprob_impl::softcap_fp32 ? 4 : 2; }

head_instant larger(const head_instant& a, const head_instant& b) { return b.total() > a.total() ? b : a; }

}  // namespace

head_instant head_with_grad(const model_architecture& model, const plan_knobs& knobs, bytes tokens, bytes logprob_tokens) {
  const auto vocab = static_cast<bytes>(model.vocab_size);
  const auto h = static_cast<bytes>(model.hidden_size);
  switch (knobs.logprob) {
    case logprob_impl::full: {
      // model(seq).logits is bf16 for every position; the response rows are upcast to fp32 while
      // it is alive; log_softmax's backward holds its saved output, the incoming gradient and its result.
      const head_instant forward{"logits upcast", {"logits (bf16)", "response logits (fp32)", ""},
                                 {2 * tokens * vocab, 4 * logprob_tokens * vocab, 0}};
      const head_instant backward{"log_softmax backward",
                                  {"log-probs (fp32, saved)", "gradient of log-probs", "gradient of logits (fp32)"},
                                  {4 * logprob_tokens * vocab, 4 * logprob_tokens * vocab, 4 * logprob_tokens * vocab}};
      const head_instant slice{"logits slice backward", {"gradient of response logits (bf16)", "gradient of logits (bf16)", ""},
                               {2 * logprob_tokens * vocab, 2 * tokens * vocab, 0}};
      return larger(larger(forward, backward), slice);
    }
    case logprob_impl::chunked:
      return {"chunked log-softmax", {"logits (bf16; gradient written in place)", "chunk log-softmax (fp32)", ""},
              {2 * tokens * vocab, 8 * chunk_rows(knobs, logprob_tokens) * vocab, 0}};
    case logprob_impl::fused:
      return {"fused head chunk", {"head chunk (logits, fp32, gradient)", "gradient of hidden states", "head weight gradient (fp32)"},
              {10 * chunk_rows(knobs, logprob_tokens) * vocab, 2 * tokens * h, knobs.lora_rank > 0 ? 0 : 4 * vocab * h}};
    case logprob_impl::softcap:
    case logprob_impl::softcap_fp32:
      // Every position, whatever is scored (ignored targets only zero their loss): at the start
      // of backward tanh's saved output, log_softmax's saved fp32 output, nll_loss's dense fp32
      // gradient and log_softmax's backward output are alive together (a snapshot of the step:
      // 14 bytes per position and vocabulary entry, 16 with the fp32 softcap).
      return {"cross-entropy backward",
              {"softcapped logits (saved)", "log-probs (fp32, saved)", "gradients of log-probs and logits (fp32)"},
              {softcap_bytes(knobs) * tokens * vocab, 4 * tokens * vocab, 8 * tokens * vocab}};
  }
  return {};
}

head_instant head_no_grad(const model_architecture& model, const plan_knobs& knobs, bytes tokens, bytes logprob_tokens) {
  const auto vocab = static_cast<bytes>(model.vocab_size);
  switch (knobs.logprob) {
    case logprob_impl::full: {
      const head_instant upcast{"logits upcast", {"logits (bf16)", "response logits (fp32)", ""},
                                {2 * tokens * vocab, 4 * logprob_tokens * vocab, 0}};
      const head_instant softmax{"log_softmax", {"response logits (fp32)", "log-probs (fp32)", ""},
                                 {4 * logprob_tokens * vocab, 4 * logprob_tokens * vocab, 0}};
      return larger(upcast, softmax);
    }
    case logprob_impl::chunked:
      return {"chunked log-softmax", {"logits (bf16)", "chunk log-softmax (fp32)", ""},
              {2 * tokens * vocab, 8 * chunk_rows(knobs, logprob_tokens) * vocab, 0}};
    case logprob_impl::fused:
      return {"fused head chunk", {"head chunk (logits, fp32)", "", ""}, {6 * chunk_rows(knobs, logprob_tokens) * vocab, 0, 0}};
    case logprob_impl::softcap:
      // The fp32 copy and log_softmax's output (the bf16 softcap's temporaries are gone by then).
      return {"cross-entropy", {"logits (fp32)", "log-probs (fp32)", ""}, {4 * tokens * vocab, 4 * tokens * vocab, 0}};
    case logprob_impl::softcap_fp32:
      // The fp32 copy, tanh's output and the softcap's product, while the statement runs.
      return {"softcap", {"logits (fp32)", "tanh (fp32)", "softcapped logits (fp32)"},
              {4 * tokens * vocab, 4 * tokens * vocab, 4 * tokens * vocab}};
  }
  return {};
}

namespace {

// Muon orthogonalises one matrix at a time (zeropower_via_newtonschulz5 in bf16): at its largest
// moment X, B @ X, a * X and the new X (m x n each) beside A and B (k x k, k the smaller side).
bytes newton_schulz_transient(bytes m, bytes n) {
  const bytes k = std::min(m, n);
  return 2 * (4 * m * n + 2 * k * k);
}

// The decoder layer's 2-D matrices that Muon takes (every linear's weight, MoE's router).
bytes layer_matrix_params(const model_architecture& model) {
  bytes matrices = 0;
  for (const linear_shape& linear : layer_linears(model)) matrices += linear.copies * linear.in * linear.out;
  return matrices + static_cast<bytes>(model.hidden_size * model.num_experts);
}

bytes largest_layer_matrix_transient(const model_architecture& model) {
  bytes largest = 0;
  for (const linear_shape& linear : layer_linears(model)) largest = std::max(largest, newton_schulz_transient(linear.in, linear.out));
  return largest;
}

}  // namespace

state_terms state_of(const model_architecture& model, const plan_knobs& knobs) {
  const parameter_count params = count_parameters(model);
  const auto total = static_cast<bytes>(params.total);
  const auto embedding = static_cast<bytes>(params.embedding);
  const bytes weight_bytes = weight_bytes_per_param(knobs);
  // Every parameter at its dtype: nanochat's embedding is bf16 beside fp32 matrices.
  const bytes all_weights = (total - embedding) * weight_bytes + embedding * embedding_bytes_per_param(knobs);
  state_terms state;
  bytes layer_trainable = 0;
  if (knobs.lora_rank > 0) {
    const auto rank = static_cast<bytes>(knobs.lora_rank);
    bytes largest_adapter = 0;
    for (const linear_shape& linear : layer_linears(model)) {
      if (!is_lora_target(knobs, linear.name)) continue;
      layer_trainable += linear.copies * rank * (linear.in + linear.out);
      largest_adapter = std::max({largest_adapter, newton_schulz_transient(rank, linear.in), newton_schulz_transient(linear.out, rank)});
    }
    const bytes trainable = layer_trainable * static_cast<bytes>(model.num_layers);
    state.trainable_params = static_cast<std::uint64_t>(trainable);
    state.weights = all_weights + trainable * adapter_bytes;
    state.gradients = trainable * adapter_bytes;
    switch (knobs.optimizer) {
      case optimizer_kind::adamw:
        state.optimizer = 2 * trainable * adapter_bytes;
        state.optimizer_step = trainable * adapter_bytes;
        break;
      case optimizer_kind::muon:  // every adapter is a 2-D matrix of a layer: one momentum each
        state.optimizer = trainable * adapter_bytes;
        state.optimizer_step = largest_adapter;
        break;
      case optimizer_kind::sgd: break;
    }
    state.layer_gradient = layer_trainable * adapter_bytes;
  } else {
    state.trainable_params = params.total;
    state.weights = all_weights;
    state.gradients = all_weights;
    switch (knobs.optimizer) {
      case optimizer_kind::adamw:
        // torch's AdamW keeps exp_avg and exp_avg_sq in the parameter's dtype; the foreach step
        // allocates sqrt(exp_avg_sq) for every parameter at once.
        state.optimizer = 2 * all_weights;
        state.optimizer_step = all_weights;
        break;
      case optimizer_kind::muon: {
        // A momentum buffer per layer matrix (zeros_like its gradient); fused AdamW's two moments
        // for the rest, whose step allocates nothing.
        const bytes matrices = layer_matrix_params(model) * static_cast<bytes>(model.num_layers) * weight_bytes;
        state.optimizer = matrices + 2 * (all_weights - matrices);
        state.optimizer_step = largest_layer_matrix_transient(model);
        break;
      }
      case optimizer_kind::sgd: break;
    }
    layer_trainable = static_cast<bytes>(params.per_layer);
    state.layer_gradient = layer_trainable * weight_bytes;
    // Tied: the head's gradient exists when the embedding's arrives, and they are summed.
    if (model.tied_embeddings) state.head_gradient = embedding * embedding_bytes_per_param(knobs);
    if (knobs.precision != precision_kind::bf16) {
      // Autocast's bf16 copies of every matmul weight, cached through the forward and kept by
      // autograd for backward (the untied embedding is a lookup, not a matmul).
      const bytes matmul_params = total - embedding + (model.tied_embeddings ? embedding : 0);
      state.autocast_copies = 2 * matmul_params;
    }
  }
  const auto gpus = static_cast<bytes>(knobs.gpus);
  // DistributedDataParallel copies gradients into flat buckets it allocates when it is built.
  if (knobs.gpus > 1 && knobs.shard == shard_kind::none) state.ddp_buckets = state.gradients;
  const bool shard_optimizer = knobs.shard != shard_kind::none;
  const bool shard_gradients = knobs.shard == shard_kind::zero2 || knobs.shard == shard_kind::fsdp;
  const bool shard_weights = knobs.shard == shard_kind::fsdp;
  if (shard_optimizer) {
    state.optimizer /= gpus;
    state.optimizer_step /= gpus;
  }
  if (shard_gradients) {
    state.gradients /= gpus;
    state.head_gradient /= gpus;
    state.gradients_in_flight = state.layer_gradient;
  }
  if (shard_weights) {
    state.weights /= gpus;
    // FSDP keeps the root unit (embeddings, head, final norm) and two decoder layers unsharded
    // in the compute dtype: the one running and the one prefetched.
    const auto root = static_cast<bytes>(params.embedding + params.lm_head + model.hidden_size);
    state.weights_in_flight = 2 * (root + 2 * static_cast<bytes>(params.per_layer));
    state.autocast_copies = 0;  // FSDP's mixed precision casts the unsharded copies instead
  }
  if (knobs.offload_weights) {
    state.host += state.weights + state.gradients + state.optimizer;
    state.weights = state.gradients = state.optimizer = state.optimizer_step = state.head_gradient = 0;
  } else if (knobs.offload_optimizer) {
    state.host += state.optimizer;
    state.optimizer = state.optimizer_step = 0;
  }
  return state;
}

}  // namespace rlmem::plan_detail
