"""The Bayesian network's specialised kernels on larger random networks (20, 60 and 150 nodes of 2-4 states, at
most 3 parents; 10^5 cases, half missing, m = 10): the first fit's time (its NVRTC compile included: run with
an empty CUPY_CACHE_DIR) and the fit's time an iteration, generic against specialised. Writes
bn-specialise-sizes.json under the folder given."""
import json
import sys
import time
from pathlib import Path

import cupy as cp
import numpy as np

from benchmarks.harness import per_iteration_ms
from gpumcmc._config import config
from gpumcmc.models.bayesnet import BayesianNetwork, algorithm, ops


def random_net(V, seed=0):
    rng = np.random.default_rng(seed)
    names = [f"n{i}" for i in range(V)]
    parents = {n: [names[j] for j in sorted(rng.choice(i, size=min(i, int(rng.integers(0, 4))), replace=False))]
               if i else [] for i, n in enumerate(names)}
    card = {n: int(rng.integers(2, 5)) for n in names}
    cpts = {v: rng.dirichlet(np.ones(card[v]), size=tuple(card[p] for p in parents[v])) for v in names}
    return BayesianNetwork(parents, {v: [str(i) for i in range(k)] for v, k in card.items()}, cpts)


out = []
for V in (20, 60, 150):
    net = random_net(V)
    X = net.sample(100_000, 0)
    X[np.random.default_rng(1).random(X.shape) < 0.5] = -1
    row = {"nodes": V, "cells": int(algorithm._Plan(net).C), "prelude_chars": len(ops._net_prelude(algorithm._Plan(net)))}
    for on in (False, True):
        with config.override(bayesnet_specialise=on, bayesnet_specialise_chars=1 << 30):
            fit = lambda n: BayesianNetwork(net.parents, net.states, n_iter=n, same=10, random_state=0,  # noqa
                                            progress=False).fit(X)
            cp.cuda.Device().synchronize()
            t = time.perf_counter()
            fit(2)
            cp.cuda.Device().synchronize()
            row[f"first_fit_s_specialise_{on}"] = time.perf_counter() - t
            row[f"fit_ms_specialise_{on}"] = per_iteration_ms(fit, 5, 205, repeats=3)
    out.append(row)
    print(json.dumps(row), flush=True)
Path(sys.argv[1], "bn-specialise-sizes.json").write_text(json.dumps(out, indent=1))
