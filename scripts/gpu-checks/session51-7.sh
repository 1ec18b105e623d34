#!/usr/bin/env bash
# One GPU: the Bayesian network's counts in registers for small networks (BN_NET_REG_COUNT): its GPU tests,
# the bare step against the counts by atomics, user_path.py's figure, and Nsight Compute on the new counts.
OUT=${OUT:-out}; mkdir -p "$OUT"
pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ date -u; cat scripts/.commit; git status --short | grep -v '^??'; nvidia-smi -L; } > "$OUT/host.txt"
T="timeout -s INT -k 10"
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 200 python -m pytest -q -m gpu -p no:cacheprovider tests/test_bayesnet.py \
  > "$OUT/tests-bayesnet.log" 2>&1; echo "tests rc=$?"; tail -n 1 "$OUT/tests-bayesnet.log"
$T 120 python - "$OUT" > "$OUT/bn-register-counts.log" 2>&1 <<'PY'
import json, sys
from pathlib import Path
from benchmarks import bayesnet as B
from benchmarks.harness import Bench, format_table
from gpumcmc._config import config
from gpumcmc.models.bayesnet import BayesianNetwork
koller = BayesianNetwork.koller()
X = B._data(koller, 1_000_000, 0.5)
out, bench = {}, Bench()
bench.suite = "bayesnet"
for cells in (32, 0, 32, 0):
    with config.override(bayesnet_register_cells=cells):
        B._bare_step_ms(X, 10, 20)
        out.setdefault(f"bare_step_ms_register_cells_{cells}", []).append(B._bare_step_ms(X, 10, 405))
        if len(out[f"bare_step_ms_register_cells_{cells}"]) == 1:
            B._parts(bench, f"koller-1M-50%-m10 register_cells={cells}", koller, X, 10)
    print(json.dumps(out), flush=True)
Path(sys.argv[1], "bn-register-counts.json").write_text(json.dumps(out, indent=1))
print(format_table(bench.rows))
PY
echo "timing rc=$?"; grep '^{' "$OUT/bn-register-counts.log" | tail -1; grep "part:counts" "$OUT/bn-register-counts.log"
$T 100 python scripts/user_path.py bayesnet --out "$OUT/user_path.json" > "$OUT/user_path.log" 2>&1
echo "user_path rc=$?"; grep -v setup "$OUT/user_path.json" | head -4
cat > /tmp/bn_steps.py <<'PY'
from benchmarks import bayesnet as B
from gpumcmc.models.bayesnet import BayesianNetwork
B._bare_step_ms(B._data(BayesianNetwork.koller(), 1_000_000, 0.5), 10, 30)
PY
$T 120 ncu --clock-control none --kernel-name regex:"bn_counts" --launch-skip 10 --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
  python /tmp/bn_steps.py > "$OUT/bn-counts-ncu.txt" 2>&1; echo "ncu rc=$?"
grep -E "Duration|Throughput|Achieved Occupancy|Registers Per" "$OUT/bn-counts-ncu.txt" | head
