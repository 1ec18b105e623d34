"""Bayesian GLMs: the fused likelihood kernel and the slice-within-Gibbs samplers against peers.

(a) f + g, N = 4M rows (small: 2**16), K = 50, float32, one coefficient
    vector: ``gpumcmc.glm.loglik_and_grad`` against CuPy (two GEMVs and the
    elementwise work) and JAX (jit value_and_grad). Floor: X read once.
    gpumcmc runs with its rows kernel (the default, a thread per row) and
    with ``kernel="tiled"`` (32 rows a warp) for an A/B on the same
    machine, each once more as 20 calls queued back to back (host launch
    work hidden); then a batch of 8 chains (one pass over X for all of
    them) against CuPy's two GEMMs.
(b) Flat logistic regression, N = 10^5 and 10^6 (small: 10^4), K = 50
    synthetic standardised covariates: BayesianGLM (4 chains) against NumPyro
    NUTS (4 chains, vectorised), min-ESS/s over the coefficients with warm-up
    counted in the wall time for both (kernels compiled beforehand; NumPyro's
    JIT compilation is in its wall time, as a user meets it). ESS from ArviZ
    when installed, else a small Geyer initial-positive-sequence estimate
    here. NumPyro's warm-up and draw counts are capped in the larger cases
    (``_NUMPYRO_SHARE``; each row's note and params say so) so that the
    suite finishes in about 200 s on an H100.
(c) Hierarchical logistic, 1,000 groups x 20 covariates x 100 rows (small:
    50 groups x 5 x 40), the same comparison.
(d) The paper's measure: time per Gibbs sweep against the bytes the sweep
    must read (each log-density evaluation reads X[:, k] once and eta of
    every chain once).
Synthetic data are drawn from the model itself.
"""

from __future__ import annotations

import time

import numpy as np


def ess_min(draws):
    """Smallest bulk ESS over the trailing coordinates of ``draws`` (chain, draw, ...)."""
    draws = np.asarray(draws, dtype=np.float64)
    C, D = draws.shape[:2]
    flat = draws.reshape(C, D, -1)
    try:
        import arviz as az
        return float(np.min(az.ess(az.convert_to_dataset({"x": flat}))["x"].values))
    except ImportError:
        pass
    out = []
    for j in range(flat.shape[2]):
        x = flat[:, :, j]
        x = x - x.mean()
        var = x.var()
        if var == 0:
            out.append(float(C * D))
            continue
        f = np.fft.rfft(x, n=2 * D, axis=1)
        ac = np.fft.irfft(f * np.conj(f), axis=1)[:, :D].mean(0) / (D * var)
        s, t = 0.0, 0
        while t + 1 < D:
            pair = ac[t] + ac[t + 1]
            if pair < 0:
                break
            s += pair
            t += 2
        out.append(C * D / max(2 * s - 1, 1e-12))
    return float(min(out))


def _logistic_data(rs, N, K):
    X = rs.normal(size=(N, K)).astype(np.float32)
    beta = rs.normal(size=K) * 0.3
    y = (rs.random(N) < 1 / (1 + np.exp(-(X @ beta)))).astype(np.float32)
    return X, y


def _agreement(loglik_and_grad, X, y, b):
    """How far the tiled kernel's f and g are from the two-GEMM path's (float64 sums of float32 products)."""
    f, g = loglik_and_grad(X, y, b, check=False)
    f2, g2 = loglik_and_grad(X, y, b, check=False, kernel="gemm")
    df = float(abs(f.astype(np.float64) - f2).max() / abs(f2).max())
    dg = float(abs(g.astype(np.float64) - g2).max() / abs(g2).max())
    return f"vs kernel='gemm': f rel {df:.1e}, g rel {dg:.1e}"


def _fg(bench):
    cp = bench.cupy
    from gpumcmc.glm import loglik_and_grad
    N = (1 << 16) if bench.small else 4_000_000
    K = 50
    rs = np.random.default_rng(0)
    X, y = _logistic_data(rs, N, K)
    Xc, yc = cp.asarray(X), cp.asarray(y)
    b = cp.asarray(rs.normal(size=K).astype(np.float32) * 0.1)
    case = f"f+g bernoulli N={N} K={K} float32"
    kw = dict(bytes_moved=N * K * 4 + N * 4, params={"N": N, "K": K})
    # Bring the GPU out of idle (clocks up, kernels compiled) before the first timed call.
    t_end = time.perf_counter() + 0.5
    while time.perf_counter() < t_end:
        for _ in range(20):
            loglik_and_grad(Xc, yc, b, check=False)
        cp.cuda.Device().synchronize()
    # What reading X once costs here, by a plain reduction (the floor's bandwidth, measured in this run).
    bench.peer(case, "cupy X.sum() (reads X once: a bandwidth reference)", N, lambda: Xc.sum(dtype=np.float32),
               bytes_moved=N * K * 4, params={"N": N, "K": K})
    bench.record(case, "gpumcmc loglik_and_grad (rows kernel, the default)",
                 bench.time(lambda: loglik_and_grad(Xc, yc, b, check=False)), N, **kw,
                 note=_agreement(loglik_and_grad, Xc, yc, b))
    bench.record(case, "gpumcmc loglik_and_grad kernel='tiled' (32 rows a warp)",
                 bench.time(lambda: loglik_and_grad(Xc, yc, b, check=False, kernel="tiled")), N, **kw)
    # Calls queued back to back, as in an optimiser's or a sampler's loop: the host's launch work then
    # overlaps the GPU, so these rows show the kernels alone (the median single call above includes it).
    reps = 20
    for kern in ("rows", "tiled"):
        bench.record(case, f"gpumcmc loglik_and_grad kernel='{kern}', {reps} calls queued, per call",
                     bench.time(lambda: [loglik_and_grad(Xc, yc, b, check=False, kernel=kern)
                                         for _ in range(reps)]) / reps, N, **kw)

    def cupy_fg():
        eta = Xc @ b
        f = (yc * eta - cp.logaddexp(0, eta)).sum()
        r = yc - 1 / (1 + cp.exp(-eta))
        return f, r @ Xc
    bench.peer(case, "cupy (2 GEMV)", N, cupy_fg, **kw)
    if bench.jax is not None:
        import jax
        import jax.numpy as jnp
        Xj, yj, bj = jnp.asarray(X), jnp.asarray(y), jnp.asarray(cp.asnumpy(b))

        def f(beta):
            eta = Xj @ beta
            return jnp.sum(yj * eta - jnp.logaddexp(0.0, eta))
        vg = jax.jit(jax.value_and_grad(f))
        bench.peer(case, "jax jit value_and_grad", N, lambda: vg(bj), sync="jax", **kw)
        del Xj

    Bn = 8
    bb = cp.asarray(rs.normal(size=(Bn, K)).astype(np.float32) * 0.1)
    case = f"f+g bernoulli N={N} K={K} float32, {Bn} chains"
    kw = dict(bytes_moved=N * K * 4 + N * 4, params={"N": N, "K": K, "chains": Bn})
    bench.record(case, "gpumcmc loglik_and_grad (rows kernel, the default)",
                 bench.time(lambda: loglik_and_grad(Xc, yc, bb, check=False)), N, **kw,
                 note="floor: X read once for all chains; " + _agreement(loglik_and_grad, Xc, yc, bb))
    bench.record(case, "gpumcmc loglik_and_grad kernel='tiled' (32 rows a warp)",
                 bench.time(lambda: loglik_and_grad(Xc, yc, bb, check=False, kernel="tiled")), N, **kw)

    def cupy_fg_batch():
        eta = bb @ Xc.T
        f = (yc * eta - cp.logaddexp(0, eta)).sum(axis=1)
        r = yc - 1 / (1 + cp.exp(-eta))
        return f, r @ Xc
    bench.peer(case, "cupy (2 GEMM)", N, cupy_fg_batch, **kw)
    del Xc
    cp.get_default_memory_pool().free_all_blocks()


def _numpyro_flat(X, y, n_warm, n_samp, chains, hier=None):
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import MCMC, NUTS

    if hier is None:
        def model(X, y):
            a = numpyro.sample("a", dist.Normal(0, 2.5))
            b = numpyro.sample("b", dist.Normal(0, 2.5).expand([X.shape[1]]))
            numpyro.sample("y", dist.Bernoulli(logits=a + X @ b), obs=y)
        args = (jnp.asarray(X), jnp.asarray(y))
    else:
        g, G = hier

        def model(X, y, g):
            K = X.shape[1] + 1
            mu = numpyro.sample("mu", dist.Normal(0, 1).expand([K]))
            tau = numpyro.sample("tau", dist.HalfNormal(1).expand([K]))
            z = numpyro.sample("z", dist.Normal(0, 1).expand([G, K]))
            beta = mu + tau * z
            eta = beta[g, 0] + jnp.sum(X * beta[g, 1:], axis=1)
            numpyro.sample("y", dist.Bernoulli(logits=eta), obs=y)
        args = (jnp.asarray(X), jnp.asarray(y), jnp.asarray(g))
    mcmc = MCMC(NUTS(model), num_warmup=n_warm, num_samples=n_samp, num_chains=chains,
                chain_method="vectorized", progress_bar=False)
    t0 = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(0), *args)
    s = mcmc.get_samples(group_by_chain=True)
    jax.block_until_ready(s)
    wall = time.perf_counter() - t0
    key = "b" if hier is None else "z"
    return wall, ess_min(np.asarray(s[key]))


# NumPyro's warm-up and draws per chain as a fraction of gpumcmc's, by case, so that the whole suite
# runs in about 200 s on an H100 (NumPyro's NUTS takes most of it). Both counts are scaled together, so
# NumPyro keeps the same share of warm-up in its wall time; min-ESS/s counts warm-up for both.
_NUMPYRO_SHARE = {"flat100000": 1.0, "hier": 0.5, "flat1000000": 0.5}


def _numpyro_counts(key, n_warm, n_samp, small):
    share = 1.0 if small else _NUMPYRO_SHARE.get(key, 1.0)
    w, d = max(20, int(round(n_warm * share))), max(40, int(round(n_samp * share)))
    note = "" if share == 1.0 else f"; capped at {w} warm-up + {d} draws per chain (gpumcmc {n_warm} + {n_samp})"
    return w, d, note


def _flat(bench, N):
    from gpumcmc.models import BayesianGLM
    K = 50
    n_warm, n_samp = (50, 100) if bench.small else (200, 500)
    rs = np.random.default_rng(1)
    X, y = _logistic_data(rs, N, K)
    case = f"flat logistic N={N} K={K}"
    Xc, yc = bench.cupy.asarray(X), bench.cupy.asarray(y)
    kw = dict(n_chains=4, random_state=0, progress=False, backend="cupy", dtype="float32")
    BayesianGLM(n_samples=2, n_warmup=2, **kw).fit(Xc[:1000], yc[:1000])  # compile the kernels first
    bench.cupy.cuda.Device().synchronize()
    t0 = time.perf_counter()
    m = BayesianGLM(n_samples=n_samp, n_warmup=n_warm, **kw).fit(Xc, yc)
    wall = time.perf_counter() - t0
    ess = ess_min(m.coef_draws_[..., 1:])
    sweeps = n_warm + n_samp
    # Fewest bytes a sweep must read: per coordinate X[:, k] and y once, and eta of every chain for
    # the current value and one accepted candidate (the least any slice update evaluates).
    bytes_sweep = (K + 1) * (2 * N * 4 + 2 * 4 * N * 4)
    bench.record(case, "gpumcmc BayesianGLM slice-within-Gibbs", wall * 1e3, N,
                 params={"N": N, "K": K, "warmup": n_warm, "samples": n_samp, "chains": 4},
                 note=f"min-ESS {ess:.0f}, min-ESS/s {ess / wall:.1f} (warm-up counted)")
    bench.record(case + " per sweep", "gpumcmc BayesianGLM", wall * 1e3 / sweeps, N,
                 bytes_moved=int(bytes_sweep), note="floor: X, y and eta read once per evaluation, 2 evaluations")
    del Xc, yc
    try:
        nw, ns, cap = _numpyro_counts(f"flat{N}", n_warm, n_samp, bench.small)
        w2, e2 = _numpyro_flat(X, y, nw, ns, 4)
        bench.record(case, "numpyro NUTS", w2 * 1e3, N, params={"warmup": nw, "samples": ns, "chains": 4},
                     note=f"min-ESS {e2:.0f}, min-ESS/s {e2 / w2:.1f} (warm-up counted){cap}")
    except Exception as exc:
        bench.record(case, "numpyro NUTS", None, N, note=f"{type(exc).__name__}: {exc}"[:300])


def _hier(bench):
    from gpumcmc.models import HierarchicalGLM
    G, K, n = (50, 5, 40) if bench.small else (1000, 20, 100)
    n_warm, n_samp = (50, 100) if bench.small else (200, 500)
    rs = np.random.default_rng(2)
    g = np.repeat(np.arange(G), n)
    X = rs.normal(size=(G * n, K)).astype(np.float32)
    beta = 0.3 * rs.normal(size=K + 1) + 0.3 * rs.normal(size=(G, K + 1))
    eta = beta[g, 0] + np.sum(X * beta[g, 1:], axis=1)
    y = (rs.random(G * n) < 1 / (1 + np.exp(-eta))).astype(np.float32)
    case = f"hierarchical logistic G={G} K={K} n={n}"
    kw = dict(n_chains=4, random_state=0, progress=False, backend="cupy", dtype="float32")
    cp = bench.cupy
    HierarchicalGLM(n_samples=2, n_warmup=2, **kw).fit(cp.asarray(X[:n * 4]), cp.asarray(y[:n * 4]), g[:n * 4])
    t0 = time.perf_counter()
    m = HierarchicalGLM(n_samples=n_samp, n_warmup=n_warm, **kw).fit(cp.asarray(X), cp.asarray(y), g)
    wall = time.perf_counter() - t0
    ess = ess_min(m.beta_draws_)
    bench.record(case, "gpumcmc HierarchicalGLM", wall * 1e3, G * n,
                 params={"G": G, "K": K, "n": n, "warmup": n_warm, "samples": n_samp, "chains": 4},
                 note=f"min-ESS {ess:.0f}, min-ESS/s {ess / wall:.1f} (whole wall time)")
    # The conjugate hyperparameter draw alone, per sweep: the glm_niw kernel against the same arithmetic
    # by CuPy's batched linear algebra (the route taken for large K).
    from gpumcmc.models import glm as mg
    from gpumcmc.random import default_rng
    hyp = mg.HyperPrior(1.0, float(K + 3), cp.eye(K + 1, dtype=np.float64))
    bt = cp.asarray(m.trace_.state.beta)
    for label, fits in (("glm_niw kernel", mg._niw_fits), ("cupy linalg (the fallback)", lambda k: False)):
        saved, mg._niw_fits = mg._niw_fits, fits
        try:
            r = default_rng(0, backend="cupy")
            ms = bench.time(lambda: mg._draw_hyper(r, bt, hyp, cp))
        finally:
            mg._niw_fits = saved
        bench.record(case + " hyperparameter draw", f"gpumcmc {label}", ms, 4,
                     note="mu, Sigma | beta for 4 chains, random numbers included")
    N = G * n
    bench.record(case + " per sweep", "gpumcmc HierarchicalGLM", wall * 1e3 / (n_warm + n_samp), N,
                 bytes_moved=int((K + 1) * (2 * N * 4 + 2 * 4 * N * 4)),
                 note="floor: X, y and eta read once per evaluation, 2 evaluations; hyperparameter draws included")
    try:
        nw, ns, cap = _numpyro_counts("hier", n_warm, n_samp, bench.small)
        w2, e2 = _numpyro_flat(X, y, nw, ns, 4, hier=(g, G))
        bench.record(case, "numpyro NUTS (non-centred)", w2 * 1e3, G * n,
                     params={"warmup": nw, "samples": ns, "chains": 4},
                     note=f"min-ESS {e2:.0f}, min-ESS/s {e2 / w2:.1f} (whole wall time){cap}")
    except Exception as exc:
        bench.record(case, "numpyro NUTS (non-centred)", None, G * n, note=f"{type(exc).__name__}: {exc}"[:300])


def run(bench):
    # The largest flat case last: the others' figures are kept if a time limit cuts the run short.
    _fg(bench)
    _flat(bench, 10_000 if bench.small else 100_000)
    _hier(bench)
    if not bench.small:
        _flat(bench, 1_000_000)


def cpu_comparison(N=5000, K=10, n_warm=100, n_samp=200):
    """The CPU backend against NumPyro NUTS on the CPU (``python -m benchmarks.glm``)."""
    from gpumcmc.models import BayesianGLM
    rs = np.random.default_rng(1)
    X, y = _logistic_data(rs, N, K)
    t0 = time.perf_counter()
    m = BayesianGLM(n_chains=4, n_samples=n_samp, n_warmup=n_warm, random_state=0, progress=False,
                    backend="numpy").fit(X.astype(np.float64), y.astype(np.float64))
    wall = time.perf_counter() - t0
    ess = ess_min(m.coef_draws_[..., 1:])
    print(f"gpumcmc numpy: {wall:.1f} s, min-ESS {ess:.0f}, min-ESS/s {ess / wall:.1f}")
    try:
        w2, e2 = _numpyro_flat(X, y, n_warm, n_samp, 4)
        print(f"numpyro NUTS cpu: {w2:.1f} s, min-ESS {e2:.0f}, min-ESS/s {e2 / w2:.1f}")
    except ImportError as exc:
        print(f"numpyro not installed here: {exc}")


if __name__ == "__main__":
    cpu_comparison()
