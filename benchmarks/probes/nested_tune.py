"""Tuning figures for the fused nested-sampling kernel (not a suite): ``python -m benchmarks.probes.nested_tune``.

Prints, for the sinusoid model with one atom:
(a) wall time per iteration of a fused run (40 iterations after a warm-up) at
    10**5 data points and at 10**3 (where the host's own work per iteration
    shows), float64 and float32 data, for several batch shapes;
(b) one launch of the fused kernel timed with CUDA events, against its
    longest walker's count of likelihood evaluations (the chain of dependent
    evaluations that sets the launch's latency), per block size.
"""

from __future__ import annotations

import time

import numpy as np


def main():
    import cupy as cp

    from gpumcmc.nested import NestedSampler, SinusoidModel

    shapes = [(2, 25, 10), (4, 64, 32), (8, 64, 32), (10, 100, 50)]
    for n_data in (100_000, 1_000):
        t, y = SinusoidModel.synthetic(n_data=n_data, amplitudes=[(1.0, 0.5, 3.0)], sigma=0.5, random_state=0)
        for dt in (np.float64, np.float32):
            m = SinusoidModel(t, y, n_atoms=1, sigma=0.5, backend="cupy", dtype=dt)
            NestedSampler(m.loglike, m.prior_transform, 3, nlive=20, max_iter=3, progress=False,
                          backend="cupy").run()
            for M, N, R in shapes:
                s = NestedSampler(m.loglike, m.prior_transform, 3, nlive=N, n_runs=M, n_replace=R, max_iter=40,
                                  random_state=1, progress=False, backend="cupy")
                cp.cuda.Device().synchronize()
                t0 = time.perf_counter()
                r = s.run().results
                cp.cuda.Device().synchronize()
                sec = time.perf_counter() - t0
                print(f"(a) n_data={n_data:6d} {np.dtype(dt).name} M={M:2d} N={N:3d} R={R:2d} W={M * R:4d}: "
                      f"{1e3 * sec / r.niter:7.3f} ms/iteration, {r.ncall / r.niter / (M * R):5.1f} evals/walker/it",
                      flush=True)
    t, y = SinusoidModel.synthetic(n_data=100_000, amplitudes=[(1.0, 0.5, 3.0)], sigma=0.5, random_state=0)
    rng = np.random.default_rng(0)
    for dt in (np.float64, np.float32):
        for W in (20, 128, 256, 512):
            for block in (256, 512, 1024):
                m = SinusoidModel(t, y, n_atoms=1, sigma=0.5, backend="cupy", dtype=dt, slice_block=block)
                u = cp.empty((W, 3))
                u[:, 0] = 0.75 + 0.002 * cp.asarray(rng.standard_normal(W))   # A near 1.0
                u[:, 1] = 0.625 + 0.002 * cp.asarray(rng.standard_normal(W))  # B near 0.5
                u[:, 2] = 0.3 + 0.0001 * cp.asarray(rng.standard_normal(W))   # f near 3.0
                v = m.prior_transform(u)
                ll = m.loglike(v)
                lstar = ll - 3.0
                n_steps, K = 12, 30
                d = cp.asarray(rng.standard_normal((n_steps, W, 3)))
                d = 0.003 * d / cp.sqrt((d * d).sum(-1, keepdims=True))
                U = cp.asarray(rng.random((n_steps, K + 1, W)))
                m._fused_slice(u, v, ll, lstar, d, U, K)
                e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                e0.record()
                out = m._fused_slice(u, v, ll, lstar, d, U, K)
                e1.record()
                e1.synchronize()
                ms = cp.cuda.get_elapsed_time(e0, e1)
                nev = int(out[4].max())
                print(f"(b) {np.dtype(dt).name} W={W:4d} block={block:4d}: {ms:8.3f} ms per launch, longest walker "
                      f"{nev} evals: {1e3 * ms / max(nev, 1):7.2f} us per evaluation; mean evals "
                      f"{float(out[4].mean()):.1f}", flush=True)


if __name__ == "__main__":
    main()
