"""The Bayesian network's sweep with its lanes' cell indices read ahead (BN_PREFETCH=1), with the cases'
rows of Z also asked for (2, the default), and without either (0), on one GPU: Koller, 10^6 cases, half
missing, m = 10, as user_path.py times the public fit (whole calls of 5 and 205 iterations, the median of
three differences), the settings in turn, and the fitted tables of each compared bit for bit.

    python -m benchmarks.probes.bn_prefetch OUT.json [1,0,1,0]

(the second argument: the BN_PREFETCH values to time, in turn; 2 also asks for the cases' rows of Z.)
"""
import json
import sys
import time

import numpy as np


def main(out):
    import cupy as cp

    from gpumcmc._config import config
    from gpumcmc.models.bayesnet import BayesianNetwork

    truth = BayesianNetwork.koller()
    X = truth.sample(1_000_000, 0)
    X[np.random.default_rng(3).random(X.shape) < 0.5] = -1

    def fit(n):
        return BayesianNetwork(truth.parents, truth.states, n_iter=n, same=10, random_state=0, progress=False).fit(X)

    def wall(n):
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        fit(n)
        cp.cuda.Device().synchronize()
        return time.perf_counter() - t

    rows, got = [{"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}], {}
    pfs = tuple(int(a) for a in sys.argv[2].split(",")) if len(sys.argv) > 2 else (1, 0, 1, 0)
    for pf in pfs:
        with config.override(bayesnet_defines=(("BN_PREFETCH", pf),)):
            m = fit(20)
            got.setdefault(pf, [np.asarray(t).copy() for t in m.cpts_])
            diffs = []
            for _ in range(3):
                a, b = wall(5), wall(205)
                diffs.append((b - a) / 200)
        rows.append({"BN_PREFETCH": pf, "ms_per_iteration": 1e3 * float(np.median(diffs)),
                     "diffs_ms": [1e3 * d for d in diffs]})
        print(json.dumps(rows[-1]), flush=True)
    first = got[pfs[0]]
    rows.append({"same_tables": all(all(np.array_equal(p, q) for p, q in zip(first, g)) for g in got.values())})
    print(json.dumps(rows[-1]), flush=True)
    with open(out, "w") as fh:
        json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bn_prefetch.json")
