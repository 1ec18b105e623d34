"""The launchers of ``kernels_cu/mixture.cu`` and their array-code twins, side by side.

The twins give the kernels' results on NumPy, and on CuPy where a kernel does not apply (p > 64):
:func:`assign` and :func:`_assign_twin` (logits, indicators, probabilities), :func:`gibbs_stats` (sort and
two-kernel reduction, or one-hot blocks times the design), :func:`_posterior_kernel` and
:func:`niw_posterior`, :func:`_gibbs_params_kernel` and :func:`_gibbs_params_twin`. Every kernel compiles
once per (p, dtype) with the macros of :func:`_defines`.
"""

from __future__ import annotations

import math

import numpy as np

from gpumcmc import _kernel_args, _loader, backend as _backend
from gpumcmc._config import config, memo
from gpumcmc.random._philox import philox_rounds, u01_f32

_LOG_2PI = math.log(2.0 * math.pi)
MODE_SAMPLE, MODE_ARGMAX, MODE_RESP = 0, 1, 2
_MAX_KERNEL_P = 64  # larger p runs the array-code twin on the GPU too
_MAX_STATS_E = 1024  # the statistics kernel has one thread per entry of [1, x, vech(x x^T)]
FILE = "mixture.cu"
_NAMES = ("mixture_logits<float>", "mixture_logits<double>", "mixture_stats_partial<float>",
          "mixture_stats_partial<double>", "mixture_gibbs_params<float>", "mixture_gibbs_params<double>")
_PLAIN = ("mixture_stats_reduce", "mixture_niw_posterior")  # extern "C" kernels, not templates
_BLOCK = 256


def _xp_of(a):
    return _backend.get_array_module(a)


def _use_component_kernel(xp, p) -> bool:
    return xp is not np and p <= _MAX_KERNEL_P


_TRI_DEVICE = memo.table("mixture.tri", device_at=1)  # (p, device) -> the indices on that device, copied once


def _tri(p, xp=np):
    """Indices of the lower triangle in row-major order: (0,0), (1,0), (1,1), (2,0), ..."""
    if xp is np:
        return np.tril_indices(p)
    key = (p, xp.cuda.runtime.getDevice())
    idx = _TRI_DEVICE.get(key)
    if idx is None:
        idx = _TRI_DEVICE[key] = tuple(xp.asarray(t) for t in np.tril_indices(p))
    return idx


def _y_block(xb, xp):
    """``[1, x, x_a x_b for a <= b]`` of a block of rows, float64 (a float32 sum of ``x x^T`` loses the
    scatter of a tight component far from the data's centre): the sufficient statistics' design."""
    xb = xb.astype(np.float64)
    n, p = xb.shape
    ti, tj = _tri(p, xp)
    out = xp.empty((n, 1 + p + ti.shape[0]), dtype=np.float64)
    out[:, 0] = 1.0
    out[:, 1:1 + p] = xb
    # the products in pieces of rows on the host, so that their temporaries stay small beside the block
    # (the design is (p + 1)(p + 2) / 2 columns: 2,145 at p = 64); the same values
    step = n if xp is not np else max(1, (16 << 20) // (8 * ti.shape[0]))
    for s in range(0, n, step):
        xp.multiply(xb[s:s + step, ti], xb[s:s + step, tj], out=out[s:s + step, 1 + p:])
    return out


def _unpack(packed, p, symmetric=False):
    """``[c, b, vech(U)]`` (..., q) as ``c, b, U``: ``U`` lower triangular, or symmetric with ``symmetric``."""
    xp = _xp_of(packed)
    u = xp.zeros(packed.shape[:-1] + (p, p), dtype=packed.dtype)
    ti, tj = _tri(p, xp)
    u[..., ti, tj] = packed[..., 1 + p:]
    if symmetric:
        u[..., tj, ti] = packed[..., 1 + p:]
    return packed[..., 0], packed[..., 1:1 + p], u


def _unpack_stats(acc, p):
    """Counts, sums and scatter matrices from the packed float64 statistics ``[n_j, s1_j, vech(s2_j)]``."""
    return _unpack(acc, p, symmetric=True)


def _safe_cholesky(s):
    """Cholesky factors of ``s`` with ``1e-10`` of its mean diagonal added to the diagonal."""
    xp = _xp_of(s)
    scale = xp.abs(xp.diagonal(s, axis1=-2, axis2=-1)).mean(-1)[..., None, None]
    return xp.linalg.cholesky(s + 1e-10 * scale * xp.eye(s.shape[-1]))


def kernel_params(log_pi, mu, chol, dtype):
    """Pack ``[c_j, U_j mu_j, vech(U_j)]`` per component from log weights, means and Cholesky factors."""
    xp = _xp_of(mu)
    p = mu.shape[-1]
    u = xp.tril(xp.linalg.inv(chol))
    b = (u @ mu[..., None])[..., 0]
    c = log_pi - xp.log(xp.diagonal(chol, axis1=-2, axis2=-1)).sum(-1) - 0.5 * p * _LOG_2PI
    ti, tj = _tri(p, xp)
    return xp.ascontiguousarray(xp.concatenate([c[..., None], b, u[..., ti, tj]], axis=-1).astype(dtype))


def _logits_twin(xb, params):
    """Logits ``(C, k, m)`` of the rows ``xb`` (m, p): the array-code twin of the kernel's inner loop."""
    xp = _xp_of(xb)
    p = xb.shape[1]
    c, b, u = _unpack(params, p)
    y = xp.matmul(xb[None, None], xp.swapaxes(u, -1, -2)) - b[..., None, :]
    return c[..., None] - xp.asarray(0.5, dtype=xb.dtype) * (y * y).sum(-1)


def _gemm_weights(params, p):
    """Weights ``W`` (C, k, q), float64, with logits ``W [1, x, vech(x x^T)]``: ``c - b.b / 2 + (U^T b).x -
    x^T U^T U x / 2``; a zero weight (``c = -inf``) becomes -1e300, so that no BLAS product meets inf * 0."""
    c, b, u = _unpack(np.asarray(params, np.float64), p)
    a = np.swapaxes(u, -1, -2) @ u
    ti, tj = _tri(p)
    quad = -0.5 * a[..., ti, tj] * np.where(ti == tj, 1.0, 2.0)
    const = c - 0.5 * (b * b).sum(-1)
    const = np.where(np.isfinite(const), const, -1e300)
    lin = (np.swapaxes(u, -1, -2) @ b[..., None])[..., 0]
    return np.ascontiguousarray(np.concatenate([const[..., None], lin, quad], axis=-1))


def _logits_gemm(xb, w):
    y = _y_block(np.asarray(xb), np)
    return np.matmul(w, y.T)


def _gumbel_twin(xp, chains: int, n_total: int, start: int, m: int, k: int, dtype, key, offset: int,
                 row0: int = 0):
    """Gumbel noise ``(C, k, m)`` keyed as the kernel keys it: ``n_total`` counters a chain, first row
    ``row0 + start``."""
    k4 = (k + 3) // 4
    idx = (np.arange(chains, dtype=np.uint64)[:, None, None] * np.uint64(n_total)
           + np.arange(row0 + start, row0 + start + m, dtype=np.uint64)[None, :, None]) * np.uint64(k4) \
        + np.arange(k4, dtype=np.uint64)[None, None, :]
    mask = np.uint64(0xFFFFFFFF)
    w = philox_rounds(idx & mask, idx >> np.uint64(32), np.uint64(offset & 0xFFFFFFFF),
                      np.uint64((offset >> 32) & 0xFFFFFFFF), int(key[0]), int(key[1]))
    words = np.stack(w, axis=-1).reshape(chains, m, 4 * k4)[..., :k]  # word j % 4 of block j // 4
    u = u01_f32(words).astype(dtype)
    g = -np.log(-np.log(u))
    return _backend.asarray(np.ascontiguousarray(np.swapaxes(g, 1, 2)), xp)


@np.errstate(under="ignore")  # probabilities below the smallest float are zero, by design
def _assign_twin(x, params, start, m, mode, key, offset, z=None, lse=None, resp=None, design=None, row0=0,
                 ctr_rows=None):
    """NumPy/array-code twin of ``mixture_logits`` for rows ``start .. start+m-1``."""
    xp = _xp_of(x)
    n_total, p = x.shape
    ctr_rows = n_total if ctr_rows is None else int(ctr_rows)
    chains, k, _ = params.shape
    step_rows = max(64, (1 << 22) // max(1, chains * k * p))
    gemm = xp is np
    if gemm:
        w = _gemm_weights(params, p)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for s in range(start, start + m, step_rows):
            e = min(start + m, s + step_rows)
            # (C, k, rows): on NumPy one float64 GEMM with the design [1, x, vech(x x^T)]; else the direct form
            if gemm and design is not None:  # the cached float64 design of rows start .. start+m-1
                lg = np.matmul(w, design[s - start:e - start].T)
            else:
                lg = _logits_gemm(x[s:e], w) if gemm else _logits_twin(x[s:e], params)
            mx = lg.max(axis=1)
            mx0 = xp.where(xp.isfinite(mx), mx, 0)
            tot = mx0 + xp.log(xp.exp(lg - mx0[:, None, :]).sum(axis=1))
            if lse is not None:
                lse[:, s:e] = tot
            if mode == MODE_SAMPLE:
                g = _gumbel_twin(xp, chains, ctr_rows, s, e - s, k, x.dtype, key, offset, row0)
                z[:, s:e] = xp.argmax(lg + g, axis=1)
            elif mode == MODE_ARGMAX and z is not None:
                z[:, s:e] = xp.argmax(lg, axis=1)
            elif mode == MODE_RESP:
                resp[:, :, s - start:e - start] = xp.exp(lg - tot[:, None, :])


def _comp_threads(p: int) -> int:
    """Components per block of the component kernels: one warp at most, 40 KB of shared memory."""
    tri = p * (p + 1) // 2
    return int(max(1, min(32, 40960 // (8 * (2 * tri + p)))))


# config.mixture_stats_rows: MIX_STATS_ROWS, sorted rows per block of the statistics kernel;
# config.mixture_defines: overrides of the defines, e.g. (("MIX_ROWS", 2),) (for tuning runs; none by default)
_DEFINES = memo.table("mixture.defines", device_at=None)  # (p, dtype, stats rows, overrides) -> the defines


def _defines(p: int, dtype, skip: bool = False) -> tuple:
    """The kernels' defines at ``p`` and ``dtype``; ``skip``: with MIX_SKIP = 1 (mixture.cu), which leaves
    out the tiles of components no row of a warp can feel: the same bits. Bayesian EM's E-step (mode RESP)
    asks for it: its pruned components (sorted last) and far ones are most of its tiles. Gibbs's draws do
    not: there the test costs more than it saves (``benchmarks/results/logs-h200/session52-*``). A MIX_SKIP
    in ``config.mixture_defines`` decides for both."""
    tune = dict(config.mixture_defines)
    if skip:
        tune.setdefault("MIX_SKIP", 1)
    dtype, tune = np.dtype(dtype), tuple(sorted(tune.items()))
    key = (p, dtype, config.mixture_stats_rows, tune)
    if key in _DEFINES:
        return _DEFINES[key]
    q = 1 + p + p * (p + 1) // 2
    qp = (q + 3) // 4 * 4
    tile = int(max(1, min(32, 24576 // (qp * dtype.itemsize))))
    # Rows per thread: each component value read from shared memory serves them all. 4 float32 rows
    # at p = 14 take 128 registers (two blocks of 256 per SM); float64 takes twice the registers.
    rows = (4 if p <= 16 else 2 if p <= 32 else 1) if dtype == np.float32 else (2 if p <= 16 else 1)
    stats_block = int(min(_MAX_STATS_E, (q + 31) // 32 * 32))
    # Two resident blocks of 256 threads at 4 float32 rows: ask the register allocator for them (128
    # registers), which it otherwise exceeds for the probability writes of mode RESP.
    min_blocks = 2 if (dtype == np.float32 and rows == 4) else 1
    d = {"MIX_P": p, "MIX_TILE": tile, "MIX_ROWS": rows, "MIX_BLOCK": _BLOCK, "MIX_STATS_ROWS": key[2],
         "MIX_STATS_BLOCK": stats_block, "MIX_COMP_THREADS": _comp_threads(p), "MIX_MIN_BLOCKS": min_blocks}
    d.update(dict(tune))
    _DEFINES[key] = tuple(d.items())
    return _DEFINES[key]


def _kernel(p: int, dtype, which: str = "mixture_logits", skip: bool = False):
    dtype = np.dtype(dtype)  # the defines are memoised per (p, dtype): pass a dtype, not a type
    name = which if which in _PLAIN else f"{which}<{'float' if dtype == np.float32 else 'double'}>"
    return _loader.get_function(FILE, name, _NAMES, defines=_defines(p, dtype, skip))


def assign(x, params, start: int, m: int, mode: int, key=(0, 0), offset: int = 0, z=None, lse=None,
           resp=None, use_kernel: bool | None = None, design=None, scratch=None, block_rows=None, row0: int = 0,
           ctr_rows: int | None = None) -> None:
    """Run the configuration kernel (or its twin) on rows ``start .. start+m-1`` of ``x``.

    ``x`` may be one shard of a larger data set: ``row0`` is the global index of its first row and
    ``ctr_rows`` the rows of the whole set (None: ``x`` is the whole set); mode SAMPLE keys its Gumbel
    noise by the global row, so a shard draws what one device draws for those rows.

    ``z`` (C, n) int32 and ``lse`` (C, n) are written at the rows of ``x``; ``resp`` (C, k, m),
    contiguous, of ``x.dtype`` or float64, gets the chunk's probabilities (mode RESP). For float32 data and
    a float64 ``resp`` the kernel keeps its float32 logits in ``scratch`` (C, k, m) (allocated when None)
    and writes the probabilities once, in float64; there ``block_rows = b`` lays them out in blocks of
    ``b`` rows (:func:`_resp_blocks`), a flat ``resp`` of ``C k m`` values.
    """
    xp = _xp_of(x)
    n_total, p = x.shape
    chains, k, q = params.shape
    if m <= 0:
        return
    if resp is not None and resp.dtype not in (x.dtype, np.float64):
        raise TypeError(f"resp must be of the data's dtype or float64, got {resp.dtype}.")
    if use_kernel is None:
        use_kernel = _use_component_kernel(xp, p)
    blocked = block_rows is not None and int(block_rows) < m
    if blocked and not (use_kernel and resp is not None and resp.dtype != x.dtype):
        raise ValueError("block_rows needs the kernel, float32 data and a float64 resp.")
    if not use_kernel:
        _assign_twin(x, params, start, m, mode, key, offset, z=z, lse=lse, resp=resp, design=design, row0=row0,
                     ctr_rows=ctr_rows)
        return
    fn = _kernel(p, x.dtype, skip=mode == MODE_RESP)
    defines = dict(_defines(p, x.dtype, skip=mode == MODE_RESP))
    rows, block = defines["MIX_ROWS"], defines["MIX_BLOCK"]
    blocks = _loader.resident_blocks(fn, block) * _loader.sm_count()
    gx = int(max(1, min(math.ceil(m / (block * rows)), max(1, blocks // chains) * 2)))
    null = _loader.NULL
    resp_out = null
    if resp is not None and resp.dtype != x.dtype:  # float32 logits in scratch, float64 probabilities
        resp_out = resp
        resp = xp.empty((chains, k, m), dtype=x.dtype) if scratch is None else scratch
    mb = int(block_rows) if blocked else m
    fn((gx, chains), (block,), _kernel_args.args(
        FILE, "mixture_logits", x=x, n_total=_loader.i64(n_total), start=_loader.i64(start), m=_loader.i64(m),
        params=params, K=_loader.i32(k), mode=_loader.i32(mode), z=z if z is not None else null,
        lse=lse if lse is not None else null, resp=resp if resp is not None else null, resp_out=resp_out,
        mb=_loader.i64(mb), ctr_rows=_loader.i64(n_total if ctr_rows is None else ctr_rows), row0=_loader.i64(row0),
        **_kernel_args.philox_dev(key, offset)))


def _resp_blocks(resp_flat, rows: int, m: int, ck: int):
    """Views of probabilities laid out in blocks of ``rows`` rows: ``(m // rows, ck, rows)`` and ``(ck, m % rows)``."""
    nb = m // rows
    rem = m - nb * rows
    head = resp_flat[:nb * ck * rows].reshape(nb, ck, rows)
    tail = resp_flat[nb * ck * rows:nb * ck * rows + ck * rem].reshape(ck, rem)
    return head, tail


def _score_params(x, params, chunk, per_sample=False):
    """Mean log-likelihood per sample (C,) of every parameter set, or the (C, n) values."""
    xp = _xp_of(x)
    n = x.shape[0]
    chains = params.shape[0]
    lse = xp.empty((chains, n), dtype=x.dtype)
    for s in range(0, n, chunk):
        assign(x, params, s, min(chunk, n - s), MODE_ARGMAX, lse=lse)
    return lse if per_sample else _mean_rows(lse)


def gibbs_stats(model, z, use_kernel: bool | None = None):
    """Counts (C, k), sums (C, k, p) and scatter (C, k, p, p), float64, of the indicators ``z`` (C, n).

    On the GPU a stable sort of ``z`` and the deterministic two-kernel reduction of ``mixture.cu``
    (O(n p^2) work, whatever k); on NumPy one-hot blocks times the design ``[1, x, vech(x x^T)]``.
    """
    return _unpack_stats(_gibbs_acc(model, z, use_kernel), model.x.shape[1])


def _gibbs_acc(model, z, use_kernel: bool | None = None):
    """The statistics of :func:`gibbs_stats` packed as ``[n_j, s1_j, vech(s2_j)]``, (C, k, q) float64."""
    xp = _xp_of(z)
    n, p = model.x.shape
    q = 1 + p + p * (p + 1) // 2
    if use_kernel is None:
        use_kernel = xp is not np and q <= _MAX_STATS_E and n < 2**31
    if use_kernel:
        return _stats_kernel(model, z)
    comp = xp.arange(model.k, dtype=np.int32)[None, :, None]
    acc = None
    for bi, s in enumerate(range(0, n, model.stats_rows)):
        e = min(n, s + model.stats_rows)
        y = model.y_blocks[bi] if model.y_blocks is not None else _y_block(model.x[s:e], xp)
        part = xp.matmul((z[:, None, s:e] == comp).astype(np.float64), y)  # one-hot (C, k, rows) x the design
        acc = part if acc is None else acc + part
    return acc


_STATS_CONSTS = memo.table("mixture.stats_consts", device_at=3)  # (chains, k, n, device) -> index arrays


def _stats_consts(xp, chains: int, k: int, n: int):
    """Per-chain key offsets, search values and gather indices of :func:`_stats_kernel` (cached per GPU)."""
    key = (chains, k, n, xp.cuda.runtime.getDevice())
    c = _STATS_CONSTS.get(key)
    if c is None:
        ch = np.arange(chains)[:, None]
        c = _STATS_CONSTS[key] = tuple(_backend.asarray(a, xp) for a in (
            ch.astype(np.int32) * k,                                   # key offsets (C, 1)
            ch.astype(np.int64) * n,                                   # row offsets (C, 1)
            np.arange(chains * k + 1, dtype=np.int32),                 # the keys searched for
            ch * k + np.arange(k + 1)[None, :]))                       # (C, k + 1) into the bounds
    return c


def _stats_kernel(model, z):
    x = model.x
    xp = _xp_of(z)
    n, p = x.shape
    k = model.k
    chains = z.shape[0]
    q = 1 + p + p * (p + 1) // 2
    off_k, off_n, search, gather = _stats_consts(xp, chains, k, n)
    # One stable sort of the keys z + chain * k: chain c's rows land at [c n, (c + 1) n), by component.
    # (cupy.bincount would read max(z) back to the host; searchsorted on the sorted keys does not.)
    # One chain (the offsets are 0 and the gather is the identity) skips those integer ops: the same values.
    one = chains == 1
    keys = z.ravel() if one else (z + off_k).ravel()
    order_flat = xp.argsort(keys, kind="stable")
    sorted_keys = keys[order_flat]
    # (new arrays of elementwise ops and gathers are C-contiguous, as the kernels read them)
    zs = sorted_keys.reshape(chains, n) if one else sorted_keys.reshape(chains, n) - off_k
    # the int64 difference stored as int32, in one launch (what subtracting and then astype(int32) give)
    order = xp.subtract(order_flat.reshape(chains, n), off_n, out=xp.empty((chains, n), dtype=np.int32),
                        casting="unsafe")
    bounds = xp.searchsorted(sorted_keys, search)  # int64
    offsets = bounds.reshape(1, k + 1) if one else bounds[gather] - off_n
    defines = dict(_defines(p, x.dtype))
    n_tiles = -(-n // defines["MIX_STATS_ROWS"])
    partial = xp.empty((chains, n_tiles + k, q), dtype=np.float64)
    out = xp.empty((chains, k, q), dtype=np.float64)
    fn = _kernel(p, x.dtype, "mixture_stats_partial")
    grid = int(min(n_tiles, 65535))
    fn((grid, chains), (defines["MIX_STATS_BLOCK"],),
       _kernel_args.args(FILE, "mixture_stats_partial", x=x, n=_loader.i64(n), order=order, zs=zs,
                         K=_loader.i32(k), n_tiles=_loader.i64(n_tiles), partial=partial))
    red = _kernel(p, x.dtype, "mixture_stats_reduce")
    red((int(min(-(-k * q // 256), 65535)), chains), (256,),
        _kernel_args.args(FILE, "mixture_stats_reduce", partial=partial, offsets=offsets, K=_loader.i32(k),
                          E=_loader.i32(q), n_tiles=_loader.i64(n_tiles), out=out))
    return out


# config.mixture_mean_block: values per partial sum of _mean_rows on the GPU; config.mixture_mean_min_blocks:
# shorter rows take one reduction (a few launches fewer where launches dominate)
def _mean_rows(a):
    """The float64 mean of each row of ``a`` (C, n); on the GPU in two deterministic passes, as
    :func:`_sum_rows` (one output per row would run on one block per row)."""
    xp = _xp_of(a)
    c, n = a.shape
    if xp is np or n // config.mixture_mean_block < config.mixture_mean_min_blocks:
        return a.mean(axis=1, dtype=np.float64)
    return _sum_rows(a) / n


def _sum_rows(a):
    """The float64 sum of each row of ``a`` (C, n), in two passes on the GPU (see :func:`_mean_rows`)."""
    xp = _xp_of(a)
    c, n = a.shape
    block = config.mixture_mean_block
    nb = n // block
    if xp is np or nb < config.mixture_mean_min_blocks:
        return a.sum(axis=1, dtype=np.float64)
    cut = nb * block
    tot = a[:, :cut].reshape(c, nb, block).sum(axis=2, dtype=np.float64).sum(axis=1)
    if cut < n:
        tot += a[:, cut:].sum(axis=1, dtype=np.float64)
    return tot


def niw_posterior(model, counts, s1, s2):
    """Posterior ``(kappa_n, m_n, df_n, Psi_n)`` of every component from weighted statistics, with
    ``Psi_n = Psi_0 + S2 + kappa0 m m^T - kappa_n m_n m_n^T``; empty components get the prior."""
    xp = _xp_of(s1)
    kn = model.kappa0 + counts
    mn = (model.kappa0 * model.m + s1) / kn[..., None]
    mm = model.m[:, None] * model.m[None, :]
    psi = model.psi0 + s2 + model.kappa0 * mm - kn[..., None, None] * (mn[..., :, None] * mn[..., None, :])
    psi = 0.5 * (psi + xp.swapaxes(psi, -1, -2))
    return kn, mn, model.df0 + counts, psi


def _posterior_kernel(model, acc, prior):
    """``mixture_niw_posterior``: :func:`niw_posterior` of the packed statistics ``acc`` in one launch."""
    xp = _xp_of(acc)
    chains, k, _ = acc.shape
    p = model.x.shape[1]
    kn, mn, dfn, psi = (xp.empty(s, dtype=np.float64) for s in ((chains, k), (chains, k, p), (chains, k),
                                                                 (chains, k, p, p)))
    fn = _kernel(p, model.x.dtype, "mixture_niw_posterior")
    n_comp = chains * k
    fn((-(-n_comp // 128),), (128,), _kernel_args.args(
        FILE, "mixture_niw_posterior", stats=xp.ascontiguousarray(acc), prior=prior, n_comp=_loader.i64(n_comp),
        kappa0=np.float64(model.kappa0), df0=np.float64(model.df0), kn_out=kn, mn_out=mn, df_out=dfn,
        psi_out=psi))
    return kn, mn, dfn, psi


def _packed_prior(model):
    """``[m, vech(Psi_0)]`` (float64, on the data's backend): the prior as the component kernels read it."""
    xp = _xp_of(model.x)
    p = model.x.shape[1]
    ti, tj = _tri(p, xp)
    psi0 = 0.5 * (model.psi0 + model.psi0.T)
    return xp.ascontiguousarray(xp.concatenate([model.m.astype(np.float64), psi0[ti, tj]]))


def _gibbs_params_twin(log_pi, mn, kn, sigma, eps, dtype):
    """Means ``mn + L eps / sqrt(kn)`` and kernel parameters of the drawn components (array code)."""
    xp = _xp_of(sigma)
    chol = _safe_cholesky(sigma)
    mu = mn + (chol @ eps[..., None])[..., 0] / xp.sqrt(kn)[..., None]
    return mu, kernel_params(log_pi, mu, chol, dtype)


def _gibbs_params_kernel(log_pi, mn, kn, sigma, eps, dtype):
    """``mixture_gibbs_params``: the twin's Cholesky factors, means and packing in one launch."""
    xp = _xp_of(sigma)
    chains, k, p = mn.shape
    dtype = np.dtype(dtype)
    q = 1 + p + p * (p + 1) // 2
    mu = xp.empty((chains, k, p), dtype=np.float64)
    params = xp.empty((chains, k, q), dtype=dtype)
    fn = _kernel(p, dtype, "mixture_gibbs_params")
    w = _comp_threads(p)
    c = xp.ascontiguousarray
    fn((-(-chains * k // w),), (w,), _kernel_args.args(
        FILE, "mixture_gibbs_params", sigma=c(sigma), mn=c(mn), kn=c(kn), eps=c(eps), log_pi=c(log_pi),
        n_comp=_loader.i64(chains * k), mu_out=mu, params=params))
    return mu, params
