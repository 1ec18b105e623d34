"""NestedSampler with its defaults (nlive=500, n_replace=None: nlive // 20) against R = 1 (dynesty's static
sampler, the default before), beside the defaults with the slice rounds' callables called from Python rather
than replayed from a CUDA graph (config.nested_capture=False), and dynesty 3.1 on this host's CPU, on the Gaussian shells in 2-D and 10-D.

    python benchmarks/probes/nested_default.py OUT.json [backend]

One run a setting (seed 1), wall time of the whole public call, log Z and logzerr beside the analytic
log Z (-1.75 in 2-D, -14.59 in 10-D).
"""
from __future__ import annotations

import json
import sys
import time
import warnings

import numpy as np

import gpumcmc
from gpumcmc import backend as _backend
from gpumcmc.nested import NestedSampler, gaussian_shells

TRUTH = {2: -1.75, 10: -14.59}


def main(out: str, backend: str = "cupy") -> None:
    xp = _backend.get_backend(backend)
    res = {"backend": backend, "rows": []}
    if backend == "cupy":
        import cupy as cp
        res["device"] = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    for d in (2, 10):
        ll, pt = gaussian_shells(d, xp=xp)
        NestedSampler(ll, pt, d, nlive=100, max_iter=5, progress=False, backend=backend).run()  # warm-up
        for label, kw, capture in (("default", {}, True), ("default-uncaptured", {}, False),
                                   ("R1", {"n_replace": 1}, True))[:3 if d == 2 or backend == "numpy" else 2]:
            t = time.perf_counter()
            with warnings.catch_warnings(), gpumcmc.config.override(nested_capture=capture):
                warnings.simplefilter("ignore")
                r = NestedSampler(ll, pt, d, random_state=1, progress=False, backend=backend, **kw).run().results
            sec = time.perf_counter() - t
            res["rows"].append(dict(d=d, setting=label, R=r.n_replace, seconds=sec, logz=r.logz, logzerr=r.logzerr,
                                    truth=TRUTH[d], niter=r.niter))
            print(json.dumps(res["rows"][-1]), flush=True)
        try:
            import dynesty
        except ImportError:
            continue
        lln, ptn = gaussian_shells(d, xp=np)
        t = time.perf_counter()
        s = dynesty.NestedSampler(lambda x: float(lln(np.asarray(x)[None])[0]), lambda u: ptn(np.asarray(u)), d,
                                  nlive=500, rstate=np.random.default_rng(0))
        s.run_nested(print_progress=False)
        res["rows"].append(dict(d=d, setting="dynesty", seconds=time.perf_counter() - t,
                                logz=float(s.results.logz[-1]), logzerr=float(s.results.logzerr[-1]), truth=TRUTH[d]))
        print(json.dumps(res["rows"][-1]), flush=True)
    with open(out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
