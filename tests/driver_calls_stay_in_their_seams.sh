#!/usr/bin/env bash
# Driver libraries are loaded in their seams only (mimalloc's one place for platform calls):
# dlopen/dlsym in src/watch/nvml_gpu_source.cpp (NVML), src/device/cuda_device.cpp (CUDA's
# driver) and src/capi/torch_symbols.cpp (torch's libraries: its OOM type, its cuBLAS getters);
# NVML's entry points in the first, CUDA's driver symbols, libcuda and CUDA's headers in the CUDA
# device's two files, nowhere else under src/ and include/ (names in comments are fine).
set -u
cd "$1" || exit 1
status=0
# Files under src/ and include/ whose code, comments stripped, matches the pattern; less the
# allowed ones (the second argument, space-separated).
outside() {
  find src include -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.c' \) | sort | while read -r file; do
    case " $2 " in *" $file "*) continue ;; esac
    sed -e 's://.*$::' "$file" | grep -qE "$1" && echo "$file"
  done
}
nvml="src/watch/nvml_gpu_source.cpp"
cuda="src/device/cuda_device.cpp src/device/cuda_driver_api.hpp"
found=$(outside '\bdl(open|sym)[[:space:]]*\(' "$nvml src/device/cuda_device.cpp src/capi/torch_symbols.cpp")
[ -n "$found" ] && { echo "FAIL dlopen/dlsym outside the seams: $found"; status=1; }
found=$(outside '\bnvml[A-Z][A-Za-z0-9_]*[[:space:]]*\(|\bnvml(Device|Return|Memory|ProcessInfo)_t\b' "$nvml")
[ -n "$found" ] && { echo "FAIL NVML called or declared outside its seam: $found"; status=1; }
found=$(outside '"cu[A-Z][A-Za-z0-9_]*"|libcuda|#include <cuda(_runtime)?\.h>|\bCU(result|deviceptr|context)\b' "$cuda")
[ -n "$found" ] && { echo "FAIL the CUDA driver loaded or declared outside its seam: $found"; status=1; }
# The check must still see the seams themselves, or it guards nothing.
grep -qE '\bdlopen[[:space:]]*\(' "$nvml" || { echo "FAIL the NVML seam no longer calls dlopen"; status=1; }
grep -qE 'dlopen\("libcuda' src/device/cuda_device.cpp || { echo "FAIL the CUDA device no longer loads libcuda"; status=1; }
[ $status -eq 0 ] && echo "driver libraries loaded only in $nvml, src/device/cuda_device.cpp and src/capi/torch_symbols.cpp"
exit $status
