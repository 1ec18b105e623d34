"""Where the set-up of LDA's fit(devices=...) goes, and how much it varies from call to call.

    python -m benchmarks.probes.sharded_setup [ROUNDS] [--out FILE]

On every GPU of the host, ROUNDS times (default 4): wall seconds of Shards(devices) (NCCL's initAll), of
tokens_from, shard_corpus, shard_data with sharded_gibbs' init (the rows' init_sharded_s) and the first sharded sweep, each from idle GPUs, then of whole
LDA(1024, devices=...).fit calls of 10 sweeps. The corpus: user_path.py's site-packages corpus where that
script is beside the repository, else a synthetic corpus of its shape. The per-sweep figures of the
public call are differences of whole fits, so a set-up that varies by a few tenths of a second moves
them by several ms a sweep.
"""
import json
import sys
import time

import cupy as cp
import numpy as np


def main():
    args = sys.argv[1:]
    out_path = None
    if "--out" in args:
        i = args.index("--out")
        out_path = args[i + 1]
        args = args[:i] + args[i + 2:]
    rounds = int(args[0]) if args else 4
    from benchmarks.harness import sync_all_gpus
    from benchmarks.probes.lda_devices_rounds import _corpus
    from gpumcmc.models import LDA
    from gpumcmc.models.lda import sharded as L
    from gpumcmc.models.lda import tokens_from
    from gpumcmc.random import default_rng
    from gpumcmc.shards import Shards

    corpus = _corpus()
    n_gpu = cp.cuda.runtime.getDeviceCount()
    devices = list(range(n_gpu))

    sync = sync_all_gpus

    def wall(fn):
        sync()
        t = time.perf_counter()
        r = fn()
        sync()
        return time.perf_counter() - t, r
    rows_out = []
    K = 1024
    for rnd in range(rounds):
        row = {"round": rnd}
        row["shards_s"], shards = wall(lambda: Shards(devices))
        row["tokens_from_s"], (rows, cols, M, V) = wall(lambda: tokens_from(corpus, np))
        row["shard_corpus_s"], (bounds, parts) = wall(lambda: L.shard_corpus(rows, cols, M, shards))
        rng = default_rng(0, backend="cupy")
        with shards.on(0):
            alg = L.sharded_gibbs(shards)

            def start():
                datas = L.shard_data(parts, shards, V, K, 1.0 / K, 1.0 / K, "float32")
                return datas, alg.init(rng, datas, K, "float32", n_chains=1)

            row["init_sharded_s"], (datas, state) = wall(start)     # shard_data and sharded_gibbs' init
            step = alg.step
            row["first_sweep_s"], _ = wall(lambda: step(rng, state))
        del datas, state, parts, step
        shards.close()
        row["fit10_s"], _ = wall(lambda: LDA(n_components=K, n_iter=10, burn_in=0, random_state=0, progress=False,
                                             devices=devices).fit(corpus))
        rows_out.append(row)
        print(row, flush=True)
    out = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "gpus": n_gpu, "rows": rows_out}
    print(json.dumps(out, indent=1))
    if out_path:
        with open(out_path, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
