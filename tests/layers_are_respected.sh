#!/usr/bin/env bash
# Layers, lower never including higher: snapshot -> model -> inspect, replay, plan -> report -> cli.
# A part includes another part's public headers (<rlmem/...>) only from a lower layer, and no
# part reaches into another's private headers ("other_part/x.hpp").
set -u
root=$1
status=0
# forbid PART PATTERN WHY: fail when a source of src/PART includes a header matching PATTERN.
forbid() {
  local found
  found=$(grep -rnE "^#include [<\"]($2)" "$root/src/$1" 2>/dev/null)
  if [ -n "$found" ]; then
    echo "FAIL src/$1 includes $3:"; echo "$found"; status=1
  fi
}
public_of_inspect='rlmem/(inspect|compare)\.hpp'
public_above_model="$public_of_inspect|rlmem/(replay|plan|report|watch)\.hpp"
forbid snapshot "rlmem/(model|allocator_[a-z]+|live_set|caching_allocator|rlmem_policy|saturating|trace_simulation|device|fake_device|cuda_device|timed_device)\.hpp|$public_above_model" "a header of a higher layer"
forbid model "$public_above_model" "a header of a higher layer"
forbid inspect "rlmem/(replay|plan|report|watch)\.hpp" "a header of replay, plan or a higher layer"
forbid replay "$public_of_inspect|rlmem/(plan|report|watch)\.hpp" "a header of inspect, plan or a higher layer"
forbid report "rlmem/(cli)\.hpp" "a header of the CLI"
# The step-end rules are plain arithmetic under inspect and watch: no other part's headers.
found=$(grep -rnE '^#include [<"]rlmem/' "$root/src/step_rules" "$root/include/rlmem/step_rules/step_rules.hpp" | grep -vE 'rlmem/(step_rules|saturating)\.hpp')
if [ -n "$found" ]; then
  echo "FAIL src/step_rules includes a header of another part:"; echo "$found"; status=1
fi
if grep -oE "rlmem_[a-z_]+" "$root/src/step_rules/CMakeLists.txt" | grep -vqxE "rlmem_(step_rules|warnings)"; then
  echo "FAIL src/step_rules/CMakeLists.txt links another part"; status=1
fi
# The device seam is the lowest part: it includes no other part's headers.
found=$(grep -rnE '^#include [<"]rlmem/' "$root/src/device" | grep -vE 'rlmem/(device|fake_device|cuda_device|timed_device)\.hpp')
if [ -n "$found" ]; then
  echo "FAIL src/device includes a header of another part:"; echo "$found"; status=1
fi
for part in "$root"/src/*/; do
  part=$(basename "$part")
  forbid "$part" "(device|snapshot|model|inspect|replay|plan|report|watch|capi|cli|step_rules)/" "another part's private header"
done
# The model's public headers include only the layers below them.
found=$(grep -nE "^#include <($public_above_model)" "$root"/include/rlmem/{model,allocator_settings,allocator_rules,allocator_policy,live_set,caching_allocator,rlmem_policy,saturating,trace_simulation}.hpp)
if [ -n "$found" ]; then
  echo "FAIL the model's public headers include a higher layer:"; echo "$found"; status=1
fi
# The runtime is the policy over the device: it includes neither the snapshot reader nor any
# layer above the model, and links only the policy and the device seam.
forbid runtime "rlmem/(snapshot|snapshot_reader|live_set|trace_simulation)\\.hpp|$public_above_model" "the snapshot reader or a higher layer"
if grep -qE "rlmem_(snapshot|model|replay|inspect|report)\b" "$root/src/runtime/CMakeLists.txt"; then
  echo "FAIL src/runtime/CMakeLists.txt links more than the policy and the device seam"; status=1
fi
# replay links the model, not inspect.
if grep -q "rlmem_inspect" "$root/src/replay/CMakeLists.txt"; then
  echo "FAIL src/replay/CMakeLists.txt links rlmem_inspect"; status=1
fi
[ $status -eq 0 ] && echo "every part includes only its own and lower layers' headers"
exit $status
