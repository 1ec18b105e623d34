"""First-call cost of each public model on a fresh machine: the kernels' NVRTC compilation, which CuPy then
keeps in its on-disk cache (CUPY_CACHE_DIR). Run once with an empty cache directory and once more with the
same one: `python scripts/gpu-checks/coldstart.py MODEL` prints {"model", "first_s", "second_s"} for a tiny
fit in this process (first call, then the same call again)."""
import json
import sys
import time

import numpy as np


def fits(name):
    from gpumcmc import models

    rs = np.random.default_rng(0)
    if name == "lda":
        X = rs.poisson(0.3, size=(200, 300))
        return lambda: models.LDA(16, n_iter=5, burn_in=2, random_state=0, progress=False).fit(X)
    if name == "mixture":
        X = rs.standard_normal((2000, 3))
        return lambda: models.DPGaussianMixture(8, n_iter=5, burn_in=2, random_state=0, progress=False).fit(X)
    if name == "bem":
        X = rs.standard_normal((2000, 3))
        return lambda: models.DPGaussianMixture(8, method="bem", n_iter=5, n_init=1, random_state=0,
                                                progress=False).fit(X)
    if name == "glm":
        X = rs.standard_normal((1000, 5))
        y = (rs.random(1000) < 0.5).astype(float)
        return lambda: models.BayesianGLM("bernoulli", n_samples=5, n_warmup=2, random_state=0, progress=False).fit(X, y)
    if name == "ising":
        return lambda: models.Ising((64, 64), beta=0.4).sample(5, random_state=0, progress=False)
    if name == "bayesnet":
        from gpumcmc.models.bayesnet import BayesianNetwork

        net = BayesianNetwork.koller()
        X = net.sample(5000, random_state=0)
        X[::3, 2] = -1
        return lambda: BayesianNetwork(net.parents, net.states, n_iter=5, same=2, random_state=0,
                                       progress=False).fit(X)
    if name == "rbm":
        X = (rs.random((500, 64)) < 0.3).astype(np.float32)
        return lambda: models.RBM(n_hidden=16, n_iter=2, random_state=0, progress=False).fit(X)
    if name == "nested":
        from gpumcmc.nested import NestedSampler, gaussian_shells

        import cupy

        loglike, prior_transform = gaussian_shells(2, xp=cupy)
        return lambda: NestedSampler(loglike, prior_transform, 2, nlive=100, random_state=0, progress=False,
                                     max_iter=50).run()
    if name == "primitives":
        import gpumcmc

        def draws():
            g = gpumcmc.random.default_rng(0, backend="cupy")
            g.gamma(0.5, size=1000); g.beta(2.0, 3.0, size=1000); g.dirichlet(np.ones(8), size=100)
            g.wishart(5, np.eye(3), size=10)
            gpumcmc.categorical(g.random((100, 8)), g)
        return draws
    raise SystemExit(f"unknown {name}")


if __name__ == "__main__":
    name = sys.argv[1]
    fn = fits(name)
    import cupy as cp

    t = time.perf_counter(); fn(); cp.cuda.Device().synchronize(); first = time.perf_counter() - t
    t = time.perf_counter(); fn(); cp.cuda.Device().synchronize(); second = time.perf_counter() - t
    print(json.dumps({"model": name, "first_s": round(first, 3), "second_s": round(second, 3)}))
