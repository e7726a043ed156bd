#!/usr/bin/env bash
# Soak: a bounded training run of STEPS steps (default 1000) on 4 MPI ranks (dp=2,tp=2), with a
# checkpoint every CKPT_EVERY steps (default 100), sampling every rank's resident memory (VmRSS)
# every INTERVAL seconds. Prints per rank the RSS after warm-up (the first 10% of samples), at
# the end, and the largest, and the growth end - warm-up; fails when a rank grew by more than
# LIMIT_MB (default 8 MB: noise of the allocator, not a leak per step).
# Usage: bench/soak.sh [STEPS] [CKPT_EVERY] [INTERVAL] [LIMIT_MB]
set -euo pipefail
steps=${1:-1000}
every=${2:-100}
interval=${3:-0.5}
limit_mb=${4:-8}
heddle=${HEDDLE:-build/tools/heddle/heddle}
export OPENBLAS_NUM_THREADS=1
dir=$(mktemp -d /tmp/heddle_soak_XXXXXX)
trap 'rm -rf "$dir"' EXIT
start=$(date +%s.%N)
mpirun --oversubscribe --allow-run-as-root --mca btl self,vader -np 4 \
  "$heddle" run gpt-tiny --mesh 4 --strategy dp=2,tp=2 --train --steps "$steps" --json \
  --backend mpi --checkpoint "$dir/ck" --checkpoint-every "$every" >"$dir/out" 2>"$dir/err" &
launcher=$!
# The ranks: heddle processes descending from this launcher (not other jobs' heddle processes).
descendants() {
  local kid
  for kid in $(pgrep -P "$1" || true); do
    echo "$kid"
    descendants "$kid"
  done
}
: >"$dir/rss"
while kill -0 "$launcher" 2>/dev/null; do
  for pid in $(descendants "$launcher"); do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = heddle ] || continue
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    [ -n "$rss" ] && echo "$pid $rss" >>"$dir/rss"
  done
  sleep "$interval"
done
wait "$launcher"
end=$(date +%s.%N)
median=$(sed -n 's/.*"median_step_s": *\([0-9.e+-]*\).*/\1/p' "$dir/out")
echo "$steps steps in $(awk "BEGIN{printf \"%.1f\", $end - $start}") s (median step $median s), checkpoint every $every"
awk -v limit="$limit_mb" '
  { n[$1]++; v[$1, n[$1]] = $2 }
  END {
    bad = 0
    for (p in n) {
      warm = v[p, int(n[p] / 10) + 1]; last = v[p, n[p]]; max = 0
      for (i = 1; i <= n[p]; i++) if (v[p, i] > max) max = v[p, i]
      grow = (last - warm) / 1024
      printf "rank pid %s: %d samples, RSS after warm-up %.1f MB, end %.1f MB, max %.1f MB, growth %+.1f MB\n", p, n[p], warm / 1024, last / 1024, max / 1024, grow
      if (grow > limit) bad = 1
    }
    if (bad) { print "FAIL: a rank grew by more than " limit " MB"; exit 1 }
    print "PASS: flat within " limit " MB"
  }' "$dir/rss"
