"""Where the host's time goes in public fits, by cProfile: the functions with the most own time.

    python -m benchmarks.probes.host_profile [case ...] [--out DIR]

Cases: ``bayesnet1`` (BayesianNetwork.koller() fit on 10^6 cases, half missing, m = 10, one GPU),
``mixture1`` (DPGaussianMixture(256).fit, n = 2^20, p = 14, one GPU), ``mixture4`` (the same at
n = 10^7 with ``devices`` every visible GPU), ``lda4`` (LDA(1024).fit on a Zipf corpus of 29 M tokens over
every visible GPU), ``shells10`` (NestedSampler.run on 10-D Gaussian shells, 5 runs of 100 live points;
its wall figure is one whole run's).

Each case's per-iteration wall time is benchmarks.harness.per_iteration_ms's (the median of three
differences of fits of a and b iterations, every GPU synced). Then the b-iteration fit runs under cProfile,
and the probe prints its host time (to the fit's return, before the final wait) and the 30 functions with
the most own time and the 40 with the most time under them. A host-bound iteration shows a profiled host
time per iteration near its wall time; the listing then says which calls to remove or batch.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import time

import numpy as np

from benchmarks.harness import per_iteration_ms, sync_all_gpus


def _wall(fn):
    sync_all_gpus()
    t = time.perf_counter()
    fn()
    sync_all_gpus()
    return time.perf_counter() - t


def _cases(cp):
    from gpumcmc.models import LDA, DPGaussianMixture

    every = list(range(cp.cuda.runtime.getDeviceCount()))

    def mixture(n, devices):
        rs = np.random.default_rng(2)
        centres = rs.normal(0, 5, (12, 14))
        X = (centres[rs.integers(0, 12, n)] + rs.normal(0, 1, (n, 14))).astype(np.float32)
        return lambda m: DPGaussianMixture(256, n_iter=m, burn_in=0, random_state=0, progress=False,
                                           devices=devices).fit(X)

    def lda(devices, tokens=29_000_000, docs=23_600, vocab=50_000):
        import scipy.sparse as sp

        rs = np.random.default_rng(1)
        w = rs.zipf(1.3, tokens) % vocab
        d = np.sort(rs.integers(0, docs, tokens))
        counts = sp.coo_matrix((np.ones(tokens, np.int32), (d, w)), shape=(docs, vocab)).tocsr()
        return lambda m: LDA(1024, n_iter=m, burn_in=0, random_state=0, progress=False, devices=devices).fit(counts)

    def shells(d):
        from gpumcmc.nested import NestedSampler, gaussian_shells

        ll, pt = gaussian_shells(d, xp=cp)
        return lambda m: NestedSampler(ll, pt, d, nlive=100, n_runs=5, n_replace=50, random_state=m,
                                       progress=False).run()

    def bayesnet():
        from gpumcmc.models.bayesnet import BayesianNetwork

        truth = BayesianNetwork.koller()
        X = truth.sample(1_000_000, 0)
        X[np.random.default_rng(3).random(X.shape) < 0.5] = -1
        return lambda m: BayesianNetwork(truth.parents, truth.states, n_iter=m, same=10, random_state=0,
                                         progress=False).fit(X)

    return {"bayesnet1": (bayesnet, 5, 105),
            "shells10": (lambda: shells(10), 1, 2),
            "mixture1": (lambda: mixture(1 << 20, None), 5, 45),
            "mixture4": (lambda: mixture(10_000_000, every), 5, 25),
            "lda4": (lambda: lda(every), 5, 25)}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import cupy as cp

    cases = _cases(cp)
    out = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
           "gpus": cp.cuda.runtime.getDeviceCount()}
    for name in args.cases or list(cases):
        make, a, b = cases[name]
        call = make()
        if name.startswith("shells"):
            call(a)
            per = _wall(lambda: call(b))
        else:
            per = per_iteration_ms(call, a, b, sync=sync_all_gpus) / 1e3
        prof = cProfile.Profile()
        sync_all_gpus()
        t = time.perf_counter()
        prof.enable()
        call(b)
        prof.disable()
        host = time.perf_counter() - t
        sync_all_gpus()
        s = io.StringIO()
        st = pstats.Stats(prof, stream=s)
        st.sort_stats("tottime").print_stats(30)
        st.sort_stats("cumulative").print_stats(40)
        out[name] = {"wall_ms_per_iter": per * 1e3, "profiled_host_s": host, "iters": b}
        print(f"== {name}: {per * 1e3:.2f} ms an iteration (wall), profiled fit of {b}: "
              f"{host:.2f} s host")
        print(s.getvalue())
        if args.out:
            prof.dump_stats(os.path.join(args.out, f"host_profile_{name}.pstats"))
    if args.out:
        with open(os.path.join(args.out, "host_profile.json"), "w") as f:
            json.dump(out, f, indent=1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
