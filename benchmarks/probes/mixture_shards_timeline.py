"""Events on every GPU around each piece of one sharded mixture sweep (n = 10^7, p = 14, k = 256).

Run it as ``python -m benchmarks.probes.mixture_shards_timeline`` on a machine with 4
GPUs. At 21314eb (logs-h100/mixture-shards-probes-21314eb.log) GPU 1's
indicator kernel started 13.2 ms into the sweep, when GPU 0's ended: the copy
of the kernel parameters for GPU 1 (``gpumcmc.shards.Replica``) waited for the
work queued on GPU 0 before it. The fix (4876c77) records the Replica's event
when it is made and copies with a kernel on the receiving GPU. The marks
"reduce0/1" bracket the all-reduce and "draws0/1" the global draws (on GPU 0).
"""
import os, sys, time
import numpy as np, cupy as cp
import gpumcmc
from gpumcmc import _validate
from gpumcmc.models import mixture as mx
from gpumcmc.shards import Shards
sys.path.insert(0, os.getcwd())
from benchmarks.mixture import _planted

n, p, k = 10**7, 14, 256
x = _planted(cp, n, p)
ev = []
def mark(tag):
    e = cp.cuda.Event(); e.record(); ev.append((tag, cp.cuda.runtime.getDevice(), e))
oa, og, omd = mx.assign, mx._gibbs_acc, mx._make_global_draws
oar = Shards.allreduce
def A(*a, **kw):
    mark("assign0"); r = oa(*a, **kw); mark("assign1"); return r
def G(*a, **kw):
    mark("acc0"); r = og(*a, **kw); mark("acc1"); return r
def AR(self, bufs, *a, **kw):
    for i in range(len(bufs)):
        with self.on(i): mark("reduce0")
    r = oar(self, bufs, *a, **kw)
    for i in range(len(bufs)):
        with self.on(i): mark("reduce1")
    return r
def MD(*a, **kw):
    d = omd(*a, **kw)
    def draws(*b, **kw2):
        mark("draws0"); r = d(*b, **kw2); mark("draws1"); return r
    return draws
mx.assign, mx._gibbs_acc, mx._make_global_draws, Shards.allreduce = A, G, MD, AR
ndev = cp.cuda.runtime.getDeviceCount()
with _validate.validation(False):
    for devs in [d for d in ([0], [0, 1], [0, 1, 2, 3]) if max(d) < ndev]:
        sh = Shards(devs) if len(devs) > 1 else gpumcmc.shards.one_device(1, devs[0])
        models = mx.make_sharded_models(x, k, sh, dtype=np.float32, cache_bytes=0)
        print("x devices", [m.x.device.id for m in models], "contig", [m.x.flags.c_contiguous for m in models], [m.x.shape for m in models])
        rng = gpumcmc.random.default_rng(0, backend="cupy")
        with sh.on(0):
            alg = mx.sharded_gibbs(sh)
            state = alg.init(rng, mx.gibbs_parts(models, sh, n))
            print("z devices", [s.z.device.id for s in state], "params", [s.params.device.id for s in state])
            step = alg.step
            for _ in range(3):
                state, _ = step(rng, state)
            for d in devs:
                with cp.cuda.Device(d): cp.cuda.get_current_stream().synchronize()
            ev.clear()
            for d in devs:
                with cp.cuda.Device(d): mark("start")
            state, _ = step(rng, state)
            for d in devs:
                with cp.cuda.Device(d): mark("end")
            for d in devs:
                with cp.cuda.Device(d): cp.cuda.get_current_stream().synchronize()
            snap = list(ev)
            t = time.perf_counter()
            for _ in range(10):
                state, _ = step(rng, state)
            for d in devs:
                with cp.cuda.Device(d): cp.cuda.get_current_stream().synchronize()
            print(f"W={len(devs)} wall {1e3 * (time.perf_counter() - t) / 10:.2f} ms a sweep (10 sweeps)")
        for d in devs:
            mine = [(t, e) for t, dv, e in snap if dv == d]
            s = mine[0][1]
            print(f"W={len(devs)} dev {d}:", [(t, round(cp.cuda.get_elapsed_time(s, e), 2)) for t, e in mine])
        del models, state, step
        cp.get_default_memory_pool().free_all_blocks()
