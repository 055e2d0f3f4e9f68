#!/bin/bash
# rounds.sh OUTDIR N BEFORE AFTER: N rounds of `runner_check --host-only` on two
# trees' python/ roots, alternating which goes first, each pinned to CPU 1 under
# nice 19; run from the repository root. OUTDIR/<round>-<before|after>.json.
set -eu
out=$1 n=$2 before=$3 after=$4
mkdir -p "$out"
for i in $(seq 1 "$n"); do
  if [ $((i % 2)) = 1 ]; then order="before after"; else order="after before"; fi
  for t in $order; do
    if [ "$t" = before ]; then tree=$before; else tree=$after; fi
    PYTHONPATH=scripts taskset -c 1 nice -n 19 .venv/bin/python -m mla_harness.runner_check \
      --tree "$tree" --device cpu --time 200 --loop 200 --sizes 1,32 --host-only \
      > "$out/$i-$t.json" 2> "$out/$i-$t.err"
  done
done
