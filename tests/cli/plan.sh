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
expect_bad "negative count" "--gpus: '-1' is not a whole number from 0 to 18446744073709551615" --model qwen2.5-0.5b "${grpo[@]}" --gpus -1
expect_bad "a batch beyond any GPU (it once hung --fit)" "--batch 576460752303423488 is beyond" --model qwen2.5-0.5b "${grpo[@]}" \
  --batch 576460752303423488 --fit h100-80g
expect_bad "tokens beyond any GPU" "beyond any GPU" --model qwen2.5-72b --phase train --micro-batch 1048576 --seq-len 16777216
expect_bad "a buffer given twice" "--buffer 'x' is given twice" --model qwen2.5-0.5b "${grpo[@]}" --buffer x=4:int8 --buffer x=5:int8
expect_bad "a buffer with no phase after @" "no phase after '@'" --model qwen2.5-0.5b "${grpo[@]}" --buffer x=4:fp32@
expect_bad "a one-token sequence" "--seq-len must be at least 2" --model qwen2.5-0.5b --phase train --micro-batch 1 --seq-len 1
expect_bad "a card smaller than the CUDA context" "less than the CUDA context" --model qwen2.5-0.5b "${grpo[@]}" --fit 500MiB

expect_output "text report names the peak phase" "Peak 39.6 GiB per GPU in update" --model qwen2.5-0.5b "${grpo[@]}"
expect_output "config.json path" "llama  1.24 B parameters" --model "$testdata/planner/configs/llama3.2-1b.json" \
  --phase generate --batch 8 --prompt-len 256 --new-tokens 256
expect_output "fit starts from your config" "Your config needs 72.7 GiB; 71.7 GiB usable: it does not fit." \
  --model qwen2.5-1.5b "${grpo[@]}" --fit h100-80g
expect_output "presets are listed" "qwen3-32b" --list-models

[ $failures -eq 0 ] && echo "all plan CLI checks passed"
exit $failures
