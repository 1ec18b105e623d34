"""Where ``glm.loglik_and_grad``'s call spends host time (one GPU).

    python -m benchmarks.probes.fg_host [--out FILE]

At N = 4 M, K = 50 (float32, one chain) the kernels take about 0.31 ms; a call timed alone, as
``user_path.py`` times it (CUDA events around each call, ``cupyx.profiler.benchmark``), also counts the
host's work before the first launch and, with ``check=True``, the wait for the status word. This probe
reports, for ``check`` on and off:

- ``events_ms``: the call timed as user_path.py does (median of 30);
- ``queued_ms``: 100 calls queued back to back, one synchronisation at the end (the GPU's pace; with the
  check on, each direct call still waits for its word);
- ``queued_deferred_ms`` (check on): the same inside ``gpumcmc.deferred_validation()``, the word read once at
  the end: the checking kernels' pace without the waits;
- ``host_us``: the host's time a call on a tiny problem (N = 4096), where the GPU is never the bottleneck;
- a cProfile of 3000 tiny calls with the check on: the functions that take the host's time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import time

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import cupy as cp
    from cupyx.profiler import benchmark

    from gpumcmc.glm import loglik_and_grad

    rs = np.random.default_rng(0)
    out = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}
    for N in (4_000_000, 4096):
        X = cp.asarray(rs.standard_normal((N, 50), dtype=np.float32) / np.float32(np.sqrt(50)))
        y = cp.asarray((rs.random(N) < 0.5).astype(np.float32))
        beta = cp.zeros(50, cp.float32)
        for check in (True, False):
            call = lambda: loglik_and_grad(X, y, beta, "bernoulli", check=check)
            for _ in range(5):
                call()
            cp.cuda.Device().synchronize()
            tag = f"N{N}_check_{check}"
            if N > 4096:
                out[f"{tag}_events_ms"] = float(np.median(benchmark(call, n_repeat=30, n_warmup=3).gpu_times[0])) * 1e3
                t = time.perf_counter()
                for _ in range(100):
                    call()
                cp.cuda.Device().synchronize()
                out[f"{tag}_queued_ms"] = (time.perf_counter() - t) / 100 * 1e3
                if check:  # the checking kernels' own pace: 100 checked calls queued, the word read once
                    import gpumcmc

                    t = time.perf_counter()
                    with gpumcmc.deferred_validation():
                        for _ in range(100):
                            call()
                        gpumcmc.check()
                    cp.cuda.Device().synchronize()
                    out[f"{tag}_queued_deferred_ms"] = (time.perf_counter() - t) / 100 * 1e3
            else:
                t = time.perf_counter()
                for _ in range(2000):
                    call()
                cp.cuda.Device().synchronize()
                out[f"{tag}_host_us"] = (time.perf_counter() - t) / 2000 * 1e6
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(3000):
        loglik_and_grad(X, y, beta, "bernoulli")
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(30)
    out["profile_check_True"] = s.getvalue()
    print(json.dumps({k: v for k, v in out.items() if not k.startswith("profile")}, indent=1))
    print(out["profile_check_True"])
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
