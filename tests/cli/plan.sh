#!/usr/bin/env bash
# `rlmem plan` as a user meets it: bad knobs get exit 2 and one line on stderr, nothing on
# stdout; good ones print the phases, JSON that parses, and --fit's answer.
set -u
rlmem=$1
testdata=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

expect_bad() {
  local name=$1 expected=$2; shift 2
  "$rlmem" plan "$@" >"$work/out" 2>"$work/err"
  local code=$?
  local lines
  lines=$(wc -l <"$work/err")
  if [ "$code" -ne 2 ] || [ "$lines" -ne 1 ] || [ -s "$work/out" ] || ! grep -qF -- "$expected" "$work/err"; then
    echo "FAIL $name: expected exit 2, one stderr line containing '$expected', empty stdout;" \
         "saw exit $code, $lines stderr lines, $(wc -c <"$work/out") stdout bytes"
    cat "$work/err"
    failures=$((failures + 1))
  else
    echo "ok   $name: $(cat "$work/err")"
  fi
}

expect_output() {
  local name=$1 expected=$2; shift 2
  "$rlmem" plan "$@" >"$work/out" 2>"$work/err"
  local code=$?
  if [ "$code" -ne 0 ] || [ -s "$work/err" ] || ! grep -qF -- "$expected" "$work/out"; then
    echo "FAIL $name: expected exit 0, no stderr, '$expected' in the output; saw exit $code"
    head -5 "$work/err" "$work/out"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

grpo=(--phase grpo-step --prompts 8 --group 8 --prompt-len 512 --new-tokens 512 --micro-batch 16 --ref-model)
printf '{"hidden_size": 64,' >"$work/broken.json"
printf '{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2}' >"$work/partial.json"

expect_bad "unknown preset suggests close names" "did you mean qwen2.5-0.5b" --model qwen2.5-05b --phase generate --batch 1 --prompt-len 1 --new-tokens 1
expect_bad "config.json that is not JSON" "not JSON" --model "$work/broken.json" --phase generate --batch 1 --prompt-len 1 --new-tokens 1
expect_bad "config.json without a field" 'lacks "num_attention_heads"' --model "$work/partial.json" --phase generate --batch 1 --prompt-len 1 --new-tokens 1
expect_bad "missing config file" "cannot open" --model "$work/none.json" --phase train --micro-batch 1 --seq-len 8
expect_bad "group not divisible by micro-batch" "--group 6 is not divisible by --micro-batch 4" --model qwen2.5-0.5b \
  --phase grpo-step --prompts 4 --group 6 --prompt-len 64 --new-tokens 64 --micro-batch 4
expect_bad "zero length" "--new-tokens must be at least 1" --model qwen2.5-0.5b --phase generate --batch 4 --prompt-len 64 --new-tokens 0
expect_bad "missing knobs of the phase" "--phase train needs --micro-batch --seq-len" --model qwen2.5-0.5b --phase train
expect_bad "unknown phase" "--phase 'rollout': expected one of generate, train, grpo-step" --model qwen2.5-0.5b --phase rollout
expect_bad "budget smaller than the weights" "the weights alone" --model qwen2.5-72b "${grpo[@]}" --fit rtx4090-24g
expect_bad "unknown card" "--fit 'h900': not a card" --model qwen2.5-0.5b "${grpo[@]}" --fit h900
expect_bad "bad buffer" "--buffer 'latents=8x0:fp32'" --model qwen2.5-0.5b "${grpo[@]}" --buffer latents=8x0:fp32
expect_bad "scored tokens beyond the sequence" "--logprob-tokens 600 must be less than --seq-len 512" --model qwen2.5-0.5b \
  --phase train --micro-batch 4 --seq-len 512 --logprob-tokens 600
expect_bad "not a number" "--micro-batch" --model qwen2.5-0.5b --phase train --micro-batch many --seq-len 512

printf '{"model_type": "deepseek_v3", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "kv_lora_rank": 16}' >"$work/mla.json"
expect_bad "latent attention is refused by name" '"kv_lora_rank"' --model "$work/mla.json" --phase generate --batch 1 --prompt-len 1 --new-tokens 1
expect_bad "negative count" "--gpus: '-1' is not a whole number of 0 or more (see rlmem plan --help)" --model qwen2.5-0.5b "${grpo[@]}" --gpus -1
expect_bad "a batch beyond any GPU (it once hung --fit)" "--batch 576460752303423488 is beyond" --model qwen2.5-0.5b "${grpo[@]}" \
  --batch 576460752303423488 --fit h100-80g
expect_bad "tokens beyond any GPU" "beyond any GPU" --model qwen2.5-72b --phase train --micro-batch 1048576 --seq-len 16777216
expect_bad "a buffer given twice" "--buffer 'x' is given twice" --model qwen2.5-0.5b "${grpo[@]}" --buffer x=4:int8 --buffer x=5:int8
expect_bad "a buffer with no phase after @" "no phase after '@'" --model qwen2.5-0.5b "${grpo[@]}" --buffer x=4:fp32@
expect_bad "a one-token sequence" "--seq-len must be at least 2" --model qwen2.5-0.5b --phase train --micro-batch 1 --seq-len 1
expect_bad "a card smaller than the CUDA context" "less than the CUDA context" --model qwen2.5-0.5b "${grpo[@]}" --fit 500MiB

# Knobs that do not apply are refused with the reason, never ignored.
train=(--phase train --micro-batch 2 --seq-len 512)
expect_bad "a bare number under 1 MiB is a likely unit mistake" "a bare number is bytes, and 80 bytes is under 1 MiB; give the unit (e.g. 80GB or 80GiB)" \
  --model qwen2.5-0.5b "${train[@]}" --fit 80
expect_bad "--margin without --fit" "--margin shapes the search of --fit; give --fit CARD" --model qwen2.5-0.5b "${train[@]}" --margin 0.2
expect_bad "--batch with train" "--batch does not apply to --phase train" --model qwen2.5-0.5b "${train[@]}" --batch 4
expect_bad "--group with train" "--group does not apply to --phase train" --model qwen2.5-0.5b "${train[@]}" --group 4
expect_bad "--grad-accum with grpo-step" "--grad-accum does not apply to --phase grpo-step" --model qwen2.5-0.5b "${grpo[@]}" --grad-accum 2
expect_bad "--lora-r with generate" "--lora-r does not apply to --phase generate: it trains nothing" --model qwen2.5-0.5b \
  --phase generate --batch 4 --prompt-len 8 --new-tokens 8 --lora-r 8
expect_bad "--shard fsdp on one GPU" "--shard fsdp divides state over --gpus; on 1 GPU it divides nothing" --model qwen2.5-0.5b "${grpo[@]}" --shard fsdp
expect_bad "--kv-rows without prealloc" "--kv-rows sizes a preallocated KV cache; it needs --kv-cache prealloc" --model qwen2.5-0.5b \
  --phase generate --batch 4 --prompt-len 8 --new-tokens 8 --kv-rows 8
expect_bad "--lora-targets without --lora-r" "--lora-targets names the modules LoRA adapts; it needs --lora-r" --model qwen2.5-0.5b "${train[@]}" \
  --lora-targets q_proj
expect_bad "--logprob-chunk without chunks" "--logprob-chunk is the rows per chunk of --logprob-impl chunked or fused" --model qwen2.5-0.5b \
  "${train[@]}" --logprob-chunk 256
expect_bad "--vary a knob the phase lacks" "--vary group: only --phase grpo-step samples a group per prompt" --model qwen2.5-0.5b "${train[@]}" \
  --fit h100-80g --vary group
expect_bad "--vary an unknown knob" "--vary 'temperature': expected a comma list of group, new-tokens, prompt-len, lora-r, batch" \
  --model qwen2.5-0.5b "${grpo[@]}" --fit h100-80g --vary group,temperature
expect_bad "--keep-shape with --vary" "--keep-shape keeps the algorithm's settings and --vary opens some" --model qwen2.5-0.5b "${grpo[@]}" \
  --fit h100-80g --vary group --keep-shape
expect_bad "adapter-disabled without LoRA" "--ref-model adapter-disabled scores with the policy's LoRA adapter switched off; it needs --lora-r" \
  --model qwen2.5-0.5b "${grpo[@]}" adapter-disabled
expect_bad "an unknown reference" "--ref-model 'frozen': expected one of copy, adapter-disabled" --model qwen2.5-0.5b "${grpo[@]}" frozen
# CLI11's own errors, in plain words.
expect_bad "an option given twice" "--fit is given 2 times; give it once (see rlmem plan --help)" --model qwen2.5-0.5b "${grpo[@]}" --fit a --fit b
expect_bad "an option without its value" "--phase needs a value (see rlmem plan --help)" --model qwen2.5-0.5b --phase
expect_bad "an unknown option" "unknown option or extra argument: --bogus (see rlmem plan --help)" --model qwen2.5-0.5b "${grpo[@]}" --bogus

issue=(--phase grpo-step --prompts 4 --group 4 --prompt-len 896 --new-tokens 128 --micro-batch 16 --lora-r 16 --ref-model)
expect_output "the issue's LoRA run: your config first" "Your config needs 157.8 GiB; 35.7 GiB usable: it does not fit." \
  --model qwen2.5-7b "${issue[@]}" --fit a100-40g
expect_output "each knob alone, with the least change that fits" "16 -> 2   32.7 GiB  125.1 GiB  yes*" \
  --model qwen2.5-7b "${issue[@]}" --fit a100-40g
expect_output "bare --ref-model with --lora-r is the base with the adapter disabled" "reference model (the base with the adapter disabled)" \
  --model qwen2.5-7b "${issue[@]}"
expect_output "bare --ref-model without LoRA is a copy" "reference model (a copy)" --model qwen2.5-0.5b "${grpo[@]}"
expect_output "a size in GB is read as written" "Fit on 32GB, read as 32,000,000,000 bytes (29.8 GiB)" --model qwen2.5-0.5b "${train[@]}" --fit 32GB
expect_output "a size in GiB is read as written" "Fit on 32GiB, read as 34,359,738,368 bytes (32.0 GiB)" --model qwen2.5-0.5b "${train[@]}" --fit 32GiB
expect_output "new card presets" "Fit on mi300x-192g (192.0 GiB)" --model qwen2.5-0.5b "${train[@]}" --fit mi300x-192g
expect_output "--keep-shape is still accepted (it is the default)" "Kept as given: group, new-tokens, prompt-len" \
  --model qwen2.5-0.5b "${grpo[@]}" --fit h100-80g --keep-shape
expect_output "--vary opens the algorithm's settings" "and varied group, new-tokens" --model qwen2.5-0.5b "${grpo[@]}" --fit h100-80g \
  --vary group,new-tokens

# Issue 29, item 5: advice a person would take.
expect_output "the ranking rule is printed above the combinations" "Ranked by tokens per step (most first), then speed" \
  --model qwen2.5-7b "${issue[@]}" --fit a100-40g
expect_output "the algorithm's knobs are kept, and the line says how to open them" \
  "Kept as given: group, new-tokens, prompt-len, lora-r. --vary group,new-tokens,prompt-len,lora-r" \
  --model qwen2.5-7b "${issue[@]}" --fit a100-40g
"$rlmem" plan --model qwen2.5-7b "${issue[@]}" --fit a100-40g >"$work/out" 2>&1
if grep -qE "prompt length|new tokens +[0-9]+ ->|^ +group +[0-9]" "$work/out"; then
  echo "FAIL without --vary no length or group is proposed"; grep -E "prompt length|new tokens|group" "$work/out" | head -3
  failures=$((failures + 1))
else
  echo "ok   without --vary no length or group is proposed"
fi
"$rlmem" plan --model qwen2.5-7b "${issue[@]}" --fit a100-40g --vary prompt-len,new-tokens >"$work/out" 2>&1
shortest=$(grep -oE "prompt length +896 -> [0-9]+" "$work/out" | awk '{ print $NF }' | sort -n | head -1)
if [ -z "$shortest" ] || [ "$shortest" -lt 224 ]; then
  echo "FAIL --vary prompt-len proposes no prompt under a quarter (224 of 896): saw '${shortest}'"
  failures=$((failures + 1))
else
  echo "ok   --vary prompt-len proposes no prompt under a quarter (shortest $shortest)"
fi
"$rlmem" plan --model qwen2.5-0.5b "${grpo[@]}" --fit h100-80g --vary group --all >"$work/out" 2>&1
if grep -qE "generation batch all ([0-9]+) -> \1(,|$)" "$work/out" || grep -qE " ([^ ]+) -> \1(,|$)" "$work/out"; then
  echo "FAIL no change leaves a knob as it was"; grep -E " ([^ ]+) -> \1(,|$)" "$work/out" | head -3
  failures=$((failures + 1))
else
  echo "ok   no change leaves a knob as it was"
fi
fitting=$(grep -oE "configurations in [0-9]+ ms, [0-9,]+ fit" "$work/out" | grep -oE "[0-9,]+ fit" | tr -d ', fit')
listed=$(grep -cE "^ +[0-9]+\. +[0-9.]+ [KMG]?i?B  " "$work/out")
if [ -z "$fitting" ] || [ "$listed" -ne "$fitting" ]; then
  echo "FAIL --all lists every fitting configuration: $fitting fit, $listed listed"
  failures=$((failures + 1))
else
  echo "ok   --all lists every fitting configuration ($listed)"
fi
"$rlmem" plan --model qwen2.5-0.5b "${grpo[@]}" --fit h100-80g --vary group --json >"$work/out.json" 2>&1
if ! python3 -c 'import json, sys
fit = json.load(open(sys.argv[1]))["fit"]
assert len(fit["every_fitting"]) == fit["fitting"], (len(fit["every_fitting"]), fit["fitting"])
assert fit["ranking"].startswith("Ranked by"), fit["ranking"]' "$work/out.json"; then
  echo "FAIL --json has every fitting configuration and the ranking rule"
  failures=$((failures + 1))
else
  echo "ok   --json has every fitting configuration and the ranking rule"
fi
expect_bad "--all without --fit" "--all shapes the search of --fit; give --fit CARD" --model qwen2.5-0.5b "${grpo[@]}" --all

# Every line of the text fits the width asked for (100 by default).
for width in 100 80; do
  "$rlmem" plan --model qwen2.5-7b "${issue[@]}" --fit a100-40g --vary new-tokens --width "$width" >"$work/out" 2>&1
  longest=$(awk '{ if (length($0) > n) n = length($0) } END { print n }' "$work/out")
  if [ "$longest" -gt "$width" ]; then
    echo "FAIL output within --width $width: a line of $longest columns"
    awk -v w="$width" 'length($0) > w' "$work/out" | head -3
    failures=$((failures + 1))
  else
    echo "ok   output within --width $width (longest line $longest)"
  fi
done

"$rlmem" plan --help >"$work/out" 2>&1
if awk 'length($0) > 100 { found = 1 } END { exit !found }' "$work/out" || grep -q '18446744073709551615' "$work/out"; then
  echo "FAIL plan --help: lines within 100 columns, no 20-digit ranges"
  awk 'length($0) > 100' "$work/out" | head -3
  failures=$((failures + 1))
else
  echo "ok   plan --help within 100 columns"
fi

expect_output "text report names the peak phase" "Peak 39.6 GiB per GPU in update" --model qwen2.5-0.5b "${grpo[@]}"
expect_output "config.json path" "llama 1.24 B parameters (0.97 B outside embeddings), 16 layers" --model "$testdata/planner/configs/llama3.2-1b.json" \
  --phase generate --batch 8 --prompt-len 256 --new-tokens 256
expect_output "fit starts from your config" "Your config needs 72.7 GiB; 71.7 GiB usable: it does not fit." \
  --model qwen2.5-1.5b "${grpo[@]}" --fit h100-80g
expect_output "presets are listed" "qwen3-32b" --list-models

# Issue 12, items 4 to 6: the generation batch, scaling buffers and epochs, nanochat, Muon.
printf '{"sequence_len": 2048, "vocab_size": 65536, "n_layer": 20, "n_head": 10, "n_kv_head": 10, "n_embd": 1280}' >"$work/d20.json"
printf '{"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257}' >"$work/gpt2.json"
nano=(--phase grpo-step --prompts 16 --group 16 --gen-batch 8 --prompt-len 256 --new-tokens 256 --micro-batch 8 --kv-cache prealloc)
expect_output "nanochat's config: untied, no gate, its precision by default" \
  "vocab 65,536, ReLU^2 MLP (no gate), norms without weights" \
  --model "$work/d20.json" "${nano[@]}" --optimizer muon
expect_output "Muon with nanochat's precision" "AdamW nanochat, softcap loss over every position, generated 8 rows at a time" --model "$work/d20.json" "${nano[@]}" --optimizer muon
expect_output "the generation batch in the rollout" "generated 8 rows at a time" --model "$work/d20.json" "${nano[@]}"
expect_output "--kv-rows follows the group" "--kv-rows group" --model "$work/d20.json" "${nano[@]}" --kv-rows group --fit h100-80g
expect_output "the generation batch is searched by default" "generation batch" --model qwen2.5-0.5b "${grpo[@]}" --fit h100-80g
expect_output "a buffer of rows x epochs" "buffer traj rows*epochs*50*263*1*196:fp32 = 314.6 MiB" --model qwen2.5-0.5b \
  --phase grpo-step --prompts 2 --group 8 --prompt-len 256 --new-tokens 64 --micro-batch 8 --epochs 2 \
  --buffer 'traj=rows*epochs*50*263*1*196:fp32'
expect_output "a policy given as --params and buffers" "params-only  3,000,000 parameters" --params 3000000 --phase grpo-step \
  --prompts 8 --group 4 --micro-batch 8 --epochs 4 --buffer 'traj=rows*epochs*50*263*1*196:fp32' --fit rtx5090-32g
expect_output "GPT-2 is read with its ungated GELU MLP" "GELU MLP (no gate)" --model "$work/gpt2.json" \
  --phase generate --batch 1 --prompt-len 1 --new-tokens 1
printf '{"model_type": "phi", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}' >"$work/phi.json"
expect_bad "an ungated family not modelled is refused by name" '"phi" has an MLP without a gate' --model "$work/phi.json" \
  --phase generate --batch 1 --prompt-len 1 --new-tokens 1
expect_bad "LoRA on GPT-2 is not modelled" "gpt2 with --lora-r is not modelled" --model "$work/gpt2.json" "${train[@]}" --lora-r 8
expect_bad "--epochs with train" "--epochs does not apply to --phase train" --model qwen2.5-0.5b "${train[@]}" --epochs 2
expect_bad "--gen-batch with generate" "--gen-batch does not apply to --phase generate" --model qwen2.5-0.5b \
  --phase generate --batch 4 --prompt-len 8 --new-tokens 8 --gen-batch 2
expect_bad "--gen-batch and --batch together" "--gen-batch and --batch both give grpo-step's generation batch" --model qwen2.5-0.5b \
  "${grpo[@]}" --gen-batch 8 --batch 8
expect_bad "--kv-rows that is no number nor knob" "--kv-rows 'some': expected a number of rows, gen-batch or group" \
  --model "$work/d20.json" "${nano[@]}" --kv-rows some
expect_bad "--kv-rows fewer than the generation batch" "fewer than the 8 generated together" --model "$work/d20.json" "${nano[@]}" --kv-rows 4
expect_bad "--precision nanochat on another model" "--precision nanochat is nanochat's" --model qwen2.5-0.5b "${train[@]}" \
  --precision nanochat
expect_bad "--params with --model" "--params describes a policy given without --model" --model qwen2.5-0.5b "${train[@]}" --params 10
expect_bad "--params without buffers" "--params without --model needs the policy's tensors as --buffer" --params 10 "${train[@]}"
expect_bad "a buffer dim that is no number, rows or epochs" "'steps' is not a positive dimension, rows or epochs" --model qwen2.5-0.5b \
  "${grpo[@]}" --buffer 'traj=rows*steps:fp32'

# Rollout engines (vLLM, SGLang): their budgets on the card, their knobs only with them, and what
# the engines themselves refuse, with their reasons.
engine_grpo=(--model qwen2.5-1.5b --phase grpo-step --prompts 8 --group 8 --prompt-len 512 --new-tokens 512 --micro-batch 8 --width 1000)
expect_output "vLLM's block of 16 tokens for qwen2.5-1.5b: 28 x 2 x 2 x 128 x 16 x 2 bytes" \
  "(448.0 KiB per block: 28 layers x 2 x 2 KV heads x 128 x 16 tokens x 2" "${engine_grpo[@]}" --rollout vllm \
  --gpu-memory-utilization 0.3 --card h100-80g
expect_output "vLLM's budget is the utilization of the card's total" "Budget 23.9 GiB = gpu_memory_utilization 0.3 x the card's 79.6 GiB" \
  "${engine_grpo[@]}" --rollout vllm --gpu-memory-utilization 0.3 --card h100-80g
expect_output "sleep level 1 keeps the weights in host memory" "its weights wait in host memory (2.88 GiB)" \
  "${engine_grpo[@]}" --rollout vllm --gpu-memory-utilization 0.3 --card h100-80g --sleep-level 1
expect_output "the engine's card defaults to --fit's, and --fit keeps the engine" "--rollout vllm --gpu-memory-utilization 0.3" \
  "${engine_grpo[@]}" --rollout vllm --gpu-memory-utilization 0.3 --fit h100-80g
expect_output "SGLang's budget is a fraction of what is free at init, the trainer's weights taken" \
  "less the CUDA context and the trainer's 2.88 GiB)" "${engine_grpo[@]}" --rollout sglang --mem-fraction-static 0.4 --card h100-80g
expect_bad "vLLM refuses a budget beyond what is free at init (a 7B trainer's 14.19 GiB resident)" \
  "vLLM refuses to start: free memory on device (64.79/79.65 GiB) on startup is less than desired GPU memory utilization (0.9, 71.68 GiB)" \
  --model qwen2.5-7b --phase grpo-step --prompts 8 --group 8 --prompt-len 512 --new-tokens 512 --micro-batch 8 --rollout vllm --card h100-80g
expect_bad "vLLM refuses a budget below the weights" "no available memory for the cache blocks" --model qwen2.5-7b \
  --phase generate --batch 8 --prompt-len 512 --new-tokens 512 --rollout vllm --gpu-memory-utilization 0.15 --card h100-80g
expect_bad "vLLM refuses a max_model_len its pool cannot hold" "to serve at least one request with the model's max seq len (4000000)" \
  --model qwen2.5-7b --phase generate --batch 8 --prompt-len 512 --new-tokens 512 --rollout vllm --gpu-memory-utilization 0.3 \
  --max-model-len 4000000 --card h100-80g
expect_bad "SGLang refuses a fraction that leaves no KV" "SGLang refuses to start: Not enough memory" --model qwen2.5-7b \
  --phase generate --batch 8 --prompt-len 512 --new-tokens 512 --rollout sglang --mem-fraction-static 0.15 --card h100-80g
expect_bad "SGLang's fraction is required" "--rollout sglang needs --mem-fraction-static" "${engine_grpo[@]}" --rollout sglang --card h100-80g
expect_bad "a card that is no card nor size" "--card 'h900': not a card" "${engine_grpo[@]}" --rollout vllm --card h900
expect_bad "an engine needs the card" "give --card CARD (or --fit CARD)" "${engine_grpo[@]}" --rollout vllm
expect_bad "vLLM's knob without vLLM" "--gpu-memory-utilization is vLLM's; give --rollout vllm" "${engine_grpo[@]}" --gpu-memory-utilization 0.5
expect_bad "SGLang's knob with vLLM" "--mem-fraction-static is SGLang's; give --rollout sglang" "${engine_grpo[@]}" --rollout vllm \
  --card h100-80g --mem-fraction-static 0.5
expect_bad "--sleep-level without an engine" "--sleep-level shapes a rollout engine" "${engine_grpo[@]}" --sleep-level 1
expect_bad "an unknown engine" "--rollout 'tgi': expected one of hf, vllm, sglang" "${engine_grpo[@]}" --rollout tgi
expect_bad "an engine for train" "--rollout applies to --phase generate and grpo-step" --model qwen2.5-0.5b "${train[@]}" \
  --rollout vllm --card h100-80g
expect_bad "HF's cache knobs with an engine" "an engine's KV is its pool" "${engine_grpo[@]}" --rollout vllm --card h100-80g \
  --gpu-memory-utilization 0.3 --kv-cache prealloc
expect_bad "a sleep level vLLM does not have" "--sleep-level must be 0" "${engine_grpo[@]}" --rollout vllm --card h100-80g \
  --gpu-memory-utilization 0.3 --sleep-level 3
expect_bad "a block size vLLM does not take" "--block-size 24: vLLM takes 1, 8, 16, 32, 64 or 128" "${engine_grpo[@]}" --rollout vllm \
  --card h100-80g --gpu-memory-utilization 0.3 --block-size 24
"$rlmem" plan "${engine_grpo[@]}" --rollout vllm --gpu-memory-utilization 0.3 --card h100-80g --sleep-level 2 --json >"$work/engine.json"
if ! python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
e = d["rollout_engine"]
assert d["knobs"]["rollout"]["engine"] == "vllm", d["knobs"]
assert e["blocks"] * 16 == e["kv_tokens"], e
assert e["block_bytes"] == 28 * 2 * 2 * 128 * 16 * 2, e
assert e["weights_bytes"] + e["kv_bytes"] + e["activation_bytes"] == e["budget_bytes"], e
assert e["asleep_bytes"] == 0 and e["sleep_host_bytes"] == 0, e
rollout = [p for p in d["phases"] if p["name"] == "rollout"][0]
assert rollout["components"]["engine KV cache pool"] == e["kv_bytes"], rollout
' "$work/engine.json"; then
  echo "FAIL vLLM's JSON: expected rollout_engine with blocks x 16 = tokens, the budget split, nothing kept at sleep level 2"
  failures=$((failures + 1))
else
  echo "ok   vLLM's budget in the JSON"
fi

# Colocated hand-offs (issue 30, item 3) and host memory (item 4): each transition a phase, the
# one that sets the step's peak named, the wake-up order that lowers it, the host per GPU and node.
verl_step=(--model qwen2.5-7b --phase grpo-step --prompts 16 --group 8 --prompt-len 1024 --new-tokens 1024 --micro-batch 4
  --grad-ckpt --gpus 8 --shard fsdp --rollout vllm --card h100-80g --gpu-memory-utilization 0.7 --sleep-level 1 --handoff offload)
expect_output "waking all at once: the sync beside the KV sets the step's peak" "The transition that sets the step's peak: weight-sync (68.9 GiB)." \
  "${verl_step[@]}" --wake-order together
expect_output "the staged order is advised, with the peak it gives" "lowers the step's peak from 68.9 GiB to 55.8 GiB:" \
  "${verl_step[@]}" --wake-order together
expect_output "the transitions in step order" "Transitions: hand-off -> wake-weights -> weight-sync -> wake-kv -> rollout -> sleep -> resume." \
  "${verl_step[@]}"
expect_output "host memory per node defaults to the job's GPUs" "Host memory: 19.5 GiB per GPU, 156.0 GiB per node of 8 GPUs" "${verl_step[@]}"
expect_output "a node short of host memory: the host is the limit" "It does not fit the node's --host-memory 93.1 GiB: 62.9 GiB short, so the host is the limit." \
  "${verl_step[@]}" --host-memory 100GB
expect_output "--fit says the host is the limit when the card has room" "exceeds the 93.1 GiB of --host-memory: the host is the limit" \
  "${verl_step[@]}" --host-memory 100GB --fit h100-80g
expect_output "when no searched change fits the host, --fit says so" "none fits the host: the configurations that fit the card need more host" \
  "${verl_step[@]}" --host-memory 128GB --fit h100-80g
expect_output "--fit's best configuration keeps the hand-off" "--handoff offload --gpus-per-node 8" "${verl_step[@]}" --host-memory 200GB --fit h100-80g
expect_output "--gpus-per-node alone shows the host" "Host memory: 0 B per GPU, 0 B per node of 1 GPU (--gpus-per-node): nothing offloaded" \
  --model qwen2.5-0.5b "${train[@]}" --gpus-per-node 1
for width in 100; do
  "$rlmem" plan "${verl_step[@]}" --wake-order together --host-memory 100GB --fit h100-80g --width "$width" >"$work/out" 2>&1
  longest=$(awk '{ if (length($0) > n) n = length($0) } END { print n }' "$work/out")
  if [ "$longest" -gt "$width" ]; then
    echo "FAIL the hand-off's report within --width $width: a line of $longest columns"; awk -v w="$width" 'length($0) > w' "$work/out" | head -3
    failures=$((failures + 1))
  else
    echo "ok   the hand-off's report within --width $width (longest line $longest)"
  fi
done
"$rlmem" plan "${verl_step[@]}" --wake-order together --host-memory 100GB --fit h100-80g --json >"$work/handoff.json"
if ! python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
h, host = d["handoff"], d["host"]
assert d["knobs"]["handoff"] == {"mode": "offload", "wake_order": "together", "sync_bucket_bytes": 0}, d["knobs"]["handoff"]
assert h["transitions"] == ["hand-off", "wake-all", "weight-sync", "rollout", "sleep", "resume"], h["transitions"]
assert d["peak_phase"] == "weight-sync" == h["together"]["peak_phase"] and h["staged"]["peak_phase"] == "rollout", h
assert h["together"]["step_peak_bytes"] == d["peak_bytes"] > h["staged"]["step_peak_bytes"], h
phases = {p["name"]: p for p in d["phases"]}
sync = phases["weight-sync"]["components"]
assert sync["weights gathered for the sync (bf16, full)"] == h["sync_source_bytes"] == d["rollout_engine"]["weights_bytes"], sync
assert sum(sync.values()) == phases["weight-sync"]["peak_bytes"], sync
assert sum(host["parts"].values()) == host["per_gpu_bytes"] == d["host_bytes"], host
assert host["per_node_bytes"] == 8 * host["per_gpu_bytes"] and host["fits"] is False, host
yours = d["fit"]["yours"]
assert yours["host"]["limit"] == "host" and yours["fits"] is False and yours["host"]["fits_card"] is True, yours
' "$work/handoff.json"; then
  echo "FAIL the hand-off's JSON: transitions, the order's peaks, the sync's parts, the host per GPU and node, fit's host limit"
  failures=$((failures + 1))
else
  echo "ok   the hand-off and the host in the JSON"
fi
expect_bad "--handoff without an engine" "--handoff hands the GPU between the trainer and a rollout engine: give --rollout vllm or sglang" \
  --model qwen2.5-0.5b "${grpo[@]}" --handoff offload
expect_bad "--handoff with generate" "--handoff plans the transitions of a colocated step: it needs --phase grpo-step" --model qwen2.5-0.5b \
  --phase generate --batch 8 --prompt-len 64 --new-tokens 64 --rollout vllm --card h100-80g --gpu-memory-utilization 0.3 --handoff keep
expect_bad "an unknown hand-off" "--handoff 'sleep3': expected one of keep, offload, rlmem-pause" "${engine_grpo[@]}" --rollout vllm \
  --card h100-80g --gpu-memory-utilization 0.3 --handoff sleep3
expect_bad "--wake-order without --handoff" "--wake-order shapes the transitions of --handoff" "${engine_grpo[@]}" --rollout vllm \
  --card h100-80g --gpu-memory-utilization 0.3 --wake-order together
expect_bad "--wake-order with an engine that never sleeps" "at --sleep-level 0 it never sleeps" "${engine_grpo[@]}" --rollout vllm \
  --card h100-80g --gpu-memory-utilization 0.3 --handoff keep --wake-order together
expect_bad "an unknown wake order" "--wake-order 'weights-first': expected staged or together" "${engine_grpo[@]}" --rollout vllm \
  --card h100-80g --gpu-memory-utilization 0.3 --sleep-level 1 --handoff keep --wake-order weights-first
expect_bad "a sync bucket without a unit" "--sync-bucket '512': expected a size of 1 MiB or more" "${engine_grpo[@]}" --rollout vllm \
  --card h100-80g --gpu-memory-utilization 0.3 --handoff keep --sync-bucket 512
expect_bad "host memory without a unit" "--host-memory '256': expected a size of 1 MiB or more" --model qwen2.5-0.5b "${train[@]}" --host-memory 256
expect_bad "more GPUs per node than the job has" "--gpus-per-node 8 is more than the job's --gpus 1" --model qwen2.5-0.5b "${train[@]}" \
  --gpus-per-node 8

# --from FILE: a trainer's config (testdata/trainer_configs/README.md says where each comes from).
configs="$testdata/trainer_configs"
recipe="$configs/trl_open_r1_qwen2.5-1.5b_grpo.yaml"
expect_output "--from a TRL recipe maps its batch" "per_device_train_batch_size 16 -> --micro-batch 16" --from "$recipe"
expect_output "--from a TRL recipe without a card names the vLLM rollout it cannot plan" \
  "use_vllm true: vLLM sizes itself from the card it runs on: give --card CARD (or --fit CARD)" --from "$recipe"
expect_output "--from a TRL recipe on a card plans its colocated vLLM" \
  "Budget 23.9 GiB = gpu_memory_utilization 0.3 x the card's 79.6 GiB" --from "$recipe" --card h100-80g --width 1000
expect_output "--from TRL's vLLM settings are listed with the knobs they set" \
  "per_device_train_batch_size x vllm_tensor_parallel_size x steps_per_generation 16 x 1 x 4 -> --max-num-seqs 64" \
  --from "$recipe" --card h100-80g --width 1000
expect_output "--from a verl config with its vLLM rollout on a card" "actor_rollout_ref.rollout.gpu_memory_utilization 0.6 -> --gpu-memory-utilization 0.6" \
  --from "$configs/verl_grpo_qwen2.5-3b_lora.yaml" --fit h100-80g --width 1000
expect_output "--from a verl config without a card names its engine settings left out" \
  "actor_rollout_ref.rollout.gpu_memory_utilization 0.6: configures the vLLM rollout, not planned (above)" \
  --from "$configs/verl_grpo_qwen2.5-3b_lora.yaml" --width 1000
expect_output "the command line's --rollout replaces the file's engine" "the command line's --rollout sglang replaces the file's vLLM" \
  --from "$recipe" --rollout sglang --mem-fraction-static 0.5 --card h100-80g --width 1000
expect_output "the command line overrides --from" "max_completion_length 1024 -> --new-tokens 1024; the command line's --new-tokens wins" \
  --from "$recipe" --new-tokens 512
expect_output "the overriding value is planned" "4 prompts x 16 samples, prompt 512 + 512 new tokens, micro-batch 8" \
  --from "$recipe" --new-tokens 512 --micro-batch 8
expect_output "--from a verl config on verl's defaults" "actor_rollout_ref.model.lora_rank 64 -> --lora-r 64" \
  --from "$configs/verl_grpo_qwen2.5-3b_lora.yaml"
expect_output "--from's GPUs come from trainer.*" '"gpus": 2,' --from "$configs/verl_grpo_qwen2.5-3b_lora.yaml" --json
expect_output "--from's knobs are planned" '"reference": "adapter-disabled",' --from "$configs/verl_grpo_qwen2.5-3b_lora.yaml" --json
expect_output "--from in the JSON" '"format": "verl-yaml"' --from "$configs/verl_grpo_qwen2.5-3b_lora.yaml" --json
"$rlmem" plan --from "$recipe" --micro-batch 8 --json >"$work/from.json" 2>"$work/err"
if ! python3 -c 'import json, sys
source = json.load(open(sys.argv[1]))["from"]
micro = [m for m in source["mapped"] if m["flag"] == "--micro-batch"][0]
assert source["format"] == "trl-grpo-yaml", source["format"]
assert micro["to"] == "16" and micro["overridden"] is True, micro
assert [i["key"] for i in source["ignored"]] == ["use_vllm"], source["ignored"]' "$work/from.json"; then
  echo "FAIL --from's JSON: expected format trl-grpo-yaml, --micro-batch 16 overridden, use_vllm ignored"; failures=$((failures + 1))
else
  echo "ok   --from's JSON names the mapped, the overridden and the ignored"
fi
mkdir -p "$work/local-model"
printf '{"model_type": "qwen2", "hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2, "intermediate_size": 4864, "vocab_size": 151936, "tie_word_embeddings": true}' \
  >"$work/local-model/config.json"
sed "s|^model_name_or_path: .*|model_name_or_path: $work/local-model|" "$recipe" >"$work/local_recipe.yaml"
expect_output "--from's model as a local folder reads its config.json" "qwen2 0.49 B parameters" --from "$work/local_recipe.yaml"
expect_bad "--from a missing file" "cannot be read" --from "$work/none.yaml"
expect_bad "--from a directory" "not a regular file" --from "$work"
printf '\x7fELF\x02\x01\x01\x00\x00\x00garbage\xff\xfe' >"$work/garbage.bin"
expect_bad "--from binary garbage" "is binary, not a JSON or YAML config" --from "$work/garbage.bin"
{ printf 'a0: &a0 [x, x, x, x, x, x, x, x, x]\n'
  for level in 1 2 3 4 5 6 7 8 9; do
    previous="*a$((level - 1))"
    printf 'a%d: &a%d [%s, %s, %s, %s, %s, %s, %s, %s, %s]\n' "$level" "$level" "$previous" "$previous" "$previous" "$previous" \
      "$previous" "$previous" "$previous" "$previous" "$previous"
  done; } >"$work/bomb.yaml"
expect_bad "--from a YAML alias bomb" "holds more than 20000 values" --from "$work/bomb.yaml"
printf 'num_generations: %s1%s\n' "$(printf '[%.0s' $(seq 200))" "$(printf ']%.0s' $(seq 200))" >"$work/deep.yaml"
expect_bad "--from deep nesting" "nests deeper than 32 levels" --from "$work/deep.yaml"
printf 'per_device_train_batch_size: four\nnum_generations: 8\n' >"$work/wrong_type.yaml"
expect_bad "--from a key of the wrong type" 'per_device_train_batch_size must be a whole number, not "four"' --from "$work/wrong_type.yaml"
printf 'learning_rate: 1.0e-6\nseed: 42\n' >"$work/unknown.yaml"
expect_bad "--from a config of neither trainer" "neither a TRL GRPOConfig" --from "$work/unknown.yaml"
expect_bad "--from with another phase" "describes an RL step" --from "$recipe" --phase train
expect_bad "--from a model it cannot read" "its model '~/models/deepseek-llm-7b-chat' is neither a preset" \
  --from "$configs/verl_ppo_trainer_defaults.yaml"
expect_bad "--from without a micro-batch" "needs --micro-batch" --from "$configs/verl_ppo_trainer_defaults.yaml" --model qwen2.5-7b
expect_bad "--from a file naming no model" "names no model" --from "$configs/trl_grpo_training_args.json"

# Response lengths as a distribution (issue 30, item 6): the step at each percentile's length, the
# longest response that fits the card, and the chance per step of drawing a longer one.
lengths=(--model qwen2.5-1.5b --phase grpo-step --prompts 8 --group 8 --prompt-len 512 --new-tokens 4096 --micro-batch 16 --grad-ckpt)
expect_output "the longest response that fits, by bisection" "The step fits up to 2,077 tokens of response: at 2,078 it needs 71.8 GiB" \
  "${lengths[@]}" --fit h100-80g --response-len-percentiles p50=600,p90=1200,p99=1800,p99.9=2400 --width 1000
expect_output "the chance per step from the percentiles" "P(a step draws one) = 1 - F(2,077)^64 = 31.3%" \
  "${lengths[@]}" --fit h100-80g --response-len-percentiles p50=600,p90=1200,p99=1800,p99.9=2400 --width 1000
expect_output "a percentile's peak" "p99            1,800   63.8 GiB  update        yes   47.4%" \
  "${lengths[@]}" --fit h100-80g --response-len-percentiles p50=600,p90=1200,p99=1800,p99.9=2400
expect_output "every length fits" "Every response up to the longest the data allows (1,024 tokens) fits" \
  "${lengths[@]}" --fit h100-80g --response-len-max 1024
expect_output "without a card the view says how to get the length" "Give --fit CARD (or --card with an engine)" \
  "${lengths[@]}" --response-len-max 3000
seq 1 1000 | awk '{ print int(($1 * 7919) % 1000) + 1 }' >"$work/lengths.txt"
expect_output "a file of observed lengths gives p50, p90, p99 and p99.9" "p99.9            999" "${lengths[@]}" --response-lens "$work/lengths.txt"
"$rlmem" plan "${lengths[@]}" --fit h100-80g --response-len-percentiles p50=600,p90=1200 --json >"$work/lengths.json"
if ! python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))["response_lengths"]
assert v["fitting_length"] == 2077 and v["fits_at_max"] is False and v["search_granularity_tokens"] == 1, v
assert [p["label"] for p in v["points"]] == ["p50", "p90", "max"], v["points"]
assert v["samples_per_step"] == 64 and v["max_length"] == 4096, v' "$work/lengths.json"; then
  echo "FAIL response lengths in the JSON: expected fitting_length 2077, points p50 p90 max"; failures=$((failures + 1))
else
  echo "ok   response lengths in the JSON"
fi
printf '12\nmany\n' >"$work/bad_lengths.txt"
expect_bad "--response-lens with a line that is no length" "line 2 is 'many', not a length in tokens" "${lengths[@]}" --response-lens "$work/bad_lengths.txt"
head -50 "$work/lengths.txt" >"$work/few_lengths.txt"
expect_bad "--response-lens with too few lengths" "50 lengths; a p99 needs at least 100" "${lengths[@]}" --response-lens "$work/few_lengths.txt"
expect_bad "--response-len-max beyond the cap" "--response-len-max 5000 is beyond --new-tokens 4096, the generation's cap" \
  "${lengths[@]}" --response-len-max 5000
expect_bad "a percentile beyond the max" "--response-len-percentiles p99=3500 is beyond the longest response, 3000" \
  "${lengths[@]}" --response-len-max 3000 --response-len-percentiles p50=500,p99=3500
expect_bad "percentiles out of order" "give the percentiles in increasing order" "${lengths[@]}" --response-len-percentiles p90=800,p50=300
expect_bad "a malformed percentile" "--response-len-percentiles 'median=300': expected pNN=TOKENS" "${lengths[@]}" \
  --response-len-percentiles median=300
expect_bad "both distributions" "give one" "${lengths[@]}" --response-len-percentiles p50=3 --response-lens "$work/lengths.txt"
expect_bad "lengths for train" "--response-len-* apply to --phase generate and grpo-step" --model qwen2.5-0.5b "${train[@]}" --response-len-max 100

[ $failures -eq 0 ] && echo "all plan CLI checks passed"
exit $failures
