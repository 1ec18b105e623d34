"""Stages of LDA's sharded sweep at K = 1024, on 1 and 2 GPUs: the whole sweep, the z-draw of every shard and
of each alone, the all-reduce of n_wk, phi and theta, after 40 sweeps from the start (LDA_STAGES_ADVANCE), as wall time with every GPU synced (the
mean of 8 after one warm-up), and the public fit's sweep on one device, on the sharded path with one
shard, and on every GPU, for comparison. The ``*_host_ms`` rows are
the time the host spends queueing a stage (median of 8, each from idle GPUs): a stage whose host time is
near its wall time waits for a GPU inside, and on 2 GPUs that serialises the shards.

    python -m benchmarks.probes.lda_sharded_stages        # writes $OUT/lda_stages_sharded.json

The corpus: user_path.py's site-packages corpus where that script is importable (the text the public
fit's 2-GPU slowdown was seen on), else a synthetic corpus of its shape (23.6 k documents, V = 50 k,
29 M tokens; gpumcmc.datasets.synthetic_lda_corpus).
"""
import json
import os
import sys
import time

import cupy as cp
import numpy as np
import scipy.sparse as sp

sys.path.insert(0, "scripts")
try:
    import user_path as up
except ImportError:  # the reference script lives beside the repository, not in it
    up = None
import copy

from gpumcmc.models import lda as L
from gpumcmc.models.lda import algorithm as LA
from benchmarks.harness import per_iteration_ms, sync_all_gpus
from gpumcmc.models.lda import tokens_from
from gpumcmc.shards import Shards
from gpumcmc.random import default_rng
from gpumcmc import _validate

R = {}
if up is not None:
    corpus = up.site_packages_corpus()
else:
    from gpumcmc.datasets import synthetic_lda_corpus

    r, c, _, _ = synthetic_lda_corpus(n_docs=23_600, n_words=50_000, n_tokens=29_000_000, n_components=100,
                                      random_state=0)
    r, c = cp.asnumpy(r) if hasattr(r, "get") else r, cp.asnumpy(c) if hasattr(c, "get") else c
    corpus = sp.csr_matrix((np.ones(r.size, np.int32), (r, c)), shape=(23_600, 50_000))
    corpus.sum_duplicates()


_sync_all = sync_all_gpus

n_gpu = cp.cuda.runtime.getDeviceCount()
K = 1024
ADVANCE = int(os.environ.get("LDA_STAGES_ADVANCE", 40))   # sweeps run before the stages are timed

def host_ms(fn, reps=8):
    """ms the host spends queueing ``fn`` (no wait): near the GPU time where ``fn`` waits for a GPU inside."""
    fn(); _sync_all()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
        _sync_all()
    return float(np.median(ts)) * 1e3


def timeit(fn, reps=8):
    fn(); _sync_all()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    _sync_all()
    return (time.perf_counter() - t) / reps * 1e3

for W in [w for w in (1, 2) if w <= n_gpu]:
    shards = Shards(list(range(W)))
    rows, cols, M, V = tokens_from(corpus, np)
    bounds, parts = L.shard_corpus(rows, cols, M, shards)
    rng = default_rng(0, backend="cupy")
    with shards.on(0):
        alg = L.sharded_gibbs(shards)
        datas = L.shard_data(parts, shards, V, K, 1.0 / K, 1.0 / K, "float32")
        state = alg.init(rng, datas, K, "float32", n_chains=1)
        step = alg.step
        R[f"W{W}_first_sweep_ms"] = timeit(lambda: step(rng, state), reps=2)
        for _ in range(ADVANCE):   # the stages' costs change as theta and phi leave their start
            state = step(rng, state)[0]
        R[f"W{W}_sweep_ms"] = timeit(lambda: step(rng, state))
        R[f"W{W}_sweep_host_ms"] = host_ms(lambda: step(rng, state))
        gens = [copy.copy(rng) for _ in range(W)]
        S = L.LDAShardedState.of(state)
        out = {}

        def z():
            with _validate.validation(False):
                out["z"] = []
                for i, d in enumerate(datas):
                    with shards.on(i):
                        out["z"].append(L.zdraw_counts(gens[i], S.theta[i], S.phi[i], d))
        R[f"W{W}_zdraw_all_ms"] = timeit(z)
        R[f"W{W}_zdraw_all_host_ms"] = host_ms(z)
        for i, d in enumerate(datas):
            def zi(i=i, d=d):
                with _validate.validation(False), shards.on(i):
                    L.zdraw_counts(gens[i], S.theta[i], S.phi[i], d)
            R[f"W{W}_zdraw_shard{i}_ms"] = timeit(zi)
            R[f"W{W}_tokens_shard{i}"] = int(parts[i].rows.size) if hasattr(parts[i], "rows") else None
        nwks = [cp.ascontiguousarray(n) for _, n in out["z"]]
        R[f"W{W}_allreduce_ms"] = timeit(lambda: shards.allreduce(nwks))
        keeps = []
        for i in range(W):
            with shards.on(i):
                keeps.append(cp.full((), 0.0, np.float32))
        def phi():   # each GPU draws phi from its copy of the summed counts
            for i in range(W):
                with shards.on(i):
                    LA._phi_once(None, copy.copy(rng), nwks[i], state[i].phi_sum, 1.0 / K, keeps[i])
        R[f"W{W}_phi_ms"] = timeit(phi)
        R[f"W{W}_phi_host_ms"] = host_ms(phi)

        def th():
            with _validate.validation(False):
                for i, d in enumerate(datas):
                    with shards.on(i):
                        ndk = out["z"][i][0]
                        C, Mi, KK = (int(x) for x in S.theta[i].shape)
                        LA._theta_draw(gens[i], cp.add(ndk, np.float32(d.alpha), dtype=np.float32), d, C)
        R[f"W{W}_theta_ms"] = timeit(th)
        R[f"W{W}_theta_host_ms"] = host_ms(th)
    print(json.dumps(R), flush=True)
    del datas, state, step, out, nwks
    cp.get_default_memory_pool().free_all_blocks()
# the public fit on one device (devices=None), on the sharded path with one shard, and on every GPU
from gpumcmc.models import LDA
for name, d in (("single_device", None), ("sharded_1gpu", [0]), (f"sharded_{n_gpu}gpu", list(range(n_gpu)))):
    call = lambda n, d=d: LDA(n_components=K, n_iter=n, burn_in=0, random_state=0, progress=False,
                              devices=d).fit(corpus)
    R[f"{name}_fit_ms_per_sweep"] = per_iteration_ms(call, 10, 40, repeats=1, sync=_sync_all)
    print(name, R[f"{name}_fit_ms_per_sweep"], flush=True)
print(json.dumps(R, indent=1))
json.dump(R, open(os.environ.get("OUT", ".") + "/lda_stages_sharded.json", "w"), indent=1)
