"""Where a direct call's time goes (gamma 2^26 and Dirichlet 65,536 x 256, float32), on the current GPU.

Prints, with validation off, deferred and on: CUDA-event times of one call
(and of validation off with a wait), the GPU time of the call queued behind
another, and by the host clock the time before the kernel's launch, the
launch, the work after it, the wait (on: the read of the status word) and the
rest. Run it as ``python -m benchmarks.probes.host_probe``; it patches the packed
launcher and the status word's read to time them, so run it in its own
process.
"""
import statistics as S
import time
import numpy as np, cupy as cp
import gpumcmc
from gpumcmc import _loader, _status

marks = {}
_lp = _loader.PackedLaunch.__call__
def lp(*a, **k):
    marks["l0"] = time.perf_counter(); _lp(*a, **k); marks["l1"] = time.perf_counter()
_loader.PackedLaunch.__call__ = lp
_rd = _status.Word.read
def rd(self):
    marks["r0"] = time.perf_counter(); v = _rd(self); marks["r1"] = time.perf_counter(); return v
_status.Word.read = rd

rng = gpumcmc.random.default_rng(7, backend="cupy")
shape = cp.random.default_rng(7).uniform(0.1, 10.0, 1 << 26).astype(np.float32)
alpha = cp.random.default_rng(8).uniform(0.1, 10.0, (65536, 256)).astype(np.float32)
s = cp.cuda.get_current_stream()
cases = {"gamma": lambda: rng.gamma(shape), "dirichlet": lambda: rng.dirichlet(alpha)}
k = cp.RawKernel(r'extern "C" __global__ void nop(int* x){ if (x == 0 && threadIdx.x == 1000) x[0] = 1; }', 'nop')
x = cp.zeros(1, dtype=np.int32)
def ev(fn, n=30):
    t = []
    for _ in range(n):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(); fn(); b.record(); b.synchronize(); t.append(cp.cuda.get_elapsed_time(a, b) * 1e3)
    return S.median(t)
print("nop events: %.1f us; nop+sync events: %.1f us" % (ev(lambda: k((1,), (32,), (x,))), ev(lambda: (k((1,), (32,), (x,)), s.synchronize()))))
for name, fn in cases.items():
    def off():
        with gpumcmc.validation(False):
            return fn()
    def offw():
        off(); s.synchronize()
    def dfr():
        with gpumcmc.deferred_validation():
            return fn()
    for _ in range(5): fn(); off()
    s.synchronize()
    print(f"{name}: events off {ev(off):.1f}  off+sync {ev(offw):.1f}  on {ev(fn):.1f}  deferred {ev(dfr):.1f} us")
    # GPU time alone: queued behind another call
    def gq(f):
        t = []
        for _ in range(20):
            off(); a, b = cp.cuda.Event(), cp.cuda.Event(); a.record(); f(); b.record(); b.synchronize()
            t.append(cp.cuda.get_elapsed_time(a, b) * 1e3)
        return S.median(t)
    print(f"{name}: GPU queued behind a call: off {gq(off):.1f}  deferred {gq(dfr):.1f} us")
    for mode, f in (("off", off), ("deferred", dfr), ("on", fn)):
        rows = []
        for _ in range(40):
            s.synchronize(); marks.clear()
            t0 = time.perf_counter(); f(); t1 = time.perf_counter()
            if mode != "on":
                s.synchronize()
            t2 = time.perf_counter()
            rows.append((marks["l0"] - t0, marks["l1"] - marks["l0"], (marks.get("r0", t1) - marks["l1"]),
                         (marks.get("r1", t1) - marks.get("r0", t1)), t1 - marks.get("r1", t1), t2 - t0))
        m = np.median(np.array(rows) * 1e6, axis=0)
        print(f"{name} {mode}: before launch {m[0]:.1f}, launch {m[1]:.1f}, launch->read {m[2]:.1f}, read(wait) {m[3]:.1f}, "
              f"read->return {m[4]:.1f}, total {m[5]:.1f} us")
