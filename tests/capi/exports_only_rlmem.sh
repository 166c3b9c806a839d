#!/usr/bin/env bash
# librlmem.so exports its C ABI and nothing else (no C++ symbols to clash with a host process).
# Usage: exports_only_rlmem.sh LIBRARY
set -u
library=$1
exported=$(nm -D --defined-only "$library" | awk '{print $NF}')
expected="rlmem_inspect_bytes rlmem_inspect_file rlmem_inspect_options_init rlmem_leak_check rlmem_report_bytes rlmem_report_file rlmem_status_name rlmem_string_free rlmem_version"
others=$(echo "$exported" | grep -v '^rlmem_' || true)
if [ -n "$others" ]; then echo "FAIL exports beyond rlmem_*:"; echo "$others" | head -20; exit 1; fi
for name in $expected; do
  echo "$exported" | grep -qx "$name" || { echo "FAIL $name is not exported"; exit 1; }
done
count=$(echo "$exported" | wc -l)
[ "$count" -eq 9 ] || { echo "FAIL $count symbols exported, expected the 9 of rlmem.h:"; echo "$exported"; exit 1; }
echo "librlmem exports exactly the 9 functions of rlmem.h"
