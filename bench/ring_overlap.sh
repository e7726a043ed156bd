#!/usr/bin/env bash
# Ring attention's overlap on and off (`heddle run --no-ring-overlap`), on threads and on MPI
# ranks, interleaved round by round so that load from other jobs hits both alike. Per run: the
# median step (`median_step_s` of `--json`) and the process CPU time (user + sys, all ranks).
# Prints one line per run, then the median of each configuration over the rounds.
# Usage: bench/ring_overlap.sh RANKS ROUNDS heddle-run-arguments...
#   e.g. bench/ring_overlap.sh 4 5 gpt-tiny --mesh 4 --strategy cp=4 --train --steps 20
# RANKS 0 skips MPI.
set -euo pipefail
ranks=${1:?RANKS} rounds=${2:?ROUNDS}
shift 2
args=("$@")
heddle=${HEDDLE:-build/tools/heddle/heddle}
out=$(mktemp) cpu=$(mktemp)
trap 'rm -f "$out" "$cpu"' EXIT
export OPENBLAS_NUM_THREADS=1
step() { sed -n 's/.*"median_step_s": *\([0-9.e+-]*\).*/\1/p'; }

run() {  # backend overlap(on|off)
  local flag=() launch=()
  [[ $2 == off ]] && flag=(--no-ring-overlap)
  [[ $1 == mpi ]] && launch=(mpirun --oversubscribe --allow-run-as-root --mca btl self,vader
    -np "$ranks")
  /usr/bin/time -f '%U %S' -o "$cpu" "${launch[@]}" "$heddle" run "${args[@]}" "${flag[@]}" \
    ${launch:+--backend mpi} --json 2>/dev/null >"$out" || true
  printf '%s %s step %s s cpu %s s\n' "$1" "$2" "$(step <"$out")" \
    "$(awk '{printf "%.2f", $1 + $2}' "$cpu")"
}

backends=(threads)
[[ $ranks -gt 0 ]] && backends+=(mpi)
lines=()
for _ in $(seq "$rounds"); do
  for b in "${backends[@]}"; do
    for o in on off; do
      line=$(run "$b" "$o")
      echo "$line"
      lines+=("$line")
    done
  done
done
echo "medians over $rounds rounds:"
printf '%s\n' "${lines[@]}" | python3 -c '
import statistics, sys
runs = {}
for line in sys.stdin:
    w = line.split()
    if w[3]:
        runs.setdefault(w[0] + " " + w[1], []).append((float(w[3]), float(w[6])))
for k in sorted(runs):
    v = runs[k]
    print("%-12s step %.4f s  cpu %.2f s" % (k, statistics.median(x[0] for x in v),
                                             statistics.median(x[1] for x in v)))'
