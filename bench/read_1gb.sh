#!/bin/bash
# Side-by-side timing of whole `rlmem inspect --json` runs on one big decompressed snapshot:
# alternates the binaries given, RUNS times each, and prints per-run lines and medians of wall
# time, user time and peak RSS, with MB/s of file and RSS / file size.
# usage: bench/read_1gb.sh SNAPSHOT RUNS BINARY... (prefix with `taskset -c 0` for one core)
set -euo pipefail
snapshot=$1; runs=$2; shift 2
bytes=$(stat -c %s "$snapshot")
log=$(mktemp)
for ((run = 1; run <= runs; run++)); do
  for binary in "$@"; do
    /usr/bin/time -f "$binary %e %U %M" -o "$log.one" "$binary" inspect --json "$snapshot" > /dev/null
    cat "$log.one" >> "$log"
    echo "run $run: $(cat "$log.one")" >&2
  done
done
for binary in "$@"; do
  grep "^$binary " "$log" | awk -v bytes="$bytes" -v name="$binary" '
    { wall[NR] = $2; user[NR] = $3; rss[NR] = $4 }
    function median(a, n,   i, j, t) {
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    END {
      w = median(wall, NR); u = median(user, NR); r = median(rss, NR)
      printf "%s: median of %d: %.2f s wall (%.0f MB/s), %.2f s user (%.0f MB/s), peak RSS %.0f MB (%.2fx file)\n",
             name, NR, w, bytes / w / 1e6, u, bytes / u / 1e6, r * 1024 / 1e6, r * 1024 / bytes
    }'
done
rm -f "$log" "$log.one"
