"""Nested sampling: gpumcmc on the GPU against dynesty on the CPU (and JAXNS / blackjax if present).

(a) The sinusoid-atoms model of Henderson's tutorial, one atom (A, B, f) with
    10**5 data points (small: 10**4). dynesty on the CPU with 50 live points
    (a full run; its likelihood is NumPy over the data) against gpumcmc runs
    whose merged number of live points is at least 50, so that their logzerr
    is at most dynesty's: the comparison is at equal or better precision.
    gpumcmc runs its fused kernel (one launch per iteration: every slice and
    shrinkage round of every walker, the likelihood included) in float64 and
    float32 data, with several batch shapes M (runs), N (live points per run)
    and R (replaced per iteration), M*R walkers; one row runs the generic path
    (one batched likelihood call per shrinkage round) for comparison, and one
    sweeps the fused kernel's block size. Floor: each likelihood evaluation
    reads t and y once (16 bytes a point in float64, 8 in float32) at the
    measured copy bandwidth; the data fit in L2, so the floor can be beaten.
(b) Cheap likelihoods, the Gaussian shells in 2, 5 and 10 dimensions, 500 live
    points in all (small: 100): gpumcmc with M=10 runs of N=50 (R=10, 100
    walkers) and M=5 runs of N=100 (R=50, 250 walkers), merged to 500 live
    points, through the generic path (a user-supplied CuPy loglike), against
    dynesty 3 with 500 live points and its defaults (one point per call).
    Items are likelihood calls; the notes give log Z, logzerr and the error
    against the analytic value.

(c) The public call against its bare iteration (run first): ``run`` per
    iteration as the difference of two whole runs of different ``max_iter``,
    against ``NestedSampler._step`` looped, on user_path's sinusoid shape
    and on the 2-D shells; the issue's goal is at most 1.1x.

Whole runs are long, so each is timed once with the host clock, after an
untimed run of the same configuration with another seed (CuPy compiles its
kernels once per machine, on first use); a run's time includes its
synchronisations, as a user sees it. JAXNS 3 runs on the same GPU with its
defaults and the same model and priors: its first run (compilation included)
and a second, compiled run are recorded apart.
"""

from __future__ import annotations

import time

import numpy as np

SHELLS = {2: -1.75, 5: -5.67, 10: -14.59}
BACKEND = "cupy"  # the array backend gpumcmc runs on here


def _wall(fn, cp=None):
    if cp is not None:
        cp.cuda.Stream.null.synchronize()
    t0 = time.perf_counter()
    out = fn()
    if cp is not None:
        cp.cuda.Stream.null.synchronize()
    return (time.perf_counter() - t0) * 1e3, out


def _note(res, truth=None):
    s = f"logz={res['logz']:.3f} logzerr={res['logzerr']:.3f}"
    if truth is not None:
        s += f" err={res['logz'] - truth:+.3f}"
    return s + f" ncall={res['ncall']}"


def _gpumcmc(nested, ll, pt, d, **kw):
    s = nested.NestedSampler(ll, pt, d, progress=False, backend=BACKEND, **kw)
    r = s.run().results
    return {"logz": r.logz, "logzerr": r.logzerr, "ncall": r.ncall, "niter": r.niter, "nbatch": r.nbatch,
            "fused": s._fused is not None}


def _dynesty(ll, pt, d, nlive, seed=0, **kw):
    import dynesty

    s = dynesty.NestedSampler(ll, pt, d, nlive=nlive, rstate=np.random.default_rng(seed), **kw)
    s.run_nested(print_progress=False)
    r = s.results
    return {"logz": float(r.logz[-1]), "logzerr": float(r.logzerr[-1]), "ncall": int(np.sum(r.ncall)),
            "niter": int(r.niter)}


def _shells(bench, nested):
    cp = bench.cupy
    for d, truth in SHELLS.items():
        # at least d + 1 live points in each of the 10 runs below
        nlive = max(100 if bench.small else 500, 10 * (d + 1))
        case = f"shells {d}-D nlive={nlive}"
        llg, ptg = nested.gaussian_shells(d, xp=cp)
        # warm-up (kernel compilation), not timed
        _gpumcmc(nested, llg, ptg, d, nlive=20, max_iter=5, random_state=9)
        configs = [(f"gpumcmc M=10 N={nlive // 10} R={nlive // 50}",
                    dict(nlive=nlive // 10, n_runs=10, n_replace=nlive // 50)),
                   (f"gpumcmc M=5 N={nlive // 5} R={nlive // 10}",
                    dict(nlive=nlive // 5, n_runs=5, n_replace=nlive // 10))]
        for impl, kw in configs:
            ms, res = _wall(lambda: _gpumcmc(nested, llg, ptg, d, random_state=1, **kw), cp)
            bench.record(case, impl, ms, res["ncall"], params={"d": d, **kw}, note=_note(res, truth))
        try:
            import dynesty  # noqa: F401
        except ImportError:
            bench.record(case, "dynesty (CPU)", None, 0, note="dynesty is not installed")
            continue
        lln, ptn = nested.gaussian_shells(d, xp=np)

        def ll1(x):
            return float(lln(np.asarray(x)[None])[0])

        def pt1(u):
            return ptn(np.asarray(u))
        ms, res = _wall(lambda: _dynesty(ll1, pt1, d, nlive))
        bench.record(case, f"dynesty (CPU) nlive={nlive}", ms, res["ncall"], params={"d": d, "nlive": nlive},
                     note=_note(res, truth))


def _sinusoid(bench, nested):
    cp = bench.cupy
    n_data = 10_000 if bench.small else 100_000
    atoms = [(1.0, 0.5, 3.0)]
    t, y = nested.SinusoidModel.synthetic(n_data=n_data, amplitudes=atoms, sigma=0.5, random_state=0)
    models = {dt: nested.SinusoidModel(t, y, n_atoms=1, sigma=0.5, backend=BACKEND, dtype=dt)
              for dt in (np.float64, np.float32)}
    mn = nested.SinusoidModel(t, y, n_atoms=1, sigma=0.5, backend="numpy")
    case = f"sinusoid 1 atom n_data={n_data}"
    for m in models.values():  # warm-up: compiles the kernels
        _gpumcmc(nested, m.loglike, m.prior_transform, 3, nlive=20, max_iter=3, random_state=9)
        _gpumcmc(nested, m.loglike, m.prior_transform, 3, nlive=20, max_iter=3, random_state=9, fused=False)
    dyn_nlive = 25 if bench.small else 50
    shapes = [(2, dyn_nlive // 2, dyn_nlive // 5), (3, dyn_nlive // 2, dyn_nlive // 5), (4, 64, 32), (10, 100, 50)]
    configs = []
    for dt, tag in ((np.float64, "f64"), (np.float32, "f32")):
        for M, N, R in shapes:
            configs.append((f"gpumcmc fused {tag} M={M} N={N} R={R}", dt, dict(nlive=N, n_runs=M, n_replace=R)))
    M, N, R = shapes[0]
    configs.append((f"gpumcmc generic f64 M={M} N={N} R={R}", np.float64,
                    dict(nlive=N, n_runs=M, n_replace=R, fused=False)))
    for impl, dt, kw in configs:
        m = models[dt]
        if kw.get("fused", True):
            # one untimed whole run first: a run's later iterations and its end call CuPy
            # kernels that the short warm-up does not, and CuPy compiles each once per machine
            _gpumcmc(nested, m.loglike, m.prior_transform, 3, random_state=2, **kw)
        ms, res = _wall(lambda: _gpumcmc(nested, m.loglike, m.prior_transform, 3, random_state=1, **kw), cp)
        bench.record(case, impl, ms, res["ncall"], params={"n_data": n_data, "dtype": np.dtype(dt).name, **kw},
                     note=_note(res) + f" niter={res['niter']}",
                     bytes_moved=2 * n_data * np.dtype(dt).itemsize * res["ncall"])
    # the fused kernel's block size (threads per walker), for few and for many walkers
    for M, N, R in (shapes[0], shapes[3]):
        for block in (256, 512, 1024):
            m = nested.SinusoidModel(t, y, n_atoms=1, sigma=0.5, backend=BACKEND, slice_block=block)
            kw = dict(nlive=N, n_runs=M, n_replace=R)
            ms, res = _wall(lambda: _gpumcmc(nested, m.loglike, m.prior_transform, 3, random_state=1, **kw), cp)
            bench.record(f"{case} block sweep", f"gpumcmc fused f64 M={M} N={N} R={R} block={block}", ms,
                         res["ncall"], params={"n_data": n_data, "block": block, **kw},
                         note=_note(res) + f" niter={res['niter']}", bytes_moved=16 * n_data * res["ncall"])
    # one batched likelihood call on its own: throughput against the bandwidth floor
    mg = models[np.float64]
    th = cp.asarray(mn.prior_transform(np.random.default_rng(0).random((1024, 3))))
    ms = bench.time(lambda: mg.loglike(th))
    bench.record(f"sinusoid loglike n_data={n_data} batch=1024", "gpumcmc", ms, 1024 * n_data,
                 bytes_moved=16 * n_data, params={"n_data": n_data, "batch": 1024})
    try:
        import dynesty  # noqa: F401
    except ImportError:
        bench.record(case, "dynesty (CPU)", None, 0, note="dynesty is not installed")
    else:
        def ll1(x):
            return float(mn.loglike(np.asarray(x)[None])[0])

        def pt1(u):
            return mn.prior_transform(np.asarray(u)[None])[0]
        ms, res = _wall(lambda: _dynesty(ll1, pt1, 3, dyn_nlive))
        bench.record(case, f"dynesty (CPU) nlive={dyn_nlive}", ms, res["ncall"],
                     params={"n_data": n_data, "nlive": dyn_nlive}, note=_note(res) + f" niter={res['niter']}")
    _jaxns(bench, case, t, y, n_data)
    try:
        import blackjax  # noqa: F401
    except Exception as exc:
        bench.record(case, "blackjax", None, 0, note=f"blackjax is not installed here ({type(exc).__name__})")
    else:
        bench.record(case, "blackjax", None, 0, note="blackjax is installed but no runner is written for it")


def _jaxns(bench, case, t, y, n_data, seeds=(0, 1)):
    """JAXNS 3 on the same GPU, the same model and priors, with its defaults.

    JAXNS compiles its depth epochs on the first run; the first run's wall
    time (compilation included, as a user's first call) and the later runs'
    (compiled) are recorded apart. JAXNS turns on JAX's float64 itself.
    """
    _ = bench.jax  # start JAX through the harness, which keeps the caller's GPU current
    try:
        import jax
        import jax.numpy as jnp
        from jaxns.core import NestedSampler
        from jaxns.model import Model
        from jaxns.priors import Prior
        from tensorflow_probability.substrates import jax as tfp
    except Exception as exc:
        bench.record(case, "jaxns", None, 0, note=f"jaxns is not installed here ({type(exc).__name__}: {exc})")
        return
    tfpd = tfp.distributions
    sigma2 = 0.25

    def prior_model(t, y):
        a = Prior(tfpd.Uniform(-2.0, 2.0), name="A").realise()
        b = Prior(tfpd.Uniform(-2.0, 2.0), name="B").realise()
        f = Prior(tfpd.Uniform(0.0, 10.0), name="f").realise()
        ph = 2 * jnp.pi * f * t
        r = y - a * jnp.cos(ph) - b * jnp.sin(ph)
        return -0.5 * jnp.sum(r * r) / sigma2 - 0.5 * t.shape[0] * jnp.log(2 * jnp.pi * sigma2)

    model = Model(prior_model=prior_model)
    device = jax.devices()[0]
    args = (jax.device_put(jnp.asarray(t), device), jax.device_put(jnp.asarray(y), device))
    sampler = NestedSampler(model=model)
    import jaxns

    version = getattr(jaxns, "__version__", None)
    if version is None:
        from importlib.metadata import version as _v
        version = _v("jaxns")
    for i, seed in enumerate(seeds):
        t0 = time.perf_counter()
        r = sampler.run(key=jax.random.PRNGKey(seed), args=args).to_result().trim()
        logz, logzerr = float(r.log_Z_mean), float(r.log_Z_uncert)  # waits for the device
        ms = (time.perf_counter() - t0) * 1e3
        res = {"logz": logz, "logzerr": logzerr, "ncall": int(r.total_num_likelihood_evaluations),
               "niter": int(r.total_num_samples)}
        what = "first run, compilation included" if i == 0 else "compiled"
        bench.record(case, f"jaxns {version} on {device.platform.upper()} ({what})", ms, res["ncall"],
                     params={"n_data": n_data, "seed": seed, "defaults": True},
                     note=_note(res) + f" samples={res['niter']}")


def _public_vs_step(bench, nested):
    """``NestedSampler.run`` through the public call against its bare iteration, per iteration.

    The public figure is the difference of two whole runs of ``a`` and ``b`` iterations (``max_iter``,
    defaults otherwise, ``progress=False``) over ``b - a``, so set-up and the end's bookkeeping drop out;
    "kernel only" is the same sampler's iteration (``_step``: removal, starts, covariance, constrained
    step, replacement) looped ``b - a`` times with one wait at the end. Both on the configuration of
    ``../shared/bench/user_path.py`` (sinusoid, 10**5 data, M = 4, N = 64, R = 32; 3 and 37 iterations, as its
    runs end after about 42: the run's set-up varies by milliseconds, 20 iterations apart moved the ratio by
    a tenth from run to run; the median of five pairs) and on the 2-D shells
    (M = 5, N = 100, R = 50; 3 and 12 iterations, as its runs end after about 14), where the likelihood is cheap
    and host work shows.
    """
    cp = bench.cupy
    n_data = 10_000 if bench.small else 100_000
    t, y = nested.SinusoidModel.synthetic(n_data=n_data, amplitudes=[(1.0, 0.5, 3.0)], sigma=0.5, random_state=0)
    m = nested.SinusoidModel(t, y, n_atoms=1, sigma=0.5, backend=BACKEND)
    lls, pts = nested.gaussian_shells(2, xp=cp)
    cases = [(f"sinusoid n_data={n_data} M=4 N=64 R=32", m.loglike, m.prior_transform, 3,
              dict(nlive=64, n_runs=4, n_replace=32), 3, 37),
             ("shells 2-D M=5 N=100 R=50", lls, pts, 2, dict(nlive=100, n_runs=5, n_replace=50), 3, 12)]
    for case, ll, pt, d, kw, a, b in cases:
        def make(n, seed=1):
            return nested.NestedSampler(ll, pt, d, random_state=seed, progress=False, backend=BACKEND,
                                        max_iter=n, **kw)
        make(b, seed=9).run()  # compiles every kernel a run uses
        per = []
        for rep in range(5):
            ta, ra = _wall(lambda: make(a).run(), cp)
            tb, rb = _wall(lambda: make(b).run(), cp)
            if rb.results.niter != b:
                bench.record(case, "gpumcmc run, per iteration (public)", None, 0,
                             note=f"the run stopped at {rb.results.niter} < {b} iterations")
                break
            per.append((tb - ta) / (b - a))
        else:
            pub = float(np.median(per))
            s = make(a)
            s.run()
            state = s._live._replace(scale=cp.ones((s.n_runs,)))  # the live points a run of a iterations left

            def bare(n):
                nonlocal state
                for _ in range(n):
                    state, _info = s._step(s.rng, state)
            bare(3)
            ms_step = np.median([_wall(lambda: bare(b - a), cp)[0] for _ in range(3)]) / (b - a)
            walkers = kw["n_runs"] * kw["n_replace"]
            bench.record(case, "gpumcmc run, per iteration (public)", pub, walkers, params={**kw, "a": a, "b": b},
                         note=f"{pub / ms_step:.3f}x the bare iteration")
            bench.record(case, "gpumcmc iteration (kernel only)", float(ms_step), walkers,
                         params={**kw, "n": b - a})


def run(bench) -> None:
    from gpumcmc import nested

    _public_vs_step(bench, nested)   # the public call's cost over its bare iteration (issue: <= 1.1x)
    _sinusoid(bench, nested)   # the case with a speed goal first
    _shells(bench, nested)
