"""align_draws' pieces on the GPU at user_path.py's mixture shape (n = 2^20, p = 14, k = 256, 60 kept draws):
each timed alone between device synchronisations, the median of 5. Prints one JSON line."""
import importlib, json, os, time

import cupy as cp
import numpy as np

R = importlib.import_module("gpumcmc.models.mixture.relabel")
from gpumcmc.models import DPGaussianMixture


def planted_mixture(n, p=14, clusters=12, seed=2):
    rs = np.random.default_rng(seed)
    centres = rs.normal(0, 5, (clusters, p))
    return (centres[rs.integers(0, clusters, n)] + rs.normal(0, 1, (n, p))).astype(np.float32)


m = DPGaussianMixture(n_components=256, n_iter=60, burn_in=0, random_state=0, progress=False,
                      relabel=False).fit(planted_mixture(2 ** 20))
d = m.trace_.draws
w, mu, cov, ll = (cp.asarray(d[k]) for k in ("weights", "means", "covariances", "loglik"))
scale = m._scale
D, k, p = 60, 256, 14


def timed(fn, reps=5):
    ts = []
    for _ in range(reps):
        cp.cuda.Device().synchronize(); t = time.perf_counter(); fn(); cp.cuda.Device().synchronize()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)) * 1e3


ref_mu, ref_w = mu[0, 5], w[0, 5]
flat, wflat = mu.reshape(-1, k, p), w.reshape(-1, k)
cost = R.relabel_costs(flat, ref_mu, scale, wflat, ref_w)
perm_dev = cp.empty((D, k), dtype=np.int64); status = cp.zeros(1, np.int32)
perm = R.relabel(mu, ref_mu, scale, w, ref_w)
out = {
    "costs_36_draws_ms": timed(lambda: R.relabel_costs(flat[:36], ref_mu, scale, wflat[:36], ref_w)),
    "costs_60_draws_ms": timed(lambda: R.relabel_costs(flat, ref_mu, scale, wflat, ref_w)),
    "lsa_solve_60_ms": timed(lambda: R._lsa_solve(cost, perm_dev, status)),
    "lsa_solve_1_ms": timed(lambda: R._lsa_solve(cost[:1], perm_dev[:1], status)),
    "relabel_ms": timed(lambda: R.relabel(mu, ref_mu, scale, w, ref_w)),
    "take_weights_ms": timed(lambda: R._take(w, perm)),
    "take_means_ms": timed(lambda: R._take(mu, perm)),
    "weighted_mean_ms": timed(lambda: R._weighted_mean(R._take(w, perm), R._take(mu, perm))),
    "take_cov_ms": timed(lambda: R._take(cov, perm)),
    "align_draws_ms": timed(lambda: R.align_draws(w, mu, cov, ll, scale)),
}
print(json.dumps(out))
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "align_pieces.json"), "w"), indent=1)

# relabel_costs_fused against relabel_costs' bits, with either square; and its time.
res = {}
for by_pow in (False, True):
    R._SQUARE_BY_POW = by_pow
    got = R._costs_fused(flat, wflat, ref_mu, ref_w, scale, 100.0)
    res[f"pow{int(by_pow)}"] = int((got != cost).sum())
    got = R._costs_fused(flat, None, ref_mu, None, scale, 100.0)
    res[f"pow{int(by_pow)}_no_weights"] = int((got != R.relabel_costs(flat, ref_mu, scale)).sum())
R._SQUARE_BY_POW = False
out["fused_mismatches"] = res
out["fused_costs_ms"] = timed(lambda: R._costs_fused(flat, wflat, ref_mu, ref_w, scale, 100.0))
print(json.dumps(out))
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "align_pieces.json"), "w"), indent=1)
