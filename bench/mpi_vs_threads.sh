#!/usr/bin/env bash
# MPI against threads for the same plan: the best of REPS `heddle run --json` wall times (the
# step, without process start-up, planning or the reference check) per backend, and their ratio.
# Usage: bench/mpi_vs_threads.sh RANKS REPS heddle-run-arguments...
#   e.g. bench/mpi_vs_threads.sh 4 5 gpt-tiny --mesh 4 --strategy dp=2,tp=2 --hidden 256
set -euo pipefail
ranks=$1
reps=$2
shift 2
heddle=${HEDDLE:-build/tools/heddle/heddle}
export OPENBLAS_NUM_THREADS=1

wall() { sed -n 's/.*"wall_time_s": *\([0-9.e+-]*\).*/\1/p'; }
best() { sort -g | head -1; }

t_threads=$(for _ in $(seq "$reps"); do "$heddle" run "$@" --json | wall; done | best)
t_mpi=$(for _ in $(seq "$reps"); do
  mpirun --oversubscribe --allow-run-as-root --mca btl self,vader -np "$ranks" \
    "$heddle" run "$@" --backend mpi --json | wall
done | best)
echo "threads ${t_threads} s, mpi ${t_mpi} s, mpi/threads $(awk "BEGIN{printf \"%.2f\", $t_mpi/$t_threads}")"
