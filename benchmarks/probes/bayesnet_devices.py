"""BayesianNetwork.fit(devices=...) on 1, 2 and 4 GPUs (as many as there are): per-iteration ms of the public call (fits of 5 and 1005
iterations, median of 5, benchmarks.harness.per_iteration_ms), Koller's network, 10^6 cases (--cases), half missing, same = 10,
as user_path.py's bayesnet row; efficiency t1 / (W tW).

    python -m benchmarks.probes.bayesnet_devices [--out FILE]
"""
import argparse
import json

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--cases", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    import cupy as cp

    from benchmarks.harness import per_iteration_ms, sync_all_gpus
    from gpumcmc.models.bayesnet import BayesianNetwork

    n_gpu = cp.cuda.runtime.getDeviceCount()
    truth = BayesianNetwork.koller()
    X = truth.sample(args.cases, 0)
    X[np.random.default_rng(3).random(X.shape) < 0.5] = -1

    sync = sync_all_gpus
    out = {"cases": args.cases, "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "gpus": n_gpu}
    for d in [None] + [list(range(w)) for w in (2, 4) if w <= n_gpu]:
        call = lambda n, d=d: BayesianNetwork(truth.parents, truth.states, devices=d, n_iter=n, same=10,
                                              random_state=0, progress=False).fit(X)
        out[f"{1 if d is None else len(d)}gpu_ms"] = per_iteration_ms(call, 5, 1005, repeats=5, sync=sync)
        print(out, flush=True)
    for w in (2, 4):
        if f"{w}gpu_ms" in out:
            out[f"efficiency_{w}gpu"] = out["1gpu_ms"] / (w * out[f"{w}gpu_ms"])
    print(json.dumps(out, indent=1))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
