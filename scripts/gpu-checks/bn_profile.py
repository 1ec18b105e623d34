"""Where the Bayesian network's iteration over W GPUs goes (issue 40 item 6): for each W given, the bare sharded
step (algorithm.collective through sampling.sharded), Koller, N cases, half missing, same = 10:

- host: the host's time to queue 20 steps (GPUs given a head start of work, so the queue does not block);
- wall: the time of those 20 steps until every GPU is idle;
- per_gpu_1: one GPU's step over N / W cases (the work each GPU has);
- the host's hot spots over 50 steps (cProfile, by own time).

If host >= wall, the iteration is bound by the host's launches; else by the GPUs (work or waits).

    python scripts/gpu-checks/bn_profile.py OUT_DIR N W [W ...]
"""
import cProfile
import io
import json
import os
import pstats
import sys
import time

import cupy as cp
import numpy as np

from gpumcmc import _validate
from gpumcmc.models.bayesnet import BayesianNetwork, algorithm
from gpumcmc.random import default_rng
from gpumcmc.sampling import sharded
from gpumcmc.shards import Shards

out_dir, N, Ws = sys.argv[1], int(float(sys.argv[2])), [int(w) for w in sys.argv[3:]]
truth = BayesianNetwork.koller()
X = truth.sample(N, 0)
X[np.random.default_rng(3).random(X.shape) < 0.5] = -1
plan = algorithm._Plan(truth)


def sync():
    for g in range(cp.cuda.runtime.getDeviceCount()):
        cp.cuda.Device(g).synchronize()


def make(Xs, w):
    sh = algorithm._one_shard(cp) if w == 1 else Shards(list(range(w)))
    rng = default_rng(0, backend="cupy")
    alg = sharded(algorithm.collective(plan, [10] * 100000), sh)
    return alg, alg.init(rng, algorithm.case_parts(Xs, plan, sh, len(Xs))), rng


def timed(alg, state, rng, n=20):
    with _validate.deferred():
        for _ in range(10):
            state, _ = alg.step(rng, state)
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            state, _ = alg.step(rng, state)
        t1 = time.perf_counter()
        sync()
        t2 = time.perf_counter()
    _validate.check()
    return state, (t1 - t0) / n * 1e3, (t2 - t0) / n * 1e3


res = {"cases": N, "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}
for w in Ws:
    alg, state, rng = make(X, w)
    state, host, wall = timed(alg, state, rng)
    state, host2, wall2 = timed(alg, state, rng)
    a1, s1, r1 = make(X[: N // w], 1)
    _, _, one = timed(a1, s1, r1)
    pr = cProfile.Profile()
    with _validate.deferred():
        pr.enable()
        for _ in range(50):
            state, _ = alg.step(rng, state)
        pr.disable()
        sync()
    _validate.check()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(22)
    res[f"W{w}"] = {"host_ms": [host, host2], "wall_ms": [wall, wall2], "per_gpu_1_ms": one}
    print(json.dumps({f"W{w}": res[f"W{w}"]}), flush=True)
    print(s.getvalue()[-6000:], flush=True)
os.makedirs(out_dir, exist_ok=True)
with open(os.path.join(out_dir, f"bn_profile_{N}_w{''.join(map(str, Ws))}.json"), "w") as f:
    json.dump(res, f, indent=1)
