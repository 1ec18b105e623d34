"""Bayesian GLMs: the fused likelihood kernel and the slice-within-Gibbs samplers against peers.

(a) f + g, N = 4M rows (small: 2**16), K = 50, float32, one coefficient
    vector: ``gpumcmc.glm.loglik_and_grad`` against CuPy (two GEMVs and the
    elementwise work) and JAX (jit value_and_grad). Floor: X read once.
    The first row is the call with its defaults (``check=True``, made by the
    kernel through the status word), then ``check=False`` beside it.
    gpumcmc runs with its rows kernel (the default, a thread per row) and
    with ``kernel="tiled"`` (32 rows a warp) for an A/B on the same
    machine, each once more as 20 calls queued back to back (host launch
    work hidden); then a batch of 8 chains (one pass over X for all of
    them) against CuPy's two GEMMs.
(b) Flat logistic regression, N = 10^5 and 10^6 (small: 10^4), K = 50
    synthetic standardised covariates: BayesianGLM (4 chains) against NumPyro
    NUTS (4 chains, vectorised), min-ESS/s over the coefficients with warm-up
    counted in the wall time for both (kernels compiled beforehand; NumPyro's
    JIT compilation is in its wall time, as a user meets it). NumPyro's
    warm-up and draw counts are capped in the larger cases (``_NUMPYRO_SHARE``; each row's note and params say so) so that the
    whole suite finishes in about 200 s on an H100. NumPyro runs in JAX's
    default float32, as gpumcmc does here (the harness turns float64 on for
    other suites; it is turned off around NumPyro's runs). ESS: ArviZ's
    rank-normalised bulk ESS, computed for all coordinates at once by
    :func:`ess_bulk` (on the GPU), min and median over the coefficients.
    gpumcmc runs with its default CUDA-graph sweeps, and once more with
    ``graph=False`` (eager sweeps) for the 10^5 and hierarchical cases.
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


def _avg_ranks(xp, v):
    """Ranks 1..n of each row of ``v`` (M, n), ties given their average rank (scipy's method="average")."""
    M, n = v.shape
    o = xp.argsort(v, axis=1)
    sv = xp.take_along_axis(v, o, axis=1)
    start = xp.ones((M, n), dtype=bool)
    start[:, 1:] = sv[:, 1:] != sv[:, :-1]
    ranks = xp.empty((M, n), dtype=np.float64)
    if bool(start.all()):  # no ties: the sorted positions
        xp.put_along_axis(ranks, o, xp.broadcast_to(xp.arange(1, n + 1, dtype=np.float64), (M, n)), axis=1)
        return ranks
    gid = xp.cumsum(start.ravel()) - 1                      # tie groups numbered over all rows
    counts = xp.bincount(gid)
    first = xp.cumsum(counts) - counts                      # flat position of each group's first element
    row0 = (xp.arange(M) * n)[:, None]
    avg = (first[gid].reshape(M, n) - row0) + (counts[gid].reshape(M, n) + 1) / 2.0
    xp.put_along_axis(ranks, o, avg, axis=1)
    return ranks


def ess_bulk(draws, xp=np):
    """ArviZ's rank-normalised bulk ESS (``az.ess(..., method="bulk")``, its default) of every coordinate.

    ``draws`` is (chain, draw, ...); the result has the trailing shape, as a
    NumPy array. The same definition as ArviZ's (Vehtari et al. 2021): each
    chain split in two halves, the draws of a coordinate replaced by the
    normal quantiles of their average ranks over all split chains,
    ``(rank - 3/8) / (n + 1/4)``; the autocovariance of every split chain by
    FFT, the combined autocorrelation ``1 - (W - mean_chains acov_t) / var+``,
    Geyer's initial positive sequence and then his initial monotone one.
    Here all coordinates go through at once (ArviZ loops over them in
    Python, ~15 s for 21,000 coordinates), on ``xp`` (NumPy or CuPy); the
    two Geyer loops run over lags with a mask per coordinate. Agrees with
    ArviZ to rounding (tests/test_glm.py).
    """
    from scipy.fft import next_fast_len

    if xp is np:
        from scipy.special import ndtri
    else:
        from cupyx.scipy.special import ndtri
    a = xp.asarray(draws, dtype=np.float64)
    C, D = a.shape[:2]
    tail = a.shape[2:]
    a = a.reshape(C, D, -1)
    M = a.shape[2]
    half = D // 2
    a = xp.concatenate([a[:, :half], a[:, D - half:]], axis=0)      # (m, n, M): split chains
    m, n = a.shape[:2]
    v = xp.ascontiguousarray(xp.moveaxis(a, 2, 0).reshape(M, m * n))
    z = ndtri((_avg_ranks(xp, v) - 0.375) / (m * n + 0.25)).reshape(M, m, n)
    const = (z.max(axis=(1, 2)) - z.min(axis=(1, 2))) < np.finfo(float).resolution
    L = next_fast_len(2 * n)
    zc = z - z.mean(axis=2, keepdims=True)
    f = xp.fft.rfft(zc, n=L, axis=2)
    acov = xp.fft.irfft(f * xp.conj(f), n=L, axis=2)[:, :, :n] / n  # (M, m, n)
    del f, zc
    mean_var = acov[:, :, 0].mean(axis=1) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if m > 1:
        var_plus = var_plus + z.mean(axis=2).var(axis=1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):            # constant coordinates: set below
        rho = xp.ascontiguousarray((1.0 - (mean_var[:, None] - acov.mean(axis=1)) / var_plus[:, None]).T)
    del acov
    rt = xp.zeros((n, M))                                            # lag-major: rows are lags
    rt[0] = 1.0
    rt[1] = rho[1]
    even = xp.ones(M)
    odd = rho[1].copy()
    going = xp.ones(M, dtype=bool)
    t_end = xp.ones(M, dtype=np.int64)   # each coordinate's lag counter when its loop stops
    t = 1
    # Geyer's initial positive sequence: pairs (t + 1, t + 2) while the last pair's sum is positive
    while t < n - 3:
        going &= (even + odd) > 0.0
        if not bool(going.any()):
            break
        e, o = rho[t + 1], rho[t + 2]
        even = xp.where(going, e, even)
        odd = xp.where(going, o, odd)
        keep = going & ((e + o) >= 0)
        rt[t + 1] = xp.where(keep, e, rt[t + 1])
        rt[t + 2] = xp.where(keep, o, rt[t + 2])
        t_end = xp.where(going, t + 2, t_end)
        t += 2
    max_t = t_end - 2
    idx = xp.arange(M)
    rt[max_t + 1, idx] = xp.where(even > 0, even, rt[max_t + 1, idx])
    # Geyer's initial monotone sequence
    t = 1
    tmax = int(max_t.max()) if M else 0
    while t <= tmax - 2:
        prev = rt[t - 1] + rt[t]
        upd = (t <= max_t - 2) & ((rt[t + 1] + rt[t + 2]) > prev)
        rt[t + 1] = xp.where(upd, prev / 2.0, rt[t + 1])
        rt[t + 2] = xp.where(upd, prev / 2.0, rt[t + 2])
        t += 2
    lag = xp.arange(n)[:, None]
    s1 = xp.where(lag <= max_t[None, :], rt, 0.0).sum(axis=0)
    s2 = xp.where(lag == (max_t + 1)[None, :], rt, 0.0).sum(axis=0)
    total = m * n
    tau = xp.maximum(-1.0 + 2.0 * s1 + s2, 1.0 / np.log10(total))
    ess = total / tau
    ess = xp.where(xp.isnan(rt).any(axis=0), np.nan, ess)
    ess = xp.where(const, float(total), ess)
    out = ess.get() if hasattr(ess, "get") else ess
    return np.asarray(out).reshape(tail)


def ess_min(draws, xp=np):
    """Smallest bulk ESS over the trailing coordinates of ``draws`` (chain, draw, ...), by :func:`ess_bulk`."""
    return ess_stats(draws, xp)[0]


def ess_stats(draws, xp=np):
    """(smallest, median) bulk ESS over the trailing coordinates of ``draws`` (chain, draw, ...)."""
    e = ess_bulk(draws, xp)
    return float(np.nanmin(e)), float(np.nanmedian(e))


def _logistic_data(rs, N, K):
    X = rs.normal(size=(N, K)).astype(np.float32)
    beta = rs.normal(size=K) * 0.3
    y = (rs.random(N) < 1 / (1 + np.exp(-(X @ beta)))).astype(np.float32)
    return X, y


def _user_path_logistic(N, K, seed=0):
    """The data of ``../shared/bench/user_path.py``'s GLM rows, made as its ``logistic_data`` makes them (the
    same generator calls, so the same values): X standard normal over sqrt(K), y Bernoulli from a standard
    normal beta. Its BayesianGLM row takes the first 10^6 rows of the 4 M it draws."""
    rs = np.random.default_rng(seed)
    X = rs.standard_normal((N, K), dtype=np.float32) / np.float32(np.sqrt(K))
    y = (rs.random(N) < 1 / (1 + np.exp(-(X @ rs.standard_normal(K).astype(np.float32))))).astype(np.float32)
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
    # The call as users make it first: the default check=True, which the rows kernel makes as it reads the
    # input (the status word; one wait for the kernels at the end of the call). Goal: <= 1.05x check=False.
    bench.record(case, "gpumcmc loglik_and_grad, defaults (check=True: the status word)",
                 bench.time(lambda: loglik_and_grad(Xc, yc, b)), N, **kw)
    bench.record(case, "gpumcmc loglik_and_grad (rows kernel, the default), check=False",
                 bench.time(lambda: loglik_and_grad(Xc, yc, b, check=False)), N, **kw,
                 note=_agreement(loglik_and_grad, Xc, yc, b))
    bench.record(case, "gpumcmc loglik_and_grad kernel='tiled', check=True (a pass over f and y after it)",
                 bench.time(lambda: loglik_and_grad(Xc, yc, b, kernel="tiled")), N, **kw)
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
    bench.record(case, "gpumcmc loglik_and_grad, defaults (check=True: the status word)",
                 bench.time(lambda: loglik_and_grad(Xc, yc, bb)), N, **kw)
    bench.record(case, "gpumcmc loglik_and_grad (rows kernel, the default), check=False",
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


def _numpyro_flat(X, y, n_warm, n_samp, chains, hier=None, ess_xp=np):
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
    # JAX's default precision (the harness turns float64 on for other suites): float32, as gpumcmc runs here.
    x64 = jnp.asarray(1.0).dtype == jnp.float64
    jax.config.update("jax_enable_x64", False)
    try:
        args = tuple(jnp.asarray(np.asarray(a)) for a in args)
        t0 = time.perf_counter()
        mcmc.run(jax.random.PRNGKey(0), *args)
        s = mcmc.get_samples(group_by_chain=True)
        jax.block_until_ready(s)
        wall = time.perf_counter() - t0
    finally:
        jax.config.update("jax_enable_x64", bool(x64))
    key = "b" if hier is None else "z"
    return wall, ess_stats(np.asarray(s[key]), xp=ess_xp)


# NumPyro's warm-up and draws per chain as fractions of gpumcmc's (200 + 500), by case, so that the whole
# suite, every row of it, runs in one call of about 200 s on an H100: NumPyro's NUTS takes most of it (the
# hierarchical model about 0.1-0.2 s an iteration with trees of hundreds of leapfrog steps). min-ESS/s
# counts warm-up for both, and each row's params and note give the counts.
_NUMPYRO_SHARE = {"flat100000": (1.0, 1.0), "hier": (0.5, 0.3), "flat1000000": (0.5, 0.5)}


def _numpyro_counts(key, n_warm, n_samp, small):
    sw, sd = (1.0, 1.0) if small else _NUMPYRO_SHARE.get(key, (1.0, 1.0))
    w, d = max(20, int(round(n_warm * sw))), max(40, int(round(n_samp * sd)))
    note = "" if (w, d) == (n_warm, n_samp) else f"; {w} warm-up + {d} draws per chain (gpumcmc {n_warm} + {n_samp})"
    return w, d, note


def _numpyro_row(bench, case, key, X, y, n_warm, n_samp, N, impl, hier=None):
    _ = bench.jax  # start JAX through the harness, which keeps the caller's GPU current
    t0 = time.perf_counter()
    try:
        nw, ns, cap = _numpyro_counts(key, n_warm, n_samp, bench.small)
        w2, (e2, med) = _numpyro_flat(X, y, nw, ns, 4, hier=hier, ess_xp=bench.cupy)
        bench.record(case, impl, w2 * 1e3, N,
                     params={"warmup": nw, "samples": ns, "chains": 4, "dtype": "float32"},
                     note=f"min-ESS {e2:.0f}, min-ESS/s {e2 / w2:.1f} (warm-up counted; JIT compilation "
                          f"included); median ESS {med:.0f}{cap}")
    except Exception as exc:
        bench.record(case, impl, None, N, note=f"{type(exc).__name__}: {exc}"[:300])
    print(f"#   {case}: {impl} took {time.perf_counter() - t0:.1f} s with its ESS", flush=True)


def _flat(bench, N):
    from gpumcmc.models import BayesianGLM
    K = 50
    n_warm, n_samp = (50, 100) if bench.small else (200, 500)
    rs = np.random.default_rng(1)
    X, y = _logistic_data(rs, N, K)
    case = f"flat logistic N={N} K={K}"
    cp = bench.cupy
    Xc, yc = cp.asarray(X), cp.asarray(y)
    kw = dict(n_chains=4, random_state=0, progress=False, backend="cupy", dtype="float32")
    sweeps = n_warm + n_samp
    # Fewest bytes a sweep must read: per coordinate X[:, k] and y once, and eta of every chain for
    # the current value and one accepted candidate (the least any slice update evaluates).
    bytes_sweep = (K + 1) * (2 * N * 4 + 2 * 4 * N * 4)
    for graph in ((True, False) if N <= 100_000 else (True,)):
        t_all = time.perf_counter()
        BayesianGLM(n_samples=2, n_warmup=2, graph=graph, **kw).fit(Xc[:1000], yc[:1000])  # compile first
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        m = BayesianGLM(n_samples=n_samp, n_warmup=n_warm, graph=graph, **kw).fit(Xc, yc)
        wall = time.perf_counter() - t0
        ess, med = ess_stats(m.coef_draws_[..., 1:], xp=cp)
        how = "" if graph else ", graph=False (eager sweeps)"
        bench.record(case, "gpumcmc BayesianGLM slice-within-Gibbs" + how, wall * 1e3, N,
                     params={"N": N, "K": K, "warmup": n_warm, "samples": n_samp, "chains": 4, "dtype": "float32",
                             "graph": graph},
                     note=f"min-ESS {ess:.0f}, min-ESS/s {ess / wall:.1f} (warm-up counted); median ESS {med:.0f}")
        bench.record(case + " per sweep", "gpumcmc BayesianGLM" + how, wall * 1e3 / sweeps, N,
                     bytes_moved=int(bytes_sweep), params={"graph": graph},
                     note="floor: X, y and eta read once per evaluation, 2 evaluations")
        print(f"#   {case}: gpumcmc graph={graph} took {time.perf_counter() - t_all:.1f} s with its ESS", flush=True)
        del m
    del Xc, yc
    cp.get_default_memory_pool().free_all_blocks()
    _numpyro_row(bench, case, f"flat{N}", X, y, n_warm, n_samp, N, "numpyro NUTS")


def hier_data(G: int, K: int, n: int):
    """(X, y, groups) of the hierarchical case: ``G`` groups of ``n`` rows, ``K`` covariates, float32,
    logistic outcomes from planted coefficients (mu + group offsets), the same for a given size."""
    rs = np.random.default_rng(2)
    g = np.repeat(np.arange(G), n)
    X = rs.normal(size=(G * n, K)).astype(np.float32)
    beta = 0.3 * rs.normal(size=K + 1) + 0.3 * rs.normal(size=(G, K + 1))
    eta = beta[g, 0] + np.sum(X * beta[g, 1:], axis=1)
    y = (rs.random(G * n) < 1 / (1 + np.exp(-eta))).astype(np.float32)
    return X, y, g


def _hier(bench):
    from gpumcmc.models import HierarchicalGLM
    G, K, n = (50, 5, 40) if bench.small else (1000, 20, 100)
    n_warm, n_samp = (50, 100) if bench.small else (200, 500)
    X, y, g = hier_data(G, K, n)
    case = f"hierarchical logistic G={G} K={K} n={n}"
    kw = dict(n_chains=4, random_state=0, progress=False, backend="cupy", dtype="float32")
    cp = bench.cupy
    N = G * n
    bt = None
    for graph in (False, True):  # eager first: the first large fit of the case, as earlier runs timed it
        t_all = time.perf_counter()
        HierarchicalGLM(n_samples=2, n_warmup=2, graph=graph, **kw).fit(cp.asarray(X[:n * 4]), cp.asarray(y[:n * 4]),
                                                                        g[:n * 4])
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        m = HierarchicalGLM(n_samples=n_samp, n_warmup=n_warm, graph=graph, **kw).fit(cp.asarray(X), cp.asarray(y), g)
        wall = time.perf_counter() - t0
        ess, med = ess_stats(m.beta_draws_, xp=cp)
        how = "" if graph else ", graph=False (eager sweeps)"
        bench.record(case, "gpumcmc HierarchicalGLM" + how, wall * 1e3, N,
                     params={"G": G, "K": K, "n": n, "warmup": n_warm, "samples": n_samp, "chains": 4,
                             "dtype": "float32", "graph": graph},
                     note=f"min-ESS {ess:.0f}, min-ESS/s {ess / wall:.1f} (whole wall time); median ESS {med:.0f}")
        bench.record(case + " per sweep", "gpumcmc HierarchicalGLM" + how, wall * 1e3 / (n_warm + n_samp), N,
                     bytes_moved=int((K + 1) * (2 * N * 4 + 2 * 4 * N * 4)), params={"graph": graph},
                     note="floor: X, y and eta read once per evaluation, 2 evaluations; hyperparameter draws "
                          "included")
        print(f"#   {case}: gpumcmc graph={graph} took {time.perf_counter() - t_all:.1f} s with its ESS", flush=True)
        bt = cp.asarray(m.trace_.state.beta)
        del m
    # The conjugate hyperparameter draw alone, per sweep: the glm_niw kernel against the same arithmetic
    # by CuPy's batched linear algebra (the route taken for large K).
    from gpumcmc._config import config
    from gpumcmc.models import glm as mg
    from gpumcmc.random import default_rng
    hyp = mg.HyperPrior(1.0, float(K + 3), cp.eye(K + 1, dtype=np.float64))
    for label, kernel in (("glm_niw kernel", True), ("cupy linalg (the fallback)", False)):
        with config.override(glm_niw_kernel=kernel):
            r = default_rng(0, backend="cupy")
            ms = bench.time(lambda: mg._draw_hyper(r, bt, hyp, cp))
        bench.record(case + " hyperparameter draw", f"gpumcmc {label}", ms, 4,
                     note="mu, Sigma | beta for 4 chains, random numbers included")
    cp.get_default_memory_pool().free_all_blocks()
    _numpyro_row(bench, case, "hier", X, y, n_warm, n_samp, N, "numpyro NUTS (non-centred)", hier=(g, G))


def _public_path(bench):
    """BayesianGLM.fit (on user_path.py's data) and HierarchicalGLM.fit with their defaults (progress off), per
    sweep as the difference of two whole calls, against their bare step loop (the same sweep replayed from its CUDA
    graph, nothing kept): what fit adds per sweep (the driver's copies of the draws and the step's
    statistics). Goal: fit <= 1.1x the bare step."""
    from gpumcmc.models import BayesianGLM, HierarchicalGLM
    from gpumcmc.models import glm as mg
    from gpumcmc.random import default_rng
    from gpumcmc.sampling import graph_step

    from benchmarks.harness import per_iteration_ms
    cp = bench.cupy
    N, K = (1 << 14, 50) if bench.small else (1_000_000, 50)
    X, y = _user_path_logistic(4 * N, K)   # user_path.py's data, so that the public rows can be set beside it
    Xc, yc = cp.asarray(X[:N]), cp.asarray(y[:N])
    del X, y
    G, Kh, n = (50, 5, 40) if bench.small else (1000, 20, 100)
    Xh, yh, g = hier_data(G, Kh, n)
    Xhc, yhc = cp.asarray(Xh), cp.asarray(yh)
    kw = dict(n_chains=4, random_state=0, progress=False, backend="cupy", dtype="float32")
    cases = {
        f"BayesianGLM N={N} K={K}": (lambda m: BayesianGLM(n_samples=m, n_warmup=0, **kw).fit(Xc, yc), None),
        f"HierarchicalGLM G={G} K={Kh} n={n}": (
            lambda m: HierarchicalGLM(n_samples=m, n_warmup=0, **kw).fit(Xhc, yhc, g),
            mg.HyperPrior(1.0, float(Kh + 3), cp.eye(Kh + 1, dtype=np.float64))),
    }
    for case, (fit, hyper) in cases.items():
        public = per_iteration_ms(fit, 5, 105) / 1e3
        if hyper is None:
            D = cp.concatenate([cp.ones((N, 1), dtype=cp.float32), Xc], axis=1)
            state, data = mg.init(D, yc, "bernoulli", 4, 2.5)
        else:
            D = cp.concatenate([cp.ones((G * n, 1), dtype=cp.float32), Xhc], axis=1)
            state, data = mg.init(D, yhc, "bernoulli", 4, 1.0, cp.asarray(np.asarray(g, dtype=np.int64)))
        sweep = graph_step(lambda r, s: mg.step(r, s, data, "bernoulli", 1.0, 0, hyper=hyper))

        def bare(m, state=state, sweep=sweep):
            r, s = default_rng(0, backend="cupy"), state
            for _ in range(m):
                s, _ = sweep(r, s)
        step = per_iteration_ms(bare, 5, 105) / 1e3
        bench.record(case + " per sweep", "gpumcmc fit, defaults (public call)", public * 1e3, 1,
                     note=f"{public / step:.3f}x the bare step loop (goal <= 1.1x)")
        bench.record(case + " per sweep", "gpumcmc step loop from its CUDA graph (kernel only)", step * 1e3, 1)
    cp.get_default_memory_pool().free_all_blocks()


def run(bench):
    # The largest flat case last: the others' figures are kept if a time limit cuts the run short.
    import os

    cases = {"f+g": _fg, "public": _public_path, "flat": lambda b: _flat(b, 10_000 if b.small else 100_000),
             "hier": _hier,
             "flat 10^6": None if bench.small else lambda b: _flat(b, 1_000_000)}
    # GPUMCMC_GLM_CASES="hier,flat 10^6": only these cases, in this order (for trials)
    only = os.environ.get("GPUMCMC_GLM_CASES")
    order = [c.strip() for c in only.split(",")] if only else list(cases)
    for name in order:
        fn = cases[name]
        if fn is None:
            continue
        t0 = time.perf_counter()
        fn(bench)
        print(f"# glm {name}: {time.perf_counter() - t0:.1f} s", flush=True)


def cpu_comparison(N=5000, K=10, n_warm=100, n_samp=200, out="benchmarks/results/glm_cpu.json"):
    """The CPU backend (float64) against NumPyro NUTS on the CPU (``python -m benchmarks.glm``; JAX's float32).

    Flat logistic regression, 4 chains, ``n_warm`` warm-up and ``n_samp``
    draws each; min-ESS/s counts the whole wall time (warm-up, and NumPyro's
    JIT compilation). Writes ``out`` (JSON) and prints the rows.
    """
    import json
    import os
    import platform

    from gpumcmc.models import BayesianGLM
    rs = np.random.default_rng(1)
    X, y = _logistic_data(rs, N, K)
    rows = []
    t0 = time.perf_counter()
    m = BayesianGLM(n_chains=4, n_samples=n_samp, n_warmup=n_warm, random_state=0, progress=False,
                    backend="numpy").fit(X.astype(np.float64), y.astype(np.float64))
    wall = time.perf_counter() - t0
    ess = ess_min(m.coef_draws_[..., 1:])
    rows.append({"impl": "gpumcmc BayesianGLM (NumPy backend)", "dtype": "float64", "seconds": wall, "min_ess": float(ess),
                 "min_ess_per_s": float(ess / wall)})
    try:
        w2, (e2, _) = _numpyro_flat(X, y, n_warm, n_samp, 4)
        rows.append({"impl": "numpyro NUTS (CPU)", "dtype": "float32", "seconds": w2, "min_ess": float(e2), "min_ess_per_s": float(e2 / w2)})
    except ImportError as exc:
        rows.append({"impl": "numpyro NUTS (CPU)", "seconds": None, "note": f"numpyro is not installed here: {exc}"})
    for r in rows:
        print(r)
    if out:
        with open(out, "w") as f:
            json.dump({"suite": "glm_cpu", "case": f"flat logistic N={N} K={K}", "chains": 4, "warmup": n_warm,
                       "samples": n_samp, "cpu_count": os.cpu_count(),
                       "machine": platform.processor() or platform.machine(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    cpu_comparison()
