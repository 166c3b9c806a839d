#!/usr/bin/env bash
# Driver libraries are loaded in their seam only: dlopen/dlsym and calls of NVML's entry points
# appear in src/watch/nvml_gpu_source.cpp and nowhere else under src/ and include/ (names in
# comments are fine). A future seam that loads another driver library, the runtime's CUDA
# device, joins the allowed list by name.
set -u
cd "$1" || exit 1
allowed="src/watch/nvml_gpu_source.cpp"
status=0
# Files under src/ and include/ whose code, comments stripped, matches the pattern; less the seam.
outside() {
  find src include -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.c' \) | sort | while read -r file; do
    case " $allowed " in *" $file "*) continue ;; esac
    sed -e 's://.*$::' "$file" | grep -qE "$1" && echo "$file"
  done
}
found=$(outside '\bdl(open|sym)[[:space:]]*\(')
[ -n "$found" ] && { echo "FAIL dlopen/dlsym outside the seam: $found"; status=1; }
found=$(outside '\bnvml[A-Z][A-Za-z0-9_]*[[:space:]]*\(|\bnvml(Device|Return|Memory|ProcessInfo)_t\b')
[ -n "$found" ] && { echo "FAIL NVML called or declared outside the seam: $found"; status=1; }
# The check must still see the seam itself, or it guards nothing.
grep -qE '\bdlopen[[:space:]]*\(' "$allowed" || { echo "FAIL the seam no longer calls dlopen"; status=1; }
[ $status -eq 0 ] && echo "dlopen and NVML only in $allowed"
exit $status
