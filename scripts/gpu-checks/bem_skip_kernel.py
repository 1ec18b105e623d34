"""Bayesian EM's E-step (the probabilities kernel in mode RESP and the statistics' GEMMs) with and without
MIX_SKIP, kernel only, at the suite's shape (n = 2^20, p = 14, k = 256, user_path.py's planted data), after
each of 5, 20 and 80 BEM iterates (as components are pruned). Prints and writes one JSON object.

    python scripts/gpu-checks/bem_skip_kernel.py OUT_DIR
"""
import json
import sys
from pathlib import Path

import cupy as cp
import numpy as np
from cupyx.profiler import benchmark

import gpumcmc
from gpumcmc._config import config
from gpumcmc.models import mixture as mx
from gpumcmc.models.mixture import algorithm

n, p, k = 1 << 20, 14, 256
rs = np.random.default_rng(2)
centres = rs.normal(0, 5, (12, p))
X = cp.asarray((centres[rs.integers(0, 12, n)] + rs.normal(0, 1, (n, p))).astype(np.float32))
model = mx.make_model(X, k, dtype=np.float32)
state = mx.init(gpumcmc.random.default_rng(0, backend="cupy"), model, 1, z=False)
step = mx.make_bem_step(model)
out, done = {"n": n, "p": p, "k": k, "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}, 0
for at in (5, 20, 80):
    while done < at:
        state, done = step(state), done + 1
    row = {"live": int(cp.isfinite(state.log_pi).sum())}
    lse = cp.empty((1, n), cp.float32)
    for skip in (0, 1, 0, 1):
        with config.override(mixture_defines=(("MIX_SKIP", skip),)):
            stats = algorithm._make_bem_stats(model)
            t = benchmark(lambda: stats(state.params), n_repeat=20, n_warmup=3).gpu_times[0]
            row.setdefault(f"estep_ms_skip{skip}", []).append(float(np.median(t)) * 1e3)
            t = benchmark(lambda: mx.assign(X, state.params, 0, n, mx.MODE_ARGMAX, lse=lse), n_repeat=20,
                          n_warmup=3).gpu_times[0]
            row.setdefault(f"argmax_lse_ms_skip{skip}", []).append(float(np.median(t)) * 1e3)
    out[f"after_{at}"] = row
    print(json.dumps({at: row}), flush=True)
Path(sys.argv[1], "bem_skip_kernel.json").write_text(json.dumps(out, indent=1))
