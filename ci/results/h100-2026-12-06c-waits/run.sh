# The series as main carries it (13 patches): on an H200, the runner benchmark
# (STEP=bench, then STEP=rest: --resume and the GPU tests, as
# ../gpu-2026-12-06-revision/run.sh runs them); on any other card, PROBE=lines
# (05j's statement profile of the kept replays, twice: sizes 1,32,64 then
# 64,32,1) or PROBE=waits (wait_probe.py, twice) or PROBE=trees (wait_probe.py over
# v0.5.23 and the queue) or PROBE=calls (call_probe.py, 3 times, no install),
# then exit 3 (PROBE=none: at once). build/v0.5.23/bundle and build/v0.5.23/without-last carried.
set -u
date -u +%FT%T >> "$OUT/times.txt"
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader >> "$OUT/times.txt"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case $card in
  *H200*) H200=1 STEP=${STEP:-bench} exec bash ci/results/gpu-2026-12-06-revision/run.sh ;;
esac
[ "${PROBE:-lines}" = none ] && exit 3
if [ "${PROBE:-lines}" = calls ]; then
  for n in 1 2 3; do
    taskset -c 14,15 python3 ci/results/h100-2026-12-06c-waits/call_probe.py > "$OUT/calls$n.txt" 2>&1
    echo "calls$n rc $? $(date -u +%T)" >> "$OUT/times.txt"
  done
  exit 3
fi
[ -d /tmp/site23 ] || bash build/v0.5.23/bundle/install.sh /tmp/site23 > "$OUT/install.log" 2>&1
echo "install rc $? $(date -u +%T)" >> "$OUT/times.txt"
export PYTHONPATH=scripts:/tmp/site23
case ${PROBE:-lines} in
  lines) script=ci/results/h100-2026-12-05j-kept-lines/kept_lines.py; runs="1,32,64 64,32,1" ;;
  waits) script=ci/results/h100-2026-12-06c-waits/wait_probe.py; runs="1 2" ;;
  trees)
    # wait_probe.py over v0.5.23 and the queue, alternating, 3 processes each.
    n=0
    for round in 1 2 3; do
      for tree in base sglang; do
        n=$((n + 1))
        WAITS=0,2000,8000 CALLS=150 taskset -c 14,15 python3 ci/results/h100-2026-12-06c-waits/wait_probe.py build/v0.5.23/$tree/python > "$OUT/trees$n-$tree.txt" 2>&1
        echo "trees$n-$tree rc $? $(date -u +%T)" >> "$OUT/times.txt"
      done
    done
    exit 3 ;;
esac
n=0
for sizes in $runs; do
  n=$((n + 1))
  KEPT_SIZES=$sizes taskset -c 14,15 python3 $script build/v0.5.23/sglang/python > "$OUT/${PROBE:-lines}$n.txt" 2>&1
  echo "${PROBE:-lines}$n rc $? $(date -u +%T)" >> "$OUT/times.txt"
done
exit 3
