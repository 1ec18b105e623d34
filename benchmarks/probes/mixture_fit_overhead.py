"""Where DPGaussianMixture.fit's Gibbs iteration spends more than its bare step (one GPU).

    python -m benchmarks.probes.mixture_fit_overhead [--out FILE]

Per-iteration ms (difference of whole calls of 5 and 65 iterations, benchmarks.harness.per_iteration_ms)
of, in order: the bare step loop; the same keeping every state (as fit's kept draws do); the step under
sampling.run; fit's kept step under run; fit without relabelling; fit with it; then the pieces fit runs
after the loop, per kept draw: stacking and copying the draws to the host, and align_draws (with the time
of one 256 x 256 assignment on one thread). The data are user_path.py's (12 planted clusters, p = 14).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import cupy as cp

    import gpumcmc
    from benchmarks.harness import per_iteration_ms
    from gpumcmc.models import DPGaussianMixture
    from gpumcmc.models import mixture as mx
    from gpumcmc.models.mixture.estimator import _KeptDraws
    from gpumcmc.models.mixture.relabel import align_draws
    from gpumcmc.sampling import run

    n, p, k, a, b = args.n, 14, args.k, 5, 65
    rs = np.random.default_rng(2)
    centres = rs.normal(0, 5, (12, p))
    X = (centres[rs.integers(0, 12, n)] + rs.normal(0, 1, (n, p))).astype(np.float32)
    Xd = cp.asarray(X)
    model = mx.make_model(Xd, k, dtype=np.float32, cache_bytes=0)
    rng = gpumcmc.random.default_rng(0, backend="cupy")
    step = mx.make_step(model)
    holder = [mx.init(rng, model, 1)]
    out = {"n": n, "p": p, "k": k, "iterations": [a, b], "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}

    def bare(m):
        for _ in range(m):
            holder[0], _ = step(rng, holder[0])

    def bare_keep(m):
        keep = _KeptDraws(0, m)
        for _ in range(m):
            holder[0], info = step(rng, holder[0])
            keep(holder[0], info)

    def on_run(m):
        holder[0] = run(step, holder[0], rng, n_iter=m, progress=False).state

    def on_run_keep(m):
        keep = _KeptDraws(0, m)

        def kept_step(r, s):
            s, info = step(r, s)
            keep(s, info)
            return s, None
        holder[0] = run(kept_step, holder[0], rng, n_iter=m, progress=False).state

    def fit(m, **kw):
        DPGaussianMixture(n_components=k, n_iter=m, burn_in=0, random_state=0, progress=False, **kw).fit(X)

    for name, call in (("bare_step", bare), ("bare_step_keeping_states", bare_keep), ("step_on_run", on_run),
                       ("kept_step_on_run", on_run_keep), ("fit_relabel_false", lambda m: fit(m, relabel=False)),
                       ("fit_default", fit)):
        out[name + "_ms"] = per_iteration_ms(call, a, b)
        print(name, round(out[name + "_ms"], 3), flush=True)

    # the pieces after the loop, per kept draw
    keep = _KeptDraws(0, b)
    for _ in range(b):
        holder[0], info = step(rng, holder[0])
        keep(holder[0], info)
    cp.cuda.Device().synchronize()

    def timed(fn, reps=3):
        ts = []
        for _ in range(reps):
            cp.cuda.Device().synchronize()
            t = time.perf_counter()
            fn()
            cp.cuda.Device().synchronize()
            ts.append(time.perf_counter() - t)
        return float(np.median(ts))

    def finish():
        d = keep.draws(cp)
        return {name: cp.asnumpy(v) for name, v in d.items()}
    out["draws_to_host_per_draw_ms"] = timed(finish) / b * 1e3
    d = keep.draws(cp)
    scale = np.ones(p)
    out["align_draws_per_draw_ms"] = timed(lambda: align_draws(d["weights"], d["means"], d["covariances"],
                                                               d["loglik"], scale)) / b * 1e3
    from scipy.optimize import linear_sum_assignment
    c = np.random.default_rng(0).random((k, k))
    out["one_assignment_ms"] = timed(lambda: linear_sum_assignment(c), reps=5) * 1e3
    import os
    out["host_cpus"] = len(os.sched_getaffinity(0))
    print(json.dumps(out, indent=1))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
