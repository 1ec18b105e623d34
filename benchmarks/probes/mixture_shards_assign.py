"""The mixture's indicator kernel (``assign``) and statistics alone on m rows of n = 10^7, by CUDA events.

Run it as ``python -m benchmarks.probes.mixture_shards_assign``
(logs-h100/mixture-shards-probes-21314eb.log): the kernel's time is linear in
the rows (25.1 ms at 10^7, 13.0 at 5 10^6, 6.5 at 2.5 10^6), the statistics
take 2-4 ms, about 2 ms of which does not shrink with the rows.
"""
import math, os, sys
import numpy as np, cupy as cp
import gpumcmc
from gpumcmc import _validate, _loader
from gpumcmc.models import mixture as mx
sys.path.insert(0, os.getcwd())
from benchmarks.mixture import _planted

n, p, k = 10**7, 14, 256
x = _planted(cp, n, p)
with _validate.validation(False):
    model = mx.make_model(x, k, dtype=np.float32, cache_bytes=0)
    rng = gpumcmc.random.default_rng(0, backend="cupy")
    state = mx.init(rng, model)
    step = mx.make_step(model)
    for _ in range(3):
        state, _ = step(rng, state)
    fn = mx._kernel(p, x.dtype)
    d = dict(mx._defines(p, x.dtype))
    print("MIX_ROWS", d["MIX_ROWS"], "MIX_BLOCK", d["MIX_BLOCK"], "resident", _loader.resident_blocks(fn, d["MIX_BLOCK"]), "sms", _loader.sm_count())
    for m in (10**7, 8 * 10**6, 6 * 10**6, 5 * 10**6, 4 * 10**6, 3 * 10**6, 2500000, 1250000):
        xm = cp.ascontiguousarray(x[:m])
        z = cp.zeros((1, m), cp.int32); lse = cp.empty((1, m), cp.float32)
        ts = []
        for r in range(5):
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            mx.assign(xm, state.params, 0, m, mx.MODE_SAMPLE, rng.key, 7, z=z, lse=lse)
            e1.record(); e1.synchronize()
            ts.append(cp.cuda.get_elapsed_time(e0, e1))
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record(); acc = mx._gibbs_acc(mx.make_model(xm, k, dtype=np.float32, cache_bytes=0, moments=(np.zeros(p), np.ones(p))), z); e1.record(); e1.synchronize()
        print(f"m={m}: assign {np.median(ts):.2f} ms; stats {cp.cuda.get_elapsed_time(e0, e1):.2f} ms")
        del xm, z, lse
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    e0.record(); state, _ = step(rng, state); e1.record(); e1.synchronize()
    print(f"whole sweep {cp.cuda.get_elapsed_time(e0, e1):.2f} ms")
