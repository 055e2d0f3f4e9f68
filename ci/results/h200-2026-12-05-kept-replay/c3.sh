# call 3: the benchmark's missing processes (--resume), then 5 processes of runner_check --pairs
set -u
date -u +%FT%T > $OUT/c3-times.txt
nvidia-smi --query-gpu=name,uuid --format=csv,noheader >> $OUT/c3-times.txt
[ -d /tmp/site23 ] || bash build/v0.5.23/bundle/install.sh /tmp/site23 > $OUT/install3.log 2>&1
export PYTHONPATH=scripts:/tmp/site23
[ -d build/bench33 ] || { [ -f gpu33/bench33-part.tar.gz ] && tar -xzf gpu33/bench33-part.tar.gz; }
date -u +%FT%T >> $OUT/c3-times.txt
timeout 300 python3 -m mla_bench --build build --base v0.5.23 --runners --runners-only --without-last --runner-rounds 5 --runner-batch-sizes 1,32,64 --runner-loop 30 --out-dir build/bench33 --no-chart --resume > $OUT/bench-resume.log 2>&1
echo "resume rc $?" >> $OUT/c3-times.txt
date -u +%FT%T >> $OUT/c3-times.txt
mkdir -p pairs
for i in 1 2 3 4 5; do
  timeout 100 taskset -c 14,15 python3 -m mla_harness.runner_check --tree build/v0.5.23/sglang/python --device cuda --pairs 100 --sizes 1,32,64 > pairs/$i.json 2> pairs/$i.err
  echo "pairs $i rc $? $(date -u +%T)" >> $OUT/c3-times.txt
done
tar -czf $OUT/results.tar.gz build/bench33 pairs
tail -5 $OUT/bench-resume.log
