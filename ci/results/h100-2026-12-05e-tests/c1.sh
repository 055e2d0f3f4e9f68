# call 1: install, then the GPU line's runner tests in two processes at once, then 0014's kit file alone
set -u
date -u +%FT%T > $OUT/c1-times.txt
nvidia-smi --query-gpu=name,uuid --format=csv,noheader >> $OUT/c1-times.txt
[ -d /tmp/site23 ] || bash build/v0.5.23/bundle/install.sh /tmp/site23 > $OUT/install.log 2>&1
echo "install rc $?" >> $OUT/c1-times.txt
export PYTHONPATH=scripts:/tmp/site23
date -u +%FT%T >> $OUT/c1-times.txt
(python3 -m pytest tests/v0_5_23/test_real_runner23.py --base v0.5.23 --graph-replays 300 -v -rfE -p no:cacheprovider > $OUT/g1.txt 2>&1; echo "rc $?" >> $OUT/g1.txt) &
(python3 -m pytest tests/v0_5_23/test_spec_runners23.py tests/v0_5_23/test_input_copies23.py tests/v0_5_23/test_registered23.py --base v0.5.23 -v -rfE -p no:cacheprovider > $OUT/g2.txt 2>&1; echo "rc $?" >> $OUT/g2.txt) &
wait
date -u +%FT%T >> $OUT/c1-times.txt
# 0014's kit file alone, timed (its est_time), as test_registered23's child runs it
R=$PWD; mkdir -p /tmp/g3 && printf '[pytest]\n' > /tmp/g3/pytest.ini
s=$(date +%s)
(cd /tmp/g3 && PYTHONPATH=$R/build/v0.5.23/sglang/python:$R/scripts:$R/tests/v0_5_23:/tmp/site23 REGTEST_DEVICE=cuda python3 -m pytest -c pytest.ini -p registered_env23 -p no:cacheprovider -q -rA --durations=0 $R/build/v0.5.23/sglang/test/registered/attention/unittests/test_runner_kept_replay.py > $OUT/g3.txt 2>&1; echo "rc $?" >> $OUT/g3.txt)
echo "g3 wall $(( $(date +%s) - s )) s" >> $OUT/g3.txt
date -u +%FT%T >> $OUT/c1-times.txt
tail -3 $OUT/g1.txt $OUT/g2.txt $OUT/g3.txt
