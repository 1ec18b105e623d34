"""Can a direct call notice its kernel's end sooner than ``cudaStreamSynchronize``? (a design probe)

A compute-bound kernel of about the Dirichlet call's length (65,536 x 256
float32, ~0.17 ms) is timed by CUDA events, start to stop, with the host:

- not waiting (validation off);
- waiting by ``stream.synchronize()`` (what a direct call does now);
- spinning on mapped memory that ``cuStreamWriteValue64`` sets after the kernel;
- spinning on mapped memory that the kernel's last block sets (each block
  counts itself done in device memory; the last one resets the count and
  writes the call's number), falling back to the stream wait.

The same kernel with the count but no wait shows what the count costs. The
real Dirichlet call, off / off + wait / on, is timed beside them. The cases
take turns call by call (301 each); medians. Run it as
``python -m benchmarks.probes.done_word`` (``--peers``: with PyTorch and JAX
started on the GPU first, as the benchmark suites did before their peers
started at first use; ``--torch`` or ``--jax``: one of them).

What it showed on an H100 host (``results/logs-h100/done-word-1bdd8d2.log``):
the stream wait adds about 2 us by events, a spin on mapped memory saves
about 1 us of that, and the last block's write saves nothing; but with
PyTorch or JAX started in the process a bare launch's host time went from
12.6 to 17-25 us and a Dirichlet call's from 24 to 34-57 us. Its Dirichlet
rows move by several microseconds with the order of the cases (the first of
them follows unrelated work); the suites' ``validation cost:`` rows, which
take turns between four modes of one call, are the measurement.
"""
import contextlib
import ctypes
import statistics as S
import sys
import time

import cupy as cp
import numpy as np

import gpumcmc

SRC = r'''
extern "C" __global__ void work(float* out, int iters, unsigned* count,
                                volatile unsigned long long* done, unsigned long long seq) {
    float x = threadIdx.x * 1e-3f, y = blockIdx.x * 1e-3f;
    for (int i = 0; i < iters; ++i) { x = fmaf(x, 0.999f, y); y = fmaf(y, 0.998f, x); }
    out[blockIdx.x * blockDim.x + threadIdx.x] = x + y;
    if (count == nullptr) return;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        if (atomicAdd(count, 1u) == gridDim.x - 1) {
            *count = 0u;
            __threadfence_system();
            *done = seq;
        }
    }
}
'''
if "--peers" in sys.argv or "--torch" in sys.argv:  # start PyTorch on the GPU first, as the suites do
    import torch

    torch.zeros(1, device="cuda")
    print("PyTorch started on the GPU")
if "--peers" in sys.argv or "--jax" in sys.argv:  # and JAX
    import jax

    jax.numpy.zeros(1).block_until_ready()
    cp.cuda.runtime.setDevice(0)
    print("JAX started on the GPU")
s = cp.cuda.get_current_stream()
dev = cp.cuda.runtime.getDevice()
k = cp.RawModule(code=SRC).get_function("work")
blocks = cp.cuda.runtime.getDeviceProperties(dev)["multiProcessorCount"] * 8
out = cp.empty(blocks * 256, dtype=np.float32)
count = cp.zeros(1, dtype=np.uint32)
ptr = cp.cuda.runtime.hostAlloc(16, 2 | 1)
host = ctypes.c_uint64.from_address(ptr)
host.value = 0
lib = ctypes.CDLL("libcuda.so.1")
wv = lib.cuStreamWriteValue64_v2
wv.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint]
wv.restype = ctypes.c_int
seq = [0]
null = np.uint64(0)


def launch(iters, counted):
    seq[0] += 1
    if counted:
        k((blocks,), (256,), (out, np.int32(iters), count, np.uint64(ptr), np.uint64(seq[0])))
    else:
        k((blocks,), (256,), (out, np.int32(iters), null, null, null))


def spin():
    v = seq[0]
    n = 0
    while host.value != v:
        n += 1
        if n & 1023 == 0 and s.done:  # the kernel ended without writing: take the stream's wait
            break
    s.synchronize() if host.value != v else None


# Tune the loop to ~170 us.
iters = 2000
for _ in range(3):
    a, b = cp.cuda.Event(), cp.cuda.Event()
    a.record(s); launch(iters, False); b.record(s); b.synchronize()
    t = cp.cuda.get_elapsed_time(a, b) * 1e3
    iters = max(1, int(iters * 170.0 / t))
print(f"device {cp.cuda.runtime.getDeviceProperties(dev)['name'].decode()}  blocks {blocks}  iters {iters}")

rng = gpumcmc.random.default_rng(7, backend="cupy")
alpha = cp.random.default_rng(8).uniform(0.1, 10.0, (65536, 256)).astype(np.float32)


def d_off():
    rng.dirichlet(alpha)


def memop():
    launch(iters, False)
    seq[0] += 1
    r = wv(s.ptr, ptr, seq[0], 0)
    if r:
        raise RuntimeError(f"cuStreamWriteValue64 {r}")
    spin()


cases = {
    "kernel, no wait": lambda: launch(iters, False),
    "kernel + stream wait": lambda: (launch(iters, False), s.synchronize()),
    "kernel + memop spin": memop,
    "counted kernel, no wait": lambda: launch(iters, True),
    "counted kernel + spin": lambda: (launch(iters, True), spin()),
    "counted kernel + stream wait": lambda: (launch(iters, True), s.synchronize()),
    "dirichlet off": d_off,
    "dirichlet off + wait": lambda: (d_off(), s.synchronize()),
    "dirichlet on": lambda: rng.dirichlet(alpha),
}
off = lambda: gpumcmc.validation(False)  # noqa: E731 (entered outside the timed window)
context = {n: off if n.startswith("dirichlet off") else contextlib.nullcontext for n in cases}
for n, fn in cases.items():
    for _ in range(20):
        with context[n]():
            fn()
s.synchronize()
ev = {n: [] for n in cases}
wall = {n: [] for n in cases}
for _ in range(301):
    for n, fn in cases.items():
        a, b = cp.cuda.Event(), cp.cuda.Event()
        with context[n]():
            a.record(s)
            t0 = time.perf_counter()
            fn()
            t1 = time.perf_counter()
            b.record(s)
        b.synchronize()
        ev[n].append(cp.cuda.get_elapsed_time(a, b) * 1e3)
        wall[n].append((t1 - t0) * 1e6)
base = {n: S.median(ev[n]) for n in cases}
for n in cases:
    ref = base["kernel, no wait"] if not n.startswith("dirichlet") else base["dirichlet off"]
    print(f"{n:30s} events {base[n]:7.1f} us ({base[n] - ref:+5.1f})  call wall {S.median(wall[n]):7.1f} us")
