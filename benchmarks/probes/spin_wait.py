"""Is a spin on mapped memory a faster wait than cudaStreamSynchronize? (a design probe)

After an empty kernel and after a Dirichlet call (65,536 x 256 float32,
validation off), the host waits either by ``stream.synchronize()`` or by
queueing ``cuStreamWriteValue64`` of a sequence number into mapped pinned
memory and spinning on that word. Also timed: the call as users make it and
deferred + ``gpumcmc.check()``. CUDA events and the call's wall clock, the
cases taking turns (301 each). Run it as ``python -m benchmarks.probes.spin_wait``.
"""
import ctypes, time, statistics as S
import numpy as np, cupy as cp
import gpumcmc

lib = ctypes.CDLL("libcuda.so.1")
f = lib.cuStreamWriteValue64_v2
f.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint]
f.restype = ctypes.c_int
dev = cp.cuda.runtime.getDevice()
print("memops attr (v1 92 / 64-bit 119):", [cp.cuda.runtime.deviceGetAttribute(a, dev) for a in (92, 119)] if True else None)
ptr = cp.cuda.runtime.hostAlloc(8, 2 | 1)
host = ctypes.c_uint64.from_address(ptr)
host.value = 0
s = cp.cuda.get_current_stream()
k = cp.RawKernel(r'extern "C" __global__ void nop(int* x){ if (x == 0 && threadIdx.x == 1000) x[0] = 1; }', 'nop')
x = cp.zeros(1, dtype=np.int32)
seq = [0]
def spin():
    seq[0] += 1
    v = seq[0]
    r = f(s.ptr, ptr, v, 0)
    if r:
        raise RuntimeError(f"cuStreamWriteValue64 {r}")
    while host.value != v:
        pass
rng = gpumcmc.random.default_rng(7, backend="cupy")
alpha = cp.random.default_rng(8).uniform(0.1, 10.0, (65536, 256)).astype(np.float32)
def d():
    with gpumcmc.validation(False):
        rng.dirichlet(alpha)
def on():
    rng.dirichlet(alpha)
def dfr():
    with gpumcmc.deferred_validation():
        rng.dirichlet(alpha)
    gpumcmc.check()
cases = {
    "nop": lambda: k((1,), (32,), (x,)),
    "nop+sync": lambda: (k((1,), (32,), (x,)), s.synchronize()),
    "nop+spin": lambda: (k((1,), (32,), (x,)), spin()),
    "dir off": d, "dir off+sync": lambda: (d(), s.synchronize()), "dir off+spin": lambda: (d(), spin()),
    "dir on": on, "dir deferred+check": dfr,
}
for fn in cases.values():
    for _ in range(20): fn()
s.synchronize()
ev = {n: [] for n in cases}
wall = {n: [] for n in cases}
for _ in range(301):
    for n, fn in cases.items():
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(s); t0 = time.perf_counter(); fn(); t1 = time.perf_counter(); b.record(s); b.synchronize()
        ev[n].append(cp.cuda.get_elapsed_time(a, b) * 1e3); wall[n].append((t1 - t0) * 1e6)
for n in cases:
    print(f"{n:20s} events {S.median(ev[n]):7.1f} us   call wall {S.median(wall[n]):7.1f} us")
