#!/usr/bin/env bash
# LDA over GPUs on user_path.py's text, after the scaling suite's fix (its sweeps timed after 40 from the start):
# the suite's bare sweeps and user_path.py's public fit (its scaling case for LDA alone), in one process each,
# on the GPUs of this host. From the repository root with scripts/user_path.py; $OUT gets the logs and JSON.
set -u
out=${OUT:-out}; mkdir -p "$out"
export PYTHONPATH=$PWD
GPUMCMC_SCALING_MODELS=lda GPUMCMC_SCALING_LDA_TEXT=scripts/user_path.py GPUMCMC_BENCH_WARMUP=1 GPUMCMC_BENCH_REPEAT=5 \
    timeout 150 python -m benchmarks scaling --out "$out" > "$out/scaling-lda.log" 2>&1
grep -E "LDA sweep" "$out/scaling-lda.log" | head -8
timeout 150 python - > "$out/user_path-lda-scaling.log" 2>&1 <<'PY'
import json, os, sys
sys.path.insert(0, "scripts")
import cupy as cp
import user_path as up
from gpumcmc.models import LDA
corpus = up.site_packages_corpus()
n = cp.cuda.runtime.getDeviceCount()
R = {}
for d in [None] + [list(range(w)) for w in (2, 4) if w <= n]:
    call = lambda k, d=d: LDA(n_components=1024, n_iter=k, burn_in=0, random_state=0, progress=False, devices=d).fit(corpus)
    R[1 if d is None else len(d)] = up.per_iteration(call, 10, 70) * 1e3
eff = {w: R[1] / (w * ms) for w, ms in R.items()}
print(json.dumps({"ms": R, "efficiency": eff}))
json.dump({"ms": R, "efficiency": eff}, open(os.path.join(os.environ.get("OUT", "out"), "user_path-lda-scaling.json"), "w"))
PY
tail -n 2 "$out/user_path-lda-scaling.log"
