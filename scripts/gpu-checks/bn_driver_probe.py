"""What BayesianNetwork.fit(devices=...) adds to its bare step when the step is bound by the host (10^6 cases on
2 GPUs): the same sharded step timed bare, through sampling.run without and with the kept draw, and the whole fit,
per iteration as user_path.py takes it; then the host's hot spots of the fit and of the bare loop (cProfile).

    python scripts/gpu-checks/bn_driver_probe.py OUT_DIR
"""
import cProfile
import io
import json
import os
import pstats
import sys

import cupy as cp
import numpy as np

from benchmarks.harness import per_iteration_ms
from gpumcmc import _validate
from gpumcmc.models.bayesnet import BayesianNetwork, algorithm
from gpumcmc.random import default_rng
from gpumcmc.sampling import run, sharded
from gpumcmc.shards import Shards

truth = BayesianNetwork.koller()
X = truth.sample(1_000_000, 0)
X[np.random.default_rng(3).random(X.shape) < 0.5] = -1
plan = algorithm._Plan(truth)
devs = list(range(cp.cuda.runtime.getDeviceCount()))
sh = Shards(devs)
rng = default_rng(0, backend="cupy")
alg = sharded(algorithm.collective(plan, [10] * 3000), sh)
start = alg.init(rng, algorithm.case_parts(X, plan, sh, len(X)))
keep = lambda s, info: {"logc": s.tables[:1]}  # noqa: E731  the fit's kept draw


def sync():
    for g in devs:
        cp.cuda.Device(g).synchronize()


def bare(n):
    state = start
    with _validate.deferred():
        for _ in range(n):
            state, _ = alg.step(rng, state)
    _validate.check()


def through_run(collect, on0=False):
    def call(n):
        if on0:
            with sh.on(0):
                run(alg.step, start, rng, n, collect=collect, progress=False, n_chains=1)
        else:
            run(alg.step, start, rng, n, collect=collect, progress=False, n_chains=1)
    return call


def fit(n):
    BayesianNetwork(truth.parents, truth.states, n_iter=n, same=10, random_state=0, progress=False,
                    devices=devs).fit(X)


out = {"gpus": len(devs), "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}
for name, call in (("bare", bare), ("run_none", through_run(None)), ("run_keep", through_run(keep)),
                   ("run_keep_on0", through_run(keep, True)), ("fit", fit), ("bare_again", bare)):
    out[name + "_ms"] = per_iteration_ms(call, 5, 1505, repeats=3, sync=sync)
    print(json.dumps({name + "_ms": out[name + "_ms"]}), flush=True)
for name, call in (("fit", fit), ("bare", bare)):
    pr = cProfile.Profile()
    call(5)
    sync()
    pr.enable()
    call(1005)
    sync()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(28)
    print(f"== {name}(1005)\n" + s.getvalue()[-7000:], flush=True)
os.makedirs(sys.argv[1], exist_ok=True)
with open(os.path.join(sys.argv[1], "bn_driver_probe.json"), "w") as f:
    json.dump(out, f, indent=1)
