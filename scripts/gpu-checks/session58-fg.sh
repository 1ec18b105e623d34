#!/usr/bin/env bash
# One GPU, about 6 minutes: glm_fg_rows with two columns a thread in phase 2 and the log-likelihood summed
# by the phase-1 threads, against the kernel before (a copy of the package at the commit before, in _base/),
# at the default shape (benchmarks/probes/glm_fg_shape.py --default-only); the GLM GPU tests with every
# launch's arguments checked; user_path.py's glm section; a profile of the new kernel.
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONUNBUFFERED=1
T="timeout -s INT -k 10"
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
for round in 1 2; do
  PYTHONPATH=$PWD/_base:$PWD $T 100 python -m benchmarks.probes.glm_fg_shape "$D/before-$round.json" --default-only \
    > "$D/before-$round.log" 2>&1; echo "before $round rc=$?"
  PYTHONPATH=$PWD $T 100 python -m benchmarks.probes.glm_fg_shape "$D/after-$round.json" --default-only \
    > "$D/after-$round.log" 2>&1; echo "after $round rc=$?"
  for f in before after; do python - "$D/$f-$round.json" "$f" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))[1:]:
    print(sys.argv[2], r["B"], "ms", round(r.get("ms", -1), 4), "fraction", round(r.get("fraction", -1), 3), r.get("error", ""))
PY
  done
done
export PYTHONPATH=$PWD
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 200 python -m pytest -q -m gpu -p no:cacheprovider tests/test_glm.py \
  > "$D/tests.log" 2>&1; echo "tests rc=$?"
grep -E "^FAILED|^ERROR" "$D/tests.log" | head; tail -n 1 "$D/tests.log"
$T 90 python scripts/user_path.py glm --out "$D/user_path-glm.json" > "$D/user_path-glm.log" 2>&1
echo "user_path glm rc=$?"; grep "loglik_and_grad" "$D/user_path-glm.json"
cat > /tmp/fg_once.py <<'PY'
import cupy as cp, numpy as np
from gpumcmc.glm import loglik_and_grad
rs = np.random.default_rng(0)
X = cp.asarray((rs.standard_normal((4_000_000, 50)) / np.sqrt(50)).astype(np.float32))
y = cp.asarray((rs.random(4_000_000) < 0.5).astype(np.float32))
b = cp.asarray(rs.normal(size=50).astype(np.float32) * 0.1)
for _ in range(6):
    loglik_and_grad(X, y, b, family="bernoulli", check=False)
cp.cuda.Device().synchronize()
PY
$T 120 ncu --set full --kernel-name regex:glm_fg_rows --launch-skip 3 --launch-count 1 python /tmp/fg_once.py \
  > "$D/fg-ncu.txt" 2>&1; echo "ncu fg rc=$?"
grep -E "Duration|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Issued Instructions  |Local Memory Spilling Requests  " "$D/fg-ncu.txt" | head -20
echo done
