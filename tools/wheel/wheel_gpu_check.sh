#!/usr/bin/env bash
# The wheel on a GPU host: installed into a venv made from the Python that has torch
# (--system-site-packages, so torch comes from there), then the monitor, rlmem.record, rlmem watch
# and the runtime, each writing what it saw under $OUT (or ./wheel-gpu-check when OUT is unset).
#
#   tools/wheel/wheel_gpu_check.sh dist/rlmem-*.whl [TORCH_PYTHON]
#
# TORCH_PYTHON: the interpreter of the torch environment, a venv's or not (default: python3 on
# PATH). Exit code 0 when every check passed, 1 when one failed (OUT/summary.txt says which), 2 on
# bad arguments.
set -u
if [ $# -lt 1 ] || [ ! -f "$1" ]; then
  echo "usage: $0 WHEEL [TORCH_PYTHON] (the wheel of make wheel, dist/rlmem-*.whl)" >&2
  exit 2
fi
wheel=$(realpath "$1")
torch_python=${2:-python3}
here=$(dirname "$(realpath "$0")")
out=${OUT:-$PWD/wheel-gpu-check}
mkdir -p "$out"
out=$(realpath "$out")
work=$(mktemp -d)
summary="$out/summary.txt"
: > "$summary"
failed=0
note() { echo "$1" | tee -a "$summary"; }
check() {  # check NAME COMMAND...: runs it, its output to OUT/NAME.log, one summary line
  local name=$1; shift
  if "$@" > "$out/$name.log" 2>&1; then note "ok      $name"; else note "FAILED  $name (exit $?, $out/$name.log)"; failed=1; fi
}

if ! "$torch_python" -c 'import torch; assert torch.cuda.is_available()' > "$out/torch.log" 2>&1; then
  note "FAILED  $torch_python has no torch with CUDA ($out/torch.log)"
  exit 1
fi
{
  echo "host: $(uname -a)"
  ldd --version | head -1
  "$torch_python" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
  nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv 2>&1
} > "$out/environment.txt" 2>&1

venv="$work/V"
check venv "$torch_python" -m venv --system-site-packages "$venv"
# --system-site-packages gives the base interpreter's packages; where TORCH_PYTHON is itself a
# venv's, its site-packages (torch's) are added with a .pth file, so the new venv sees them too.
"$torch_python" -c 'import site, sys; print("\n".join(site.getsitepackages()) if sys.prefix != sys.base_prefix else "")' \
  > "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/torch_environment.pth"
check torch_in_venv "$venv/bin/python" -c 'import torch; print(torch.__file__)'
# --ignore-installed: an rlmem the torch environment already has must not count as this one.
check pip_install env PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/pip" install --no-index --ignore-installed "$wheel"
[ -x "$venv/bin/rlmem" ] || { note "FAILED  no rlmem command in $venv/bin after the install"; exit 1; }
library=$("$venv/bin/python" -c 'import rlmem; print(rlmem.library_path())' 2> "$out/import.log")
{
  echo "library: $library"
  readelf -d "$library" | grep -E 'NEEDED|SONAME'
  echo "resolved:"; ldd "$library"
  echo "the process's libstdc++ under torch:"
  "$venv/bin/python" -c 'import torch, rlmem; rlmem.version(); print(open("/proc/self/maps").read())' \
    | awk '/libstdc\+\+|librlmem|libc10\.so/ {print $NF}' | sort -u
} > "$out/library.txt" 2>&1

cd "$work" || exit 1  # away from any checkout: the venv's rlmem is the one imported
check version "$venv/bin/rlmem" --version
check python_m_version "$venv/bin/python" -m rlmem --version
check monitor_and_record "$venv/bin/python" "$here/wheel_gpu_check.py" monitor "$out"
snapshot=$(find "$out/snapshots" -type f 2>/dev/null | sort | tail -1)
if [ -n "$snapshot" ]; then
  check inspect_recording "$venv/bin/rlmem" inspect "$snapshot"
else
  note "FAILED  inspect_recording (rlmem.record wrote no snapshot under $out/snapshots)"; failed=1
fi
check watch_once "$venv/bin/rlmem" watch --once --log "$out/steps.jsonl"
# A few seconds of the live view as JSON, one object a refresh; timeout's 124 is the expected end.
timeout 5 "$venv/bin/rlmem" watch --json --interval 1 --log "$out/steps.jsonl" > "$out/watch.jsonl" 2> "$out/watch.err"
watch_status=$?
refreshes=$(grep -c '^{' "$out/watch.jsonl")
# The last refresh read the GPUs through NVML (the driver's library, loaded at run time).
gpus=$("$venv/bin/python" -c 'import json, sys
last = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print(len(last["gpus"]) if last["nvml"]["available"] else "no NVML: " + str(last["nvml"]["message"]))' \
  "$out/watch.jsonl" 2>&1)
if [ "$watch_status" = 124 ] && [ "$refreshes" -ge 3 ] && [ ! -s "$out/watch.err" ] && [ "${gpus:-0}" -gt 0 ] 2>/dev/null; then
  note "ok      watch_live ($refreshes refreshes in 5 s, $gpus GPUs through NVML)"
else
  note "FAILED  watch_live (exit $watch_status, $refreshes refreshes, GPUs: $gpus; $out/watch.err)"; failed=1
fi
check runtime "$venv/bin/python" "$here/wheel_gpu_check.py" runtime "$out"
rm -rf "$work"
exit $failed
