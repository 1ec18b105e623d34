"""The two-kernel LDA sweep (fused=False): one device against two shards on one GPU, ms a sweep.

A synthetic corpus drawn from the model (20,000 documents, 20,000 words, 2 M tokens), 2 chains, K = 64
(the butterfly) and 128 (the warp kernel); medians of 20 sweeps. Run it as
``python -m benchmarks.probes.lda_unfused_shards`` on a GPU.
"""


def main() -> None:
    import statistics as S
    import time
    import cupy as cp
    from gpumcmc.datasets import synthetic_lda_corpus
    from gpumcmc.models import lda as L
    from gpumcmc.random import default_rng
    from gpumcmc.shards import one_device

    rows, cols, _, _ = synthetic_lda_corpus(n_docs=20000, n_words=20000, n_tokens=2_000_000, n_components=50,
                                            random_state=0, backend="cupy")
    for K in (64, 128):
        a, b = 1.0 / K, 0.01

        def timed(step, state, rng, n=20):
            s = cp.cuda.Stream.null
            for _ in range(3):
                state, _ = step(rng, state)
            s.synchronize()
            ts = []
            for _ in range(n):
                t0 = time.perf_counter()
                state, _ = step(rng, state)
                s.synchronize()
                ts.append(time.perf_counter() - t0)
            return S.median(ts) * 1e3
        rng = default_rng(0, backend="cupy")
        data, state = L.init(rng, rows, cols, 20000, 20000, K, a, b, "float32", n_chains=2, fused=False)
        t1 = timed(lambda r, s_: L.step(r, s_, data), state, rng)
        sh = one_device(2)
        rng = default_rng(0, backend="cupy")
        _, parts = L.shard_corpus(rows, cols, 20000, sh)
        alg = L.sharded_gibbs(sh)
        st2 = alg.init(rng, L.shard_data(parts, sh, 20000, K, a, b, "float32", fused=False), K, "float32", n_chains=2)
        t2 = timed(alg.step, st2, rng)
        print(f"K={K}: one device {t1:.2f} ms, two shards on one GPU {t2:.2f} ms a sweep", flush=True)


if __name__ == "__main__":
    main()
