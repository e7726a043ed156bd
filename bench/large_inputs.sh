#!/usr/bin/env bash
# Limits: wall time and peak memory (max RSS, GNU time) of heddle on very large inputs — a text-IR
# graph of OPS ops through show (parse + verify + summary), a 4096-device cluster through plan and
# simulate, and the search's --time-limit against the wall time it actually took.
# Usage: bench/large_inputs.sh [OPS]   (default 1000000; HEDDLE=path/to/heddle)
# Prints wall time, CPU time (user + sys) and peak RSS per command.
set -euo pipefail
ops=${1:-1000000}
heddle=${HEDDLE:-build/tools/heddle/heddle}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A chain of OPS elementwise ops on f32[4, 8]: relu, add of a parameter, relu, ...
awk -v n="$ops" 'BEGIN {
  print "graph chain {"; print "  input %v0: f32[4, 8]"; print "  param %b: f32[4, 8]";
  for (i = 1; i <= n; i++)
    if (i % 2) printf "  %%v%d: f32[4, 8] = relu [m=4, n=8] %%v%d(m, n) -> (m, n)\n", i, i - 1;
    else printf "  %%v%d: f32[4, 8] = add [m=4, n=8] %%v%d(m, n), %%b(m, n) -> (m, n)\n", i, i - 1;
  printf "  output %%v%d\n}\n", n }' > "$tmp/chain.hd"

measure() {  # label, then the heddle arguments
  local label=$1
  shift
  /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" "$heddle" "$@" >"$tmp/out" 2>"$tmp/err" || {
    echo "$label: exit $? $(tail -1 "$tmp/err")"
    return
  }
  read -r wall user sys rss <"$tmp/time"
  printf "%-62s %8.2f s wall %8.2f s CPU %9.1f MiB\n" "$label" "$wall" \
    "$(awk "BEGIN{print $user + $sys}")" "$(awk "BEGIN{print $rss/1024}")"
}

echo "input: $(du -h "$tmp/chain.hd" | cut -f1) of text IR, $ops ops"
measure "show ($ops-op text IR)" show "$tmp/chain.hd"
measure "show --json ($ops-op text IR)" show --json "$tmp/chain.hd"
measure "show --text (round trip, $ops ops)" show "$tmp/chain.hd" --text "$tmp/again.hd"
measure "plan gpt3-175b --train on a100x4096 (time limit 30 s)" plan gpt3-175b --cluster a100x4096 --train --batch 4096 --time-limit 30
measure "simulate gpt3-175b --train on a100x4096 dp=512,tp=8,zero=3" simulate gpt3-175b --cluster a100x4096 --train --batch 4096 --strategy dp=512,tp=8,zero=3,recompute=full,mb=1
for limit in 1 2 5; do
  measure "plan gpt3-175b --train on a100x4096 --time-limit $limit" plan gpt3-175b --cluster a100x4096 --train --batch 4096 --time-limit "$limit"
done
