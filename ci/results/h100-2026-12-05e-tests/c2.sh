# call 2: the runner benchmark over three trees, 5 rounds (BENCH_S: its time limit, 530 s)
set -u
date -u +%FT%T > $OUT/c2-times.txt
nvidia-smi --query-gpu=name,uuid --format=csv,noheader >> $OUT/c2-times.txt
[ -d /tmp/site23 ] || bash build/v0.5.23/bundle/install.sh /tmp/site23 > $OUT/install2.log 2>&1
export PYTHONPATH=scripts:/tmp/site23
date -u +%FT%T >> $OUT/c2-times.txt
timeout ${BENCH_S:-530} python3 -m mla_bench --build build --base v0.5.23 --runners --runners-only --without-last --runner-rounds 5 --runner-batch-sizes 1,32,64 --runner-loop 30 --out-dir build/bench33 --no-chart > $OUT/bench.log 2>&1
echo "bench rc $?" >> $OUT/c2-times.txt
date -u +%FT%T >> $OUT/c2-times.txt
tar -czf $OUT/bench33-part.tar.gz build/bench33
tail -5 $OUT/bench.log
