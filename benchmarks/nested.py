"""Nested sampling: gpumcmc on the GPU against dynesty on the CPU (and JAXNS / blackjax if present).

(a) Cheap likelihoods, the Gaussian shells in 2, 5 and 10 dimensions, 500 live
    points in all (small: 100): gpumcmc as one plain run (N=500, R=1, the
    schedule dynesty runs), gpumcmc batched (M=10 runs of N=50, R=10 replaced,
    merged to 500 live points: 100 walkers per step), and dynesty 3 with its
    defaults (one point per call). Items are likelihood calls; the notes give
    log Z, logzerr and the error against the analytic value.
(b) The sinusoid-atoms model of Henderson's tutorial, one atom (A, B, f) with
    10**5 data points (small: 10**4): dynesty on the CPU with 50 live points
    (a full run; its likelihood is NumPy over the data), gpumcmc with the same
    merged number of live points (M=2 runs of N=25, R=10: equal expected
    logzerr) and with a GPU-sized batch (M=10, N=100, R=50: 1000 merged live
    points and 500 walkers per call, a logzerr about 4.5x smaller, which
    dynesty would need about 20x its run time to match). Floor of a likelihood call: reading t and y
    once (the parameters are tiny), times the calls made.

Whole runs are long, so each is timed once with the host clock after a short
warm-up run that compiles the kernels; a run's time includes its
synchronisations, as a user sees it.
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
    return {"logz": r.logz, "logzerr": r.logzerr, "ncall": r.ncall, "niter": r.niter, "nbatch": r.nbatch}


def _dynesty(ll, pt, d, nlive, seed=0, **kw):
    import dynesty

    s = dynesty.NestedSampler(ll, pt, d, nlive=nlive, rstate=np.random.default_rng(seed), **kw)
    s.run_nested(print_progress=False)
    r = s.results
    return {"logz": float(r.logz[-1]), "logzerr": float(r.logzerr[-1]), "ncall": int(np.sum(r.ncall)),
            "niter": int(r.niter)}


def _shells(bench, nested):
    cp = bench.cupy
    nlive = 100 if bench.small else 500
    for d, truth in SHELLS.items():
        case = f"shells {d}-D nlive={nlive}"
        llg, ptg = nested.gaussian_shells(d, xp=cp)
        # warm-up (kernel compilation), not timed
        _gpumcmc(nested, llg, ptg, d, nlive=20, max_iter=5, random_state=9)
        n_small = max(nlive // 10, 2 * d + 2)
        r_small = max(1, n_small // 5)
        configs = [(f"gpumcmc plain N={nlive} R=1", dict(nlive=nlive)),
                   (f"gpumcmc M=10 N={n_small} R={r_small}", dict(nlive=n_small, n_runs=10, n_replace=r_small))]
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
        bench.record(case, "dynesty (CPU)", ms, res["ncall"], params={"d": d, "nlive": nlive},
                     note=_note(res, truth))


def _sinusoid(bench, nested):
    cp = bench.cupy
    n_data = 10_000 if bench.small else 100_000
    atoms = [(1.0, 0.5, 3.0)]
    t, y = nested.SinusoidModel.synthetic(n_data=n_data, amplitudes=atoms, sigma=0.5, random_state=0)
    mg = nested.SinusoidModel(t, y, n_atoms=1, sigma=0.5, backend=BACKEND)
    mn = nested.SinusoidModel(t, y, n_atoms=1, sigma=0.5, backend="numpy")
    case = f"sinusoid 1 atom n_data={n_data}"
    bytes_per_call = 2 * n_data * 8
    _gpumcmc(nested, mg.loglike, mg.prior_transform, 3, nlive=20, max_iter=3, random_state=9)
    dyn_nlive = 25 if bench.small else 50
    configs = [(f"gpumcmc M=2 N={dyn_nlive // 2} R={dyn_nlive // 5}",
                dict(nlive=dyn_nlive // 2, n_runs=2, n_replace=dyn_nlive // 5)),
               ("gpumcmc M=10 N=100 R=50", dict(nlive=100, n_runs=10, n_replace=50))]
    for impl, kw in configs:
        ms, res = _wall(lambda: _gpumcmc(nested, mg.loglike, mg.prior_transform, 3, random_state=1, **kw), cp)
        bench.record(case, impl, ms, res["ncall"], params={"n_data": n_data, **kw}, note=_note(res),
                     bytes_moved=bytes_per_call * res["nbatch"])
    # one batched likelihood call on its own: throughput against the bandwidth floor
    th = cp.asarray(mn.prior_transform(np.random.default_rng(0).random((1024, 3))))
    ms = bench.time(lambda: mg.loglike(th))
    bench.record(f"sinusoid loglike n_data={n_data} batch=1024", "gpumcmc", ms, 1024 * n_data,
                 bytes_moved=bytes_per_call, params={"n_data": n_data, "batch": 1024})
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
                     params={"n_data": n_data, "nlive": dyn_nlive}, note=_note(res))
    for name in ("jaxns", "blackjax"):
        try:
            __import__(name)
        except Exception as exc:
            bench.record(case, name, None, 0, note=f"{name} is not installed here ({type(exc).__name__})")
        else:
            bench.record(case, name, None, 0, note=f"{name} is installed but no runner is written for it")


def run(bench) -> None:
    from gpumcmc import nested

    _sinusoid(bench, nested)   # the case with a speed goal first: the shells' plain runs are long
    _shells(bench, nested)
