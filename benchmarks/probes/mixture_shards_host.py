"""Host timestamps of a sharded mixture sweep's pieces (n = 10^7, p = 14, k = 256) on 1, 2 and 4 GPUs.

Each call of the indicator kernel's launcher, the statistics and the row sums
is timed on the host, without a wait of its own, so a piece that waits for its
GPU shows as a long host call. Run it as ``python -m benchmarks.probes.mixture_shards_host``
on a machine with 4 GPUs (logs-h100/mixture-shards-probes-21314eb.log): no piece
waits (the statistics take 0.3-0.8 ms of host time), while the GPUs finish at
28 ms on 1 and 2 GPUs alike; so the 2-GPU sweep was held back on the GPUs,
not by the host.
"""
import time, json, os, sys
import numpy as np, cupy as cp
import gpumcmc
from gpumcmc import _validate
from gpumcmc.models import mixture as mx
from gpumcmc.shards import Shards
sys.path.insert(0, os.getcwd())
from benchmarks.mixture import _planted

n, p, k = 10**7, 14, 256
x = _planted(cp, n, p)
log = {}
from gpumcmc.models.mixture import algorithm as mxa  # gibbs_local's names: the pieces of a shard's sweep
orig_acc, orig_assign, orig_sum = mxa._gibbs_acc, mxa.assign, mxa._sum_rows
stamps = []
def wrap(name, f):
    def g(*a, **kw):
        t0 = time.perf_counter(); r = f(*a, **kw); stamps.append((name, cp.cuda.runtime.getDevice(), t0, time.perf_counter())); return r
    return g
mxa._gibbs_acc = wrap("acc", orig_acc); mxa.assign = wrap("assign", orig_assign); mxa._sum_rows = wrap("sum_rows", orig_sum)
with _validate.validation(False):
    for devs in ([0], [0, 1], [0, 1, 2, 3]):
        sh = Shards(devs) if len(devs) > 1 else gpumcmc.shards.one_device(1)
        models = mx.make_sharded_models(x, k, sh, dtype=np.float32, cache_bytes=0)
        rng = gpumcmc.random.default_rng(0, backend="cupy")
        with sh.on(0):
            alg = mx.sharded_gibbs(sh)
            state = alg.init(rng, mx.gibbs_parts(models, sh, n))
            step = alg.step
            for _ in range(3):
                state, _ = step(rng, state)
            for d in devs:
                with cp.cuda.Device(d): cp.cuda.get_current_stream().synchronize()
            print("current device after sweeps", cp.cuda.runtime.getDevice(), "sample_rows", [m.sample_rows for m in models])
            for r in range(3):
                stamps.clear()
                t0 = time.perf_counter()
                state, _ = step(rng, state)
                t1 = time.perf_counter()
                for d in devs:
                    with cp.cuda.Device(d): cp.cuda.get_current_stream().synchronize()
                t2 = time.perf_counter()
                print(f"W={len(devs)} host {1e3*(t1-t0):.2f} ms, end {1e3*(t2-t0):.2f} ms; pieces:",
                      [(nm, dv, round(1e3*(a-t0),2), round(1e3*(b-a),2)) for nm, dv, a, b in stamps])
        # device time of one shard's pieces alone
        with sh.on(0):
            m = models[0]; z = state[0].z
            for nm, f in (("acc", lambda: orig_acc(m, z)),):
                e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                e0.record(); f(); e1.record(); e1.synchronize()
                print(f"W={len(devs)} shard 0 {nm} alone {cp.cuda.get_elapsed_time(e0, e1):.2f} ms")
        del models, state, step
        cp.get_default_memory_pool().free_all_blocks()
print("device at the end", cp.cuda.runtime.getDevice())
