# The GPU tests of the revised PR 7 / PR 8 (main's series, the bundle of
# `make bundle BASE=v0.5.23` carried): test_real_runner23 with 300 graph
# replays beside the upstream files' groups, two processes at once.
set -u
date -u +%FT%T > "$OUT/times.txt"
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader >> "$OUT/times.txt"
bash build/v0.5.23/bundle/install.sh /tmp/site23 > "$OUT/install.log" 2>&1
echo "install rc $? $(date -u +%T)" >> "$OUT/times.txt"
export PYTHONPATH=scripts:/tmp/site23
timeout 300 python3 -m pytest tests/v0_5_23/test_real_runner23.py --base v0.5.23 --graph-replays 300 -v -rfE -p no:cacheprovider > "$OUT/g1.txt" 2>&1 &
timeout 300 python3 -m pytest tests/v0_5_23/test_spec_runners23.py tests/v0_5_23/test_input_copies23.py tests/v0_5_23/test_registered23.py --base v0.5.23 -v -rfE -p no:cacheprovider > "$OUT/g2.txt" 2>&1
wait
echo "tests done $(date -u +%T)" >> "$OUT/times.txt"
tail -n 3 "$OUT/g1.txt"
tail -n 3 "$OUT/g2.txt"
