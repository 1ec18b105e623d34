"""Uncollapsed LDA: the full Gibbs iteration (z, counts, theta, phi) as a user runs it.

Corpora (synthetic, drawn from the LDA model with Zipf word frequencies by
``gpumcmc.datasets.synthetic_lda_corpus`` on the GPU):

* "paper": Steele & Tristan's shape, M = 43,556 documents, V = 37,286 words,
  3,072,662 tokens (small: 16x fewer of each);
* "nytimes": 300,000 documents, 101,000 words, 100 M tokens, UCI NYTimes' size
  (skipped when small).

K in {64, 256, 1024}. gpumcmc is timed through the run driver, progress off,
10 sweeps per call, float32 (items: tokens x sweeps). Peak GPU memory is the
CuPy pool's high-water mark over the fit.

Peers: a plain-CuPy implementation of the same sweep (gather -> cumsum ->
search in chunks of tokens, bincount counts, cupy.random.gamma Dirichlet);
tomotopy (collapsed Gibbs, 1 worker) and ``lda`` (collapsed Gibbs) per
iteration on the CPU, on the Reuters subset (395 documents, 84,010 tokens):
a different corpus and the host's CPU, said in their notes.

Floor: bytes of one sweep over the copy bandwidth: the fused z-draw reads the
int32 rows and cols and theta, phi once and writes both count tables (zeroed
first); the Dirichlet draws read the counts and write theta and phi; the
posterior sums read and write their running sums. The stage rows give the
floor of each stage (for the separate z-draw and counts, z is written and read).

Variants on the paper corpus, in the same run: the z-draw and counts as two
kernels (``fused=False``), the fused kernel with theta read densely or as
compacted lists, its launch shape (``config.lda_zwarps`` warps per block,
``config.lda_zwaves`` times the resident blocks), coarser ``token_order`` tiles, and 4 chains.
"""

from __future__ import annotations

import functools
import os
import sys
import time

import numpy as np

SWEEPS = 10


def _corpus(cp, M, V, T, seed):
    from gpumcmc.datasets import synthetic_lda_corpus

    rows, cols, _, _ = synthetic_lda_corpus(M, V, n_tokens=T, n_components=100, zipf=1.0, random_state=seed,
                                            backend="cupy")
    return rows, cols


def zipf_corpus(M=43556, V=37286, T=3072662, seed=1):
    """A SciPy CSR count matrix of ``M`` documents (lengths multinomial, at least one token), ``V`` words with
    Zipf frequencies and ``T`` tokens; the defaults are the corpus shape of Steele & Tristan's experiments."""
    import scipy.sparse as sp

    rs = np.random.default_rng(seed)
    lens = rs.multinomial(T - M, np.full(M, 1 / M)) + 1
    f = 1.0 / (np.arange(V) + 1.0)
    w = rs.choice(V, size=T, p=f / f.sum())
    X = sp.csr_matrix((np.ones(T, np.int32), (np.repeat(np.arange(M), lens), w)), shape=(M, V))
    X.sum_duplicates()
    return X


def _stage_bytes(M, V, T, K, f=4):
    """Bytes each stage of a sweep must move at least (int32 token indices, float32 tables)."""
    return {
        "z-draw": T * (4 + 4 + 8) + (M + V) * K * f,        # rows, cols in; z out; theta, phi read once
        "counts": T * 16 + (M + V) * K * 4 * 2,             # rows, cols, z in; both tables zeroed and written
        "z-draw + counts (fused)": T * 8 + (M + V) * K * (f + 4 * 2),   # no z; theta, phi in; tables
        "theta Dirichlet": M * K * (4 + f + f),             # counts in, prior added, draws out
        "phi Dirichlet": V * K * (4 + f + f) + V * K * (4 + f + f),   # and its running sum: counts, sum in, out
        "posterior sums": M * K * (4 + f + f),              # theta's: counts and sum in, sum out
    }


def _floor_bytes(M, V, T, K, f=4):
    b = _stage_bytes(M, V, T, K, f)
    return sum(v for k, v in b.items() if k not in ("z-draw", "counts"))


def _stages(bench, case, rng, data, state, M, V, T, K):
    """One row per stage of the sweep, as :func:`gpumcmc.models.lda.step` runs it (checks off)."""
    import numpy as np

    from gpumcmc import _validate
    from gpumcmc.discrete import categorical_products
    from gpumcmc.models import lda as L

    cp = bench.cupy
    th, ph = state.theta[0], state.phi[0]
    nb = _stage_bytes(M, V, T, K)
    with _validate.validation(False):
        z = categorical_products(th, ph, data.rows, data.cols, rng)
        ndk, nwk = L.fused_counts(data.rows, data.cols, z, M, V, K)
        one = cp.ones((), np.float32)
        a = cp.add(ndk, np.float32(data.alpha), dtype=np.float32)
        b = cp.add(nwk, np.float32(data.beta), dtype=np.float32)
        fns = {
            "z-draw": lambda: categorical_products(th, ph, data.rows, data.cols, rng),
            "counts": lambda: L.fused_counts(data.rows, data.cols, z, M, V, K, out=(ndk, nwk)),
            "theta Dirichlet": lambda: rng.dirichlet(cp.add(ndk, np.float32(data.alpha), dtype=np.float32),
                                                     dtype=np.float32),
            # as the sweep runs them: phi's running sum of its posterior means inside the normalisation's
            # passes, theta's in lda_row_means
            "phi Dirichlet": lambda: L.ops.dirichlet_columns_counts(rng, nwk, np.float32(data.beta),
                                                                    L._phi_store(state.phi_sum)[:, 0], one),
            "posterior sums": lambda: L._accumulate_mean(state.theta_sum[0], ndk, np.float32(data.alpha), 1, one),
        }
        for name, fn in fns.items():
            items = T if name in ("z-draw", "counts") else {"theta Dirichlet": M * K, "phi Dirichlet": V * K,
                                                             "posterior sums": M * K}[name]
            bench.peer(case, f"stage: {name}", items, fn, bytes_moved=nb[name], params={"K": K},
                       note="one stage of the sweep, value checks off as inside the sampler")
    del a, b


def _cupy_sweep(cp, theta, phi, rows, cols, alpha, beta, chunk=1 << 18):
    """The same sweep in plain CuPy: gather products, cumsum, search; bincount; gamma Dirichlet."""
    M, K = theta.shape
    V = phi.shape[0]
    z = cp.empty(rows.size, cp.int64)
    for s in range(0, rows.size, chunk):
        p = theta[rows[s:s + chunk]] * phi[cols[s:s + chunk]]
        c = cp.cumsum(p, axis=1)
        u = cp.random.random_sample(c.shape[0], dtype=cp.float32)[:, None] * c[:, -1:]
        z[s:s + chunk] = cp.minimum((c < u).sum(axis=1), K - 1)
    ndk = cp.bincount(rows * K + z, minlength=M * K).reshape(M, K)
    nkw = cp.bincount(z * V + cols, minlength=K * V).reshape(K, V)
    g = cp.random.standard_gamma(ndk + alpha, dtype=cp.float32)
    theta = g / g.sum(1, keepdims=True)
    g = cp.random.standard_gamma(nkw + beta, dtype=cp.float32)
    phi = cp.ascontiguousarray((g / g.sum(1, keepdims=True)).T)
    return theta, phi


def _cpu_peers(bench):
    try:
        from gpumcmc.datasets import load_reuters

        X, _, _ = load_reuters()
    except Exception as exc:  # lda not installed
        bench.record("reuters-cpu K=64", "lda (CPU)", None, 0, note=f"Reuters unavailable: {exc}"[:200])
        return
    T = int(X.sum())
    for K in (64, 256):
        case = f"reuters-cpu K={K}"
        try:
            import lda

            m = lda.LDA(n_topics=K, n_iter=20, random_state=0)
            t0 = time.perf_counter()
            m.fit(X)
            ms = (time.perf_counter() - t0) * 1e3 / 20
            bench.record(case, "lda collapsed Gibbs (CPU)", ms, T, params={"K": K},
                         note="per iteration on the host CPU, Reuters subset (84,010 tokens), incl. setup")
        except Exception as exc:
            bench.record(case, "lda collapsed Gibbs (CPU)", None, T, note=f"{type(exc).__name__}: {exc}"[:200])
        try:
            import tomotopy as tp

            mdl = tp.LDAModel(k=K, seed=0)
            Xc = X.tocsr()
            for d in range(Xc.shape[0]):
                s, e = Xc.indptr[d], Xc.indptr[d + 1]
                words = [str(w) for w, c in zip(Xc.indices[s:e], Xc.data[s:e]) for _ in range(int(c))]
                if words:
                    mdl.add_doc(words)
            mdl.train(0, workers=1)
            t0 = time.perf_counter()
            mdl.train(20, workers=1)
            ms = (time.perf_counter() - t0) * 1e3 / 20
            bench.record(case, "tomotopy collapsed Gibbs (CPU, 1 worker)", ms, T, params={"K": K},
                         note="per iteration on the host CPU, Reuters subset (84,010 tokens)")
        except Exception as exc:
            bench.record(case, "tomotopy collapsed Gibbs (CPU, 1 worker)", None, T,
                         note=f"{type(exc).__name__}: {exc}"[:200])


def _fit_row(bench, case, impl, rows, cols, M, V, T, K, n_chains=1, note="", tune=None, alpha=None, graph=False,
             **init_kw):
    """Time 10 sweeps through the run driver of one configuration; returns (data, state) for the stages.

    ``graph``: the sweep captured once as a CUDA graph (during warm-up) and replayed. ``tune``: knobs of
    ``gpumcmc._config.config`` set for this row."""
    from gpumcmc._config import config
    from gpumcmc.models import lda as L
    from gpumcmc.random import default_rng
    from gpumcmc.sampling import graph_step
    from gpumcmc.sampling import run as drive

    cp = bench.cupy
    pool = cp.get_default_memory_pool()
    with config.override(**(tune or {})):
        alpha = beta = 1.0 / K if alpha is None else alpha
        rng = default_rng(0, backend="cupy")
        pool.free_all_blocks()
        base = pool.total_bytes()
        data, state = L.init(rng, rows, cols, M, V, K, alpha, beta, "float32", burn_in=0, n_chains=n_chains,
                             **init_kw)
        step = functools.partial(L.step, data=data)
        if graph:
            step = graph_step(step)
        holder = {"s": state}

        def fit():
            holder["s"] = drive(step, holder["s"], rng, SWEEPS, progress=False).state

        try:
            ms = bench.time(fit)
        except Exception as exc:
            bench.record(case, impl, None, T * SWEEPS * n_chains, note=f"{type(exc).__name__}: {exc}"[:300])
            return None, None, rng
        peak = pool.total_bytes() - base
        bench.record(case, impl, ms, T * SWEEPS * n_chains,
                     bytes_moved=SWEEPS * n_chains * _floor_bytes(M, V, T, K),
                     params={"K": K, "M": M, "V": V, "n_chains": n_chains, "alpha": alpha, "fused": data.fused,
                             "sparse": data.sparse, "graph": graph, **init_kw, **(tune or {})},
                     note=f"{ms / SWEEPS:.3f} ms per sweep; GPU pool peak {peak / 2**30:.2f} GiB over the "
                          f"corpus{note}")
        return data, holder["s"], rng


def _fused_stage(bench, case, rng, data, state, M, V, T, K):
    """The fused z-draw and counts (theta compaction included) as one stage."""
    from gpumcmc import _validate
    from gpumcmc.models import lda as L

    phi = L._phi_store(state.phi)
    with _validate.validation(False):
        label = "fused" if data.fused else "two kernels"
        nb = _stage_bytes(M, V, T, K)
        moved = nb["z-draw + counts (fused)"] if data.fused else nb["z-draw"] + nb["counts"]
        bench.peer(case, f"stage: z-draw + counts ({label})", T, lambda: L.zdraw_counts(rng, state.theta, phi, data),
                   params={"K": K, "sparse": data.sparse}, bytes_moved=moved,
                   note="one kernel (and the compaction of theta when sparse); items: tokens")


def _graph_rows(bench):
    """Sweeps replayed from a CUDA graph beside the same sweeps launched one kernel at a time.

    A sweep is about 15 launches and their Python; on a small corpus that, not
    the GPU, sets its time. Corpora: one of the Reuters subset's shape (395
    documents, 4,258 words, 84 k tokens, synthetic) and the paper's.
    """
    cp = bench.cupy
    sizes = [("reuters-shape", 395, 4_258, 84_000, (16, 64)), ("paper", 43_556, 37_286, 3_072_662, (64,))]
    if bench.small:
        sizes = sizes[:1]
    for name, M, V, T, Ks in sizes:
        rows, cols = _corpus(cp, M, V, T, seed=2)
        T = int(rows.size)
        for K in Ks:
            case = f"graph {name} T={T} K={K}"
            _fit_row(bench, case, "gpumcmc LDA (driver)", rows, cols, M, V, T, K)
            _fit_row(bench, case, "gpumcmc LDA (driver), graph=True", rows, cols, M, V, T, K, graph=True,
                     note="; the sweep replayed from a CUDA graph")
        del rows, cols
        cp.get_default_memory_pool().free_all_blocks()


def run(bench):
    from gpumcmc._config import config

    cp = bench.cupy
    if os.environ.get("GPUMCMC_LDA_GRAPH", "1") != "0":
        _graph_rows(bench)
    pool = cp.get_default_memory_pool()
    corpora = [("paper", 43_556, 37_286, 3_072_662)]
    if bench.small:
        corpora = [("paper-small", 43_556 // 16, 37_286 // 16, 3_072_662 // 16)]
    else:
        corpora.append(("nytimes", 300_000, 101_000, 100_000_000))
    only = os.environ.get("GPUMCMC_LDA_CORPUS")     # run one corpus ("paper" or "nytimes"), e.g. to split a run
    if only:
        corpora = [c for c in corpora if c[0] == only]
    for name, M, V, T in corpora:
        t0 = time.perf_counter()
        rows, cols = _corpus(cp, M, V, T, seed=1)
        cp.cuda.Stream.null.synchronize()
        gen_s = time.perf_counter() - t0
        T = int(rows.size)
        big = T > 5_000_000
        for K in (64, 256, 1024):
            case = f"{name} T={T} K={K}"
            data, state, rng = _fit_row(bench, case, "gpumcmc LDA (driver)", rows, cols, M, V, T, K,
                                        note=f"; corpus generated in {gen_s:.2f} s")
            if data is not None and not bench.small and (not big or K == 1024):
                try:
                    _fused_stage(bench, case, rng, data, state, M, V, T, K)
                    _stages(bench, case, rng, data, state, M, V, T, K)
                except Exception as exc:
                    bench.record(case, "stages", None, T, note=f"{type(exc).__name__}: {exc}"[:300])
            del data, state
            pool.free_all_blocks()
            # The other path of the z-draw and counts: one fused kernel, or two (categorical_products, lda_counts).
            if K >= config.lda_fused_min_k:
                _fit_row(bench, case, "gpumcmc LDA, separate z-draw and counts", rows, cols, M, V, T, K, fused=False)
            else:
                _fit_row(bench, case, "gpumcmc LDA, fused z-draw and counts", rows, cols, M, V, T, K, fused=True)
            if not big:
                _fit_row(bench, case,
                         f"gpumcmc LDA, fused, {'dense' if K >= config.lda_sparse_min_k else 'sparse'} theta",
                         rows, cols, M, V, T, K, fused=True, sparse=K < config.lda_sparse_min_k)
            if not big and K == 1024:
                for tune in ({"lda_zwarps": 2}, {"lda_zwaves": 2}, {"lda_zwaves": 8}):
                    _fit_row(bench, case, f"gpumcmc LDA, fused, {tune}", rows, cols, M, V, T, K, tune=tune)
                _fit_row(bench, case, "gpumcmc LDA, fused, token_order tiles of 4x L2", rows, cols, M, V, T, K,
                         cache_bytes=4 * cp.cuda.Device().attributes["L2CacheSize"])
                # A common larger prior, alpha = beta = 50 / K: theta rows are dense, read whole.
                _fit_row(bench, case, "gpumcmc LDA (driver), alpha = beta = 50/K", rows, cols, M, V, T, K,
                         alpha=50.0 / K)
                _fit_row(bench, case, "gpumcmc LDA, separate z-draw and counts, alpha = beta = 50/K", rows, cols,
                         M, V, T, K, alpha=50.0 / K, fused=False)
            if not big and K == 256:
                _fit_row(bench, case, "gpumcmc LDA (driver), 4 chains", rows, cols, M, V, T, K, n_chains=4,
                         note="; items: tokens x sweeps x chains")
            if not big and K == 1024:
                _fit_row(bench, case, "gpumcmc LDA (driver), 4 chains", rows, cols, M, V, T, K, n_chains=4,
                         note="; items: tokens x sweeps x chains")
            pool.free_all_blocks()
            if not big:
                alpha = beta = 1.0 / K
                th = cp.full((M, K), 1.0 / K, cp.float32)
                ph = cp.full((V, K), 1.0 / V, cp.float32)
                bench.peer(case, "plain CuPy sweep", T, lambda: _cupy_sweep(cp, th, ph, rows, cols, alpha, beta),
                           params={"K": K})
                del th, ph
                pool.free_all_blocks()
        del rows, cols
        pool.free_all_blocks()
    if os.environ.get("GPUMCMC_LDA_CPU_PEERS", "1") != "0":
        _cpu_peers(bench)


# ----------------------------------------------------------------------------- the public call against the sweep

def user_path_text(path: str):
    """``site_packages_corpus()`` of the user_path.py at ``path``: its real text, a SciPy CSR count matrix of
    about 29 M tokens. The script is imported from its own folder, since its corpus builder's worker processes
    unpickle its helpers by module name."""
    import importlib

    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    return importlib.import_module(os.path.splitext(os.path.basename(path))[0]).site_packages_corpus()


def fit_against_step(out=None, user_path=None):
    """``LDA.fit`` with its defaults against the bare step loop, per sweep, on the corpora of
    ``../shared/bench/user_path.py`` (the paper's shape, Zipf words) and a 29 M-token Zipf corpus of the real
    corpus' size (23.6 k documents, V = 50 k); and fit's set-up before its first sweep, in pieces.
    ``user_path``: the path of user_path.py; its real text (``site_packages_corpus``, about 29 M tokens, case
    ``site_packages``) then replaces the Zipf corpus of that size, so that the rows are those of issue 40's goals.

    Per sweep of fit: (time of fit(n_iter=60) - time of fit(n_iter=10)) / 50, median of 3 after a warm-up
    call, as user_path.py does. The bare loop: 50 calls of ``lda.step`` on the state of ``init``, one
    synchronisation at the end. Run: ``python -m benchmarks.lda [--out FILE]``.
    """
    import cProfile
    import io
    import json
    import pstats

    import cupy as cp

    from gpumcmc.models import LDA
    from gpumcmc.models import lda as L
    from gpumcmc.random import default_rng

    def wall(fn):
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        fn()
        cp.cuda.Device().synchronize()
        return time.perf_counter() - t

    R = {}
    corpora = {"paper_shape_zipf": zipf_corpus()}
    if user_path:
        corpora["site_packages"] = user_path_text(user_path)
    else:
        corpora["zipf_29M"] = zipf_corpus(23600, 50000, 29_000_000)
    for name, X in corpora.items():
        T = int(X.sum())
        for K in (256, 1024):
            key = f"{name}_K{K}"
            call = lambda n, K=K, X=X: LDA(n_components=K, n_iter=n, burn_in=0, random_state=0,  # noqa: E731
                                           progress=False).fit(X)
            call(10)
            diffs, t10 = [], []
            for _ in range(3):
                a = wall(lambda: call(10))
                b = wall(lambda: call(60))
                diffs.append((b - a) / 50)
                t10.append(a)
            per_fit = float(np.median(diffs))
            # the bare step loop
            rng = default_rng(0, backend="cupy")
            rows, cols, M, V = L.tokens_from(X, cp)
            data, state = L.init(rng, rows, cols, M, V, K, 1 / K, 1 / K, "float32", burn_in=0)
            for _ in range(3):
                state, _ = L.step(rng, state, data)
            s = {"x": state}

            def loop(n=50):
                for _ in range(n):
                    s["x"], _ = L.step(rng, s["x"], data)

            per_step = float(np.median([wall(loop) / 50 for _ in range(3)]))
            s["x"] = state

            def loop_ll(n=50):
                for _ in range(n):
                    s["x"], _ = L.step(rng, s["x"], data, loglik=True)

            per_step_ll = float(np.median([wall(loop_ll) / 50 for _ in range(3)]))
            del data, state, s, rows, cols
            # set-up, in pieces
            t_tok = wall(lambda: L.tokens_from(X, cp))
            rows, cols, M, V = L.tokens_from(X, cp)
            t_init = wall(lambda: L.init(default_rng(0, backend="cupy"), rows, cols, M, V, K, 1 / K, 1 / K, "float32"))
            del rows, cols
            prof = cProfile.Profile()
            prof.enable()
            t1 = wall(lambda: call(1))
            prof.disable()
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("cumtime").print_stats(25)
            R[key] = {"tokens": T, "fit_ms_per_sweep": per_fit * 1e3, "step_ms_per_sweep": per_step * 1e3,
                      "step_loglik_ms_per_sweep": per_step_ll * 1e3, "fit_over_step": per_fit / per_step,
                      "fit_Mtokens_per_s": T / per_fit / 1e6, "step_Mtokens_per_s": T / per_step / 1e6,
                      "fit_setup_s": float(np.median(t10)) - 10 * per_fit, "tokens_from_s": t_tok,
                      "init_s": t_init, "fit_1_sweep_s": t1, "fit_1_sweep_profile": buf.getvalue()[-6000:]}
            print(json.dumps({k: v for k, v in R[key].items() if k != "fit_1_sweep_profile"} | {"case": key}),
                  flush=True)
            cp.get_default_memory_pool().free_all_blocks()
    R["device"] = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    if out:
        with open(out, "w") as fh:
            json.dump(R, fh, indent=1)
    print(R["device"], file=sys.stderr)
    return R


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=fit_against_step.__doc__)
    parser.add_argument("--out")
    parser.add_argument("--user-path", help="user_path.py: time its real text in place of the 29 M-token Zipf corpus")
    args = parser.parse_args()
    fit_against_step(args.out, args.user_path)
