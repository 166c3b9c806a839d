#!/usr/bin/env bash
# Moves each part's headers from include/rlmem/ into include/rlmem/<part>/ (only the C ABI's
# rlmem.h and rlmem_runtime.h, and version.h, stay at the top) and rewrites every reference to
# them: #include lines, CMake, scripts, docs. Reproducible, and idempotent: a rewritten path is
# not matched again.
#
#   tools/dev/move_headers.sh                  git mv the headers, then rewrite every tracked file
#   tools/dev/move_headers.sh --rewrite F...   rewrite only the files F (a branch's files written
#                                              against the old layout, when it is merged)
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"

# part header...: the folder under include/rlmem/ and the headers it takes.
parts=(
  "base error.hpp format.hpp regular_file.hpp usable_cores.hpp saturating.hpp whole_number.hpp output_file.hpp enum_names.hpp"
  "snapshot snapshot.hpp snapshot_reader.hpp"
  "device device.hpp fake_device.hpp cuda_device.hpp timed_device.hpp"
  "policy allocator_policy.hpp rlmem_policy.hpp"
  "model model.hpp allocator_settings.hpp allocator_rules.hpp caching_allocator.hpp live_set.hpp trace_simulation.hpp allocator_choice.hpp"
  "runtime runtime.hpp"
  "step_rules step_rules.hpp"
  "inspect inspect.hpp compare.hpp views.hpp"
  "replay replay.hpp"
  "plan plan.hpp trainer_config.hpp"
  "watch watch.hpp"
  "report report.hpp"
)

# One perl substitution per header: rlmem/NAME -> rlmem/PART/NAME where "rlmem/" starts a path
# (after "<", a quote, a space, "include/" or a line's start), never inside a longer name.
program=""
for row in "${parts[@]}"; do
  read -r part headers <<<"$row"
  for header in $headers; do
    quoted=${header//./\\.}
    program+="s{(^|[^A-Za-z0-9_./-]|include/)rlmem/${quoted}\\b}{\$1rlmem/${part}/${header}}g;"
  done
done

rewrite() {
  # Only files that name a header of the old layout are touched (and so their times kept).
  local file
  for file in "$@"; do
    [ -f "$file" ] || continue
    if grep -qE 'rlmem/[a-z_]+\.hpp' "$file"; then
      perl -pi -e "$program" "$file"
    fi
  done
}

if [ "${1:-}" = "--rewrite" ]; then
  shift
  rewrite "$@"
  exit 0
fi

for row in "${parts[@]}"; do
  read -r part headers <<<"$row"
  mkdir -p "include/rlmem/$part"
  for header in $headers; do
    if [ -f "include/rlmem/$header" ]; then
      git mv "include/rlmem/$header" "include/rlmem/$part/$header"
    fi
  done
done
# Every tracked text file but this script (whose table names the old paths on purpose).
mapfile -t files < <(git ls-files | grep -vx 'tools/dev/move_headers.sh' | grep -vE '\.(zst|gz|pickle|png|bin)$')
rewrite "${files[@]}"
