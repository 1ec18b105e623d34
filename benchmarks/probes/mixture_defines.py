"""DPGaussianMixture.fit's Gibbs iteration under other launch shapes of its indicator kernel (one GPU).

    python -m benchmarks.probes.mixture_defines [--out FILE]

Times ``fit`` as user_path.py does (difference of whole calls of 5 and 25 iterations, n = 2^20, p = 14,
k = 256) for each override of ``config.mixture_defines`` listed in ``VARIANTS``: rows a thread
(``MIX_ROWS``), components a shared-memory tile (``MIX_TILE``) and the resident blocks asked of the register
allocator (``MIX_MIN_BLOCKS``). None of them changes a draw: each logit is summed in the same order, and
the Gumbel noise is keyed by (row, component). The probe checks that the indicators of a 5-iteration fit
match the default's. Beside the fit it times the indicator kernel alone (``mixture_logits`` in its
sampling mode on all the rows, CUDA events, median of 20 launches): the fit's differences of whole calls
move by a few percent from run to run, the kernel's time does not.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

VARIANTS = ((), (("MIX_ROWS", 3),), (("MIX_ROWS", 3), ("MIX_TILE", 16)), (("MIX_ROWS", 3), ("MIX_MIN_BLOCKS", 3)),
            (("MIX_TILE", 16),), (("MIX_ROWS", 2), ("MIX_MIN_BLOCKS", 3)), (("MIX_ROWS", 5), ("MIX_MIN_BLOCKS", 1)),
            ())


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import cupy as cp

    from gpumcmc._config import config
    from benchmarks.harness import per_iteration_ms
    from gpumcmc.models import DPGaussianMixture
    from gpumcmc.models.mixture import algorithm, ops
    from gpumcmc.random import default_rng

    rs = np.random.default_rng(2)
    centres = rs.normal(0, 5, (12, 14))
    X = (centres[rs.integers(0, 12, 1 << 20)] + rs.normal(0, 1, (1 << 20, 14))).astype(np.float32)
    Xd = cp.asarray(X)
    fit = lambda n: DPGaussianMixture(n_components=256, n_iter=n, burn_in=0, random_state=0, progress=False).fit(Xd)
    out = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "variants": []}
    model = algorithm.make_model(Xd, 256)
    state = algorithm.init(default_rng(0), model)
    z_buf = cp.empty((1, Xd.shape[0]), cp.int32)
    lse = cp.empty((1, Xd.shape[0]), cp.float32)

    def kernel_ms():
        times = []
        for i in range(23):
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record()
            ops.assign(model.x, state.params, 0, Xd.shape[0], ops.MODE_SAMPLE, (1, 2), i, z=z_buf, lse=lse)
            b.record()
            b.synchronize()
            times.append(cp.cuda.get_elapsed_time(a, b))
        return float(np.median(times[3:]))

    ref = None
    for v in VARIANTS:
        config.mixture_defines = v
        try:
            z = fit(5).z_
            k_ms = kernel_ms()
            ms = per_iteration_ms(fit, 5, 45)
        except Exception as exc:  # a shape the kernel cannot take (registers, shared memory)
            row = {"defines": dict(v), "error": f"{type(exc).__name__}: {exc}"[:300]}
        else:
            ref = z if ref is None else ref
            row = {"defines": dict(v), "kernel_ms": k_ms, "ms": ms, "same_indicators": bool(np.array_equal(z, ref))}
        out["variants"].append(row)
        print(json.dumps(row), flush=True)
    config.mixture_defines = ()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
