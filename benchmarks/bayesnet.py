"""Benchmark suite ``bayesnet``: SAME chromatic Gibbs for discrete Bayesian networks (synthetic data
forward-sampled from the network, cells hidden at random)."""
import time

import numpy as np

from gpumcmc.models.bayesnet import BayesianNetwork


def _case(bench, name, truth, n, frac, same, n_iter):
    X = truth.sample(n, 0)
    X[np.random.default_rng(1).random(X.shape) < frac] = -1
    fresh = BayesianNetwork(truth.parents, truth.states)
    fresh.fit(X, n_iter=1, same=same, random_state=0, progress=False, backend="cupy")  # warm-up/compile
    bench.cupy.cuda.Device().synchronize()
    t0 = time.perf_counter()
    fresh.fit(X, n_iter=n_iter, same=same, random_state=0, progress=False, backend="cupy")
    bench.cupy.cuda.Device().synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / n_iter
    bench.record(name, "gpumcmc", ms, n * same, params={"cases": n, "missing": frac, "same": same},
                 note=f"ms per iteration; KL_avg = {fresh.kl_avg(truth):.3g}; BIDMach anchor 804 ms (Koller)")


def run(bench):
    _case(bench, "koller-1M-50%-m10", BayesianNetwork.koller(), 1_000_000, 0.5, 10, 20)
    from gpumcmc.datasets.bif import bif_example_files
    files = bif_example_files()
    if "andes" in files:
        _case(bench, "andes-100k-30%", BayesianNetwork.from_bif(files["andes"]), 100_000, 0.3, 1, 5)
