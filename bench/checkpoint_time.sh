#!/usr/bin/env bash
# Checkpoint write and resume time against the step time, threads and MPI (4 ranks), for one
# model and plan: the median step without checkpoints, the median checkpoint write (every step,
# from the `checkpoint written` log records: shard + index + manifest + latest, fsync'd), its
# bytes, and the read of a resume (checksums, reassembly: the `checkpoint read` record), over
# STEPS steps.
# Usage: bench/checkpoint_time.sh [STEPS] heddle-run-arguments...
#   e.g. bench/checkpoint_time.sh 20 gpt-tiny --mesh 4 --strategy dp=2,tp=2 --hidden 256
set -euo pipefail
steps=${1:-20}
shift || true
[ $# -gt 0 ] || set -- gpt-tiny --mesh 4 --strategy dp=2,tp=2
heddle=${HEDDLE:-build/tools/heddle/heddle}
export OPENBLAS_NUM_THREADS=1
mpi=(mpirun --oversubscribe --allow-run-as-root --mca btl self,vader -np 4)
dir=$(mktemp -d /tmp/heddle_ckbench_XXXXXX)
trap 'rm -rf "$dir"' EXIT
num() { sed -n "s/.*\"$1\": *\([0-9.e+-]*\).*/\1/p"; }
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

for backend in threads mpi; do
  launch=("$heddle")
  [ "$backend" = mpi ] && launch=("${mpi[@]}" "$heddle")
  rm -rf "$dir/ck"
  step=$("${launch[@]}" run "$@" --train --steps "$steps" --json --backend "$backend" | num median_step_s)
  "${launch[@]}" run "$@" --train --steps "$steps" --json --backend "$backend" \
    --checkpoint "$dir/ck" --log-level info >/dev/null 2>"$dir/write.log"
  # rank 0's records (threads: the only process)
  grep '"checkpoint written' "$dir/write.log" | grep -v '"rank":[1-9]' >"$dir/w0" || true
  write=$(num seconds <"$dir/w0" | median)
  bytes=$(num bytes <"$dir/w0" | head -1)
  "${launch[@]}" run "$@" --train --steps $((steps + 1)) --json --backend "$backend" \
    --resume "$dir/ck" --log-level info >/dev/null 2>"$dir/read.log"
  read=$(grep '"checkpoint read' "$dir/read.log" | grep -v '"rank":[1-9]' | num seconds | head -1)
  awk -v b="$backend" -v s="$step" -v w="$write" -v n="$bytes" -v r="$read" 'BEGIN {
    printf "%-7s median step %.4f s | checkpoint write %.4f s (%.2f steps), rank 0 shard %.2f MB | resume read %.4f s (%.2f steps)\n",
      b, s, w, w / s, n / 1e6, r, r / s }'
done
