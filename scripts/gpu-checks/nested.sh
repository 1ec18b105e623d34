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
# Issue 35, nested sampling in fewer lines (same draws). CuPy code was only moved: the launchers of ops.py now
# share one module-level import of _loader and _kernel_args (_GpuOps.argsort_rows, slice_start, slice_round,
# _GpuProgress, sinusoid_loglike, sinusoid_fused_slice), _round_word keeps its per-thread dict by setdefault,
# _NestedSteps._slice hands one tuple of walker arrays to the fused step and to the masked rounds, run() no
# longer re-zeroes _ncall_dev after _init, SinusoidModel no longer sums y**2 on the device at construction, and
# the tiled twin (kernel=False) evaluates SinusoidModel.model per tile. Their GPU tests, arguments checked:
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu tests/test_nested.py -q -p no:cacheprovider 2>&1 | tail -5
# Then the same CuPy runs before (8466ba3, from git archive) and after, hashed; the after runs twice, so a
# configuration whose bits vary from run to run is named as such rather than as a change.
mkdir -p /tmp/nested_base && git archive 8466ba3 gpumcmc kernels_cu | tar -x -C /tmp/nested_base \
    || echo "no git history here: only this tree's hashes"
cat > /tmp/nested_fp.py <<'PY'
import hashlib, os, sys, warnings
import numpy as np
import gpumcmc
from gpumcmc.nested import NestedSampler, SinusoidModel, correlated_gaussian, gaussian_shells
print(gpumcmc.__file__, file=sys.stderr)
be = os.environ.get("FP_BACKEND", "cupy")
xp = np if be == "numpy" else __import__("cupy")
warnings.simplefilter("ignore")
def h(r):
    return hashlib.sha256(b"".join(np.asarray(getattr(r, k)).tobytes() for k in
                          ("logz", "logzerr", "samples", "logl", "nlive", "ncall", "nbatch", "niter"))).hexdigest()[:16]
ll, pt = gaussian_shells(2, xp=xp)
for sampler in ("slice", "cslice", "rwalk"):
    for rounds in ((None, "compact") if sampler != "rwalk" else (None,)):
        s = NestedSampler(ll, pt, 2, nlive=60, n_replace=5, n_runs=3, sampler=sampler, random_state=3,
                          progress=False, backend=be, dlogz=0.1)
        s._rounds = rounds
        print("shells", sampler, rounds, h(s.run().results))
cl, cpt, _ = correlated_gaussian(3, xp=xp)
print("corr3", h(NestedSampler(cl, cpt, 3, nlive=50, random_state=5, progress=False, backend=be).run().results))
t, y = SinusoidModel.synthetic(n_data=2000, amplitudes=[(1.0, 0.5, 3.0), (0.5, -0.3, 7.0)], random_state=0)
for kernel in (True, False):
    for fused in ((None, False) if kernel else (None,)):
        m = SinusoidModel(t, y, n_atoms=2, backend=be, kernel=kernel, tile=700)
        s = NestedSampler(m.loglike, m.prior_transform, 6, nlive=40, n_replace=8, n_runs=2, max_iter=30,
                          random_state=3, progress=False, backend=be, fused=fused)
        print("sinusoid kernel", kernel, "fused", fused, s.fused, h(s.run().results))
PY
python /tmp/nested_fp.py > "$OUT/nested_lines_fp_after.txt"
python /tmp/nested_fp.py > "$OUT/nested_lines_fp_after2.txt"
if [ -d /tmp/nested_base/gpumcmc ]; then
    PYTHONPATH=/tmp/nested_base python /tmp/nested_fp.py > "$OUT/nested_lines_fp_before.txt"
    python - "$OUT" <<'PY'
import sys
d = sys.argv[1]
b, a, a2 = (open(f"{d}/nested_lines_fp_{k}.txt").read().splitlines() for k in ("before", "after", "after2"))
for x, y, z in zip(b, a, a2):
    print("same" if x == y else ("varies run to run" if y != z else "CHANGED"), "|", y)
PY
fi
