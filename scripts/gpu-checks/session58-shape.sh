#!/usr/bin/env bash
# One GPU, about 7 minutes: glm_fg_rows' launch shape (benchmarks/probes/glm_fg_shape.py); Nsight Compute's
# full set on glm_fg_rows (N = 4 M, K = 50, one chain) and on the Bayesian network's specialised sweep and
# counts (Koller, 10^6 cases, half missing, m = 10), for their stall reasons; the sampling and RBM GPU tests.
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T="timeout -s INT -k 10"
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; which ncu; } > "$D/host.txt" 2>&1
$T 100 python -m pytest -q -m gpu -p no:cacheprovider tests/test_sampling.py tests/test_rbm.py > "$D/tests.log" 2>&1
echo "tests rc=$?"; grep -E "^FAILED|^ERROR" "$D/tests.log" | head; tail -n 1 "$D/tests.log"
$T 260 python -m benchmarks.probes.glm_fg_shape "$D/glm_fg_shape.json" > "$D/shape.log" 2>&1
echo "shape rc=$?"; cut -c1-330 "$D/shape.log"
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
$T 150 ncu --set full --kernel-name regex:glm_fg_rows --launch-skip 3 --launch-count 1 python /tmp/fg_once.py \
  > "$D/fg-ncu.txt" 2>&1; echo "ncu fg rc=$?"
grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Achieved Occupancy|Registers Per|Stall|Warp Cycles Per Issued|Issue Slots Busy|Shared Memory|Bank" "$D/fg-ncu.txt" | head -40
cat > /tmp/bn_once.py <<'PY'
import numpy as np
from gpumcmc.models.bayesnet import BayesianNetwork
truth = BayesianNetwork.koller()
X = truth.sample(1_000_000, 0)
X[np.random.default_rng(3).random(X.shape) < 0.5] = -1
BayesianNetwork(truth.parents, truth.states).fit(X, n_iter=30, same=10, random_state=0, progress=False)
PY
$T 200 ncu --set full --kernel-name regex:"bn_sweep|bn_counts" --launch-skip 40 --launch-count 4 python /tmp/bn_once.py \
  > "$D/bn-ncu.txt" 2>&1; echo "ncu bn rc=$?"
grep -E "bn_|Duration|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Issue Slots Busy" "$D/bn-ncu.txt" | head -50
echo done
