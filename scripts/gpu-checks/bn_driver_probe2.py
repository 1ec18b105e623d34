"""Which part of BayesianNetwork.fit(devices=...) makes its iteration slower than its bare sharded step at 10^6
cases on 2 GPUs (bn_driver_probe.py: 0.51 against 0.29 ms, with run() itself adding nothing): the step through
run() from a state made once, from a fresh init per call, from fresh shards, parts and init per call, and the
fit; each per iteration (calls of 5 and 1,505 iterations), with the host's share of the longer call.

    python scripts/gpu-checks/bn_driver_probe2.py OUT_DIR
"""
import json
import os
import sys
import time

import cupy as cp
import numpy as np

from gpumcmc.models.bayesnet import BayesianNetwork, algorithm
from gpumcmc.random import default_rng
from gpumcmc.sampling import run, sharded
from gpumcmc.shards import Shards

truth = BayesianNetwork.koller()
X = truth.sample(1_000_000, 0)
X[np.random.default_rng(3).random(X.shape) < 0.5] = -1
devs = list(range(cp.cuda.runtime.getDeviceCount()))
keep = lambda s, info: {"logc": s.tables[:1]}  # noqa: E731  the fit's kept draw


def sync():
    for g in devs:
        cp.cuda.Device(g).synchronize()


def stepper(sh, Xc, net):
    plan = algorithm._Plan(net)
    alg = sharded(algorithm.collective(plan, [10] * 3000), sh)
    return alg, algorithm.case_parts(Xc, plan, sh, len(Xc))


sh0 = Shards(devs)
alg0, parts0 = stepper(sh0, X, truth)
start0 = alg0.init(default_rng(0, backend="cupy"), parts0)


def made_once(n):
    with sh0.on(0):
        run(alg0.step, start0, default_rng(0, backend="cupy"), n, collect=keep, progress=False, n_chains=1)


def fresh_init(n):
    rng = default_rng(0, backend="cupy")
    st = alg0.init(rng, parts0)
    with sh0.on(0):
        run(alg0.step, st, rng, n, collect=keep, progress=False, n_chains=1)


def fresh_all(n, encoded=False):
    net = BayesianNetwork(truth.parents, truth.states)
    sh = Shards(devs)
    alg, parts = stepper(sh, net._encode(X) if encoded else X, net)
    rng = default_rng(0, backend="cupy")
    st = alg.init(rng, parts)
    with sh.on(0):
        run(alg.step, st, rng, n, collect=keep, progress=False, n_chains=1)


def fit(n):
    BayesianNetwork(truth.parents, truth.states, n_iter=n, same=10, random_state=0, progress=False,
                    devices=devs).fit(X)


def timed(call, n):
    sync()
    t0 = time.perf_counter()
    call(n)
    t1 = time.perf_counter()
    sync()
    return t1 - t0, time.perf_counter() - t0


out = {"gpus": len(devs), "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}
for name, call in (("made_once", made_once), ("fresh_init", fresh_init), ("fresh_all", fresh_all),
                   ("fresh_all_encoded", lambda n: fresh_all(n, True)), ("fit", fit), ("made_once_again", made_once)):
    call(5)
    rows = []
    for _ in range(3):
        ha, wa = timed(call, 5)
        hb, wb = timed(call, 1505)
        rows.append(((wb - wa) / 1500 * 1e3, hb, wb))
    per = float(np.median([r[0] for r in rows]))
    out[name] = {"ms": per, "long_call_host_s": [r[1] for r in rows], "long_call_wall_s": [r[2] for r in rows]}
    print(json.dumps({name: out[name]}), flush=True)
os.makedirs(sys.argv[1], exist_ok=True)
with open(os.path.join(sys.argv[1], "bn_driver_probe2.json"), "w") as f:
    json.dump(out, f, indent=1)
