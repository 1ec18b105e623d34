"""Truncated DP Gaussian mixtures: Gibbs and Bayesian-EM iterations against a plain-CuPy peer.

(a) The paper's shape, n = 2**20 (small: 2**14), p = 14, k = 256, float32,
    synthetic data drawn from a planted 20-component mixture: a whole Gibbs
    iteration (``gpumcmc.models.mixture.make_step``, what ``fit`` runs), its
    step 1 alone (the fused configuration kernel) and its sufficient
    statistics, and a whole BEM iteration; the peer is a plain-CuPy chunked
    step 1 (batched triangular products, log-sum-exp, inverse-CDF draw).
    Floor: n k (p(p+1)/2 + 2p) fused multiply-adds at the device's FP32 rate
    (SMs x 128 lanes x 2 flops x clock), or the data read once, the larger.
(b) Scale: n up to 10**7 (small: 2**16) at k = 256, and k up to 4,096 at
    n = 2**20; time per Gibbs iteration and peak pool memory in the note.
(c) Real data: the FCS files bundled with fcsparser, arcsinh(x / 150), k = 64:
    gpumcmc BEM (4 starts, to convergence at tol = 1e-6 and at scikit-learn's
    rule, 1e-3 / n per sample) and Gibbs (200 + 200 sweeps) against
    scikit-learn's BayesianGaussianMixture (CPU, dirichlet_process, otherwise
    its defaults: max_iter=100, tol=1e-3, one start) on the same file; wall
    time of one fit each, mean log-likelihood per event, iterations and
    whether it converged in the note. Where scikit-learn stops at its
    iteration cap unconverged, its time is a lower bound on its time to a
    converged fit, so the ratio to our converged fit understates the gap. The
    NumPy BEM fit (one start) is capped at the same 100 iterations. Also one
    BEM iterate of the four starts (host overhead at this size).
(d) The paper's Table 1 shape: 100 Gibbs iterations and 100 BEM iterations at
    n = 10**4 .. 10**6, p = 14, k = 256 (wall time of the 100 iterations).

The whole suite takes longer than one benchmark run may on some machines;
``GPUMCMC_MIXTURE_PARTS`` picks parts (comma-separated: ``shape``,
``table1``, ``scale``, ``fcs``; default all) and ``GPUMCMC_MIXTURE_FCS``
the FCS files (comma-separated names: ``facscalibur``, ``lsr2``,
``fortessa``; default all), e.g. ``GPUMCMC_MIXTURE_PARTS=fcs python -m
benchmarks mixture`` for the real-data rows alone (about three minutes on an
H100 host, most of it scikit-learn).
"""

from __future__ import annotations

import os
import time

import numpy as np

_BACKEND = "cupy"  # the backend the estimator rows use


def _fp32_rate(bench):
    cp = bench.cupy
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())
    return bench.sm_count * 128 * 2 * props["clockRate"] * 1e3  # flops / s


def _planted(cp, n, p, n_clusters=20, seed=0, dtype=np.float32):
    rs = np.random.default_rng(seed)
    centers = rs.normal(0, 4, (n_clusters, p))
    w = rs.dirichlet(np.full(n_clusters, 2.0))
    a = rs.normal(size=(n_clusters, p, p)) / np.sqrt(p)
    chol = np.linalg.cholesky(a @ np.swapaxes(a, -1, -2) + 0.2 * np.eye(p))
    g = cp.random.default_rng(seed)
    lab = cp.asarray(rs.choice(n_clusters, size=n, p=w))
    x = g.standard_normal((n, p), dtype=np.float64)
    for c in range(n_clusters):  # one cluster at a time: an (n, p, p) gather of factors would not fit at 10**7
        idx = cp.nonzero(lab == c)[0]
        x[idx] = x[idx] @ cp.asarray(chol[c]).T + cp.asarray(centers[c])
    return x.astype(dtype)


def _peak(cp, fn):
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    fn()
    cp.cuda.Stream.null.synchronize()
    return pool.total_bytes()


class _Chain:
    """A state holder so that a timed call advances the chain."""

    def __init__(self, step, state, rng):
        self.step, self.state, self.rng = step, state, rng

    def __call__(self):
        self.state, _ = self.step(self.rng, self.state)


def _cupy_peer_step1(cp, x, params_mu, chol_inv, log_pi, chunk, rng):
    """Plain CuPy: per chunk, logits by batched products, log-sum-exp, inverse-CDF draw."""
    n, p = x.shape
    logdet = cp.log(cp.diagonal(chol_inv, axis1=-2, axis2=-1)).sum(-1)
    const = log_pi + logdet - 0.5 * p * np.log(2 * np.pi)
    z = cp.empty(n, dtype=cp.int32)
    for s in range(0, n, chunk):
        xb = x[s:s + chunk]
        d = xb[None, :, :] - params_mu[:, None, :]  # (k, m, p)
        y = cp.matmul(d, cp.swapaxes(chol_inv, -1, -2))  # (k, m, p)
        lg = const[:, None] - 0.5 * (y * y).sum(-1)  # (k, m)
        mx = lg.max(0)
        pr = cp.exp(lg - mx)
        c = cp.cumsum(pr, axis=0)
        u = rng.random(xb.shape[0], dtype=x.dtype) * c[-1]
        z[s:s + chunk] = (c < u[None, :]).sum(0).astype(cp.int32)
    return z


def _shape_case(bench, gpumcmc, n, p, k, chains=1):
    from gpumcmc.models import mixture as mx

    cp = bench.cupy
    x = _planted(cp, n, p)
    model = mx.make_model(x, k, dtype=np.float32, chains=chains)
    rng = gpumcmc.random.default_rng(0, backend=_BACKEND)
    state = mx.init(rng, model, chains)
    step = mx.make_step(model)
    for _ in range(5):  # leave the random start
        state, _ = step(rng, state)
    return mx, model, rng, state, step, x


def _paper_shape(bench, gpumcmc):
    from gpumcmc._config import config

    cp = bench.cupy
    n, p, k = (1 << 14 if bench.small else 1 << 20), 14, 256
    mx, model, rng, state, step, x = _shape_case(bench, gpumcmc, n, p, k)
    (n, p), k = model.x.shape, model.k
    rate = _fp32_rate(bench)
    fma = n * k * (p * (p + 1) / 2 + 2 * p)
    flops = 2 * fma
    floor_ms = max(flops / rate, 0) * 1e3
    params = {"n": n, "p": p, "k": k, "dtype": "float32"}
    case = f"mixture n={n} p={p} k={k}"
    note = f"FLOP floor {floor_ms:.3f} ms at {rate / 1e12:.1f} TFLOP/s FP32"
    chain = _Chain(step, state, rng)
    ms = bench.time(chain)
    bench.record(case, "gpumcmc Gibbs iteration", ms, n, bytes_moved=n * p * 4 + n * 4, flops=flops,
                 params=params, note=f"{note}; FLOP floor / time = {floor_ms / ms:.2f}")
    st = chain.state
    z = cp.empty((1, n), cp.int32)
    off = [0]

    def step1():
        off[0] += 1
        mx.assign(model.x, st.params, 0, n, mx.MODE_SAMPLE, rng.key, off[0], z=z)

    ms1 = bench.time(step1)
    bench.record(case, "gpumcmc step 1 (fused kernel)", ms1, n, bytes_moved=n * p * 4 + n * 4, flops=flops,
                 params=params, note=f"{note}; FLOP floor / time = {floor_ms / ms1:.2f}")
    ms2 = bench.time(lambda: mx.gibbs_stats(model, st.z))
    q = 1 + p + p * (p + 1) // 2
    bench.record(case, "gpumcmc sufficient statistics", ms2, n, bytes_moved=n * q * 4 + n * 4,
                 flops=2.0 * n * k * q, params=params, note="stable sort of z + deterministic segmented sums of [1, x, vech(x x^T)]")
    # the plain-CuPy peer of step 1
    mu = st.mu[0].astype(np.float32)
    chol_inv = cp.tril(cp.linalg.inv(cp.linalg.cholesky(st.sigma[0]))).astype(np.float32)
    log_pi = st.log_pi[0].astype(np.float32)
    crng = cp.random.default_rng(0)
    chunk = max(1024, (256 << 20) // (k * p * 4))
    bench.peer(case, "CuPy step 1 (chunked)", n,
               lambda: _cupy_peer_step1(cp, model.x, mu, chol_inv, log_pi, chunk, crng), params=params,
               note=f"chunk={chunk} rows")
    # BEM iteration, one start
    bstate = mx.init(rng, model, 1, z=False)
    holder = [bstate]
    bem_step = mx.make_bem_step(model)

    def bem():
        holder[0] = bem_step(holder[0])

    msb = bench.time(bem)
    # floors: the probability kernel's multiply-adds at the FP32 rate, the statistics GEMM's at the
    # FP64 tensor rate (H100: 128 multiply-adds per SM per clock), or the bytes: float32 logits
    # written and read back, float64 probabilities written and read, the float64 design read
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())
    fp64 = bench.sm_count * 256 * props["clockRate"] * 1e3
    gemm_ms = 2.0 * n * k * q / fp64 * 1e3
    bytes_bem = n * k * (4 + 4 + 8 + 8) + n * q * 8
    bytes_ms = bytes_bem / bench.copy_bandwidth * 1e3
    floor_b = max(floor_ms + gemm_ms, bytes_ms)
    bench.record(case, "gpumcmc BEM iteration", msb, n, flops=flops + 2.0 * n * k * q, bytes_moved=bytes_bem,
                 params=dict(params, chunk=model.chunk, gemm_rows=config.mixture_gemm_rows),
                 note=f"floor {floor_b:.3f} ms = max(FP32 {floor_ms:.3f} + FP64 tensor {gemm_ms:.3f}, bytes "
                      f"{bytes_ms:.3f}); floor / time = {floor_b / msb:.2f}; probabilities written once in "
                      f"float64 by the fused kernel in blocks of {config.mixture_gemm_rows} rows, one batched cuBLAS DGEMM "
                      f"over the blocks per chunk of {model.chunk} rows, the variational update in array code")
    del model, st, chain, x, bem_step, holder
    bench.cupy.get_default_memory_pool().free_all_blocks()


def _scale(bench, gpumcmc):
    cp = bench.cupy
    p = 14
    cases = [(1 << 16, 256)] if bench.small else [(10**6, 256), (10**7, 256), (1 << 20, 1024), (1 << 20, 4096)]
    for n, k in cases:
        try:
            mx, model, rng, state, step, x = _shape_case(bench, gpumcmc, n, p, k)
            chain = _Chain(step, state, rng)
            peak = _peak(cp, chain)
            old = bench.repeat
            bench.repeat = 5
            ms = bench.time(chain)
            bench.repeat = old
            flops = 2.0 * n * k * (p * (p + 1) / 2 + 2 * p)
            bench.record(f"mixture scale n={n} k={k}", "gpumcmc Gibbs iteration", ms, n, flops=flops,
                         params={"n": n, "p": p, "k": k, "chunk": model.chunk},
                         note=f"peak pool {peak / 2**30:.2f} GiB; FLOP floor {flops / _fp32_rate(bench) * 1e3:.2f} ms")
        except Exception as e:  # out of memory on a smaller device
            bench.record(f"mixture scale n={n} k={k}", "gpumcmc Gibbs iteration", None, n,
                         note=f"{type(e).__name__}: {e}"[:300])
        finally:
            mx = model = state = step = x = chain = None  # noqa: F841 (free the case's arrays)
            cp.get_default_memory_pool().free_all_blocks()


def _wall(cp, fn):
    cp.cuda.Stream.null.synchronize()
    t0 = time.perf_counter()
    out = fn()
    cp.cuda.Stream.null.synchronize()
    return (time.perf_counter() - t0) * 1e3, out


def _fcs(bench, gpumcmc):
    from gpumcmc.datasets import fcs_example_files, load_fcs
    from gpumcmc.models import DPGaussianMixture
    from gpumcmc.models import mixture as mx

    cp = bench.cupy
    try:
        files = fcs_example_files()
    except Exception as e:
        bench.record("mixture fcs", "gpumcmc BEM", None, 0, note=f"no example files: {e}")
        return
    names = ["facscalibur"] if bench.small else list(files)
    chosen = os.environ.get("GPUMCMC_MIXTURE_FCS", "").strip()
    if chosen:
        wanted = [t.strip() for t in chosen.split(",") if t.strip()]
        unknown = [t for t in wanted if t not in files]
        if unknown:
            raise ValueError(f"GPUMCMC_MIXTURE_FCS names {unknown}; the files are {sorted(files)}.")
        names = wanted  # in the order given
    for name in names:
        X = load_fcs(files[name]).data
        n, p = X.shape
        case = f"mixture fcs {name} n={n} p={p} k=64"
        params = {"n": n, "p": p, "k": 64, "file": name}
        bem = DPGaussianMixture(n_components=64, method="bem", n_init=4, n_iter=1000, tol=1e-6, random_state=0,
                                progress=False, backend=_BACKEND)
        _wall(cp, lambda: DPGaussianMixture(n_components=64, method="bem", n_init=4, n_iter=3, progress=False,
                                            backend=_BACKEND).fit(X))  # compile (kernels are built per p and starts)
        ms, _ = _wall(cp, lambda: bem.fit(X))
        ms_bem = ms
        bench.record(case, "gpumcmc BEM fit (GPU)", ms, n, params=params,
                     note=f"mean loglik {bem.score(X):.4f}; {bem.n_iter_} iterations, converged={bem.converged_}")
        # scikit-learn's rule: its lower bound is a sum over the samples, so tol = 1e-3 there is 1e-3 / n
        # per sample here
        strict = DPGaussianMixture(n_components=64, method="bem", n_init=4, n_iter=5000, tol=1e-3 / n,
                                   random_state=0, progress=False, backend=_BACKEND)
        ms, _ = _wall(cp, lambda: strict.fit(X))
        gpu_fits = {"tol=1e-6": (ms_bem, bem), "tol=1e-3/n": (ms, strict)}
        bench.record(case, "gpumcmc BEM fit (GPU), tol = 1e-3 / n", ms, n, params=dict(params, tol=1e-3 / n),
                     note=f"mean loglik {strict.score(X):.4f}; {strict.n_iter_} iterations, "
                          f"converged={strict.converged_} (scikit-learn's stopping rule per sample)")
        # one BEM iterate of the four starts at this size: host launch overhead, not GPU work
        model = mx.make_model(cp.asarray(X), 64, dtype=np.float32, chains=4)
        holder = [mx.init(gpumcmc.random.default_rng(0, backend=_BACKEND), model, 4, z=False)]
        bem_step = mx.make_bem_step(model)

        def one():
            holder[0] = bem_step(holder[0])

        bench.record(case, "gpumcmc BEM iteration (4 starts)", bench.time(one), n, params=params,
                     note="probabilities, DGEMM, mean log-likelihood and the variational update (array code), no host sync")
        gibbs = DPGaussianMixture(n_components=64, n_iter=200, burn_in=200, random_state=0, progress=False,
                                  backend=_BACKEND)
        ms, _ = _wall(cp, lambda: gibbs.fit(X))
        bench.record(case, "gpumcmc Gibbs fit (GPU)", ms, n, params=params,
                     note=f"mean loglik {gibbs.score(X):.4f}; 400 sweeps, fit {gibbs.fit_seconds_:.2f} s "
                          f"(relabelling included: costs built on the GPU, assignments solved on the host)")
        try:
            from sklearn.mixture import BayesianGaussianMixture
        except ImportError:
            bench.record(case, "sklearn BayesianGaussianMixture (CPU)", None, n, note="scikit-learn missing")
            continue
        if bench.small:
            continue
        import warnings

        from sklearn.exceptions import ConvergenceWarning

        # scikit-learn's defaults (max_iter=100, tol=1e-3); whether it converged goes into the note
        sk = BayesianGaussianMixture(n_components=64, weight_concentration_prior_type="dirichlet_process",
                                     random_state=0)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            sk.fit(X)
        ms = sk_ms = (time.perf_counter() - t0) * 1e3
        sk_ll = sk.score(X)
        # the goal: >= 100x faster on the GPU to a converged fit with a mean log-likelihood at
        # least scikit-learn's; each GPU BEM fit of this case against this one
        vs = "; ".join(f"GPU BEM {tag}: {ms / g_ms:.0f}x faster, converged={g.converged_}, mean loglik "
                       f"{g.score(X) - sk_ll:+.4f} vs scikit-learn" for tag, (g_ms, g) in gpu_fits.items())
        bench.record(case, "sklearn BayesianGaussianMixture (CPU)", ms, n, params=dict(params, max_iter=sk.max_iter),
                     note=f"mean loglik {sk_ll:.4f}; {sk.n_iter_} iterations (its default cap "
                          f"max_iter={sk.max_iter}), converged={sk.converged_}; {vs}")
        cpu = DPGaussianMixture(n_components=64, method="bem", n_init=1, n_iter=100, tol=1e-6, random_state=0,
                                progress=False, backend="numpy")
        t0 = time.perf_counter()
        cpu.fit(X)
        ms = (time.perf_counter() - t0) * 1e3
        bench.record(case, "gpumcmc BEM fit (NumPy)", ms, n, params=dict(params, n_iter=100),
                     note=f"mean loglik {cpu.score(X):.4f}; {cpu.n_iter_} iterations (capped at 100, as "
                          f"scikit-learn's default), converged={cpu.converged_}; "
                          f"scikit-learn's time / this = {sk_ms / ms:.1f}")


def _table1(bench, gpumcmc):
    cp = bench.cupy
    p, k = 14, 256
    sizes = [10**4] if bench.small else [10**4, 10**5, 10**6]
    for n in sizes:
        mx, model, rng, state, step, x = _shape_case(bench, gpumcmc, n, p, k)
        chain = _Chain(step, state, rng)

        def hundred():
            for _ in range(100):
                chain()

        ms, _ = _wall(cp, hundred)
        bench.record(f"mixture table1 n={n} p={p} k={k}", "gpumcmc 100 Gibbs iterations", ms, n,
                     params={"n": n, "p": p, "k": k})
        holder = [mx.init(rng, model, 1, z=False)]
        bem_step = mx.make_bem_step(model)

        def bem100():
            for _ in range(100):
                holder[0] = bem_step(holder[0])

        ms, _ = _wall(cp, bem100)
        bench.record(f"mixture table1 n={n} p={p} k={k}", "gpumcmc 100 BEM iterations", ms, n,
                     params={"n": n, "p": p, "k": k})
        cp.get_default_memory_pool().free_all_blocks()


def run(bench):
    import gpumcmc
    from gpumcmc import _validate

    parts = {"shape": _paper_shape, "table1": _table1, "scale": _scale, "fcs": _fcs}
    chosen = [t.strip() for t in os.environ.get("GPUMCMC_MIXTURE_PARTS", "").split(",") if t.strip()]
    unknown = [t for t in chosen if t not in parts]
    if unknown:
        raise ValueError(f"GPUMCMC_MIXTURE_PARTS names {unknown}; the parts are {list(parts)}.")
    with _validate.validation(False):
        for name, part in parts.items():
            if not chosen or name in chosen:
                part(bench, gpumcmc)


# ----------------------------------------------------------------------------- the public fit against its sweep
def _per_iteration(call, a, b, sync):
    """Seconds per iteration of ``call(n)``: :func:`benchmarks.harness.per_iteration_ms`, waiting by ``sync``."""
    try:
        from benchmarks.harness import per_iteration_ms
    except ImportError:  # run as a script, benchmarks/ itself on the path
        from harness import per_iteration_ms

    return per_iteration_ms(call, a, b, sync=sync) / 1e3


def profile_fit(n=1 << 20, p=14, k=256, a=5, b=305):
    """Per-iteration cost of ``DPGaussianMixture.fit`` (defaults, no progress bar) against the bare sweep.

    The calls are ``b - a`` = 300 iterations apart (user_path.py takes 60): a fit's set-up varies by tens of
    ms from call to call, which over 60 iterations of 4-5 ms moved the fit's figure by up to a tenth.

    Rows (ms per iteration): the bare Gibbs step loop ("kernel only"), fit with the default relabelling and
    without it, align_draws alone on b - a draws (per draw), and the same for BEM (bare make_bem_step loop,
    fit with tol = 0, n_init = 1). The data are those of ``../shared/bench/user_path.py`` (12 planted
    clusters, scale 5). Runs on CuPy where it imports, else on NumPy at n = 2**14.
    """
    import gpumcmc
    from gpumcmc.models import DPGaussianMixture
    from gpumcmc.models import mixture as mx

    try:
        import cupy as xp

        backend = "cupy"
        sync = xp.cuda.Device().synchronize
    except ImportError:
        xp, backend, sync, n = np, "numpy", (lambda: None), min(n, 1 << 14)
    rs = np.random.default_rng(2)
    centres = rs.normal(0, 5, (12, p))
    X = (centres[rs.integers(0, 12, n)] + rs.normal(0, 1, (n, p))).astype(np.float32)
    out = {"n": n, "p": p, "k": k, "backend": backend, "iterations": [a, b]}
    Xd = xp.asarray(X)
    model = mx.make_model(Xd, k, dtype=np.float32, cache_bytes=0 if backend == "cupy" else None)
    rng = gpumcmc.random.default_rng(0, backend=backend)
    holder = [mx.init(rng, model, 1)]
    step = mx.make_step(model)

    def bare(m):
        for _ in range(m):
            holder[0], _ = step(rng, holder[0])

    out["gibbs_step_ms"] = _per_iteration(bare, a, b, sync) * 1e3

    def gibbs(m, **kw):
        DPGaussianMixture(n_components=k, n_iter=m, burn_in=0, random_state=0, progress=False, backend=backend,
                          **kw).fit(X)

    out["gibbs_fit_ms"] = _per_iteration(gibbs, a, b, sync) * 1e3
    out["gibbs_fit_relabel_false_ms"] = _per_iteration(lambda m: gibbs(m, relabel=False), a, b, sync) * 1e3
    gm = DPGaussianMixture(n_components=k, n_iter=b - a, burn_in=0, random_state=0, progress=False,
                           backend=backend, relabel=False).fit(X)
    d = gm.trace_.draws
    args = (xp.asarray(d["weights"]), xp.asarray(d["means"]), xp.asarray(d["covariances"]), d["loglik"], gm._scale)
    mx.align_draws(*args)
    sync()
    t = time.perf_counter()
    mx.align_draws(*args)
    sync()
    out["align_draws_per_draw_ms"] = (time.perf_counter() - t) / (b - a) * 1e3
    bmodel = mx.make_model(Xd, k, dtype=np.float32)
    bem_step = mx.make_bem_step(bmodel)

    def bare_bem(m):
        # from the start each time, as each fit runs: a BEM iterate's cost falls as components are pruned
        # (their tiles left out of the E-step), so a loop carried on from the previous call's state would
        # time later, cheaper iterates than the fits' iterates a .. b
        state = mx.init(rng, bmodel, 1, z=False)
        for _ in range(m):
            state = bem_step(state)

    out["bem_step_ms"] = _per_iteration(bare_bem, a, b, sync) * 1e3
    out["bem_fit_ms"] = _per_iteration(
        lambda m: DPGaussianMixture(n_components=k, method="bem", n_iter=m, n_init=1, tol=0.0, random_state=0,
                                    progress=False, backend=backend).fit(X), a, b, sync) * 1e3
    out["gibbs_fit_over_step"] = out["gibbs_fit_ms"] / out["gibbs_step_ms"]
    out["bem_fit_over_step"] = out["bem_fit_ms"] / out["bem_step_ms"]
    return out


if __name__ == "__main__":
    import argparse
    import json

    ap = argparse.ArgumentParser(description="Per-iteration cost of the mixture's public fit against its sweep.")
    ap.add_argument("--profile-fit", action="store_true", help="time fit against the bare step (the default)")
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--iterations", type=int, nargs=2, default=(5, 305), metavar=("A", "B"))
    ap.add_argument("--out", default=None, help="write the JSON there too")
    args = ap.parse_args()
    res = profile_fit(n=args.n, k=args.k, a=args.iterations[0], b=args.iterations[1])
    print(json.dumps(res, indent=1))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1)
