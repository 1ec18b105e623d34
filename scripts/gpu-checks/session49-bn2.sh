#!/usr/bin/env bash
# The Bayesian network's fit against its step with the fits' set-up noise taken out of the per-iteration figure
# (1,000 to 2,000 iterations between the two calls, a median of five, a collection before each call): the public
# row of benchmarks.bayesnet, the fit over 1 and 2 GPUs at 10^6 and 10^7 cases (bn_scaling.py), the fit's
# set-up call by call; and the mixture's fits against their steps (item 4). JSON and logs under $OUT.
OUT=${OUT:-out}; mkdir -p "$OUT"
pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ date -u; cat scripts/.commit; nvidia-smi -L; } > "$OUT/host.txt"
T="timeout -s INT -k 10"
CUDA_VISIBLE_DEVICES=0 $T 60 python -m benchmarks.bayesnet "$OUT" --user-path > "$OUT/bayesnet-user-path.log" 2>&1
CUDA_VISIBLE_DEVICES=0 $T 40 python - > "$OUT/bn-setup.log" 2>&1 <<'PY'
import time, numpy as np, cupy as cp
from gpumcmc.models.bayesnet import BayesianNetwork
k = BayesianNetwork.koller(); X = k.sample(1_000_000, 0); X[np.random.default_rng(3).random(X.shape) < 0.5] = -1
f = lambda n: BayesianNetwork(k.parents, k.states, n_iter=n, same=10, random_state=0, progress=False).fit(X)
f(5)
for _ in range(10):
    cp.cuda.Device().synchronize(); t = time.perf_counter(); f(5); cp.cuda.Device().synchronize()
    print("fit(5) s", round(time.perf_counter() - t, 4))
PY
$T 120 python scripts/gpu-checks/bn_scaling.py "$OUT" > "$OUT/bn-scaling.log" 2>&1
$T 200 python scripts/gpu-checks/bn_scaling.py "$OUT" --cases 1e7 > "$OUT/bn-scaling-1e7.log" 2>&1
CUDA_VISIBLE_DEVICES=0 $T 60 python -m benchmarks.mixture --profile-fit --out "$OUT/mixture-profile-fit.json" > "$OUT/mixture-profile-fit.log" 2>&1
cat "$OUT/bayesnet-user-path.json"; cat "$OUT/bn-setup.log"; grep '^{"cases' "$OUT"/bn-scaling*.log; tail -n 8 "$OUT/mixture-profile-fit.log"
