#!/usr/bin/env bash
# GPU checks of nested sampling, the package gpumcmc/models/nested (run from the repository root on a GPU
# machine; $OUT collects JSON and logs).
set -x
# Every nested GPU test, with each kernel argument checked against its C parameter (ops.py's four launches:
# nested_progress and nested_argsort_rows against their twins, sinusoid_ssq against the tiled expression,
# the fused sinusoid_slice against the generic slice path of algorithm.py and the NumPy twin), run() twice,
# a +inf found mid-run. Then the same as users run it (no per-launch check).
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu tests/test_nested.py -q -p no:cacheprovider 2>&1 \
    | tee "$OUT/nested_gpu.log" | tail -40
python -m pytest -m "gpu and not slow" tests/test_nested.py -q -p no:cacheprovider 2>&1 | tail -5
# The public call (run, defaults, progress=False) per iteration against its bare iteration (_step), on
# user_path's sinusoid configuration and the 2-D shells; then the whole suite, small.
python -m benchmarks nested --small --out "$OUT/nested-small" 2>&1 | tail -40
python ../shared/bench/user_path.py nested --out "$OUT/user_path_nested.json"
# Issue 37, item 5: the equal-width two-mode mixture on CuPy (slow): 5 runs of 50 live points flagged (at least
# 3 of 8 seeds; NumPy flags 8), and at the default 500 the 0.3 mode's merged weight within 0.16.
python -m pytest -m "gpu and slow" tests/test_nested.py -q -p no:cacheprovider -k "issue_modes" 2>&1 | tail -15
# Issue 38, nested sampling of cheap likelihoods: the generic slice step's rounds over every walker on its own
# slice (nested_slice_start / nested_slice_round, no host sync per round) against the compacting rounds.
# First the tests of those rounds alone, each launch's arguments checked (twin and kernels against the
# walker-by-walker reference, CuPy masked = CuPy compacting bit for bit, CuPy vs NumPy, a NaN named).
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu tests/test_nested.py -q -p no:cacheprovider \
    -k "slice_rounds or masked_rounds or bad_value_in_the_masked or gpu_run_twice or fused" 2>&1 | tail -15
# Then the shells 2-D and 10-D as user_path.py times them (5 runs of 100, 50 replaced, median of seeds 1-3 after
# a warm-up with seed 9), with the rounds masked (the default) and compacting (the former path, by the private
# switch _rounds), each seed's logz, logzerr, ncall and nbatch (the same points: logz equal), and dynesty 3.1
# with 500 live points on this host's CPU where it is installed.
python - "$OUT/nested_rounds.json" <<'PY' 2>&1 | tail -20
import json, sys, time
import numpy as np
import cupy as cp
from gpumcmc.nested import NestedSampler, gaussian_shells

def wall(fn):
    cp.cuda.Device().synchronize(); t = time.perf_counter(); out = fn(); cp.cuda.Device().synchronize()
    return time.perf_counter() - t, out

out = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}
for d in (2, 10):
    ll, pt = gaussian_shells(d, xp=cp)
    for rounds in ("masked", "compact"):
        def shells(seed):
            s = NestedSampler(ll, pt, d, nlive=100, n_runs=5, n_replace=50, random_state=seed, progress=False)
            s._rounds = rounds
            return s.run().results
        shells(9)
        rows = {s: wall(lambda s=s: shells(s)) for s in (1, 2, 3)}
        out[f"shells_{d}d_{rounds}_s"] = float(np.median([t for t, _ in rows.values()]))
        out[f"shells_{d}d_{rounds}_runs"] = {s: dict(seconds=t, logz=r.logz, logzerr=r.logzerr, ncall=r.ncall,
                                                      nbatch=r.nbatch, niter=r.niter) for s, (t, r) in rows.items()}
        print(d, rounds, out[f"shells_{d}d_{rounds}_s"], flush=True)
    try:
        import dynesty
    except ImportError:
        continue
    lln, ptn = gaussian_shells(d, xp=np)
    t, _ = wall(lambda: dynesty.NestedSampler(lambda x: float(lln(np.asarray(x)[None])[0]),
                                              lambda u: ptn(np.asarray(u)), d, nlive=500,
                                              rstate=np.random.default_rng(0)).run_nested(print_progress=False))
    out[f"shells_{d}d_dynesty_s"] = t
    print(d, "dynesty", t, flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
PY
