# one call, the card decides: an H200 runs the runner benchmark (c2.sh, BENCH_S
# its time limit), another card the tests with real graphs (c1.sh); both are
# the 05d run's scripts (as run, byte-identical copies sat in this folder)
set -u
scripts=$(dirname "$0")/../h100-2026-12-05d-kept-planned
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash "$scripts/c2.sh"
else
  bash "$scripts/c1.sh"
fi
