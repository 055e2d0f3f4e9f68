# The revision of PR 7 / PR 8 (main at 460bb76, 13 patches): the runner
# benchmark over v0.5.23, the queue without 0013 (PR 8) and the queue, then the
# GPU tests (build/v0.5.23/bundle and build/v0.5.23/without-last carried).
# STEP=bench: the benchmark, ROUNDS (5) rounds, packed every 20 s, on whichever card
# came (times.txt names it). STEP=rest: the missing processes (--resume), then
# the GPU tests, two processes at once. STEP=tests: the tests only. H200=1:
# exit 3 on another card, after the install.
set -u
date -u +%FT%T >> "$OUT/times.txt"
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader >> "$OUT/times.txt"
[ -d /tmp/site23 ] || bash build/v0.5.23/bundle/install.sh /tmp/site23 > "$OUT/install.log" 2>&1
echo "install rc $?" >> "$OUT/times.txt"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case ${H200:-0}:$card in 1:*H200*|0:*) ;; *) echo "not an H200: $card"; exit 3 ;; esac
export PYTHONPATH=scripts:/tmp/site23
step=${STEP:-bench}
bench() {
  pack() { tar -czf "$OUT/.part.tgz" build/bench33 2> /dev/null && mv "$OUT/.part.tgz" "$OUT/bench33.tar.gz"; }
  (while sleep 20; do pack; done) &
  packer=$!
  timeout "$1" python3 -m mla_bench --build build --base v0.5.23 --runners --runners-only --without-last --runner-rounds ${ROUNDS:-5} --runner-batch-sizes 1,32,64 --runner-loop 30 --out-dir build/bench33 --no-chart $2 > "$OUT/$3" 2>&1
  echo "bench rc $? $(date -u +%T)" >> "$OUT/times.txt"
  kill "$packer"; pack
}
tests() {
  python3 -m pytest tests/v0_5_23/test_real_runner23.py --base v0.5.23 --graph-replays 300 -v -rfE -p no:cacheprovider > "$OUT/g1.txt" 2>&1 &
  python3 -m pytest tests/v0_5_23/test_spec_runners23.py tests/v0_5_23/test_input_copies23.py tests/v0_5_23/test_registered23.py --base v0.5.23 -v -rfE -p no:cacheprovider > "$OUT/g2.txt" 2>&1
  wait
  echo "tests done $(date -u +%T)" >> "$OUT/times.txt"
  tail -n 3 "$OUT/g1.txt" "$OUT/g2.txt"
}
case $step in
  bench) bench "${BENCH_S:-500}" "" bench.log ;;
  rest) bench 150 --resume bench-resume.log; tests ;;
  tests) tests ;;
esac
tail -5 "$OUT"/bench*.log 2> /dev/null
