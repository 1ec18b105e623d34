"""Where DPGaussianMixture.fit's relabelling goes (n = 2^20, p = 14, k = 256, Gibbs, burn_in = 0, as user_path.py
fits it): for fits of 5, 65 and 305 iterations, the whole align_draws, its rounds, and the cost and solve
launches of its first round on their own. Writes mixture-relabel.json under the folder given."""
import json
import sys
import time
from pathlib import Path

import cupy as cp
import numpy as np

from gpumcmc.models import DPGaussianMixture
import importlib

rl = importlib.import_module("gpumcmc.models.mixture.relabel")

sys.path.insert(0, "scripts")
from user_path import planted_mixture  # noqa: E402

X = planted_mixture(2 ** 20)


def wall(fn, reps=3):
    fn()
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        cp.cuda.Device().synchronize()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)) * 1e3


out = {}
for n_iter in (5, 65, 305):
    gm = DPGaussianMixture(n_components=256, n_iter=n_iter, burn_in=0, random_state=0, progress=False,
                           relabel=False).fit(X)
    d = gm.trace_.draws
    w, mu, cov = (cp.asarray(d[k]) for k in ("weights", "means", "covariances"))
    args = (w, mu, cov, d["loglik"], gm._scale)
    rounds = []
    real = rl.relabel
    rl.relabel = lambda *a, **k: rounds.append(1) or real(*a, **k)
    rl.align_draws(*args)
    rl.relabel = real
    c, dd = np.unravel_index(int(np.argmax(d["loglik"])), d["loglik"].shape)
    flat, wflat = mu.reshape(-1, 256, mu.shape[-1]), w.reshape(-1, 256)
    cost = rl._costs_fused(flat, wflat, mu[c, dd], w[c, dd], gm._scale, 100.0)
    row = {"draws": int(flat.shape[0]), "rounds": len(rounds),
           "align_draws_ms": wall(lambda: rl.align_draws(*args)),
           "costs_ms": wall(lambda: rl._costs_fused(flat, wflat, mu[c, dd], w[c, dd], gm._scale, 100.0)),
           "solve_ms": wall(lambda: rl._assign_gpu(cost)),
           "take_cov_ms": wall(lambda: rl._take(cov, rl._assign_gpu(cost).reshape(mu.shape[:-1])))}
    out[f"n_iter_{n_iter}"] = row
    print(json.dumps({n_iter: row}), flush=True)
Path(sys.argv[1], "mixture-relabel.json").write_text(json.dumps(out, indent=1))
