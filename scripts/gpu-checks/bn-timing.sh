#!/usr/bin/env bash
# The Bayesian network sweep of issue 38 timed: the public fit against its bare step, user_path.py bayesnet, and each
# kernel with its launch variants (the part of bayesnet.sh after its issue-38 tests). $1: the folder for the JSON.
OUT=${1:-${OUT:-out}}; mkdir -p "$OUT"
python -m benchmarks.bayesnet "$OUT" --user-path          # public fit and bare step, $OUT/bayesnet-user-path.json
for f in scripts/user_path.py ../shared/bench/user_path.py; do  # the reference measurement, where present
  if [ -f "$f" ]; then python "$f" bayesnet --out "$OUT/user_path_bayesnet.json"; break; fi
done
# The suite's kernel timing (benchmarks/bayesnet.py: each kernel on its own, Koller 10^6, half missing, m = 10), and
# the suite's per-iteration row, with the defaults and the counts/sweep launch variants; JSON under $OUT.
python - "$OUT" <<'EOF'
import sys
from pathlib import Path

from benchmarks import bayesnet as B
from benchmarks.harness import Bench, format_table
from gpumcmc._config import config
from gpumcmc.models.bayesnet import BayesianNetwork

bench, koller = Bench(), BayesianNetwork.koller()
bench.suite = "bayesnet"
X = B._data(koller, 1_000_000, 0.5)
B._case(bench, "koller-1M-50%-m10", koller, X, 10, 100)
for defs in ((), (("BN_COUNT_ROWS", 2),), (("BN_COUNT_ROWS", 1),), (("BN_MIN_BLOCKS", 5),), (("BN_GROUP", 2),),
             (("BN_GROUP", 4),), (("BN_GROUP", 4), ("BN_MIN_BLOCKS", 3))):
    with config.override(bayesnet_defines=defs):
        B._parts(bench, "koller-1M-50%-m10", koller, X, 10, sweeps="BN_COUNT_ROWS" not in dict(defs))
print(format_table(bench.rows))
print("# wrote", bench.write("bayesnet-issue38-kernels", Path(sys.argv[1])))
EOF
