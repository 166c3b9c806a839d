#!/usr/bin/env bash
# librlmem.so exports its C ABI (rlmem.h, rlmem_runtime.h) and nothing else (no C++ symbols to clash with a host process).
# Usage: exports_only_rlmem.sh LIBRARY
set -u
library=$1
# Defined, not LOCAL: the linker may leave localised symbols in .dynsym (LOCAL binding: no other
# object can bind to them), as link-time optimisation of part of the library does. Not ABS: the
# version node's own name (RLMEM_MAJOR.MINOR, soname_is_the_project_version.sh) is no function.
exported=$(readelf --dyn-syms -W "$library" | awk '$1 ~ /^[0-9]+:$/ && $5 != "LOCAL" && $7 != "UND" && $7 != "ABS" && NF >= 8 {sub(/@.*/, "", $8); print $8}')
expected="rlmem_check_inspect_option rlmem_inspect_bytes rlmem_inspect_file rlmem_inspect_options_init rlmem_inspect_options_init_sized rlmem_leak_check rlmem_step_rules_init rlmem_step_rules_init_sized rlmem_judge_step rlmem_judge_imbalance rlmem_report_bytes rlmem_report_file rlmem_read_option_file rlmem_write_file rlmem_status_name rlmem_string_free rlmem_version
  rlmem_runtime_options_init rlmem_runtime_options_init_sized rlmem_runtime_configure rlmem_runtime_open_cuda rlmem_runtime_open_fake rlmem_runtime_close rlmem_runtime_is_open
  rlmem_runtime_allocate rlmem_runtime_free rlmem_runtime_enter_region rlmem_runtime_leave_region rlmem_runtime_pause
  rlmem_runtime_resume rlmem_runtime_release_graph_memory rlmem_runtime_blocks_still_filled_json rlmem_runtime_empty_cache rlmem_runtime_release_host_buffers rlmem_runtime_reserve_host_buffers rlmem_runtime_reset_peaks rlmem_runtime_growable_reserve rlmem_runtime_grow rlmem_runtime_growable_release rlmem_runtime_read rlmem_runtime_write rlmem_runtime_statistics_json rlmem_runtime_snapshot_json
  rlmem_torch_malloc rlmem_torch_free rlmem_torch_pool_malloc rlmem_torch_prepare_libraries"
others=$(echo "$exported" | grep -v '^rlmem_' || true)
if [ -n "$others" ]; then echo "FAIL exports beyond rlmem_*:"; echo "$others" | head -20; exit 1; fi
for name in $expected; do
  echo "$exported" | grep -qx "$name" || { echo "FAIL $name is not exported"; exit 1; }
done
count=$(echo "$exported" | wc -l)
wanted=$(echo $expected | wc -w)
[ "$count" -eq "$wanted" ] || { echo "FAIL $count symbols exported, expected the $wanted of rlmem.h and rlmem_runtime.h:"; echo "$exported"; exit 1; }
echo "librlmem exports exactly the $wanted functions of rlmem.h and rlmem_runtime.h"
