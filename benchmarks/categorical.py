"""One draw per row from discrete distributions: gpumcmc's methods against the peers.

(a) Materialised weights, n = 2**20 rows (small: 2**14) x K in {16, 64, 256,
    1024}, float32 and float64: "prefix", "transpose", "butterfly", "warp" and "auto"
    against torch.multinomial (num_samples=1), jax.random.categorical on the log
    weights (jit) and CuPy's cumsum + compare. Floor: read the weights once and
    write n int64 indices.
(b) The fused LDA z-draw, categorical_products: M = 43,556 documents, V = 37,286
    words, 3,072,662 tokens (small: 16x fewer of each), K in {64, 256, 1024},
    random theta / phi / tokens, tokens sorted by word so that phi rows can be
    reused from cache, against CuPy's gather -> cumsum -> search (in chunks of
    tokens, to bound its memory). Items are tokens. Floor: theta and phi read
    once, rows and cols read, indices written; a random theta row per token
    cannot be cached, so the real floor is higher.
(c) Butterfly against transpose over K = 16 .. 2048 for both dtypes, on the
    fused form with 2**20 tokens (small: 2**14), as in Figure 7 of Steele &
    Tristan (PPoPP 2017), and the one-warp-per-row "warp" method beside them;
    the notes give the speed-up over the transpose.

(d) The default path, as users call it (validation on), beside validation
    off, by CUDA events and by the wall clock of back-to-back calls:
    categorical 2**20 x 1024 float32 "auto", and categorical_products with
    the LDA sizes at K = 1024 in token_order and sorted by document.

Sections (a) and (b) time the calls as users make them, checks on (fused
into the kernels: one wait per call); (c) compares the methods' kernels with
validation off; (d) gives the price of the checks, default beside off.
"""

from __future__ import annotations

import numpy as np

METHODS = ("prefix", "transpose", "butterfly", "warp", "auto")
LDA = {"M": 43_556, "V": 37_286, "T": 3_072_662}


def _check(case, idx, n, K):
    """Before timing: the right shape, and every index in [0, K) (no row failed)."""
    if idx.shape != (n,) or not bool(((idx >= 0) & (idx < K)).all()):
        raise RuntimeError(f"{case}: gpumcmc returned indices outside [0, {K})")


def _auto(K, dtype, products=False):
    from gpumcmc.discrete import choose_method

    return choose_method(K, dtype, products=products)


def _materialised(bench, gpumcmc):
    cp, torch, jax = bench.cupy, bench.torch, bench.jax
    n = 1 << (14 if bench.small else 20)
    cgen = cp.random.default_rng(0)
    rng = gpumcmc.random.default_rng(1, backend="cupy")
    for dtype in (np.float32, np.float64):
        dname = np.dtype(dtype).name
        for K in (16, 64, 256, 1024):
            case = f"categorical n={n} K={K} {dname}"
            w = cgen.random((n, K), dtype=dtype) + dtype(1e-3)
            kw = dict(bytes_moved=n * K * np.dtype(dtype).itemsize + n * 8,
                      params={"n": n, "K": K, "dtype": dname})
            out = cp.empty(n, dtype=np.int64)
            for method in METHODS:
                def ours(method=method):
                    return gpumcmc.categorical(w, rng=rng, method=method, out=out)
                _check(case, ours(), n, K)
                note = f"auto = {_auto(K, dtype)}" if method == "auto" else None
                bench.record(case, f"gpumcmc {method}", bench.time(ours), n, note=note, **kw)

            def cupy_cumsum():
                u = cgen.random(n, dtype=dtype)
                c = cp.cumsum(w, axis=1)
                return (c > (u * c[:, -1])[:, None]).argmax(axis=1)
            bench.peer(case, "cupy cumsum + compare", n, cupy_cumsum, **kw)
            if torch is not None:
                try:
                    tw = torch.as_tensor(w, device="cuda")
                    bench.peer(case, "torch.multinomial", n, lambda: torch.multinomial(tw, 1), **kw)
                    del tw
                except Exception as exc:  # no zero-copy import, or out of memory
                    bench.record(case, "torch.multinomial", None, n, note=f"{type(exc).__name__}: {exc}"[:300], **kw)
            if jax is not None:
                try:
                    import jax.numpy as jnp

                    logw = jnp.log(jax.dlpack.from_dlpack(w))
                    f = jax.jit(lambda key, lw: jax.random.categorical(key, lw, axis=-1))
                    key = jax.random.PRNGKey(0)
                    bench.peer(case, "jax.random.categorical (log w)", n, lambda: f(key, logw), sync="jax", **kw)
                    logw.delete()
                except Exception as exc:
                    bench.record(case, "jax.random.categorical (log w)", None, n,
                                 note=f"{type(exc).__name__}: {exc}"[:300], **kw)
            del w, out
            bench.free_memory()


def _lda(bench, T, M, V, K, dtype, seed=0, order="word"):
    """Random theta, phi and tokens; ``order`` "word" sorts tokens by word then
    document, "tiles" by gpumcmc.token_order (document tiles that fit in L2,
    by word inside each)."""
    import gpumcmc

    cp = bench.cupy
    g = cp.random.default_rng(seed)
    theta = g.random((M, K), dtype=dtype) + dtype(1e-3)
    phi = g.random((V, K), dtype=dtype) + dtype(1e-3)
    rows = g.integers(0, M, T, dtype=np.int64)
    cols = g.integers(0, V, T, dtype=np.int64)
    if order == "word":
        perm = cp.lexsort(cp.stack([rows, cols]))  # by word, then document
    else:
        perm = gpumcmc.token_order(rows, cols, K, dtype)
    return theta, phi, rows[perm].astype(np.int32), cols[perm].astype(np.int32)


def _fused(bench, gpumcmc):
    cp = bench.cupy
    scale = 16 if bench.small else 1
    M, V, T = (LDA[k] // scale for k in ("M", "V", "T"))
    rng = gpumcmc.random.default_rng(2, backend="cupy")
    cgen = cp.random.default_rng(3)
    for dtype in (np.float32, np.float64):
        dname = np.dtype(dtype).name
        for K in (64, 256, 1024):
            case = f"LDA z-draw T={T} K={K} {dname}"
            theta, phi, rows, cols = _lda(bench, T, M, V, K, dtype)
            isz = np.dtype(dtype).itemsize
            kw = dict(bytes_moved=(M + V) * K * isz + T * (4 + 4 + 8),
                      params={"tokens": T, "docs": M, "words": V, "K": K, "dtype": dname, "sorted": "by word"})
            out = cp.empty(T, dtype=np.int64)
            for method in METHODS:
                def ours(method=method):
                    return gpumcmc.categorical_products(theta, phi, rows, cols, rng=rng, method=method, out=out)
                _check(case, ours(), T, K)
                note = f"auto = {_auto(K, dtype, products=True)}" if method == "auto" else None
                bench.record(case, f"gpumcmc {method}", bench.time(ours), T, note=note, **kw)
            chunk = max(1, (1 << 28) // K)

            def cupy_gather():
                res = cp.empty(T, dtype=np.int64)
                for s in range(0, T, chunk):
                    e = min(T, s + chunk)
                    wc = theta[rows[s:e]] * phi[cols[s:e]]
                    c = cp.cumsum(wc, axis=1)
                    u = cgen.random(e - s, dtype=dtype)
                    res[s:e] = (c > (u * c[:, -1])[:, None]).argmax(axis=1)
                return res
            bench.peer(case, "cupy gather + cumsum + compare", T, cupy_gather,
                       note=f"chunks of {chunk} tokens", **kw)
            del theta, phi, rows, cols
            bench.free_memory()
            # The same tokens in gpumcmc.token_order's cache-tiled order.
            theta, phi, rows, cols = _lda(bench, T, M, V, K, dtype, order="tiles")
            kw["params"] = {**kw["params"], "sorted": "token_order (document tiles, by word)"}
            for method in ("transpose", "butterfly", "warp"):
                def tiled(method=method):
                    return gpumcmc.categorical_products(theta, phi, rows, cols, rng=rng, method=method, out=out)
                _check(case, tiled(), T, K)
                bench.record(case + " tiled", f"gpumcmc {method}", bench.time(tiled), T, **kw)
            del theta, phi, rows, cols, out
            bench.free_memory()


def _curve(bench, gpumcmc):
    cp = bench.cupy
    T = 1 << (14 if bench.small else 20)
    M, V = LDA["M"], LDA["V"]
    rng = gpumcmc.random.default_rng(4, backend="cupy")
    for dtype in (np.float32, np.float64):
        dname = np.dtype(dtype).name
        for K in (16, 32, 64, 128, 256, 512, 1024, 2048):
            case = f"butterfly vs transpose T={T} K={K} {dname}"
            theta, phi, rows, cols = _lda(bench, T, M, V, K, dtype, seed=K)
            isz = np.dtype(dtype).itemsize
            kw = dict(bytes_moved=(M + V) * K * isz + T * 16, params={"tokens": T, "K": K, "dtype": dname})
            out = cp.empty(T, dtype=np.int64)
            ms = {}
            for method in ("transpose", "butterfly", "warp"):
                def ours(method=method):
                    return gpumcmc.categorical_products(theta, phi, rows, cols, rng=rng, method=method, out=out)
                _check(case, ours(), T, K)
                ms[method] = bench.time(ours)
            bench.record(case, "gpumcmc transpose", ms["transpose"], T, **kw)
            bench.record(case, "gpumcmc butterfly", ms["butterfly"], T,
                         note=f"{ms['transpose'] / ms['butterfly']:.2f}x the transpose", **kw)
            bench.record(case, "gpumcmc warp", ms["warp"], T,
                         note=f"{ms['transpose'] / ms['warp']:.2f}x the transpose", **kw)
            del theta, phi, rows, cols, out
            bench.free_memory()


def _default_path(bench, gpumcmc):
    from ._validation_cost import compare

    cp = bench.cupy
    n = 1 << (14 if bench.small else 20)
    K = 1024
    w = cp.random.default_rng(5).random((n, K), dtype=np.float32)
    rng = gpumcmc.random.default_rng(5, backend="cupy")
    out = cp.empty(n, dtype=np.int64)
    compare(bench, f"validation cost: categorical n={n} K={K} float32 auto",
            lambda: gpumcmc.categorical(w, rng, out=out), n, bytes_moved=n * K * 4 + n * 8,
            params={"n": n, "K": K, "dtype": "float32"})
    del w, out
    bench.free_memory()
    scale = 16 if bench.small else 1
    M, V, T = (LDA[k] // scale for k in ("M", "V", "T"))
    for order in ("tiles", "document"):
        theta, phi, rows, cols = _lda(bench, T, M, V, K, np.float32, order="tiles" if order == "tiles" else "word")
        if order == "document":
            perm = cp.argsort(rows, kind="stable")
            rows, cols = rows[perm], cols[perm]
        out = cp.empty(T, dtype=np.int64)
        compare(bench, f"validation cost: categorical_products T={T} K={K} float32, "
                       f"{'token_order' if order == 'tiles' else 'sorted by document'}",
                lambda: gpumcmc.categorical_products(theta, phi, rows, cols, rng, out=out), T,
                bytes_moved=(M + V) * K * 4 + T * 16, params={"tokens": T, "K": K, "order": order})
        del theta, phi, rows, cols, out
        bench.free_memory()


def run(bench) -> None:
    import gpumcmc

    _default_path(bench, gpumcmc)
    _materialised(bench, gpumcmc)
    _fused(bench, gpumcmc)
    with gpumcmc.validation(False):
        _curve(bench, gpumcmc)
