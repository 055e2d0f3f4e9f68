# call 5: the queue without and with 0014, 3 rounds alternating, runner_check pinned as the benchmark pins it,
# verify planned ahead as v0.5.23's EAGLE worker runs it (runner_check at main's 53d35df and later)
set -u
date -u +%FT%T > $OUT/c5-times.txt
nvidia-smi --query-gpu=name,uuid --format=csv,noheader >> $OUT/c5-times.txt
[ -d /tmp/site23 ] || bash build/v0.5.23/bundle/install.sh /tmp/site23 > $OUT/install5.log 2>&1
export PYTHONPATH=scripts:/tmp/site23
python3 -c "from sglpatch.layout import Layout; from mla_bench import ladder; l = Layout.create('build', base='v0.5.23'); print(ladder.without_last(l, l.sglang / 'python'))" >> $OUT/c5-times.txt 2>&1
mkdir -p planned
for i in 1 2 3; do
  if [ $((i % 2)) = 1 ]; then order="before after"; else order="after before"; fi
  for t in $order; do
    if [ "$t" = before ]; then tree=build/v0.5.23/without-last-tree/python; else tree=build/v0.5.23/sglang/python; fi
    timeout 60 taskset -c 14,15 python3 -m mla_harness.runner_check --tree $tree --device cuda --time 100 --loop 30 --sizes 1,32,64 > planned/$i-$t.json 2> planned/$i-$t.err
    echo "$i $t rc $? $(date -u +%T)" >> $OUT/c5-times.txt
  done
done
tar -czf $OUT/planned.tar.gz planned
tail -8 $OUT/c5-times.txt
