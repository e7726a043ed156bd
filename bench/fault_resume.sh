#!/usr/bin/env bash
# Issue 21's fault test in full: a 4-rank MPI training run (checkpoint every CKPT_EVERY steps) is
# SIGKILLed KILLS times (default 20) and resumed after each kill; the final params_digest must
# equal the uninterrupted run's. Kills are seeded (SEED) and deterministic: three in four kill a
# random rank before a random collective (a random step, HEDDLE_TEST_FAIL_*), one in four a random
# rank during a random checkpoint write at a random phase (HEDDLE_TEST_CHECKPOINT_KILL: shard
# written not renamed / before the manifest / before `latest`). After each kill the script
# checks that `latest` never moves back (no completed checkpoint is lost) and that the resume
# starts right after it (0 steps lost beyond the last checkpoint).
# Usage: bench/fault_resume.sh [KILLS] [STEPS] [CKPT_EVERY] [SEED]
#   e.g. bench/fault_resume.sh 20 40 2 21
set -euo pipefail
kills=${1:-20}
steps=${2:-40}
every=${3:-2}
seed=${4:-21}
heddle=${HEDDLE:-build/tools/heddle/heddle}
args=(gpt-tiny --mesh 4 --strategy dp=2,tp=2 --train --steps "$steps" --json)
mpi=(mpirun --oversubscribe --allow-run-as-root --mca btl self,vader
  --mca btl_vader_single_copy_mechanism none --mca odls_base_sigkill_timeout 1 -np 4)
export OPENBLAS_NUM_THREADS=1
dir=$(mktemp -d /tmp/heddle_fault_XXXXXX)
trap 'rm -rf "$dir"' EXIT
digest() { sed -n 's/.*"params_digest": *"\([0-9a-f]*\)".*/\1/p'; }
latest_step() { [ -f "$dir/ck/latest" ] && sed 's/step-0*//' "$dir/ck/latest" || echo 0; }

want=$("$heddle" run "${args[@]}" | digest)
collectives=$("${mpi[@]}" "$heddle" run "${args[@]}" --backend mpi | sed -n 's/.*"collectives": *\([0-9]*\).*/\1/p')
per_run=$((collectives / 4 * steps))
echo "uninterrupted: params_digest $want ($collectives collectives per step over 4 ranks)"
RANDOM=$seed
phases=(shard manifest latest)
launches=0
before=0
fired=0
completed=0
while ((fired < kills)); do
  k=$((fired + 1))
  resume=()
  [ -f "$dir/ck/latest" ] && resume=(--resume "$dir/ck")
  rank=$((RANDOM % 4))
  if ((launches % 4 == 3)); then
    nth=$((RANDOM % 3 + 1))
    phase=${phases[$((RANDOM % 3))]}
    # manifest and latest are rank 0's phases
    [ "$phase" != shard ] && rank=0
    env=(HEDDLE_TEST_CHECKPOINT_KILL="$rank:$nth:$phase")
  else
    # a collective in the first half of what is left, so most kills land before the end
    left=$(((steps - $(latest_step)) * collectives / 4 / 2 + 1))
    at=$(((RANDOM * 32768 + RANDOM) % left + 1))
    env=(HEDDLE_TEST_FAIL_MODE=kill HEDDLE_TEST_FAIL_RANK="$rank" HEDDLE_TEST_FAIL_AT="$at")
  fi
  launches=$((launches + 1))
  set +e
  env "${env[@]}" "${mpi[@]}" "$heddle" run "${args[@]}" --backend mpi --checkpoint "$dir/ck" \
    --checkpoint-every "$every" "${resume[@]}" --log-level info >"$dir/out" 2>"$dir/err"
  code=$?
  set -e
  now=$(latest_step)
  echo "launch $launches, kill $k: ${env[*]}: exit $code, latest checkpoint step $before -> $now"
  # 0 steps lost beyond the last checkpoint: the resume starts right after it.
  if ((${#resume[@]} > 0)) && ! grep -q "resuming at step $((before + 1)) " "$dir/err"; then
    echo "FAIL: the launch did not resume at step $((before + 1))" >&2
    exit 1
  fi
  if ((now < before)); then
    echo "FAIL: the latest checkpoint moved back" >&2
    exit 1
  fi
  before=$now
  if ((code == 0)); then
    echo "  (the run completed before the kill fired: not counted; starting over)"
    got=$(digest <"$dir/out")
    [ "$got" = "$want" ] || { echo "FAIL: digest $got != $want" >&2; exit 1; }
    completed=$((completed + 1))
    rm -rf "$dir/ck"
    before=0
  else
    fired=$((fired + 1))
  fi
done
resume=()
[ -f "$dir/ck/latest" ] && resume=(--resume "$dir/ck")
"${mpi[@]}" "$heddle" run "${args[@]}" --backend mpi --checkpoint "$dir/ck" \
  --checkpoint-every "$every" "${resume[@]}" --log-level info >"$dir/out" 2>"$dir/err"
launches=$((launches + 1))
got=$(digest <"$dir/out")
grep -m1 "resuming at step" "$dir/err" | sed 's/^/final launch: /' || true
echo "$kills kills fired in $launches launches ($completed runs completed before their kill, each checked and restarted): final params_digest $got, uninterrupted $want"
if [ "$got" != "$want" ]; then
  echo "FAIL: the resumed run's parameters differ from the uninterrupted run's" >&2
  exit 1
fi
echo "PASS: bit-identical"
