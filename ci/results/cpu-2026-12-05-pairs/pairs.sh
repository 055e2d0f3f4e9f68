#!/bin/bash
# pairs.sh OUTDIR N TREE: N processes of `runner_check --pairs 100 --sizes 1,32
# --host-only` on TREE (a python/ root), one after another, each pinned to CPU 1
# under nice 19; run from the repository root. OUTDIR/<process>.json.
set -eu
out=$1 n=$2 tree=$3
mkdir -p "$out"
for i in $(seq 1 "$n"); do
  PYTHONPATH=scripts taskset -c 1 nice -n 19 .venv/bin/python -m mla_harness.runner_check \
    --tree "$tree" --device cpu --pairs 100 --sizes 1,32 --host-only \
    > "$out/$i.json" 2> "$out/$i.err"
done
