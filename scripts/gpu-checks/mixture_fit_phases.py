"""Where DPGaussianMixture(256).fit's time goes for n_iter = 5 and 65 (n = 2^20, p = 14, Gibbs, burn_in = 0, as
user_path.py fits it): each phase closed by a synchronisation, five calls each, medians in ms. The phases: the
set-up before the run, the run (sweeps and kept draws), the relabelling, the rest (stacking, host copies,
summaries). Also lsa_solve on copies of one draw's costs (D = 5, 65, 305): whether draws are solved at once.
Writes mixture-fit-phases.json under the folder given."""
import importlib
import json
import sys
import time
from pathlib import Path

import cupy as cp
import numpy as np

from gpumcmc.models import DPGaussianMixture

est = importlib.import_module("gpumcmc.models.mixture.estimator")
rl = importlib.import_module("gpumcmc.models.mixture.relabel")
sys.path.insert(0, "scripts")
from user_path import planted_mixture  # noqa: E402

X = planted_mixture(2 ** 20)
marks = []


def mark(name):
    cp.cuda.Device().synchronize()
    marks.append((name, time.perf_counter()))


def wrap(mod, name, label):
    real = getattr(mod, name)

    def f(*a, **k):
        mark(f"{label}:start")
        out = real(*a, **k)
        mark(f"{label}:end")
        return out
    setattr(mod, name, f)


wrap(est, "run", "run")
wrap(est, "align_draws", "relabel")
out = {}
for n_iter in (5, 65, 5, 65):
    rows = []
    for _ in range(5):
        marks.clear()
        mark("call")
        DPGaussianMixture(n_components=256, n_iter=n_iter, burn_in=0, random_state=0, progress=False).fit(X)
        mark("end")
        t = dict(marks)
        rows.append({"setup": t["run:start"] - t["call"], "run": t["run:end"] - t["run:start"],
                     "relabel": t["relabel:end"] - t["relabel:start"],
                     "rest": (t["end"] - t["run:end"]) - (t["relabel:end"] - t["relabel:start"]),
                     "total": t["end"] - t["call"]})
    med = {k: float(np.median([r[k] for r in rows])) * 1e3 for k in rows[0]}
    out.setdefault(f"n_iter_{n_iter}", []).append({"median_ms": med, "calls_ms": [
        {k: round(v * 1e3, 3) for k, v in r.items()} for r in rows]})
    print(json.dumps({n_iter: med}), flush=True)
gm = DPGaussianMixture(n_components=256, n_iter=65, burn_in=0, random_state=0, progress=False, relabel=False).fit(X)
d = gm.trace_.draws
w, mu = cp.asarray(d["weights"]), cp.asarray(d["means"])
flat, wflat = mu.reshape(-1, 256, 14), w.reshape(-1, 256)
solve = {}
for which in (0, 32, 64):
    cost1 = rl._costs_fused(flat[which:which + 1], wflat[which:which + 1], mu[0, -1], w[0, -1], gm._scale, 100.0)
    for D in (1, 5, 65, 305):
        cost = cp.ascontiguousarray(cp.broadcast_to(cost1, (D, 256, 256)))
        rl._assign_gpu(cost)
        ts = []
        for _ in range(5):
            cp.cuda.Device().synchronize()
            t = time.perf_counter()
            rl._assign_gpu(cost)
            ts.append(time.perf_counter() - t)
        solve[f"draw_{which}_D_{D}"] = float(np.median(ts)) * 1e3
    print(json.dumps(solve), flush=True)
out["solve_copies_ms"] = solve
Path(sys.argv[1], "mixture-fit-phases.json").write_text(json.dumps(out, indent=1))
