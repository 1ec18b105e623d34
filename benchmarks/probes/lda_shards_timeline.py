"""Events on every GPU around each piece of one sharded LDA sweep (10^8 tokens, K = 1024).

Run it as ``python -m benchmarks.probes.lda_shards_timeline`` on a machine with 2 or
more GPUs. Marks on each GPU's stream: the z-draw and counts ("z0/z1"), the
theta draw ("theta0/theta1"), the wait for the sums of n_wk ("wait"), the phi
draw ("phi0/phi1"); on the side stream of ``Shards.allreduce_async``: the
sums ("sum0/sum1"). Times are milliseconds after each GPU's start event, so
the two streams of a GPU share a clock. Also the wall-clock time of a sweep
(10 sweeps), and of a sweep with the sums on the GPUs' own streams after the
theta draws (``allreduce_async`` replaced by ``allreduce``), for comparison.
"""
import os
import sys
import time

import cupy as cp
import numpy as np

sys.path.insert(0, os.getcwd())
from gpumcmc.datasets import synthetic_lda_corpus
from gpumcmc.models import lda as L
from gpumcmc.models.lda import algorithm as LS   # the sweep's module: the pieces are replaced there
from gpumcmc.random import default_rng
from gpumcmc.shards import Shards

M, V, T, K = 300_000, 101_000, 100_000_000, 1024
ev = []


def mark(tag, stream=None):
    e = cp.cuda.Event()
    e.record(stream)
    ev.append((tag, cp.cuda.runtime.getDevice(), e))


oz, ot, odp = LS.zdraw_counts, LS._theta_draw, LS._phi_once
oas = Shards.allreduce_async


def Z(*a, **k):
    mark("z0"); r = oz(*a, **k); mark("z1"); return r


def TH(*a, **k):
    mark("theta0"); r = ot(*a, **k); mark("theta1"); return r


def DP(*a, **k):   # once per shard, under its device (a shard that shares its device's draw marks nothing)
    mark("phi0"); r = odp(*a, **k); mark("phi1"); return r


def AS(self, arrays):
    wait = oas(self, arrays)
    for i in range(len(self)):
        with self.on(i):
            side = self._sides.get(self.devices[i])
            if side is not None:
                mark("sum1", side)

    def w():
        for i in range(len(self)):
            with self.on(i): mark("wait")
        wait()
    return w


def sync_all(devs):
    for d in devs:
        with cp.cuda.Device(d):
            cp.cuda.get_current_stream().synchronize()


LS.zdraw_counts, LS._theta_draw, LS._phi_once, Shards.allreduce_async = Z, TH, DP, AS
rows, cols, _, _ = synthetic_lda_corpus(M, V, n_tokens=T, n_components=100, zipf=1.0, random_state=1,
                                        backend="cupy")
count = cp.cuda.runtime.getDeviceCount()
for devs in [[0, 1]] + ([list(range(count))] if count > 2 else []):
    sh = Shards(devs)
    rng = default_rng(0, backend="cupy")
    with sh.on(0):
        _, parts = L.shard_corpus(rows, cols, M, sh)
        alg = L.sharded_gibbs(sh)
        state = alg.init(rng, L.shard_data(parts, sh, V, K, 1.0 / K, 1.0 / K, "float32"), K, "float32")
        del parts
        step = alg.step
        for _ in range(2):
            state, _ = step(rng, state)
        sync_all(devs)
        ev.clear()
        for d in devs:
            with cp.cuda.Device(d): mark("start")
        state, _ = step(rng, state)
        for d in devs:
            with cp.cuda.Device(d): mark("end")
        sync_all(devs)
        snap = list(ev)
        for label, swap in (("sums beside theta (allreduce_async)", None),
                            ("sums after theta (allreduce)", True)):
            if swap:
                Shards.allreduce_async = lambda self, arrays: (self.allreduce(arrays), lambda: None)[1]
            ts = []
            for _ in range(3):
                sync_all(devs)
                t = time.perf_counter()
                for _ in range(5):
                    state, _ = step(rng, state)
                sync_all(devs)
                ts.append(1e3 * (time.perf_counter() - t) / 5)
            print(f"W={len(devs)} {label}: {min(ts):.2f} ms a sweep (best of 3 x 5 sweeps)", flush=True)
        Shards.allreduce_async = AS
    for d in devs:
        mine = [(t, e) for t, dv, e in snap if dv == d]
        s = mine[0][1]
        print(f"W={len(devs)} GPU {d}:", [(t, round(cp.cuda.get_elapsed_time(s, e), 2)) for t, e in mine], flush=True)
    del datas, state, step, sh
    cp.get_default_memory_pool().free_all_blocks()
