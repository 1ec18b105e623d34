"""The Bayesian network over GPUs (issue 40 item 6): BayesianNetwork.fit(devices=...) against its bare step
loop (algorithm.collective through sampling.sharded on the same Shards), per iteration as user_path.py takes
it (the difference of whole calls of 5 and B iterations), on 1, 2 and all GPUs; Koller, 10^6 cases, half
missing, same = 10. Prints and writes one JSON object with each time and efficiency t1 / (W tW).

A fit's set-up (encoding and cutting the cases, the first draws, the imputations copied back) varies from call
to call by tens of ms at 10^6 cases and by tenths of a second at 10^7: the fits' difference is taken over
B = 2,000 iterations at 10^6 (300 at 10^7) and is the median of five. At 10^7 that is still not enough (on
4 x H200 the difference gave 0.60 ms an iteration over 4 GPUs, against 1.08 for the bare step and 4.4 for one
GPU), so each fit's sampling loop (its sampling.run call, from idle GPUs to idle GPUs) is also timed inside
the same calls: ``fitloop_*`` is the difference of those loop times, the fit's per-iteration cost without its
set-up.

    python scripts/gpu-checks/bn_scaling.py OUT_DIR [--numpy] [--cases N [B]]
    # --numpy: a short dry run on two shards of NumPy; --cases: N cases (default 10^6), fits' difference over B
"""
import json
import os
import sys
import time

import numpy as np

from benchmarks.bayesnet import _bare_step_ms
from benchmarks.harness import per_iteration_ms
from gpumcmc.models.bayesnet import BayesianNetwork, estimator
from gpumcmc.shards import Shards

numpy_dry = "--numpy" in sys.argv
n_cases, B = (300, 25) if numpy_dry else (1_000_000, 2005)
if "--cases" in sys.argv:
    at = sys.argv.index("--cases")
    n_cases = int(float(sys.argv[at + 1]))
    B = 305 if n_cases >= 5_000_000 else B
    if len(sys.argv) > at + 2 and not sys.argv[at + 2].startswith("--"):
        B = int(sys.argv[at + 2])
truth = BayesianNetwork.koller()
X = truth.sample(n_cases, 0)
X[np.random.default_rng(3).random(X.shape) < 0.5] = -1

if numpy_dry:
    def sync():
        pass
    configs = [(1, None), (2, Shards(n_virtual=2))]
    backend = "numpy"
else:
    import cupy as cp

    def sync():
        for g in range(cp.cuda.runtime.getDeviceCount()):
            cp.cuda.Device(g).synchronize()
    count = cp.cuda.runtime.getDeviceCount()
    configs = [(1, None)] + [(w, "all" if w == count else list(range(w))) for w in (2, 4) if w <= count]
    backend = "cupy"

loops = []  # the wall time of each fit's sampling.run call, in call order
_run = estimator.run


def timed_run(*args, **kwargs):
    sync()
    t = time.perf_counter()
    trace = _run(*args, **kwargs)
    sync()
    loops.append(time.perf_counter() - t)
    return trace


estimator.run = timed_run
out = {"cases": n_cases, "same": 10}
for w, devices in configs:
    kw = {"backend": backend} if devices is None else {"devices": devices}
    fit = lambda n: BayesianNetwork(truth.parents, truth.states, n_iter=n, same=10, random_state=0,  # noqa: E731
                                    progress=False, **kw).fit(X)
    shards = None if devices is None else devices if isinstance(devices, Shards) else Shards(devices)
    loops.clear()
    out[f"fit_{w}gpu_ms"] = per_iteration_ms(fit, 5, B, repeats=5, sync=sync)
    pairs = loops[1:]  # per_iteration_ms: one warm-up call of 5, then pairs of calls of B and of 5, in that order
    out[f"fitloop_{w}gpu_ms"] = float(np.median([(b - a) / (B - 5) for b, a in zip(pairs[::2], pairs[1::2])])) * 1e3
    out[f"step_{w}gpu_ms"] = _bare_step_ms(X, 10, min(B, 105), shards, backend, sync)
    print(json.dumps({k: v for k, v in out.items() if k.endswith(f"_{w}gpu_ms")}), flush=True)
for w, _ in configs[1:]:
    for kind in ("fit", "fitloop", "step"):
        out[f"{kind}_{w}gpu_efficiency"] = out[f"{kind}_1gpu_ms"] / (w * out[f"{kind}_{w}gpu_ms"])
print(json.dumps(out))
os.makedirs(sys.argv[1], exist_ok=True)
name = "bn_scaling.json" if n_cases == 1_000_000 else f"bn_scaling_{n_cases}.json"
with open(os.path.join(sys.argv[1], name), "w") as f:
    json.dump(out, f, indent=1)
