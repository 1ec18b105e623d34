"""Variants of the GLM kernels timed side by side (one GPU session): slice-sweep settings and f+g macros."""
import json
import os
import sys
import time

import numpy as np


def main(out, quick=False):
    import cupy as cp

    import gpumcmc.glm as gg
    import gpumcmc.models.glm as mg
    from gpumcmc.random import default_rng
    rows = []

    def rec(**kw):
        rows.append(kw)
        print(json.dumps(kw), flush=True)
        with open(out, "w") as fh:
            json.dump(rows, fh, indent=1)

    def sweeps(D, y, groups, dtype, n_warm=20, n=60, kernel="pass", spec=4, chunk=None, hyper=None, C=4, block=None):
        mg._SLICE_KERNEL, mg._SPEC_SHRINK, mg._CHUNK_ROWS, mg._BLOCK = kernel, spec, chunk, block
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
    for N in ((100_000,) if quick else (100_000, 1_000_000)):
        X = rs.normal(size=(N, 50)).astype(np.float32)
        b = rs.normal(size=50) * 0.3
        y = (rs.random(N) < 1 / (1 + np.exp(-(X @ b)))).astype(np.float32)
        D = np.column_stack([np.ones(N, np.float32), X])
        variants = [("pass", 4, None, np.float32), ("pass", 2, None, np.float32), ("pass", 8, None, np.float32),
                    ("pass", 4, 2048 if N < 10**6 else 16384, np.float32), ("pass", 4, None, np.float64)]
        if N < 10**6:
            variants += [("pass", 4, 256, np.float32), ("segment", 4, None, np.float32)]
        if quick:
            variants = [("pass", 8, None, np.float32), ("pass", 12, None, np.float32)]
        for kernel, spec, chunk, dt in variants:
            n = 3 if kernel == "segment" else 60
            try:
                ms, err, fb, nch = sweeps(D, y, None, dt, n_warm=5 if kernel == "segment" else 20, n=n,
                                          kernel=kernel, spec=spec, chunk=chunk)
                rec(case=f"flat N={N} K=51", kernel=kernel, spec=spec, chunk=chunk, dtype=np.dtype(dt).name,
                    ms_per_sweep=ms, eta_err=err, fallbacks=fb, n_chunks=nch)
            except Exception as exc:
                rec(case=f"flat N={N}", kernel=kernel, spec=spec, error=repr(exc)[:300])
    # hierarchical 1000 x 20 x 100
    G, K, n = 1000, 20, 100
    g = np.repeat(np.arange(G), n)
    X = rs.normal(size=(G * n, K)).astype(np.float32)
    beta = 0.3 * rs.normal(size=K + 1) + 0.3 * rs.normal(size=(G, K + 1))
    eta = beta[g, 0] + np.sum(X * beta[g, 1:], axis=1)
    y = (rs.random(G * n) < 1 / (1 + np.exp(-eta))).astype(np.float32)
    D = np.column_stack([np.ones(G * n, np.float32), X])
    hyper = mg.HyperPrior(1.0, float(K + 3), cp.eye(K + 1, dtype=np.float64))
    hv = [("pass", 4, None), ("pass", 2, None), ("pass", 8, None), ("segment", 4, None)]
    if quick:
        hv = [("pass", 8, None), ("pass", 8, 64), ("pass", 8, 128)]
    for kernel, spec, block in hv:
        try:
            ms, err, fb, nch = sweeps(D, y, g, np.float32, n_warm=10, n=20 if kernel == "segment" else 60,
                                      kernel=kernel, spec=spec, hyper=hyper, block=block)
            t0 = time.perf_counter()
            st, data = mg.init(cp.asarray(D), cp.asarray(y), "bernoulli", 4, 1.0, cp.asarray(g))
            rng = default_rng(0, backend="cupy")
            for _ in range(20):
                mg._draw_hyper(rng, st.beta, hyper, cp)
            cp.cuda.Device().synchronize()
            hyp = (time.perf_counter() - t0) * 1e3 / 20
            rec(case="hier G=1000 K=21 n=100", kernel=kernel, spec=spec, block=block, ms_per_sweep=ms, eta_err=err,
                fallbacks=fb, hyper_draw_ms_upper=hyp)
        except Exception as exc:
            rec(case="hier", kernel=kernel, error=repr(exc)[:300])
    mg._SLICE_KERNEL, mg._SPEC_SHRINK, mg._CHUNK_ROWS, mg._BLOCK = "pass", 8, None, None
    if quick:
        return

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
    for name, defs, threads, tile in [
            ("default", (), 256, 256 * 8 * 16),
            ("minblocks4", (("GLM_MIN_BLOCKS", 4),), 256, 256 * 8 * 16),
            ("minblocks2", (("GLM_MIN_BLOCKS", 2),), 256, 256 * 8 * 16),
            ("t512 vpt4 mb2", (("GLM_THREADS", 512), ("GLM_VPT", 4), ("GLM_MIN_BLOCKS", 2)), 512, 512 * 4 * 16),
            ("t128 vpt8 mb6", (("GLM_THREADS", 128), ("GLM_MIN_BLOCKS", 6)), 128, 128 * 8 * 16),
            ("vpt4 mb4", (("GLM_VPT", 4), ("GLM_MIN_BLOCKS", 4)), 256, 256 * 4 * 16)]:
        gg._DEFINES, gg._THREADS, gg._TILE_BYTES = defs, threads, tile
        try:
            f, gr = gg.loglik_and_grad(Xc, yc, b1, check=False)
            agree = float(cp.abs(gr - g_ref).max() / cp.abs(g_ref).max())
            one = timed(lambda: gg.loglik_and_grad(Xc, yc, b1, check=False), 1)
            q = timed(lambda: gg.loglik_and_grad(Xc, yc, b1, check=False), 20)
            b8t = timed(lambda: gg.loglik_and_grad(Xc, yc, b8, check=False), 5)
            rec(case="f+g N=4M K=50 f32", variant=name, ms_single=one, ms_queued=q, ms_8chains=b8t, g_rel=agree,
                GBps_queued=floor_bytes / q / 1e6)
        except Exception as exc:
            rec(case="f+g", variant=name, error=repr(exc)[:300])
    gg._DEFINES, gg._THREADS, gg._TILE_BYTES = (), 256, 256 * 8 * 16


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.environ.get("OUT", "."), "tune.json"),
         quick="quick" in sys.argv[2:])
