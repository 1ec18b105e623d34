"""Host time of the pieces of a direct call, and of whole calls too small for the GPU to matter.

Best of 5 loops of 20,000 (pieces) or 3,000 (calls) on the current GPU:
stream and device look-ups, an allocation, the status-word ticket, then
Dirichlet 4 x 4, gamma 1,024 and categorical 64 x 1,024 with validation on,
off, off with a wait, and deferred; an empty kernel's launch and wait; and
cProfile listings of the Dirichlet and categorical calls. Run it as
``python -m benchmarks.probes.host_pieces``.
"""
import time
import numpy as np, cupy as cp
import gpumcmc
from gpumcmc import _status, _validate as V, _nvtx
from gpumcmc.random import _gamma

def t(fn, n=20000):
    for _ in range(200): fn()
    best = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n): fn()
        best.append((time.perf_counter() - t0) / n * 1e6)
    return min(best)

rng = gpumcmc.random.default_rng(7, backend="cupy")
alpha = cp.random.default_rng(8).uniform(0.1, 10.0, (65536, 256)).astype(np.float32)
small = cp.ones((4, 4), dtype=np.float32)
s = cp.cuda.get_current_stream()
print("nvtx module:", _nvtx._nvtx())
rows = {
 "get_current_stream": lambda: cp.cuda.get_current_stream(),
 "stream.ptr": lambda: cp.cuda.get_current_stream().ptr,
 "getDevice": lambda: cp.cuda.runtime.getDevice(),
 "Device().id": lambda: cp.cuda.Device().id,
 "cupy.empty 64MB": lambda: cp.empty((65536, 256), dtype=np.float32),
 "annotate enter/exit": lambda: _nvtx.annotate("x", cp).__enter__() if False else (lambda c: (c.__enter__(), c.__exit__(None, None, None)))(_nvtx.annotate("gpumcmc.random.dirichlet", cp)),
 "ParamMessage": lambda: _gamma.ParamMessage(("alpha", "alpha"), (65536, 256)),
 "rng.advance": lambda: rng.advance(),
 "is_cupy_array": lambda: gpumcmc.backend.is_cupy_array(alpha),
 "flags.c_contiguous": lambda: alpha.flags.c_contiguous,
 "alpha.data.ptr": lambda: alpha.data.ptr,
 "status.pending()": lambda: _status.pending(),
}
def tk():
    V._state.deferred += 1
    try:
        V.fused(_gamma.ParamMessage(("alpha", "alpha"), (65536, 256)))
    finally:
        V._state.deferred -= 1
    _status._local.pending = []
    for w in _status._local.words.values(): w.calls = []
rows["fused ticket (+reset)"] = tk
for k, f in rows.items():
    print(f"{k:28s} {t(f):7.2f} us", flush=True)
# whole calls on a tiny input: host-bound
def off(): 
    with V.validation(False): rng.dirichlet(small)
print(f"{'dirichlet 4x4 off (with ctx)':28s} {t(off, 3000):7.2f} us")
def offw():
    with V.validation(False): rng.dirichlet(small)
    s.synchronize()
print(f"{'dirichlet 4x4 off+sync':28s} {t(offw, 3000):7.2f} us")
print(f"{'dirichlet 4x4 on':28s} {t(lambda: rng.dirichlet(small), 3000):7.2f} us")
def dfr():
    with V.deferred(): rng.dirichlet(small)
    _status._local.pending = []
    for w in _status._local.words.values(): w.calls = []
print(f"{'dirichlet 4x4 deferred':28s} {t(dfr, 3000):7.2f} us")
sh = cp.ones(1024, dtype=np.float32)
print(f"{'gamma 1024 on':28s} {t(lambda: rng.gamma(sh), 3000):7.2f} us")
def goff():
    with V.validation(False): rng.gamma(sh)
    s.synchronize()
print(f"{'gamma 1024 off+sync':28s} {t(goff, 3000):7.2f} us")
w = cp.ones((64, 1024), dtype=np.float32); out = cp.empty(64, dtype=np.int64)
print(f"{'categorical 64x1024 on':28s} {t(lambda: gpumcmc.categorical(w, rng, out=out), 3000):7.2f} us")
def coff():
    with V.validation(False): gpumcmc.categorical(w, rng, out=out)
    s.synchronize()
print(f"{'categorical 64x1024 off+sync':28s} {t(coff, 3000):7.2f} us")
def coffq():
    with V.validation(False): gpumcmc.categorical(w, rng, out=out)
print(f"{'categorical 64x1024 off':28s} {t(coffq, 3000):7.2f} us")
k = cp.RawKernel(r'extern "C" __global__ void nop(int* x){ if (x == 0 && threadIdx.x == 1000) x[0] = 1; }', 'nop')
x = cp.zeros(1, dtype=np.int32)
print(f"{'nop launch':28s} {t(lambda: k((1,), (32,), (x,)), 3000):7.2f} us")
print(f"{'nop launch+sync':28s} {t(lambda: (k((1,), (32,), (x,)), s.synchronize()), 3000):7.2f} us")
import cProfile, pstats
pr = cProfile.Profile(); pr.enable()
for _ in range(3000): rng.dirichlet(small)
pr.disable(); pstats.Stats(pr).sort_stats("tottime").print_stats(18)
pr = cProfile.Profile(); pr.enable()
for _ in range(3000): gpumcmc.categorical(w, rng, out=out)
pr.disable(); pstats.Stats(pr).sort_stats("tottime").print_stats(25)
