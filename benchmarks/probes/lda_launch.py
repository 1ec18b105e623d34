"""LDA.fit's sweep under other launch shapes of its z-draw kernel (one GPU).

    python -m benchmarks.probes.lda_launch [--user-path FILE] [--variants 4x2,4x8,...] [--k 1024,256]
                                           [--fused-min-k N] [--out FILE]

Times ``LDA(1024).fit`` as user_path.py does (difference of whole calls of 10 and 60 sweeps) on the real
corpus that user_path.py builds (the words of this Python's site-packages, about 29 M tokens; its
``site_packages_corpus`` is imported from ``--user-path``) and on the paper's corpus shape, for each pair
of ``config.lda_zwarps`` (warps a block, at most 4) and ``config.lda_zwaves`` (the grid in waves of
resident blocks) in ``--variants`` (``WARPSxWAVES``; the first is the reference of the draws), for each
number of topics in ``--k``. ``--fused-min-k`` sets ``config.lda_fused_min_k`` for the whole run: below
it LDA takes the two-pass z-draw, which ignores the launch shape (K = 256 by default). Neither changes a draw (the config says so, and the probe checks the topic-word
matrix of a 10-sweep fit against the default's).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

VARIANTS = "4x2,4x1,4x4,2x2,2x4,4x8,4x2"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--user-path", default="scripts/user_path.py")
    ap.add_argument("--variants", default=VARIANTS)
    ap.add_argument("--k", default="1024")
    ap.add_argument("--fused-min-k", type=int, default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    variants = [tuple(int(x) for x in v.split("x")) for v in args.variants.split(",")]
    import cupy as cp

    from benchmarks.harness import per_iteration_ms
    from benchmarks.lda import user_path_text, zipf_corpus
    from gpumcmc._config import config
    from gpumcmc.models import LDA

    corpora = {"site_packages": user_path_text(args.user_path), "paper_shape_zipf": zipf_corpus()}
    out = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "rows": []}
    default = (config.lda_zwarps, config.lda_zwaves)
    if args.fused_min_k is not None:
        config.lda_fused_min_k = args.fused_min_k
    out["fused_min_k"] = config.lda_fused_min_k
    for name, X, K in ((n, X, int(k)) for n, X in corpora.items() for k in args.k.split(",")):
        T = int(X.sum())
        fit = lambda n, X=X, K=K: LDA(n_components=K, n_iter=n, burn_in=0, random_state=0, progress=False).fit(X)
        ref = None
        for warps, waves in variants:
            config.lda_zwarps, config.lda_zwaves = warps, waves
            comp = fit(10).components_
            ref = comp if ref is None else ref
            ms = per_iteration_ms(fit, 10, 60)
            row = {"corpus": name, "K": K, "zwarps": warps, "zwaves": waves, "ms": ms, "Mtokens_per_s": T / ms / 1e3,
                   "same_draws": bool(np.array_equal(comp, ref))}
            out["rows"].append(row)
            print(json.dumps(row), flush=True)
        config.lda_zwarps, config.lda_zwaves = default
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
