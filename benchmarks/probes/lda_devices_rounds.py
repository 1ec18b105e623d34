"""Is LDA's fit(devices=...) slower from run to run, or from round to round in one process?

    python -m benchmarks.probes.lda_devices_rounds [ROUNDS] [--out FILE]

The public fit at K = 1024 on user_path.py's 29 M-token site-packages corpus (a synthetic corpus of its
shape where that script is not beside the repository): per-sweep ms (fits of 10 and 40 sweeps) on one
device and on every GPU, alternated for ROUNDS rounds (default 3) in one process, with the GPUs' SM
clocks read after each.
"""
import json
import subprocess
import sys

import cupy as cp
import numpy as np

from benchmarks.harness import per_iteration_ms, sync_all_gpus


def _corpus():
    sys.path.insert(0, "scripts")
    try:
        import user_path as up
        return up.site_packages_corpus()
    except ImportError:
        import scipy.sparse as sp

        from gpumcmc.datasets import synthetic_lda_corpus
        r, c, _, _ = synthetic_lda_corpus(n_docs=23_600, n_words=50_000, n_tokens=29_000_000, n_components=100,
                                          random_state=0)
        r, c = cp.asnumpy(r) if hasattr(r, "get") else r, cp.asnumpy(c) if hasattr(c, "get") else c
        m = sp.csr_matrix((np.ones(r.size, np.int32), (r, c)), shape=(23_600, 50_000))
        m.sum_duplicates()
        return m


def main():
    args = sys.argv[1:]
    out_path = None
    if "--out" in args:
        i = args.index("--out")
        out_path = args[i + 1]
        args = args[:i] + args[i + 2:]
    rounds = int(args[0]) if args else 3
    from gpumcmc.models import LDA

    corpus = _corpus()
    n_gpu = cp.cuda.runtime.getDeviceCount()

    sync = sync_all_gpus
    rows = []
    for r in range(rounds):
        for d in (None, list(range(n_gpu))):
            call = lambda n, d=d: LDA(n_components=1024, n_iter=n, burn_in=0, random_state=0, progress=False,
                                      devices=d).fit(corpus)
            ms = per_iteration_ms(call, 10, 40, repeats=1, sync=sync)
            clocks = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader"],
                                    capture_output=True, text=True).stdout.split()
            rows.append({"round": r, "gpus": 1 if d is None else len(d), "ms_per_sweep": ms, "sm_clocks": clocks})
            print(rows[-1], flush=True)
    out = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "rows": rows}
    print(json.dumps(out, indent=1))
    if out_path:
        with open(out_path, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
