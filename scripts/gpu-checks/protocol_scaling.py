"""The mixture's Gibbs fit(devices=...) per iteration on 1, 2, 4 and 8 GPUs (as many as there are), by
user_path.py's rule (whole public calls of two lengths), n = 10^7, p = 14, k = 256: the scaling section's
mixture row alone. Prints and writes one JSON object."""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "bench"))
from user_path import per_iteration, planted_mixture  # noqa: E402

import cupy as cp  # noqa: E402

from gpumcmc.models import DPGaussianMixture  # noqa: E402


def main():
    out_path = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else None
    n_gpu = cp.cuda.runtime.getDeviceCount()
    X = planted_mixture(10_000_000)
    res = {"gpus": n_gpu}
    for w in [1] + [w for w in (2, 4, 8) if w <= n_gpu]:
        d = None if w == 1 else list(range(w))
        call = lambda n, d=d: DPGaussianMixture(n_components=256, n_iter=n, burn_in=0, random_state=0,
                                                progress=False, devices=d).fit(X)
        res[f"mixture_gibbs_n1e7_k256_{w}gpu_ms"] = per_iteration(call, 5, 45) * 1e3
        if w > 1:
            res[f"mixture_gibbs_n1e7_k256_{w}gpu_efficiency"] = (
                res["mixture_gibbs_n1e7_k256_1gpu_ms"] / (w * res[f"mixture_gibbs_n1e7_k256_{w}gpu_ms"]))
        print(json.dumps(res), flush=True)
    if out_path:
        with open(out_path, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
