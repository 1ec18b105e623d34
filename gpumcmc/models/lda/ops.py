"""The launchers of ``kernels_cu/lda.cu`` (:class:`_GpuOps`) and their NumPy twins (:class:`_NumpyOps`).

One interface: ``counts`` (both count tables in one pass), ``zdraw_counts`` (z drawn and counted),
``normalise_columns`` (the Dirichlet over words from its log-gammas) and ``accumulate`` (the running sums).
The twins give the same draws, but where a prefix sum lies within rounding of its target. The functions
after them take NumPy or CuPy arrays and pick the ops of their array module.
"""

from __future__ import annotations

import copy

import numpy as np

from gpumcmc import _kernel_args, _loader
from gpumcmc import backend as _backend
from gpumcmc._config import config
from gpumcmc.discrete import CounterIndex, categorical_products
from gpumcmc.random import _gamma

FILE = "lda.cu"
_ALL = ("lda_counts<long long>", "lda_counts<int>",   # every instantiation, so that lda.cu compiles once
        *(f"{k}<{t}>" for t in ("float", "double") for k in ("lda_col_partials", "lda_col_combine",
                                                              "lda_col_normalise")),
        *(f"{k}<{t}>" for t in ("float", "double") for k in ("lda_theta_compact", "lda_zdraw", "lda_row_means")))


def _chain_tokens(data, C: int):
    """Token rows and columns of all chains as one batch: token ``t`` of chain ``c`` is entry ``c T + t``, with
    theta row ``c M + d`` and phi row ``w C + c``."""
    xp = _backend.get_array_module(data.rows)
    rows, cols = data.rows, data.cols
    if C == 1:
        return rows, cols
    rows, cols = rows.astype(np.int64), cols.astype(np.int64)
    chains = xp.arange(C, dtype=np.int64)[:, None]
    return (rows[None, :] + chains * data.n_docs).reshape(-1), (cols[None, :] * C + chains).reshape(-1)


def _token_counters(data, C: int):
    """``(C T,)`` int64: the z-draw's counter of each token of every chain, ``c n_tokens + g_t`` (ShardPlace)."""
    xp = _backend.get_array_module(data.rows)
    p = data.place
    T = int(data.rows.size)
    g = xp.arange(T, dtype=np.int64) + p.base
    if p.n_head:
        g[:p.n_head] = p.index[:p.n_head]
    if p.n_tail:
        g[T - p.n_tail:] = p.index[p.n_head:]
    if C == 1:
        return g
    return (xp.arange(C, dtype=np.int64)[:, None] * p.n_tokens + g[None, :]).reshape(-1)


def _phi_store(phi):
    """The (V, C, K) array behind a state's (C, V, K) ``phi`` (a view when it is one; else a copy)."""
    return _backend.get_array_module(phi).ascontiguousarray(phi.transpose(1, 0, 2))


def counts(rows, z, n_rows: int, K: int):
    """``n[r, k]`` = number of tokens with row ``r`` and topic ``k`` (bincount of ``rows * K + z``)."""
    xp = _backend.get_array_module(rows)
    return xp.bincount(rows * K + z, minlength=n_rows * K).reshape(n_rows, K)


def counts_twin(rows, cols, z, M: int, V: int, K: int):
    """NumPy twin of the ``lda_counts`` kernel: ``(n_dk (M, K), n_wk (V, K))`` as int32, without the tokens
    whose topic is outside ``[0, K)`` (the z-draw's -1)."""
    ok = (z >= 0) & (z < K)
    if not ok.all():
        rows, cols, z = rows[ok], cols[ok], z[ok]
    return counts(rows, z, M, K).astype(np.int32), counts(cols, z, V, K).astype(np.int32)


class _NumpyOps:
    """The NumPy twins of the kernels of lda.cu."""

    def counts(self, rows, cols, z, M, V, K, out=None):
        """``lda_counts``' twin (``out`` is not reused)."""
        return counts_twin(rows, cols, z, M, V, K)

    def zdraw_counts(self, rng, theta, phi, data, zout, loglik):
        """``lda_zdraw``'s twin: z by :func:`gpumcmc.categorical_products` (``"prefix"``), then the counts."""
        return _two_pass(self, rng, theta, phi, data, zout, loglik, "prefix")

    def normalise_columns(self, lg, total, keep, counts=None, prior=None):
        """Each column of the log-gammas ``lg`` as ``exp(x - max) / sum(exp(x - max))`` (in place), with the
        running sum where ``total`` is given: of the draws, or with ``counts`` (int32, lg's shape) and
        ``prior`` of the posterior means given them (:func:`_accumulate_mean`)."""
        dtype = lg.dtype
        with np.errstate(under="ignore"):
            lg -= lg.max(axis=0)
            e = np.exp(lg, out=lg)
            e /= e.sum(axis=0, dtype=dtype)
        if total is None:
            return e
        return e, (self.accumulate(total, e, keep) if counts is None else
                   self.accumulate_mean(total, counts, prior, 0, keep))

    def accumulate(self, total, x, keep):
        """``total + keep * x`` (keep is 0 or 1, so the product is exact)."""
        return total + keep * x

    def accumulate_mean(self, total, counts, prior, axis, keep):
        """:func:`_accumulate_mean`: ``total + keep * ((counts + prior) / (n + L prior))``, n summed as int64."""
        L = counts.shape[axis]
        den = counts.sum(axis=axis, keepdims=True, dtype=np.int64).astype(total.dtype) + prior.dtype.type(L) * prior
        return total + keep * ((counts.astype(total.dtype) + prior) / den)

    def dirichlet_counts(self, rng, counts, prior):
        """``dirichlet_counts_draw``'s twin: Dirichlet rows of the concentrations ``counts + prior``."""
        return rng.dirichlet(np.add(counts, prior, dtype=prior.dtype), dtype=prior.dtype)


class _GpuOps:
    """Launchers of the kernels of lda.cu (same interface as :class:`_NumpyOps`)."""

    def counts(self, rows, cols, z, M, V, K, out=None):
        """``lda_counts``; ``out``, a pair of int32 arrays to reuse, is zeroed."""
        xp = _backend.get_array_module(rows)
        if out is None:
            out = (xp.zeros((M, K), np.int32), xp.zeros((V, K), np.int32))
        else:
            out[0].fill(0)
            out[1].fill(0)
        if z.dtype != np.int64:
            z = z.astype(np.int64)     # the kernel reads topics as int64 (the z-draw's output type)
        # rows and cols of one index type, the kernel's (it reads both by their addresses)
        ix = np.int32 if rows.dtype == np.int32 else np.int64
        name = "lda_counts<int>" if ix == np.int32 else "lda_counts<long long>"
        fn = _loader.get_function(FILE, name, _ALL)
        _loader.launch(fn, int(rows.size), _kernel_args.args(
            FILE, "lda_counts", rows=_loader.contiguous(rows, ix), cols=_loader.contiguous(cols, ix),
            z=_loader.contiguous(z), ndk=out[0], nwk=out[1], T=_loader.i64(rows.size), K=_loader.i32(K)))
        return out

    def zdraw_counts(self, rng, theta, phi, data, zout, loglik):
        """``lda_zdraw`` (after ``lda_theta_compact`` where ``data.sparse``); the two passes (method
        ``"auto"``) where ``data.fused`` is off or the kernel cannot take the data (a phi row over 48 KiB of
        shared memory, int64 token indices)."""
        xp = _backend.get_array_module(theta)
        if phi.dtype != theta.dtype:  # the fused kernel reads phi in theta's type (the two passes refuse it too)
            raise TypeError(f"theta and phi must share a dtype, got {theta.dtype} and {phi.dtype}.")
        C, M, K = (int(x) for x in theta.shape)
        V = int(phi.shape[0])
        th2, ph2 = theta.reshape(C * M, K), phi.reshape(V * C, K)
        row_bytes = (K + K // 32 + 1) * theta.dtype.itemsize     # a padded phi row in shared memory (lda.cu)
        if not data.fused or row_bytes > 48 * 1024 or data.rows.dtype != np.int32 or data.cols.dtype != np.int32:
            return _two_pass(self, rng, theta, phi, data, zout, loglik, "auto")
        T = int(data.rows.size)
        p = data.place
        NULL = _loader.NULL
        if p is None:
            n_all, base, gidx, n_head, n_tail = T, 0, NULL, 0, 0
        else:
            n_all, base, n_head, n_tail = p.n_tokens, p.base, p.n_head, p.n_tail
            gidx = p.index if p.index.size else NULL
        offset = rng.advance()
        t = _loader.CTYPE[theta.dtype]
        th2 = _loader.contiguous(th2)
        nnz = sidx = sval = NULL
        if data.sparse:
            nnz = xp.empty(C * M, np.int32)
            sidx = xp.empty((C * M, K), np.int32)
            sval = xp.empty((C * M, K), theta.dtype)
            _loader.launch(_loader.get_function(FILE, f"lda_theta_compact<{t}>", _ALL), C * M * 32,
                           _kernel_args.args(FILE, "lda_theta_compact", theta=th2, n_rows=_loader.i64(C * M),
                                             K=_loader.i32(K), nnz=nnz, sidx=sidx, sval=sval), block=256)
        ndk = xp.zeros((C * M, K), np.int32)
        nwk = xp.zeros((V * C, K), np.int32)
        warps = max(1, min(config.lda_zwarps, 4, (48 * 1024) // row_bytes))   # 4: the kernel's launch bound
        fn = _loader.get_function(FILE, f"lda_zdraw<{t}>", _ALL)
        smem = warps * row_bytes
        blocks = _loader.resident_blocks(fn, 32 * warps, smem) * _loader.sm_count() * config.lda_zwaves
        gx = max(1, min(-(-T // (32 * warps)), -(-blocks // C)))
        fn((gx, C), (32 * warps,), _kernel_args.args(
            FILE, "lda_zdraw", theta=th2, phi=_loader.contiguous(ph2), rows=data.rows, cols=data.cols, nnz=nnz,
            sidx=sidx, sval=sval, ndk=ndk, nwk=nwk, zout=zout if zout is not None else NULL, n=_loader.i64(T),
            M=_loader.i32(M), C=_loader.i32(C), K=_loader.i32(K), **_kernel_args.philox_dev(rng.key, offset),
            n_all=_loader.i64(n_all), base=_loader.i64(base), gidx=gidx, n_head=_loader.i64(n_head),
            n_tail=_loader.i64(n_tail), ll=loglik if loglik is not None else NULL), shared_mem=smem)
        return ndk, nwk

    def normalise_columns(self, lg, total, keep, counts=None, prior=None):
        """``lda_col_partials``, ``lda_col_combine``, ``lda_col_normalise`` (out of place); with ``counts``
        the running sum adds the posterior means given them, their column sums formed in the same passes."""
        import cupy

        V, K = lg.shape
        t = "float" if lg.dtype == np.float32 else "double"
        if total is not None:  # read and written by address in lg's type
            total = _loader.contiguous(total, lg.dtype)
        fns = [_loader.get_function(FILE, f"{k}<{t}>", _ALL)
               for k in ("lda_col_partials", "lda_col_combine", "lda_col_normalise")]
        # About 2048 threads per SM in the partial pass: K columns a tile, tiles of whole rows.
        tiles = int(max(1, min(V, 65535, (_loader.sm_count() * 2048) // K)))  # gridDim.y <= 65535
        per_tile = -(-V // tiles)
        tiles = -(-V // per_tile)
        pm = cupy.empty((tiles, K), lg.dtype)
        ps = cupy.empty((tiles, K), lg.dtype)
        means = total is not None and counts is not None
        cnt = _loader.contiguous(counts, np.int32) if means else _loader.NULL
        pn = cupy.empty((tiles, K), np.int64) if means else _loader.NULL
        bx = min(256, 32 * -(-K // 32))
        fns[0]((-(-K // bx), tiles), (bx,), _kernel_args.args(FILE, "lda_col_partials", x=lg, V=_loader.i64(V),
                                                               K=_loader.i32(K), rows_per_tile=_loader.i64(per_tile),
                                                               pm=pm, ps=ps, cnt=cnt, pn=pn))
        fns[1]((-(-K // 32),), (32, 32), _kernel_args.args(FILE, "lda_col_combine", pm=pm, ps=ps,
                                                            tiles=_loader.i32(tiles), K=_loader.i32(K), pn=pn))
        out = cupy.empty_like(lg)
        new_total = None if total is None else cupy.empty_like(total)
        null = total is None    # no running sum: the kernel reads neither sum nor keep
        t = lg.dtype.type
        # a thread a column, the rows strided over about 2048 threads a SM (few columns: more row blocks)
        gy = int(max(1, min(V, 65535, -(-_loader.sm_count() * 2048 // (-(-K // bx) * bx)))))
        fns[2]((-(-K // bx), gy), (bx,), _kernel_args.args(
            FILE, "lda_col_normalise", x=lg, m=pm, s=ps, out=out, sum_in=_loader.NULL if null else total,
            sum_out=_loader.NULL if null else new_total,
            keep=_loader.NULL if null else _loader.contiguous(keep, lg.dtype), n=_loader.i64(lg.size),
            K=_loader.i32(K), cnt=cnt, pn=pn, prior=t(prior if means else 0), vprior=t(V) * t(prior if means else 0)))
        return out if total is None else (out, new_total)

    def dirichlet_counts(self, rng, counts, prior):
        """``dirichlet_counts_draw``: ``Generator.dirichlet``'s rows of ``counts + prior``, with no pass to
        form the concentrations."""
        return _gamma.dirichlet_counts_cupy(_loader.contiguous(counts), prior, rng.key, rng.advance())

    def accumulate_mean(self, total, counts, prior, axis, keep):
        """``lda_row_means``: :func:`_accumulate_mean` along rows (axis 1), the rows' sums formed in the pass.
        Columns' (phi's) are formed in :meth:`normalise_columns`' kernels instead."""
        import cupy

        if axis != 1 or counts.ndim != 2:
            raise ValueError("on the GPU the posterior-mean sums run along the rows of a 2-d count array; phi's "
                             "column sums are formed by normalise_columns(..., counts, prior).")
        rows, K = (int(x) for x in counts.shape)
        t = total.dtype.type
        out = cupy.empty_like(total)
        fn = _loader.get_function(FILE, f"lda_row_means<{'float' if total.dtype == np.float32 else 'double'}>", _ALL)
        _loader.launch(fn, rows * 32, _kernel_args.args(
            FILE, "lda_row_means", n=_loader.contiguous(counts, np.int32), sum_in=_loader.contiguous(total),
            sum_out=out, keep=_loader.contiguous(keep, total.dtype), rows=_loader.i64(rows), K=_loader.i32(K),
            prior=t(prior), kprior=t(K) * t(prior)))
        return out


_NUMPY, _GPU = _NumpyOps(), _GpuOps()


def _ops(xp):
    return _NUMPY if xp is np else _GPU


def fused_counts(rows, cols, z, M: int, V: int, K: int, out=None):
    """``(n_dk (M, K), n_wk (V, K))`` int32 in one pass over the tokens; ``out``: a pair to reuse (zeroed)."""
    return _ops(_backend.get_array_module(rows)).counts(rows, cols, z, M, V, K, out)


def zdraw_counts(rng, theta, phi, data, zout=None, loglik=None):
    """One sweep's z-draw and counts for every chain: ``(n_dk (C M, K), n_wk (V C, K))`` int32.

    ``theta`` is (C, M, K) and ``phi`` the (V, C, K) store; token ``t`` of chain ``c`` takes the uniform
    of row ``c T + t`` (a shard's: of row ``c T_all + g_t``, see :class:`ShardPlace`). ``zout`` (int64,
    C T) receives z. ``loglik`` ((C,) float64): adds each chain's ``sum_t log(max(total_t, 1e-300))``.
    """
    return _ops(_backend.get_array_module(theta)).zdraw_counts(rng, theta, phi, data, zout, loglik)


def _two_pass(ops, rng, theta, phi, data, zout, loglik, method: str):
    """The z-draw by :func:`gpumcmc.categorical_products` over all chains' tokens (a shard: with their
    counters), then the counts by ``ops``."""
    C, M, K = (int(x) for x in theta.shape)
    V = int(phi.shape[0])
    th2, ph2 = theta.reshape(C * M, K), phi.reshape(V * C, K)
    r_all, c_all = _chain_tokens(data, C)
    if data.place is None or _backend.get_array_module(th2) is np:
        z = categorical_products(th2, ph2, r_all, c_all, rng, method=method, log_total=loglik,
                                 counter_index=None if data.place is None else _token_counters(data, C))
    else:
        z = _placed_products(th2, ph2, r_all, c_all, rng, data, C, method, loglik)
    if zout is not None:
        zout[...] = z
    return ops.counts(r_all, c_all, z, C * M, V * C, K)


def _placed_products(th2, ph2, r_all, c_all, rng, data, C: int, method: str, loglik=None):
    """On the GPU, :func:`gpumcmc.categorical_products` of a shard's tokens at one generator offset, token
    ``t`` of chain ``c`` drawn as token ``c T_all + g_t`` of one device's call (the same uniform and lane):
    each chain's tokens between head and tail with a counter base, the heads and tails with their counters.
    """
    xp = _backend.get_array_module(th2)
    p = data.place
    T = int(data.rows.size)
    z = xp.empty(C * T, np.int64)
    for c in range(C):
        a, b = c * T + p.n_head, (c + 1) * T - p.n_tail
        if b > a:
            categorical_products(th2, ph2, r_all[a:b], c_all[a:b], copy.copy(rng), method=method, out=z[a:b],
                                 counter_base=c * p.n_tokens + p.base + p.n_head,
                                 log_total=None if loglik is None else loglik[c:c + 1])
    if p.n_head or p.n_tail:
        def ends():  # the heads' and tails' places, tokens and counters: the same every sweep
            local = xp.concatenate([xp.arange(p.n_head, dtype=np.int64),
                                    xp.arange(T - p.n_tail, T, dtype=np.int64)])
            chains = xp.arange(C, dtype=np.int64)[:, None]
            pos = (chains * T + local[None, :]).reshape(-1)
            counters = CounterIndex((chains * p.n_tokens + p.index[None, :]).reshape(-1))
            return pos, r_all[pos], c_all[pos], counters

        pos, r_ends, c_ends, counters = _memoised(p, C, ends)
        if loglik is None or C == 1:
            z[pos] = categorical_products(th2, ph2, r_ends, c_ends, copy.copy(rng), method=method,
                                          counter_index=counters, log_total=loglik)
        else:
            E = p.n_head + p.n_tail
            per = _memoised(p, (C, "chains"),
                            lambda: [CounterIndex(counters.index[c * E:(c + 1) * E]) for c in range(C)])
            for c in range(C):
                e = slice(c * E, (c + 1) * E)
                z[pos[e]] = categorical_products(th2, ph2, r_ends[e], c_ends[e], copy.copy(rng), method=method,
                                                 counter_index=per[c], log_total=loglik[c:c + 1])
    rng.advance()
    return z


def _memoised(place, key, make):
    """``make()``, kept in ``place.memo`` under ``key`` (where the place has a memo) for the next sweeps."""
    if place.memo is None:
        return make()
    if key not in place.memo:
        place.memo[key] = make()
    return place.memo[key]


def dirichlet_columns(rng, concentration, total=None, keep=None):
    """``out[:, k] ~ Dir(concentration[:, k])`` for each column of a (V, K) array, in its dtype.

    Log-gammas (``Generator.gamma(log=True)``, exact for tiny shapes), then each column normalised as
    ``exp(x - max) / sum(exp(x - max))``, the row formula of ``Generator.dirichlet``. On the GPU the column
    reductions are tiled so that every read is coalesced. With ``total`` and ``keep`` (a 0-d array, 0 or 1)
    it returns ``(out, total + keep * out)``, the running sum formed in the same pass.

    Examples
    --------
    >>> import numpy as np
    >>> from gpumcmc.random import default_rng
    >>> from gpumcmc.models.lda import dirichlet_columns
    >>> phi = dirichlet_columns(default_rng(0, backend="numpy"), np.full((5, 3), 0.5))
    >>> np.allclose(phi.sum(axis=0), 1)
    True
    """
    lg = rng.gamma(concentration, dtype=concentration.dtype, log=True)
    return _ops(_backend.get_array_module(concentration)).normalise_columns(lg, total, keep)


def dirichlet_counts(rng, counts, prior):
    """``Dir(counts + prior)`` rows of the (n, K) int32 ``counts`` in ``prior``'s dtype (a NumPy scalar): the
    draws of ``rng.dirichlet`` given that sum, which the GPU forms as it reads the counts."""
    return _ops(_backend.get_array_module(counts)).dirichlet_counts(rng, counts, prior)


def dirichlet_columns_counts(rng, counts, prior, total=None, keep=None):
    """:func:`dirichlet_columns` of the concentrations ``counts + prior`` ((V, K) int32 counts, ``prior`` a
    NumPy scalar of the output's dtype), the sum formed as the GPU reads the counts: the same draws. With
    ``total`` and ``keep`` the running sum adds the columns' posterior means given the counts,
    ``(counts + prior) / (n + V prior)`` (:func:`_accumulate_mean`), formed in the normalisation's passes."""
    ops = _ops(_backend.get_array_module(counts))
    return ops.normalise_columns(_gamma.log_gamma_counts(rng, counts, prior), total, keep, counts, prior)


def _accumulate_mean(total, counts, prior, axis: int, keep):
    """``total + keep * E[p | counts]``, ``E[p | counts] = (counts + prior) / (n + L prior)`` for Dirichlet
    vectors along ``axis`` (length L, n their counts' sum) of the int32 ``counts``, in ``total``'s dtype
    (``prior`` a NumPy scalar of it): the running sum of the posterior mean given each sweep's topics
    (Rao-Blackwellised), which the mean of the Dirichlet draws estimates with far more noise where the prior
    is small (most draws of an entry without counts underflow, and the mean misses its size by orders of
    magnitude). The same roundings on both backends (integer sums, one division; ``keep`` is 0 or 1)."""
    return _ops(_backend.get_array_module(counts)).accumulate_mean(total, counts, prior, axis, keep)
