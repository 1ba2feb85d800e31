#!/bin/bash
# Paired fit timing after the package re-layout (issue 9): the old flat layout (a git worktree
# of 1250593 at /tmp/old) against the current tree, alternating, sharing one warm compile cache.
#   git worktree add /tmp/old 1250593 && bash bench/bench_layout_pair.sh
set -e
W=/tmp/pairwork; rm -rf $W; mkdir -p $W/data $W/models
cp /work/main/data/measurements.csv /work/main/data/hardware.csv /work/main/data/seed_estimates.csv $W/data/
cp /work/main/models/priors.toml $W/models/
export PYTENSOR_FLAGS=base_compiledir=/tmp/paircache/pytensor,numba__fastmath=False NUMBA_CACHE_DIR=/tmp/paircache/numba
cd $W
PY=/work/main/.venv/bin/python
old() { PYTHONPATH=/tmp/old/src $PY -c "import sys; from ddtree_bayes.cli import main; sys.exit(main(sys.argv[1:]))" fit --quiet --format json > /dev/null; }
new() { $PY -c "import sys; from ddtree_bayes.cli.main import main; sys.exit(main(sys.argv[1:]))" fit --quiet --format json > /dev/null; }
old; new   # warm-up both
for i in 1 2 3 4; do
  t0=$(date +%s.%N); old; t1=$(date +%s.%N); new; t2=$(date +%s.%N)
  echo "pair $i old $(echo "$t1 - $t0" | bc) new $(echo "$t2 - $t1" | bc)"
done
