# the copy micro-benchmark (copies.py, two processes, on the tree the bundle
# unpacks), then the GPU tests of the queue with this folder's candidate
# folded in (its bundle carried): the runner tests with real graphs beside the
# upstream files' groups, as 05d's c1.sh ran them
set -u
date -u +%FT%T > "$OUT/times.txt"
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader >> "$OUT/times.txt"
[ -d /tmp/site23 ] || bash build/v0.5.23/bundle/install.sh /tmp/site23 > "$OUT/install.log" 2>&1
echo "install rc $?" >> "$OUT/times.txt"
d=ci/results/h100-2026-12-05k-copy-host
for i in 1 2; do
  PYTHONPATH=build/v0.5.23/sglang/python:scripts:/tmp/site23 taskset -c 14,15 python3 $d/copies.py > "$OUT/copies$i.txt" 2>&1
  echo "copies$i rc $? $(date -u +%T)" >> "$OUT/times.txt"
done
export PYTHONPATH=scripts:/tmp/site23
(python3 -m pytest tests/v0_5_23/test_real_runner23.py --base v0.5.23 --graph-replays 300 -q -rfE -p no:cacheprovider > "$OUT/g1.txt" 2>&1; echo "rc $?" >> "$OUT/g1.txt") &
(python3 -m pytest tests/v0_5_23/test_spec_runners23.py tests/v0_5_23/test_input_copies23.py tests/v0_5_23/test_registered23.py --base v0.5.23 -q -rfE -p no:cacheprovider > "$OUT/g2.txt" 2>&1; echo "rc $?" >> "$OUT/g2.txt") &
wait
echo "tests done $(date -u +%T)" >> "$OUT/times.txt"
tail -3 "$OUT/g1.txt" "$OUT/g2.txt"; cat "$OUT/times.txt"
