"""Where DPGaussianMixture.fit's relabelling time goes on this host: align_draws on the device draws of a
Gibbs fit at user_path.py's shape (n = 2^20, p = 14, k = 256, 60 kept draws), whole and by piece, on 1 to all
threads; the assignments' own time, and the number of rounds. Prints one JSON line."""
import functools, json, os, sys, time

import cupy as cp
import numpy as np

import importlib
R = importlib.import_module("gpumcmc.models.mixture.relabel")
from gpumcmc.models import DPGaussianMixture


def planted_mixture(n, p=14, clusters=12, seed=2):
    rs = np.random.default_rng(seed)
    centres = rs.normal(0, 5, (clusters, p))
    return (centres[rs.integers(0, clusters, n)] + rs.normal(0, 1, (n, p))).astype(np.float32)


X = planted_mixture(2 ** 20)
m = DPGaussianMixture(n_components=256, n_iter=60, burn_in=0, random_state=0, progress=False, relabel=False).fit(X)
d = m.trace_.draws
w, mu, cov, ll = (cp.asarray(d[k]) for k in ("weights", "means", "covariances", "loglik"))
scale = m._scale
out = {"draws": int(w.shape[1]), "ncpu": len(os.sched_getaffinity(0))}
import scipy.optimize as so
orig = so.linear_sum_assignment
calls = []
def timed(c):
    t = time.perf_counter(); r = orig(c); calls.append(time.perf_counter() - t); return r
so.linear_sum_assignment = timed
orig_relabel = R.relabel
rel_times = []
def rel(*a, workers=None, **k):
    t = time.perf_counter(); r = orig_relabel(*a, workers=out_workers, **k); rel_times.append(time.perf_counter() - t); return r
R.relabel = rel
results = {}
gpu_max = R.GPU_MAX_K
for mode, out_workers in [("gpu", None), ("host", 16), ("host", None)]:
    if out_workers is not None and out_workers > out["ncpu"]:
        continue
    R.GPU_MAX_K = gpu_max if mode == "gpu" else 0
    for rep in range(2):
        calls.clear(); rel_times.clear(); cp.cuda.Device().synchronize()
        t = time.perf_counter()
        res = R.align_draws(w, mu, cov, ll, scale)
        cp.cuda.Device().synchronize()
        el = time.perf_counter() - t
    results[(mode, out_workers)] = [cp.asnumpy(a) for a in res]
    out[f"{mode}{out_workers}"] = {"align_ms_per_draw": el / w.shape[1] * 1e3, "relabel_ms": [x * 1e3 for x in rel_times],
                                   "lsa_calls": len(calls), "lsa_sum_ms": sum(calls) * 1e3}
R.GPU_MAX_K = gpu_max
ref = results[("host", 16)]
out["gpu_equals_host"] = all(np.array_equal(a, b) for a, b in zip(results[("gpu", None)], ref))
# the costs alone and their copies
ref = mu[0, 0]
t = time.perf_counter()
for _ in range(3):
    c = R.relabel_costs(mu, ref, scale, w, w[0, 0]); h = cp.asnumpy(c)
out["costs_and_copy_ms_per_draw"] = (time.perf_counter() - t) / 3 / w.shape[1] * 1e3
print(json.dumps(out))
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "align_probe.json"), "w"), indent=1)
