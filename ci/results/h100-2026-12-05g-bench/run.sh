# only on an H200: the runner benchmark over v0.5.23, v0.5.23 without 0014 and
# the queue, 5 rounds (BENCH_S: its time limit); the kept rounds are packed
# every 20 s, so a call cut by the session's device time still brings back
# what finished, and `--resume` runs only the missing processes
set -u
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case $card in *H200*) ;; *) echo "not an H200: $card"; exit 3 ;; esac
date -u +%FT%T > "$OUT/times.txt"
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader >> "$OUT/times.txt"
[ -d /tmp/site23 ] || bash build/v0.5.23/bundle/install.sh /tmp/site23 > "$OUT/install.log" 2>&1
echo "install rc $?" >> "$OUT/times.txt"
export PYTHONPATH=scripts:/tmp/site23
pack() { tar -czf "$OUT/.part.tgz" build/bench33 2> /dev/null && mv "$OUT/.part.tgz" "$OUT/bench33.tar.gz"; }
(while sleep 20; do pack; done) &
packer=$!
date -u +%FT%T >> "$OUT/times.txt"
timeout "${BENCH_S:-500}" python3 -m mla_bench --build build --base v0.5.23 --runners --runners-only --without-last --runner-rounds 5 --runner-batch-sizes 1,32,64 --runner-loop 30 --out-dir build/bench33 --no-chart ${RESUME:-} > "$OUT/bench.log" 2>&1
echo "bench rc $?" >> "$OUT/times.txt"
kill "$packer"
pack
date -u +%FT%T >> "$OUT/times.txt"
tail -5 "$OUT/bench.log"
