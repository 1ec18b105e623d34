"""Variants of the GLM kernels timed side by side (one GPU session): slice-sweep settings and f+g macros."""
import json
import os
import sys
import time

import numpy as np


def _recorder(out):
    """``rec(**row)``: print the row as JSON and rewrite ``out`` with every row so far."""
    rows = []

    def rec(**kw):
        rows.append(kw)
        print(json.dumps(kw), flush=True)
        with open(out, "w") as fh:
            json.dump(rows, fh, indent=1)

    return rec


def main(out, quick=False):
    import cupy as cp

    import gpumcmc.glm as gg
    import gpumcmc.models.glm as mg
    from gpumcmc.random import default_rng
    rec = _recorder(out)

    def sweeps(D, y, groups, dtype, n_warm=20, n=60, spec=4, chunk=None, hyper=None, C=4, block=None):
        mg._SPEC_SHRINK, mg._CHUNK_ROWS, mg._BLOCK = spec, chunk, block
        Dc, yc = cp.asarray(D, dtype=dtype), cp.asarray(y, dtype=dtype)
        g = None if groups is None else cp.asarray(groups)
        st, data = mg.init(Dc, yc, "bernoulli", C, 2.5 if groups is None else 1.0, g)
        rng = default_rng(0, backend="cupy")
        for _ in range(n_warm):
            st, info = mg.step(rng, st, data, "bernoulli", 1.0, 10**9, hyper=hyper)
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            st, info = mg.step(rng, st, data, "bernoulli", 1.0, 0, hyper=hyper)
        cp.cuda.Device().synchronize()
        ms = (time.perf_counter() - t0) * 1e3 / n
        eta_ref = cp.stack([cp.sum(Dc * st.beta[c][data.gid], axis=1) for c in range(C)])
        err = float(cp.abs(st.eta - eta_ref).max())
        return ms, err, int(info.fallbacks.sum()), data.plan.n_chunks if data.plan is not None else 0

    rs = np.random.default_rng(1)
    # hierarchical 1000 x 20 x 100: the sweep with the hyperparameter draw by the glm_niw kernel and by
    # CuPy's linear algebra, the sweep without it, and the draw alone (synchronised per call)
    G, K, n = 1000, 20, 100
    g = np.repeat(np.arange(G), n)
    X = rs.normal(size=(G * n, K)).astype(np.float32)
    beta = 0.3 * rs.normal(size=K + 1) + 0.3 * rs.normal(size=(G, K + 1))
    eta = beta[g, 0] + np.sum(X * beta[g, 1:], axis=1)
    y = (rs.random(G * n) < 1 / (1 + np.exp(-eta))).astype(np.float32)
    D = np.column_stack([np.ones(G * n, np.float32), X])
    hyper = mg.HyperPrior(1.0, float(K + 3), cp.eye(K + 1, dtype=np.float64))
    from gpumcmc._config import config
    for label, hyp, f in (("niw kernel", hyper, True), ("cupy linalg", hyper, False), ("no hyper", None, True)):
        config.glm_niw_kernel = f
        try:
            ms, err, fb, nch = sweeps(D, y, g, np.float32, n_warm=10, n=60, spec=8, hyper=hyp)
            st, data = mg.init(cp.asarray(D), cp.asarray(y), "bernoulli", 4, 1.0, cp.asarray(g))
            rng = default_rng(0, backend="cupy")
            mg._draw_hyper(rng, st.beta, hyper, cp)
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            for _ in range(20):
                mg._draw_hyper(rng, st.beta, hyper, cp)
            cp.cuda.Device().synchronize()
            hyp_ms = (time.perf_counter() - t0) * 1e3 / 20
            rec(case="hier G=1000 K=21 n=100", variant=label, ms_per_sweep=ms, eta_err=err, fallbacks=fb,
                hyper_draw_ms=hyp_ms)
        except Exception as exc:
            rec(case="hier", variant=label, error=repr(exc)[:300])
        finally:
            config.glm_niw_kernel = True
    mg._SPEC_SHRINK, mg._CHUNK_ROWS, mg._BLOCK = 8, None, None

    # f+g macros: N = 4M, K = 50, float32, one chain and eight
    N, K = 4_000_000, 50
    Xc = cp.asarray(rs.normal(size=(N, K)).astype(np.float32))
    yc = cp.asarray((rs.random(N) < 0.5).astype(np.float32))
    b1 = cp.asarray(rs.normal(size=K).astype(np.float32) * 0.1)
    b8 = cp.asarray(rs.normal(size=(8, K)).astype(np.float32) * 0.1)
    f_ref, g_ref = gg.loglik_and_grad(Xc, yc, b1, check=False, kernel="gemm")
    ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()

    def timed(fn, reps):
        fn()
        cp.cuda.Device().synchronize()
        ts = []
        for _ in range(5):
            ev0.record()
            for _ in range(reps):
                fn()
            ev1.record()
            ev1.synchronize()
            ts.append(cp.cuda.get_elapsed_time(ev0, ev1) / reps)
        return float(np.median(ts))

    floor_bytes = N * K * 4 + N * 4
    # read-only bandwidth in this run: a sum over X by CuPy (one pass, its own reduction kernel)
    rd = timed(lambda: Xc.sum(dtype=np.float32), 5)
    rec(case="read bandwidth", ms=rd, GBps=N * K * 4 / rd / 1e6)
    for name, defs, threads, tile in [
            ("default", (), 256, 256 * 8 * 16),
            ("rows mb2", (("GLM_ROWS_MIN_BLOCKS", 2),), 256, 256 * 8 * 16),
            ("rows mb4", (("GLM_ROWS_MIN_BLOCKS", 4),), 256, 256 * 8 * 16),
            ("vpt4 mb4", (("GLM_VPT", 4), ("GLM_ROWS_MIN_BLOCKS", 4), ("GLM_MIN_BLOCKS", 4)), 256, 256 * 4 * 16),
            ("t512 vpt4 mb2", (("GLM_THREADS", 512), ("GLM_VPT", 4), ("GLM_ROWS_MIN_BLOCKS", 2),
                               ("GLM_MIN_BLOCKS", 2)), 512, 512 * 4 * 16)]:
        gg._DEFINES, gg._THREADS, gg._TILE_BYTES = defs, threads, tile
        for kern in ("rows", "tiled"):
            if kern == "tiled" and name != "default":
                continue
            try:
                f, gr = gg.loglik_and_grad(Xc, yc, b1, check=False, kernel=kern)
                agree = float(cp.abs(gr - g_ref).max() / cp.abs(g_ref).max())
                fagree = float(abs(float(f) - float(f_ref)) / abs(float(f_ref)))
                one = timed(lambda: gg.loglik_and_grad(Xc, yc, b1, check=False, kernel=kern), 1)
                q = timed(lambda: gg.loglik_and_grad(Xc, yc, b1, check=False, kernel=kern), 20)
                b8t = timed(lambda: gg.loglik_and_grad(Xc, yc, b8, check=False, kernel=kern), 5)
                rec(case="f+g N=4M K=50 f32", kernel=kern, variant=name, ms_single=one, ms_queued=q, ms_8chains=b8t,
                    g_rel=agree, f_rel=fagree, GBps_queued=floor_bytes / q / 1e6)
            except Exception as exc:
                rec(case="f+g", kernel=kern, variant=name, error=repr(exc)[:300])
    gg._DEFINES, gg._THREADS, gg._TILE_BYTES = (), 256, 256 * 8 * 16


def profile(out):
    """Where the hierarchical fit's time goes (1,000 groups x 20 covariates x 100 rows, float32, 4 chains).

    ms per sweep of: the whole fit (eager and from a CUDA graph); glm.step in a bare loop, plain, inside
    the driver's deferred validation, and in warm-up mode; the host time to queue a sweep (no sync);
    CUDA-event times of the sweep's parts; and a cProfile of an eager fit's host time."""
    import cProfile
    import io
    import pstats

    import cupy as cp

    import gpumcmc._validate as v
    import gpumcmc.models.glm as mg
    from gpumcmc.models import HierarchicalGLM
    from gpumcmc.random import default_rng
    rec = _recorder(out)

    G, K, n = 1000, 20, 100
    from benchmarks.glm import hier_data

    X, y, g = hier_data(G, K, n)
    Xc, yc = cp.asarray(X), cp.asarray(y)
    kw = dict(n_chains=4, random_state=0, progress=False, backend="cupy", dtype="float32")
    for graph in (False, True):
        HierarchicalGLM(n_samples=2, n_warmup=2, graph=graph, **kw).fit(Xc[:400], yc[:400], g[:400])
    for graph in (False, True):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        m = HierarchicalGLM(n_samples=500, n_warmup=200, graph=graph, **kw).fit(Xc, yc, g)
        wall = time.perf_counter() - t0
        rec(what="fit 200+500", graph=graph, ms_per_sweep=wall * 1e3 / 700, driver_s=m.trace_.seconds, wall_s=wall)
    D = cp.asarray(np.column_stack([np.ones(G * n, np.float32), X]))
    st0, data = mg.init(D, yc, "bernoulli", 4, 1.0, cp.asarray(g))
    hyper = mg.HyperPrior(1.0, float(K + 3), cp.eye(K + 1, dtype=np.float64))
    rng = default_rng(0, backend="cupy")
    st = st0
    for _ in range(20):
        st, info = mg.step(rng, st, data, "bernoulli", 1.0, 10**9, hyper=hyper)
    cp.cuda.Device().synchronize()
    for label, nw, ctx in (("step plain", 0, None), ("step warm", 10**9, None), ("step deferred", 0, v.deferred),
                           ("step no hyper", 0, None)):
        hyp = None if "no hyper" in label else hyper
        cm = ctx() if ctx else None
        if cm:
            cm.__enter__()
        try:
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            for _ in range(100):
                st, info = mg.step(rng, st, data, "bernoulli", 1.0, nw, hyper=hyp)
            t1 = time.perf_counter()
            cp.cuda.Device().synchronize()
            t2 = time.perf_counter()
        finally:
            if cm:
                cm.__exit__(None, None, None)
        rec(what=label, ms_per_sweep=(t2 - t0) * 10, host_queue_ms_per_sweep=(t1 - t0) * 10)
    # GPU time of the parts of one sweep, by CUDA events, with the sweep's own arrays
    ev = [cp.cuda.Event() for _ in range(6)]
    C = 4
    dt = np.float32
    parts = {}
    for rep in range(30):
        ev[0].record()
        e_all = rng.standard_exponential(size=(K + 1, C, G), dtype=dt)
        u_all = rng.uniform(size=(K + 1, 2, C, G), dtype=dt)
        us_all = rng.uniform(size=(K + 1, 24, C, G), dtype=dt)
        ev[1].record()
        beta_, eta_, width_ = st.beta.copy(), st.eta.copy(), st.width.copy()
        mg._slice_pass_sweep(cp, st, beta_, eta_, width_, data, "bernoulli", 1.0, 0, 4, 24, e_all, u_all, us_all)
        ev[2].record()
        mg._draw_hyper(rng, beta_, hyper, cp)
        ev[3].record()
        from gpumcmc.glm import pointwise_loglik
        pointwise_loglik(eta_, data.y, "bernoulli", 1.0, cp, None).sum(axis=1, dtype=np.float64)
        ev[4].record()
        ev[4].synchronize()
        if rep >= 5:
            for name, (i, j) in (("draws", (0, 1)), ("slice sweep", (1, 2)), ("hyper", (2, 3)), ("loglik", (3, 4))):
                parts.setdefault(name, []).append(cp.cuda.get_elapsed_time(ev[i], ev[j]))
    rec(what="parts, GPU ms (events, each part synchronised)", **{k: float(np.median(x)) for k, x in parts.items()})
    # the slice sweep alone queued back to back: its GPU time without host gaps
    ev[0].record()
    for _ in range(20):
        beta_, eta_, width_ = st.beta.copy(), st.eta.copy(), st.width.copy()
        mg._slice_pass_sweep(cp, st, beta_, eta_, width_, data, "bernoulli", 1.0, 0, 4, 24, e_all, u_all, us_all)
    ev[1].record()
    ev[1].synchronize()
    rec(what="slice sweep queued x20", ms=cp.cuda.get_elapsed_time(ev[0], ev[1]) / 20)
    pr = cProfile.Profile()
    pr.enable()
    HierarchicalGLM(n_samples=100, n_warmup=100, graph=False, **kw).fit(Xc, yc, g)
    pr.disable()
    sio = io.StringIO()
    pstats.Stats(pr, stream=sio).sort_stats("tottime").print_stats(25)
    rec(what="cProfile eager fit 100+100, by tottime", text=sio.getvalue()[-6000:])
    print(sio.getvalue()[-6000:])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "profile":
        profile(sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.environ.get("OUT", "."), "profile.json"))
        sys.exit(0)
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.environ.get("OUT", "."), "tune.json"),
         quick="quick" in sys.argv[2:])
