"""Truncated Dirichlet-process Gaussian mixtures: blocked Gibbs and Bayesian EM.

The model of Suchard et al. (2010, Appendix A), for data ``x_1..x_n`` in R^p
and an upper bound of ``k`` components:

* ``(mu_j, Sigma_j) ~ N(mu_j | m, gamma Sigma_j) IW(Sigma_j | nu + 2, nu Phi)``
  independently over ``j``. ``IW(nu + 2, nu Phi)`` is written in West's
  parametrisation; in the usual one (density ``|Sigma|^{-(df + p + 1)/2}``)
  it is ``InvWishart(df = nu + p + 1, scale = nu Phi)``, whose mean is
  ``Phi``.
* Truncated stick-breaking weights: ``v_j ~ Be(1, alpha)`` for
  ``j < k``, ``v_k = 1``, ``pi_j = v_j prod_{r<j} (1 - v_r)``.
* ``alpha ~ Gamma(a, b)`` (shape ``a``, rate ``b``).

Functional layer: :func:`init` and :func:`step` (one Gibbs sweep of every
chain: configuration indicators, NIW draws, stick-breaking Betas, alpha),
:func:`bem_step` (one Bayesian-EM iterate of every start), over a
:class:`Model` that holds the data and the prior. The estimator
:class:`DPGaussianMixture` sits on top with scikit-learn's mixture API.

The hot loop is ``kernels_cu/mixture.cu``: one fused kernel per chunk of data
computes ``log pi_j + log N(x_i | mu_j, Sigma_j)`` from inverse Cholesky
factors and draws ``z_i`` by the Gumbel-max trick with Philox uniforms keyed by
the global data index, so chunked and unchunked runs give the same draws.
:func:`_assign_twin` is its array-code twin (on NumPy the logits are one
float64 GEMM of the design ``[1, x, vech(x x^T)]``, see :func:`_gemm_weights`;
:func:`_logits_twin` is the direct form). The Gibbs sufficient statistics come
from a stable sort of the indicators and two deterministic kernels of the same
file (:func:`gibbs_stats`), their twin from one-hot blocks times the design.
The component updates run one thread per component in the same file: the NIW
posterior (``mixture_niw_posterior``, twin :func:`niw_posterior`), the Gibbs
means and kernel parameters from the covariance draws (``mixture_gibbs_params``,
twin :func:`_gibbs_params_twin`). A BEM iterate is the fused kernel's
probabilities, their weighted statistics (one GEMM per chunk) and the
variational update of :func:`_bem_vb_update` (array code, a few dozen small
launches on the GPU), and never reads back to the host. (The plug-in modes of
the paper's BEM steps, once a kernel of their own, are gone: their modes never
cut a component back to zero weight.)
"""

from __future__ import annotations

import functools
import math
import time
from typing import NamedTuple

import numpy as np

from ... import _kernel_args, _loader
from ... import _validate
from ..._config import config, forward, memo
from ... import backend as _backend
from ...random._philox import philox_rounds, u01_f32
from ...sampling import Estimator, Monitor, as_data, run
from ...sampling._estimator import Integral, Interval, Real, StrOptions, mixin
from ... import shards as _shards
from ...shards import Shards

__all__ = ["DPGaussianMixture", "Model", "State", "Info", "init", "init_bem", "step", "bem_step", "make_bem_step",
           "make_model", "relabel", "relabel_costs", "align_draws", "make_sharded_models", "init_sharded",
           "make_sharded_step", "make_sharded_bem_step", "init_bem_sharded", "allreduce_bytes"]

_LOG_2PI = math.log(2.0 * math.pi)
MODE_SAMPLE, MODE_ARGMAX, MODE_RESP = 0, 1, 2
_MAX_KERNEL_P = 64          # larger p runs the array-code twin on the GPU too
_V_MAX = 1.0 - 2.0**-40     # sticks are kept below 1 so that log(1 - v) stays finite


# ---------------------------------------------------------------------------
# Model, state, priors
# ---------------------------------------------------------------------------

class Model(NamedTuple):
    """Data and prior of one fit (fixed during a run).

    x : (n, p) array of ``dtype`` — the data minus ``center``.
    center : (p,) float64 host array added back to reported means.
    m : (p,) float64 prior mean (centred coordinates); kappa0 = 1 / gamma.
    psi0 : (p, p) float64, ``nu Phi``; df0 = nu + p + 1.
    a, b : the Gamma(shape a, rate b) prior of alpha.
    k : the number of components; chunk : rows per launch of the probability (BEM) kernel;
    sample_rows : rows per launch of the Gibbs indicator kernel (all rows unless chunk_size is given);
    stats_rows : rows per block of the sufficient-statistics products.
    y_blocks : cached ``[1, x, x_a x_b (a <= b)]`` row blocks, or None.
    """

    x: object
    center: np.ndarray
    m: object
    kappa0: float
    psi0: object
    df0: float
    a: float
    b: float
    k: int
    chunk: int
    sample_rows: int
    stats_rows: int
    y_blocks: object


class State(NamedTuple):
    """State of every chain (leading axis: chain), or of every BEM start.

    z : (C, n) int32 configuration indicators (Gibbs; BEM leaves them empty).
    v : (C, k) float64 stick fractions (``v[:, -1] == 1``).
    log_pi : (C, k) float64 log weights.
    mu : (C, k, p) float64 component means (centred coordinates).
    sigma : (C, k, p, p) float64 component covariances.
    params : (C, k, Q) kernel parameters ``[c_j, U_j mu_j, vech(U_j)]`` of ``dtype``.
    alpha : (C,) float64 DP precision.
    counts : (C, k) float64 points per component (Gibbs) or summed probabilities (BEM).
    loglik : (C,) float64 mean log-likelihood per sample at the parameters the
        indicators (or probabilities) were computed from.
    """

    z: object
    v: object
    log_pi: object
    mu: object
    sigma: object
    params: object
    alpha: object
    counts: object
    loglik: object


class Info(NamedTuple):
    """Per-iteration diagnostics: ``n_active`` (C,) components holding data."""

    n_active: object


def _xp_of(a):
    return _backend.get_array_module(a)


_TRI_DEVICE = memo.table("mixture.tri", device_at=1)  # (p, device) -> the indices on that device, copied once


def _tri(p, xp=np):
    """Indices of the lower triangle in row-major order: (0,0), (1,0), (1,1), (2,0), ..."""
    if xp is np:
        return np.tril_indices(p)
    key = (p, xp.cuda.runtime.getDevice())
    idx = _TRI_DEVICE.get(key)
    if idx is None:
        ti, tj = np.tril_indices(p)
        idx = _TRI_DEVICE[key] = (xp.asarray(ti), xp.asarray(tj))
    return idx


def default_chunk(n: int, k: int, chains: int, itemsize: int, gpu: bool) -> int:
    """Rows per launch so that a (chains, k, rows) block stays within 256 MB (GPU) or 16 MB (CPU)."""
    budget = (256 if gpu else 16) * 2**20
    return int(max(256, min(n, budget // max(1, chains * k * itemsize))))


def make_model(x, k: int, *, dtype=np.float32, mean_prior=None, mean_precision_prior=None,
               covariance_prior=None, degrees_of_freedom_prior=None, alpha_prior=(1.0, 1.0),
               chunk_size=None, chains: int = 1, cache_bytes: int | None = None, moments=None) -> Model:
    """A :class:`Model` from data ``x`` (an (n, p) array on its backend) with data-based defaults.

    ``moments = (center, var)``, host float64 (p,) arrays, gives the column
    means and variances instead of computing them from ``x`` (a shard of the
    data takes those of the whole set, see :func:`make_sharded_models`).

    Defaults, for column means ``xbar`` and column variances ``s^2``:
    ``m = xbar``; ``Phi = diag(s^2) / 64`` (a component's prior covariance
    spans an eighth of the data's spread in each coordinate); ``nu = 2`` (a
    weak prior: the covariance of a component holding ``n_j`` points is
    ``(nu Phi + S_j) / (nu + n_j)``, so tight populations stay tight);
    ``gamma = 16`` (prior spread of the means ``gamma Phi = diag(s^2) / 4``,
    with the weight of 1/16 of a data point); ``alpha ~ Gamma(alpha_prior)``. A constant column is handled through the prior:
    its variance is floored at 1e-3 of the mean positive variance (or 1).
    """
    xp = _xp_of(x)
    n, p = x.shape
    dtype = np.dtype(dtype)
    if moments is None:
        xh = x.astype(np.float64)
        center = xh.mean(axis=0)
        var = ((xh - center) ** 2).mean(axis=0)
        var = _backend.to_host(var)
        center = _backend.to_host(center)
    else:
        center, var = (np.asarray(t, np.float64).reshape(p) for t in moments)
    pos = var[var > 0]
    floor = 1e-3 * (pos.mean() if pos.size else 1.0)
    var = np.maximum(var, floor)
    m = np.zeros(p) if mean_prior is None else np.asarray(mean_prior, np.float64).reshape(p) - center
    gamma = 16.0 if mean_precision_prior is None else 1.0 / float(mean_precision_prior)
    nu = 2.0 if degrees_of_freedom_prior is None else float(degrees_of_freedom_prior)
    if nu <= 0:
        raise ValueError(f"degrees_of_freedom_prior must be positive (nu in IW(nu + 2, nu Phi)), got {nu}.")
    if gamma <= 0 or not np.isfinite(gamma):
        raise ValueError("mean_precision_prior must be positive and finite.")
    if covariance_prior is None:
        phi = np.diag(var / 64.0)
    else:
        phi = np.asarray(covariance_prior, np.float64)
        if phi.ndim == 1:
            phi = np.diag(phi)
        if phi.shape != (p, p):
            raise ValueError(f"covariance_prior must be ({p}, {p}) or ({p},), got {phi.shape}.")
        try:
            np.linalg.cholesky(phi)
        except np.linalg.LinAlgError:
            raise ValueError("covariance_prior must be symmetric positive definite.") from None
    a, b = (float(t) for t in alpha_prior)
    if not (a > 0 and b > 0):
        raise ValueError(f"alpha_prior = (shape, rate) must be positive, got {alpha_prior}.")
    xc = (x - xp.asarray(center, dtype=x.dtype)).astype(dtype)
    xc = xp.ascontiguousarray(xc)
    gpu = xp is not np
    if chunk_size is None:
        chunk = default_chunk(n, k, chains, dtype.itemsize, gpu)
        sample_rows = n if gpu else chunk  # the kernel stores nothing per (row, component)
    else:
        chunk = int(chunk_size)
        if chunk < 1:
            raise ValueError(f"chunk_size must be a positive number of rows, got {chunk_size}.")
        sample_rows = chunk
    stats_rows = default_chunk(n, k, chains, dtype.itemsize, gpu)
    q = 1 + p + p * (p + 1) // 2
    cache_bytes = (1 << 30 if gpu else 1 << 28) if cache_bytes is None else cache_bytes
    y_blocks = None
    if n * q * 8 <= cache_bytes:
        y_blocks = [_y_block(xc[s:s + stats_rows], xp) for s in range(0, n, stats_rows)]
    return Model(xc, center, xp.asarray(m), 1.0 / gamma, xp.asarray(nu * phi), nu + p + 1.0, a, b, int(k),
                 chunk, sample_rows, stats_rows, y_blocks)


def _y_block(xb, xp):
    """``[1, x, x_a x_b for a <= b]`` of a block of rows, float64: the sufficient statistics' design.

    Statistics are summed in float64: a float32 sum of ``x x^T`` over many rows
    loses the scatter of a tight component far from the data's centre (its
    error grows like ``eps |mu|^2 n_j`` against ``sigma^2 n_j``).
    """
    xb = xb.astype(np.float64)
    p = xb.shape[1]
    ti, tj = _tri(p, xp)
    return xp.concatenate([xp.ones((xb.shape[0], 1), xb.dtype), xb, xb[:, ti] * xb[:, tj]], axis=1)


# ---------------------------------------------------------------------------
# Kernel parameters, the fused kernel and its twin
# ---------------------------------------------------------------------------

def kernel_params(log_pi, mu, chol, dtype):
    """Pack ``[c_j, U_j mu_j, vech(U_j)]`` per component from log weights, means and Cholesky factors."""
    xp = _xp_of(mu)
    p = mu.shape[-1]
    u = xp.linalg.inv(chol)
    u = xp.tril(u)
    b = (u @ mu[..., None])[..., 0]
    diag = xp.diagonal(chol, axis1=-2, axis2=-1)
    c = log_pi - xp.log(diag).sum(-1) - 0.5 * p * _LOG_2PI
    ti, tj = _tri(p, xp)
    return xp.ascontiguousarray(xp.concatenate([c[..., None], b, u[..., ti, tj]], axis=-1).astype(dtype))


def _unpack(params, p):
    xp = _xp_of(params)
    c = params[..., 0]
    b = params[..., 1:1 + p]
    u = xp.zeros(params.shape[:-1] + (p, p), dtype=params.dtype)
    ti, tj = _tri(p, xp)
    u[..., ti, tj] = params[..., 1 + p:]
    return c, b, u


def _logits_twin(xb, params):
    """Logits ``(C, k, m)`` of the rows ``xb`` (m, p): the array-code twin of the kernel's inner loop."""
    xp = _xp_of(xb)
    p = xb.shape[1]
    c, b, u = _unpack(params, p)
    y = xp.matmul(xb[None, None], xp.swapaxes(u, -1, -2)) - b[..., None, :]
    return c[..., None] - xp.asarray(0.5, dtype=xb.dtype) * (y * y).sum(-1)


def _gemm_weights(params, p):
    """Weights ``W`` (C, k, q), float64, with logits = ``W [1, x, vech(x x^T)]``.

    ``-|U x - b|^2 / 2 + c = c - b.b / 2 + (U^T b).x - x^T A x / 2`` with
    ``A = U^T U``; the off-diagonal entries of ``A`` count twice. A weight of
    zero (``c = -inf``) becomes -1e300, so that no BLAS product meets inf * 0.
    """
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
    """Gumbel noise ``(C, k, m)`` with the kernel's counter layout.

    ``n_total`` is the counter range per chain (the rows of the whole data
    set) and ``row0 + start`` the global index of the first row.
    """
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


def _twin_rows(chains, k, p):
    return max(64, (1 << 22) // max(1, chains * k * p))


def _assign_twin(x, params, start, m, mode, key, offset, z=None, lse=None, resp=None, design=None, row0=0,
                 ctr_rows=None):
    """NumPy/array-code twin of ``mixture_logits`` for rows ``start .. start+m-1``."""
    xp = _xp_of(x)
    n_total, p = x.shape
    ctr_rows = n_total if ctr_rows is None else int(ctr_rows)
    chains, k, _ = params.shape
    step_rows = _twin_rows(chains, k, p)
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
            finite = xp.isfinite(mx)
            mx0 = xp.where(finite, mx, 0)
            tot = mx0 + xp.log(xp.exp(lg - mx0[:, None, :]).sum(axis=1))
            if lse is not None:
                lse[:, s:e] = tot
            if mode == MODE_SAMPLE:
                g = _gumbel_twin(xp, chains, ctr_rows, s, e - s, k, x.dtype, key, offset, row0)
                z[:, s:e] = xp.argmax(lg + g, axis=1)
            elif mode == MODE_ARGMAX:
                if z is not None:
                    z[:, s:e] = xp.argmax(lg, axis=1)
            else:
                resp[:, :, s - start:e - start] = xp.exp(lg - tot[:, None, :])


_NAMES = ("mixture_logits<float>", "mixture_logits<double>", "mixture_stats_partial<float>",
          "mixture_stats_partial<double>",
          "mixture_gibbs_params<float>", "mixture_gibbs_params<double>")
_BLOCK = 256
FILE = "mixture.cu"
# config.mixture_gemm_rows: rows per block of the Bayesian-EM statistics GEMM (None: one GEMM per chunk);
# config.mixture_gemm_min_blocks: chunks of fewer blocks take one GEMM (there launches, not the GEMM, take
# the time); config.mixture_stats_rows: MIX_STATS_ROWS, sorted rows per block of the statistics kernel
forward(__name__, {"_GEMM_ROWS": "mixture_gemm_rows", "_GEMM_MIN_BLOCKS": "mixture_gemm_min_blocks",
                   "_STATS_ROWS": "mixture_stats_rows"})
_MAX_STATS_E = 1024  # the statistics kernel has one thread per entry of [1, x, vech(x x^T)]


def _comp_threads(p: int) -> int:
    """Components per block of the component kernels: one warp at most, 40 KB of shared memory."""
    tri = p * (p + 1) // 2
    return int(max(1, min(32, 40960 // (8 * (2 * tri + p)))))


# config.mixture_defines: overrides of the defines, e.g. (("MIX_ROWS", 2),) (for tuning runs; none by default)
forward(__name__, {"_TUNE": "mixture_defines"})
_DEFINES = memo.table("mixture.defines", device_at=None)  # (p, dtype, stats rows, overrides) -> the defines


def _defines(p: int, dtype) -> tuple:
    key = (p, np.dtype(dtype), config.mixture_stats_rows, tuple(sorted(dict(config.mixture_defines).items())))
    d = _DEFINES.get(key)
    if d is None:
        d = _DEFINES[key] = _defines_for(*key)
    return d


def _defines_for(p: int, dtype, stats_rows: int, tune: tuple) -> tuple:
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
    d = {"MIX_P": p, "MIX_TILE": tile, "MIX_ROWS": rows, "MIX_BLOCK": _BLOCK, "MIX_STATS_ROWS": stats_rows,
         "MIX_STATS_BLOCK": stats_block, "MIX_COMP_THREADS": _comp_threads(p), "MIX_MIN_BLOCKS": min_blocks}
    d.update(dict(tune))
    return tuple(d.items())


_PLAIN = ("mixture_stats_reduce", "mixture_niw_posterior")  # extern "C" kernels, not templates


def _kernel(p: int, dtype, which: str = "mixture_logits"):
    dtype = np.dtype(dtype)  # the defines are memoised per (p, dtype): pass a dtype, not a type
    name = which if which in _PLAIN else f"{which}<{'float' if dtype == np.float32 else 'double'}>"
    return _loader.get_function(FILE, name, _NAMES, defines=_defines(p, dtype))


def assign(x, params, start: int, m: int, mode: int, key=(0, 0), offset: int = 0, z=None, lse=None,
           resp=None, use_kernel: bool | None = None, design=None, scratch=None, block_rows=None, row0: int = 0,
           ctr_rows: int | None = None) -> None:
    """Run the configuration kernel (or its twin) on rows ``start .. start+m-1`` of ``x``.

    ``x`` may be one shard of a larger data set: ``row0`` is the global index
    of its first row and ``ctr_rows`` the rows of the whole set (None: ``x``
    is the whole set). The Gumbel noise of mode SAMPLE is keyed by the global
    row, so a shard draws what one device would draw for those rows.

    ``z`` (C, n) int32 and ``lse`` (C, n) are written at the rows' global
    indices; ``resp`` (C, k, m), contiguous, of ``x.dtype`` or float64, gets the
    chunk's probabilities (mode RESP). For float32 data and a float64 ``resp``
    the kernel keeps its float32 logits in ``scratch`` (C, k, m) (allocated
    when None) and writes the probabilities once, in float64; there
    ``block_rows = b`` lays them out in blocks of ``b`` rows (see
    :func:`_resp_blocks`), a flat ``resp`` of ``C k m`` values.
    """
    xp = _xp_of(x)
    n_total, p = x.shape
    chains, k, q = params.shape
    if m <= 0:
        return
    if resp is not None and resp.dtype not in (x.dtype, np.float64):
        raise TypeError(f"resp must be of the data's dtype or float64, got {resp.dtype}.")
    if use_kernel is None:
        use_kernel = xp is not np and p <= _MAX_KERNEL_P
    blocked = block_rows is not None and int(block_rows) < m
    if blocked and not (use_kernel and resp is not None and resp.dtype != x.dtype):
        raise ValueError("block_rows needs the kernel, float32 data and a float64 resp.")
    if not use_kernel:
        _assign_twin(x, params, start, m, mode, key, offset, z=z, lse=lse, resp=resp, design=design, row0=row0,
                     ctr_rows=ctr_rows)
        return
    fn = _kernel(p, x.dtype)
    defines = dict(_defines(p, x.dtype))
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


# ---------------------------------------------------------------------------
# Sufficient statistics and the NIW posterior
# ---------------------------------------------------------------------------

def _stats_from(weights_of, model: Model, chains: int):
    """Counts (C, k), sums (C, k, p) and scatter (C, k, p, p), float64, from per-block weights."""
    x = model.x
    xp = _xp_of(x)
    n, p = x.shape
    k = model.k
    acc = None
    for bi, s in enumerate(range(0, n, model.stats_rows)):
        e = min(n, s + model.stats_rows)
        y = model.y_blocks[bi] if model.y_blocks is not None else _y_block(x[s:e], xp)
        w = weights_of(s, e)  # (C, k, rows) of x.dtype
        part = xp.matmul(w.astype(np.float64), y)
        acc = part if acc is None else acc + part
    return acc


def gibbs_stats(model: Model, z, use_kernel: bool | None = None):
    """Counts (C, k), sums (C, k, p) and scatter (C, k, p, p), float64, of the indicators ``z`` (C, n).

    On the GPU: a stable sort of ``z`` and the deterministic two-kernel
    reduction of ``mixture.cu`` (O(n p^2) work, whatever k). Its twin, used on
    NumPy: one-hot blocks times the design ``[1, x, vech(x x^T)]``.
    """
    return _unpack_stats(_gibbs_acc(model, z, use_kernel), model.x.shape[1])


def _gibbs_acc(model: Model, z, use_kernel: bool | None = None):
    """The statistics of :func:`gibbs_stats` packed as ``[n_j, s1_j, vech(s2_j)]``, (C, k, q) float64."""
    xp = _xp_of(z)
    n, p = model.x.shape
    q = 1 + p + p * (p + 1) // 2
    if use_kernel is None:
        use_kernel = xp is not np and q <= _MAX_STATS_E and n < 2**31
    if use_kernel:
        return _stats_kernel(model, z)
    chains = z.shape[0]
    comp = xp.arange(model.k, dtype=np.int32)[None, :, None]
    return _stats_from(lambda s, e: (z[:, None, s:e] == comp).astype(np.float64), model, chains)


_STATS_CONSTS = memo.table("mixture.stats_consts", device_at=3)  # (chains, k, n, device) -> index arrays


def _stats_consts(xp, chains: int, k: int, n: int):
    """Per-chain key offsets, search values and gather indices of :func:`_stats_kernel` (cached on the GPU)."""
    key = (chains, k, n, None if xp is np else xp.cuda.runtime.getDevice())
    c = _STATS_CONSTS.get(key) if xp is not np else None
    if c is None:
        ch = np.arange(chains)[:, None]
        c = (ch.astype(np.int32) * k,                                  # key offsets (C, 1)
             ch.astype(np.int64) * n,                                  # row offsets (C, 1)
             np.arange(chains * k + 1, dtype=np.int32),                # the keys searched for
             ch * k + np.arange(k + 1)[None, :])                       # (C, k + 1) into the bounds
        c = tuple(_backend.asarray(a, xp) for a in c)
        if xp is not np:
            _STATS_CONSTS[key] = c
    return c


def _stats_kernel(model: Model, z):
    x = model.x
    xp = _xp_of(z)
    n, p = x.shape
    k = model.k
    chains = z.shape[0]
    q = 1 + p + p * (p + 1) // 2
    off_k, off_n, search, gather = _stats_consts(xp, chains, k, n)
    # One stable sort of the keys z + chain * k: chain c's rows land at [c n, (c + 1) n), by component.
    # (cupy.bincount would read max(z) back to the host; searchsorted on the sorted keys does not.)
    keys = (z + off_k).ravel()
    order_flat = xp.argsort(keys, kind="stable")
    sorted_keys = keys[order_flat]
    zs = xp.ascontiguousarray(sorted_keys.reshape(chains, n) - off_k)
    order = xp.ascontiguousarray((order_flat.reshape(chains, n) - off_n).astype(np.int32))
    offsets = xp.ascontiguousarray(xp.searchsorted(sorted_keys, search)[gather] - off_n, dtype=np.int64)
    n_tiles = -(-n // dict(_defines(p, x.dtype))["MIX_STATS_ROWS"])
    partial = xp.empty((chains, n_tiles + k, q), dtype=np.float64)
    out = xp.empty((chains, k, q), dtype=np.float64)
    defines = dict(_defines(p, x.dtype))
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
forward(__name__, {"_MEAN_BLOCK": "mixture_mean_block", "_MEAN_MIN_BLOCKS": "mixture_mean_min_blocks"})


def _mean_rows(a):
    """The float64 mean of each row of ``a`` (C, n).

    On the GPU in two passes, partial sums of ``config.mixture_mean_block`` values and then
    their sum: a reduction with one output per row would run on one block per
    row (benchmarks/NOTES.md has the time). Deterministic (no atomics).
    """
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


def _unpack_stats(acc, p):
    xp = _xp_of(acc)
    chains, k = acc.shape[:2]
    ti, tj = _tri(p, xp)
    s2 = xp.zeros((chains, k, p, p), dtype=np.float64)
    s2[..., ti, tj] = acc[..., 1 + p:]
    s2[..., tj, ti] = acc[..., 1 + p:]
    return acc[..., 0], acc[..., 1:1 + p], s2


def niw_posterior(model: Model, counts, s1, s2):
    """Posterior ``(kappa_n, m_n, df_n, Psi_n)`` of every component from weighted statistics.

    ``Psi_n = Psi_0 + S2 + kappa0 m m^T - kappa_n m_n m_n^T`` (the scatter about
    the mean plus the prior-to-mean term); empty components get the prior.
    """
    xp = _xp_of(s1)
    kn = model.kappa0 + counts
    mn = (model.kappa0 * model.m + s1) / kn[..., None]
    mm = model.m[:, None] * model.m[None, :]
    psi = model.psi0 + s2 + model.kappa0 * mm - kn[..., None, None] * (mn[..., :, None] * mn[..., None, :])
    psi = 0.5 * (psi + xp.swapaxes(psi, -1, -2))
    return kn, mn, model.df0 + counts, psi


def _posterior_kernel(model: Model, acc, prior):
    """``mixture_niw_posterior``: :func:`niw_posterior` of the packed statistics ``acc`` in one launch."""
    xp = _xp_of(acc)
    chains, k, _ = acc.shape
    p = model.x.shape[1]
    kn = xp.empty((chains, k), dtype=np.float64)
    mn = xp.empty((chains, k, p), dtype=np.float64)
    dfn = xp.empty((chains, k), dtype=np.float64)
    psi = xp.empty((chains, k, p, p), dtype=np.float64)
    fn = _kernel(p, model.x.dtype, "mixture_niw_posterior")
    n_comp = chains * k
    fn((-(-n_comp // 128),), (128,), _kernel_args.args(
        FILE, "mixture_niw_posterior", stats=xp.ascontiguousarray(acc), prior=prior, n_comp=_loader.i64(n_comp),
        kappa0=np.float64(model.kappa0), df0=np.float64(model.df0), kn_out=kn, mn_out=mn, df_out=dfn,
        psi_out=psi))
    return kn, mn, dfn, psi


def _log_pi(v):
    xp = _xp_of(v)
    lv = xp.log(v)
    l1 = xp.log1p(-xp.minimum(v, _V_MAX))
    before = xp.cumsum(l1, axis=-1) - l1
    return lv + before


def _safe_cholesky(s):
    xp = _xp_of(s)
    p = s.shape[-1]
    eye = xp.eye(p)
    scale = xp.abs(xp.diagonal(s, axis1=-2, axis2=-1)).mean(-1)[..., None, None]
    return xp.linalg.cholesky(s + 1e-10 * scale * eye)


# ---------------------------------------------------------------------------
# Gibbs
# ---------------------------------------------------------------------------

def init(rng, model: Model, chains: int = 1, z=True) -> State:
    """Starting states: means at random data points, covariances ``Phi``, equal weights."""
    x = model.x
    xp = _xp_of(x)
    n, p = x.shape
    k = model.k
    u = _backend.asarray(rng.random((chains, k), dtype=np.float64), xp)
    idx = xp.minimum((u * n).astype(np.int64), n - 1)
    mu = x[idx].astype(np.float64)
    zz = xp.zeros((chains, n), dtype=np.int32) if z else xp.zeros((chains, 0), dtype=np.int32)
    return _init_from_means(model, mu, zz)


def _init_from_means(model: Model, mu, zz) -> State:
    xp = _xp_of(mu)
    chains, k, p = mu.shape
    x = model.x
    phi = model.psi0 / (model.df0 - p - 1)
    sigma = xp.broadcast_to(phi, (chains, k, p, p)).copy()
    j = xp.arange(k, dtype=np.float64)
    v = xp.broadcast_to(1.0 / (k - j), (chains, k)).copy()
    log_pi = _log_pi(v)
    chol = _safe_cholesky(sigma)
    params = kernel_params(log_pi, mu, chol, x.dtype)
    alpha = xp.full((chains,), model.a / model.b)
    return State(zz, v, log_pi, mu, sigma, params, alpha, xp.zeros((chains, k)), xp.zeros((chains,)))


# config.mixture_kmeans_rows: rows of the subsample a BEM start's k-means++ sees (at most; at least 16 per
# component); config.mixture_kmeans_lloyd: Lloyd iterations on the subsample after the k-means++ seeding
forward(__name__, {"_KMEANS_ROWS": "mixture_kmeans_rows", "_KMEANS_LLOYD": "mixture_kmeans_lloyd"})


def _kmeans_rows(n: int, k: int) -> int:
    return int(min(n, max(16 * k, min(config.mixture_kmeans_rows, n))))


def _kmeanspp(xs, k: int, u):
    """k-means++ centres of the host rows ``xs`` (m, p), float64, then Lloyd iterations.

    ``u`` (k,) host uniforms make the choices (inverse CDF of the squared
    distances), so that a seed gives the same centres on every backend.
    Distances are ``|x|^2 - 2 x.c + |c|^2`` (one GEMM per Lloyd iteration);
    a centre that loses all its rows keeps its place.
    """
    m, p = xs.shape
    centres = np.empty((k, p))
    centres[0] = xs[min(int(u[0] * m), m - 1)]
    d2 = ((xs - centres[0]) ** 2).sum(1)
    for j in range(1, k):
        cum = np.cumsum(d2)
        if cum[-1] > 0:
            i = int(np.searchsorted(cum, u[j] * cum[-1], side="right"))
        else:  # every row sits on a centre already
            i = int(u[j] * m)
        centres[j] = xs[min(i, m - 1)]
        d2 = np.minimum(d2, ((xs - centres[j]) ** 2).sum(1))
    sq = (xs * xs).sum(1)
    for _ in range(config.mixture_kmeans_lloyd):
        lab = np.argmin(sq[:, None] - 2.0 * xs @ centres.T + (centres * centres).sum(1)[None, :], axis=1)
        sums = np.zeros((k, p))
        np.add.at(sums, lab, xs)
        cnt = np.bincount(lab, minlength=k)
        moved = cnt > 0
        new = centres.copy()
        new[moved] = sums[moved] / cnt[moved, None]
        if np.array_equal(new, centres):
            break
        centres = new
    return centres


def _bem_start_means(rng, n: int, k: int, starts: int, gather):
    """Starting means (starts, k, p), host float64: k-means++ on a subsample of rows for each start.

    ``gather(idx)`` returns the rows at global indices ``idx`` (starts, m) as a
    host float64 array (starts, m, p) (centred data). Each start takes its own
    subsample (rows drawn with replacement), so the starts differ.
    """
    m = _kmeans_rows(n, k)
    u = _backend.to_host(rng.random((starts, m + k), dtype=np.float64))
    idx = np.minimum((u[:, :m] * n).astype(np.int64), n - 1)
    rows = gather(idx)
    return np.stack([_kmeanspp(rows[s], k, u[s, m:]) for s in range(starts)])


def init_bem(rng, model: Model, starts: int = 1) -> State:
    """BEM starting states: means from k-means++ (and a few Lloyd iterations) on a subsample for each start,
    covariances ``Phi``, equal weights."""
    xp = _xp_of(model.x)
    n = model.x.shape[0]

    def gather(idx):
        return _backend.to_host(model.x[_backend.asarray(idx.ravel(), xp)].astype(np.float64)).reshape(
            idx.shape + (model.x.shape[1],))

    mu = _bem_start_means(rng, n, model.k, starts, gather)
    return _init_from_means(model, _backend.asarray(mu, xp), xp.zeros((starts, 0), dtype=np.int32))


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


def _use_component_kernel(xp, p) -> bool:
    return xp is not np and p <= _MAX_KERNEL_P


def make_step(model: Model):
    """``step(rng, state) -> (state, info)``: one blocked-Gibbs sweep of every chain (the paper's four steps).

    On the GPU the NIW posterior is one launch (``mixture_niw_posterior``;
    twin :func:`niw_posterior`), and so are the Cholesky factors, means and
    kernel parameters of the drawn components (``mixture_gibbs_params``; twin
    :func:`_gibbs_params_twin`).
    """
    x = model.x
    xp = _xp_of(x)
    n, p = x.shape
    draws = _make_global_draws(model)

    def step(rng, state: State):
        with _validate.validation(False):
            chains = state.z.shape[0]
            # (1) indicators from the current parameters, in chunks of rows.
            offset = rng.advance()
            z = state.z
            lse = xp.empty((chains, n), dtype=x.dtype)
            for s in range(0, n, model.sample_rows):
                assign(x, state.params, s, min(model.sample_rows, n - s), MODE_SAMPLE, rng.key, offset,
                       z=z, lse=lse)
            loglik = _mean_rows(lse)
            acc = _gibbs_acc(model, z)
            # (2)-(4) from the sufficient statistics
            return draws(rng, state, z, acc, loglik)

    return step


def _make_global_draws(model: Model):
    """``draws(rng, state, z, acc, loglik) -> (state, info)``: steps (2)-(4) of a Gibbs sweep.

    From the packed sufficient statistics ``acc`` (C, k, q), float64: the NIW
    draws, the sticks and alpha, and the next kernel parameters. These are the
    global draws of a sweep: with the data split over devices, every shard
    makes them from the same summed statistics and the same key.
    """
    xp = _xp_of(model.x)
    p = model.x.shape[1]
    k = model.k
    dtype = model.x.dtype
    kernel = _use_component_kernel(xp, p)
    gibbs_params = _gibbs_params_kernel if kernel else _gibbs_params_twin
    prior = _packed_prior(model) if kernel else None

    def draws(rng, state: State, z, acc, loglik):
        chains = acc.shape[0]
        counts = acc[..., 0]
        # (2) NIW draws; empty components draw from the prior.
        if kernel:
            kn, mn, dfn, psi = _posterior_kernel(model, acc, prior)
        else:
            kn, mn, dfn, psi = niw_posterior(model, *_unpack_stats(acc, p))
        sigma = rng.invwishart(dfn, psi, dtype=np.float64)
        eps = _backend.asarray(rng.standard_normal((chains, k, p), dtype=np.float64), xp)
        # (3) stick-breaking Betas: v_j ~ Be(1 + n_j, alpha + sum_{r>j} n_r).
        tail = counts.sum(axis=1, keepdims=True) - xp.cumsum(counts, axis=1)
        vb = rng.beta(1.0 + counts[:, :-1], state.alpha[:, None] + tail[:, :-1], dtype=np.float64)
        v = xp.concatenate([xp.clip(vb, 1e-300, _V_MAX), xp.ones((chains, 1))], axis=1)
        log_pi = _log_pi(v)
        # (4) alpha | v ~ Gamma(a + k - 1, b - sum_{j<k} log(1 - v_j)) (Ishwaran and James 2001).
        rate = model.b - xp.log1p(-v[:, :-1]).sum(axis=1)
        alpha = rng.gamma(xp.full((chains,), model.a + k - 1.0), 1.0 / rate, dtype=np.float64)
        alpha = xp.maximum(alpha, 1e-300)
        # (2, cont.) means mu_j = m_n + L_j eps_j / sqrt(kappa_n), and the kernel parameters.
        mu, params = gibbs_params(log_pi, mn, kn, sigma, eps, dtype)
        n_active = (counts > 0).sum(axis=1)
        return State(z, v, log_pi, mu, sigma, params, alpha, counts, loglik), Info(n_active)

    return draws


def step(rng, state: State, model: Model):
    """One Gibbs sweep (see :func:`make_step`, which builds the closure the driver calls)."""
    return make_step(model)(rng, state)


# ---------------------------------------------------------------------------
# Data-parallel Gibbs: the data and indicators split over devices
# ---------------------------------------------------------------------------

def make_sharded_models(X, k: int, shards: Shards, **kwargs) -> list:
    """One :class:`Model` per local shard of ``X`` (rows split by ``shards.bounds``).

    The column means and variances behind the defaults and the centring are
    those of the whole data set, summed over the shards (two all-reduces of
    ``p`` values), so every shard has the same prior. ``kwargs`` go to
    :func:`make_model`.
    """
    n, p = X.shape
    if n < shards.world:
        raise ValueError(f"{n} rows cannot be split over {shards.world} shards: use fewer devices.")
    xp = shards.xp
    parts = shards.scatter(X)
    sums = []
    for i, part in enumerate(parts):
        with shards.on(i):
            sums.append(xp.ascontiguousarray(part.astype(np.float64).sum(axis=0)))
    center = _backend.to_host(shards.allreduce(sums)[0]) / n
    sq = []
    for i, part in enumerate(parts):
        with shards.on(i):
            sq.append(xp.ascontiguousarray(((part.astype(np.float64) - xp.asarray(center)) ** 2).sum(axis=0)))
    var = _backend.to_host(shards.allreduce(sq)[0]) / n
    models = []
    for i, part in enumerate(parts):
        with shards.on(i):
            models.append(make_model(part, k, moments=(center, var), **kwargs))
    return models


def init_sharded(rng, models: list, shards: Shards, n: int, chains: int = 1, z: bool = True) -> State:
    """:func:`init` over shards: the same starting state as one device for the same ``rng``.

    The global fields live on local shard 0's device; ``z`` is a tuple of the
    shards' indicators. The starting means are data points, gathered from the
    shards that hold them by an all-reduce of (chains, k, p) values.
    """
    xp = shards.xp
    k = models[0].k
    p = models[0].x.shape[1]
    with shards.on(0):
        u = _backend.asarray(rng.random((chains, k), dtype=np.float64), xp)
        idx = _backend.to_host(xp.minimum((u * n).astype(np.int64), n - 1))
    mu = _gather_rows(models, shards, n, idx)
    zs = []
    for i, model in enumerate(models):
        with shards.on(i):
            zs.append(xp.zeros((chains, model.x.shape[0] if z else 0), dtype=np.int32))
    with shards.on(0):
        return _init_from_means(models[0], mu.reshape(chains, k, p), tuple(zs))


def _gather_rows(models: list, shards: Shards, n: int, idx):
    """Rows ``idx`` (host integers, any shape) of the data split over ``shards``, float64, on shard 0's
    device: each shard fills the rows it holds and zeros elsewhere, and one all-reduce sums them."""
    xp = shards.xp
    bufs = []
    for i, (model, (a, b)) in enumerate(zip(models, shards.bounds(n))):
        with shards.on(i):
            mine = (idx >= a) & (idx < b)
            local = np.where(mine, idx - a, 0)
            rows = model.x[_backend.asarray(local, xp)].astype(np.float64)
            bufs.append(xp.ascontiguousarray(xp.where(_backend.asarray(mine, xp)[..., None], rows, 0.0)))
    return shards.allreduce(bufs)[0]


def init_bem_sharded(rng, models: list, shards: Shards, n: int, starts: int = 1) -> State:
    """:func:`init_bem` over shards: the same starting state as one device for the same ``rng``.

    The subsample's rows are gathered from the shards that hold them by one
    all-reduce of (starts, m, p) values.
    """
    xp = shards.xp
    p = models[0].x.shape[1]

    def gather(idx):
        return _backend.to_host(_gather_rows(models, shards, n, idx)).reshape(idx.shape + (p,))

    with shards.on(0):
        mu = _bem_start_means(rng, n, models[0].k, starts, gather)
        return _init_from_means(models[0], _backend.asarray(mu, xp), xp.zeros((starts, 0), dtype=np.int32))


def make_sharded_step(models: list, shards: Shards, n: int):
    """``step(rng, state) -> (state, info)``: one Gibbs sweep with the data split over ``shards``.

    Each shard draws the indicators of its rows, with Gumbel noise keyed by
    the global row (so the indicators are those one device draws), and sums
    its statistics ``[n_j, s1_j, vech(s2_j)]`` and its log-likelihood; one
    all-reduce of ``chains (k q + 1)`` float64 values per sweep adds them up;
    the global draws (NIW, sticks, alpha) follow from the sums with the same
    key. In one process they are made once, on local shard 0's device, and the
    kernel parameters are copied to the other devices; processes of a Dask
    cluster (:func:`gpumcmc.shards.join_dask`) each make them, identically.
    The sums over shards add the same terms in another order than one
    device does, so the draws equal one device's up to that rounding (exactly
    where the sums are exact, e.g. data on a coarse dyadic grid).
    """
    xp = shards.xp
    k = models[0].k
    p = models[0].x.shape[1]
    q = 1 + p + p * (p + 1) // 2
    dtype = models[0].x.dtype
    bounds_ = shards.bounds(n)
    with shards.on(0):
        draws = _make_global_draws(models[0])

    def step(rng, state: State):
        with _validate.validation(False):
            chains = state.params.shape[0]
            offset = rng.advance()
            copies = _shards.Replica(shards, state.params)
            # Every shard's indicator kernel is queued before any shard's statistics: queuing a shard's
            # statistics takes host time (a sort and several small kernels; benchmarks/NOTES.md), which in
            # one loop would start each GPU's indicator kernel that much after the previous GPU's.
            lses = []
            for i, (model, (a, _)) in enumerate(zip(models, bounds_)):
                params = copies(i)
                with shards.on(i):
                    ni = model.x.shape[0]
                    lse = xp.empty((chains, ni), dtype=dtype)
                    for s in range(0, ni, model.sample_rows):
                        assign(model.x, params, s, min(model.sample_rows, ni - s), MODE_SAMPLE, rng.key, offset,
                               z=state.z[i], lse=lse, row0=a, ctr_rows=n)
                    lses.append(lse)
            bufs = []
            for i, model in enumerate(models):
                with shards.on(i):
                    acc = _gibbs_acc(model, state.z[i])
                    ll = _sum_rows(lses[i])
                    bufs.append(xp.ascontiguousarray(xp.concatenate([acc.reshape(chains, k * q), ll[:, None]], axis=1)))
            total = shards.allreduce(bufs)[0]
            with shards.on(0):
                acc = total[:, :k * q].reshape(chains, k, q)
                return draws(rng, state, state.z, acc, total[:, k * q] / n)

    return step


def make_sharded_bem_step(models: list, shards: Shards, n: int):
    """``bem(state) -> state``: one Bayesian-EM iterate of every start with the data split over ``shards``.

    Each shard computes its rows' configuration probabilities and their
    weighted statistics (:func:`make_bem_step`'s steps (1)-(2)) and the sum of
    its log-likelihoods; one all-reduce of ``starts (k q + 1)`` float64 values
    adds them up, and the update (steps (2)-(4), deterministic) follows on
    local shard 0's device (in every process of a Dask cluster, identically).
    The iterates equal one device's up to the rounding of the sums' order.
    """
    xp = shards.xp
    k = models[0].k
    p = models[0].x.shape[1]
    q = 1 + p + p * (p + 1) // 2
    stats = []
    for i, model in enumerate(models):
        with shards.on(i):
            stats.append(_make_bem_stats(model))

    def bem(state: State) -> State:
        with _validate.validation(False):
            chains = state.params.shape[0]
            copies = _shards.Replica(shards, state.params)
            bufs = []
            for i in range(len(models)):
                params = copies(i)
                with shards.on(i):
                    acc, lse = stats[i](params)
                    bufs.append(xp.ascontiguousarray(
                        xp.concatenate([acc.reshape(chains, k * q), _sum_rows(lse)[:, None]], axis=1)))
            total = shards.allreduce(bufs)[0]
            with shards.on(0):
                acc = xp.ascontiguousarray(total[:, :k * q].reshape(chains, k, q))
                return _bem_update(models[0], state, acc, total[:, k * q] / n)

    return bem


def _sharded_score(models: list, shards: Shards, params, n: int):
    """Mean log-likelihood per sample (C,) of every parameter set, the data split over ``shards``."""
    xp = shards.xp
    copies = _shards.Replica(shards, params)
    sums = []
    for i, model in enumerate(models):
        pi = copies(i)
        with shards.on(i):
            lse = _score_params(model.x, pi, model.chunk, per_sample=True)
            sums.append(xp.ascontiguousarray(_sum_rows(lse)))
    return shards.allreduce(sums)[0] / n


def allreduce_bytes(k: int, p: int, chains: int = 1) -> int:
    """Bytes all-reduced per Gibbs sweep or BEM iterate with the data split over devices.

    ``chains (k q + 1)`` float64 values (``chains``: Gibbs chains or BEM starts).
    """
    q = 1 + p + p * (p + 1) // 2
    return 8 * chains * (k * q + 1)


# ---------------------------------------------------------------------------
# Bayesian EM
# ---------------------------------------------------------------------------

def _gammaln(x):
    xp = _xp_of(x)
    if xp is np:
        from scipy.special import gammaln
    else:
        from cupyx.scipy.special import gammaln
    return gammaln(x)


def _bem_kl(model: Model, state: State):
    """The KL divergences of a BEM state's variational posteriors from the prior, summed, (C,) float64.

    Sticks ``Be(1 + p_j, alpha + tail_j)`` against ``Be(1, alpha)`` (at the
    state's ``E alpha``) and every component's NIW posterior against the NIW
    prior (zero for a pruned component, whose posterior is the prior). With
    the mean log-sum-exp of the E-step at the state's parameters, ``n`` times
    that less this is the variational lower bound (alpha's own term left out:
    it is the same order for every start).
    """
    xp = _xp_of(state.counts)
    p = model.x.shape[1]
    counts = state.counts
    alpha = state.alpha[:, None]
    tail = counts.sum(axis=1, keepdims=True) - xp.cumsum(counts, axis=1)
    g1, g2 = 1.0 + counts[:, :-1], alpha + tail[:, :-1]
    dg = _digamma(g1 + g2)
    # log B(1, alpha) = -log alpha
    kl_v = (-xp.log(alpha) - (_gammaln(g1) + _gammaln(g2) - _gammaln(g1 + g2))
            + (g1 - 1.0) * (_digamma(g1) - dg) + (g2 - alpha) * (_digamma(g2) - dg)).sum(axis=1)
    kn = model.kappa0 + counts
    dfn = model.df0 + counts
    psi = state.sigma * (dfn - p - 1)[..., None, None]
    chol = _safe_cholesky(psi)
    logdet_n = 2.0 * xp.log(xp.diagonal(chol, axis1=-2, axis2=-1)).sum(-1)
    psi0 = 0.5 * (model.psi0 + model.psi0.T)
    logdet_0 = 2.0 * xp.log(xp.diagonal(xp.linalg.cholesky(psi0))).sum()
    inv_n = xp.linalg.inv(psi)
    tr = (psi0[None, None] * inv_n).sum(axis=(-2, -1))  # tr(Psi_0 Psi_n^-1), both symmetric
    i = xp.arange(p, dtype=np.float64)
    lmg_n = _gammaln((dfn[..., None] - i) / 2.0).sum(-1)
    lmg_0 = _gammaln((model.df0 - i) / 2.0).sum()
    dmg_n = _digamma((dfn[..., None] - i) / 2.0).sum(-1)
    df0 = model.df0
    # Wishart(df_n, Psi_n^-1) against Wishart(df_0, Psi_0^-1)
    kl_w = (-0.5 * df0 * (logdet_0 - logdet_n) + 0.5 * dfn * (tr - p) + lmg_0 - lmg_n
            + 0.5 * (dfn - df0) * dmg_n)
    d = state.mu - model.m
    quad = (d[..., :, None] * inv_n * d[..., None, :]).sum(axis=(-2, -1)) * dfn
    kl_m = 0.5 * (p * model.kappa0 / kn - p + p * xp.log(kn / model.kappa0) + model.kappa0 * quad)
    live = xp.isfinite(state.log_pi)
    return kl_v + xp.where(live, kl_w + kl_m, 0.0).sum(axis=1)


def _packed_prior(model: Model):
    """``[m, vech(Psi_0)]`` (float64, on the data's backend): the prior as the component kernels read it."""
    xp = _xp_of(model.x)
    p = model.x.shape[1]
    ti, tj = _tri(p, xp)
    psi0 = 0.5 * (model.psi0 + model.psi0.T)
    return xp.ascontiguousarray(xp.concatenate([model.m.astype(np.float64), psi0[ti, tj]]))


def make_bem_step(model: Model):
    """``bem(state) -> state``: one Bayesian-EM iterate of every start (the paper's four BEM steps).

    (1) The configuration probabilities, chunk by chunk: on the GPU the fused
    kernel writes them once, in float64 (for float32 data, in blocks of
    ``config.mixture_gemm_rows`` rows); (2) their weighted statistics, one float64 GEMM per
    chunk with the design ``[1, x, vech(x x^T)]``, batched over the blocks
    where a chunk holds at least ``config.mixture_gemm_min_blocks`` of them (float64
    because a float32 sum of ``x x^T`` loses the scatter of a tight component
    far from the data's centre); (2)-(4) the variational update of the NIW,
    stick and alpha posteriors and the next E-step's kernel parameters
    (:func:`_bem_vb_update`, which also holds components of too little
    support at zero weight). Nothing is read back to the host. The closure keeps its scratch buffers (probabilities,
    logits, log-sum-exp) between calls; returned states never share memory
    with them.
    """
    stats = _make_bem_stats(model)

    def bem(state: State) -> State:
        with _validate.validation(False):
            acc, lse = stats(state.params)
            loglik = _mean_rows(lse)
            return _bem_update(model, state, acc, loglik)

    return bem


def _bem_update(model: Model, state: State, acc, loglik) -> State:
    """Steps (2)-(4) of a BEM iterate from the weighted statistics ``acc`` (C, k, q): :func:`_bem_vb_update`."""
    v, log_pi, mu, sigma, params, alpha, counts = _bem_vb_update(model, acc, state.alpha)
    return State(state.z, v, log_pi, mu, sigma, params, alpha, counts, loglik)


def _prune_count(p: int) -> float:
    """Summed probability below which BEM holds a component at zero weight: half the number of free
    parameters of a component's mean and covariance, ``(p + p (p + 1) / 2) / 2`` events (Figueiredo and
    Jain 2002: a component with less support than that does not pay for its parameters). With the default
    covariance prior a handful of points far in a cluster's tail otherwise keeps a tight component of its
    own, which takes those points from the cluster."""
    return 0.5 * (p + p * (p + 1) / 2)


def _digamma(x):
    xp = _xp_of(x)
    if xp is np:
        from scipy.special import digamma
    else:
        from cupyx.scipy.special import digamma
    return digamma(x)


def _bem_vb_update(model: Model, acc, alpha):
    """Steps (2)-(4) of a BEM iterate as a mean-field variational update of the truncated DP mixture.

    From the weighted statistics ``acc`` (C, k, q), float64: the NIW posterior
    of every component (step 2), the Beta posteriors of the sticks
    ``Be(1 + p_j, alpha + sum_{r>j} p_r)`` (step 3) and alpha's Gamma posterior
    ``Gamma(a + k - 1, b - sum_j E log(1 - v_j))`` (step 4), as in Blei and
    Jordan (2006). The next configuration probabilities use the expected log
    weights and log densities, ``E log pi_j + E log N(x | mu_j, Sigma_j)``:
    a component that holds few points pays for its uncertainty there, and the
    truncated stick-breaking prior drains it. The plug-in modes of the paper's
    step 3 never reach zero (a Beta mode with first parameter ``1 + p_j > 1``
    is positive), and with k-means++ starts every component keeps its share.
    A component whose probabilities sum to less than :func:`_prune_count`
    events (10 at p = 5, 59.5 at p = 14) is held at zero weight from then on
    (its probabilities are exactly zero).

    Returns ``v, log_pi, mu, sigma, params, alpha, counts``: the sticks' and
    weights' posterior means (log weights ``log E pi_j``, -inf for pruned
    components), the NIW posterior means of ``mu`` and ``Sigma``, the kernel
    parameters of the next E-step, ``E alpha`` and the summed probabilities,
    with the components in order of decreasing summed probability. Array code,
    the same on NumPy and CuPy.
    """
    xp = _xp_of(acc)
    p = model.x.shape[1]
    k = model.k
    chains = acc.shape[0]
    # the sticks in order of decreasing size (Kurihara, Welling and Vlassis 2007): the prior's mass goes
    # to the large components first, and the small ones, last, are drained faster
    order = xp.argsort(-acc[..., 0], axis=1, kind="stable")
    acc = xp.take_along_axis(acc, order[..., None], axis=1)
    counts, s1, s2 = _unpack_stats(acc, p)
    dead = counts < _prune_count(p)
    dead[:, 0] = False  # the largest component stays, however few the events (n < the prune count)
    counts = xp.where(dead, 0.0, counts)
    kn, mn, dfn, psi = niw_posterior(model, counts, s1 * ~dead[..., None], s2 * ~dead[..., None, None])
    sigma = psi / (dfn - p - 1)[..., None, None]
    chol = _safe_cholesky(psi)
    logdet = 2.0 * xp.log(xp.diagonal(chol, axis1=-2, axis2=-1)).sum(-1)
    # E log|Lambda| for Lambda ~ Wishart(df_n, Psi_n^-1)
    i = xp.arange(p, dtype=np.float64)
    elogdet = _digamma((dfn[..., None] - i) / 2.0).sum(-1) + p * math.log(2.0) - logdet
    # sticks: Be(1 + p_j, alpha + tail_j), j < k
    tail = counts.sum(axis=1, keepdims=True) - xp.cumsum(counts, axis=1)
    g1 = 1.0 + counts[:, :-1]
    g2 = alpha[:, None] + tail[:, :-1]
    dg = _digamma(g1 + g2)
    elv = _digamma(g1) - dg
    el1v = _digamma(g2) - dg
    zero = xp.zeros((chains, 1))
    elogpi = xp.concatenate([elv, zero], axis=1) + xp.concatenate([zero, xp.cumsum(el1v, axis=1)], axis=1)
    ev = g1 / (g1 + g2)
    v = xp.concatenate([ev, xp.ones((chains, 1))], axis=1)
    v = xp.where(dead, 0.0, v)
    with np.errstate(divide="ignore"):
        log_pi = _log_pi(v)
    # pruned components come last (they hold the least): the stick they leave goes to the others
    top = log_pi.max(axis=1, keepdims=True)
    log_pi = log_pi - (top + xp.log(xp.exp(log_pi - top).sum(axis=1, keepdims=True)))
    alpha_new = (model.a + k - 1.0) / (model.b - el1v.sum(axis=1))
    # E-step parameters: the quadratic form of E Lambda = df_n Psi_n^-1 (factor chol / sqrt(df_n)) and the
    # constant E log pi_j + E log|Lambda| / 2 - p / (2 kappa_n) - p log(2 pi) / 2
    scaled = chol / xp.sqrt(dfn)[..., None, None]
    # kernel_params adds -sum log diag(scaled) = (p log df_n - log|Psi_n|) / 2; take it back out
    c = elogpi + 0.5 * elogdet - 0.5 * (p * xp.log(dfn) - logdet) - 0.5 * p / kn
    c = xp.where(dead, -xp.inf, c)
    params = kernel_params(c, mn, scaled, model.x.dtype)
    return v, log_pi, mn, sigma, params, alpha_new, counts


def _make_bem_stats(model: Model):
    """``stats(params) -> (acc, lse)``: step (1) of a BEM iterate and its weighted statistics.

    ``acc`` (C, k, q) float64 packs ``[sum_i r_ij, sum_i r_ij x_i, vech(sum_i r_ij x_i x_i^T)]``
    and ``lse`` (C, n) holds each row's log-likelihood (a buffer of the closure,
    overwritten by the next call).
    """
    x = model.x
    xp = _xp_of(x)
    n, p = x.shape
    k = model.k
    q = 1 + p + p * (p + 1) // 2
    kernel = _use_component_kernel(xp, p)
    # Row blocks of the float64 probabilities (float32 data on the GPU): the chunk's GEMM
    # (C k, m) x (m, q) has few output tiles and a long inner dimension; one batched GEMM over
    # blocks of config.mixture_gemm_rows rows keeps every tile busy, and the blocks' products are summed after.
    gemm_rows, min_blocks = config.mixture_gemm_rows, config.mixture_gemm_min_blocks
    blocks = gemm_rows if (kernel and x.dtype == np.float32 and gemm_rows) else None
    spans = [(s, min(n, s + model.chunk)) for s in range(0, n, model.chunk)]
    cached = model.y_blocks is not None and model.chunk == model.stats_rows
    buffers: dict = {}

    def scratch(chains):
        b = buffers.get(chains)
        if b is None:
            size = chains * k * (spans[0][1] - spans[0][0])
            # float32 logits beside the float64 probabilities (the kernel on float32 data only)
            logits = xp.empty(size, dtype=x.dtype) if kernel and x.dtype != np.float64 else None
            parts = xp.empty((len(spans), chains * k, q), dtype=np.float64) if len(spans) > 1 else None
            b = buffers[chains] = (xp.empty(size, dtype=np.float64), logits, xp.empty((chains, n), dtype=x.dtype),
                                   parts)
        return b

    def stats(params):
        chains = params.shape[0]
        resp_flat, logits_flat, lse, parts = scratch(chains)
        with _validate.validation(False):
            # (1) configuration probabilities, chunk by chunk, (2) their weighted statistics.
            acc = None
            for ci, (s, e) in enumerate(spans):
                m = e - s
                resp = resp_flat[:chains * k * m].reshape(chains, k, m)
                logits = None if logits_flat is None else logits_flat[:chains * k * m].reshape(chains, k, m)
                y = model.y_blocks[ci] if cached else _y_block(x[s:e], xp)
                if blocks is not None and m >= min_blocks * blocks:
                    assign(x, params, s, m, MODE_RESP, lse=lse, resp=resp_flat, scratch=logits,
                           block_rows=blocks)
                    head, tail = _resp_blocks(resp_flat, blocks, m, chains * k)
                    nb = head.shape[0]
                    # (nb, C k, rows) x (nb, rows, q), summed over the blocks in order
                    part = xp.matmul(head, y[:nb * blocks].reshape(nb, blocks, q)).sum(axis=0)
                    if tail.shape[1]:
                        part += xp.matmul(tail, y[nb * blocks:m])
                    if parts is None:
                        acc = part
                    else:
                        parts[ci] = part
                    continue
                assign(x, params, s, m, MODE_RESP, lse=lse, resp=resp, design=y, scratch=logits)
                # one GEMM for every start: (C k, m) x (m, q)
                if parts is None:
                    acc = xp.matmul(resp.reshape(chains * k, m), y)
                else:
                    xp.matmul(resp.reshape(chains * k, m), y, out=parts[ci])
            if parts is not None:
                acc = parts.sum(axis=0)
        return acc.reshape(chains, k, q), lse

    return stats


def bem_step(model: Model, state: State) -> State:
    """One Bayesian-EM iterate of every start (see :func:`make_bem_step`, which keeps buffers between calls)."""
    return make_bem_step(model)(state)


# ---------------------------------------------------------------------------
# Relabelling
# ---------------------------------------------------------------------------

def relabel_costs(means, reference, scale=None, weights=None, reference_weights=None,
                  weight_cost: float = 100.0):
    """Assignment costs (D, k, k) of every draw's components (rows) against the reference's (columns).

    ``cost[d, j, l] = |mu_dj - ref_l|^2 / scale^2 + weight_cost (sqrt w_dj - sqrt ref_w_l)^2`` for
    ``means`` (..., k, p) flattened to D draws, one batched expression on the
    backend of ``means`` (on the GPU, a few launches for all the draws together).
    """
    xp = _xp_of(means)
    means = xp.asarray(means, dtype=np.float64)
    ref = _backend.asarray(reference, xp, np.float64)
    k, p = ref.shape
    scale = xp.ones(p) if scale is None else _backend.asarray(scale, xp, np.float64)
    flat = means.reshape(-1, k, p)
    cost = (((flat[:, :, None, :] - ref[None, None, :, :]) / scale) ** 2).sum(-1)
    if weights is not None and reference_weights is not None:
        sw = xp.sqrt(_backend.asarray(weights, xp, np.float64).reshape(-1, k))
        sref = xp.sqrt(_backend.asarray(reference_weights, xp, np.float64))
        cost = cost + weight_cost * (sw[:, :, None] - sref[None, None, :]) ** 2
    return cost


def relabel(means, reference, scale=None, weights=None, reference_weights=None, weight_cost: float = 100.0,
            block_bytes: int | None = None, workers: int | None = None):
    """Permutations aligning each draw's components to ``reference`` by their means (and weights).

    ``means`` is (..., k, p), on the host or the GPU; ``reference`` (k, p).
    Returns host int indices ``perm`` of shape (..., k) with
    ``means[..., perm, :]`` matched to the reference components in order, from
    a linear assignment per draw on the cost of :func:`relabel_costs`
    ``|mu_j - ref_l|^2 / scale^2 + weight_cost (sqrt w_j - sqrt ref_w_l)^2``.
    The weight term keeps the means of empty components, which are prior draws
    scattered over the data, from taking the label of an occupied one.

    The cost matrices are built by one batched expression on the backend of
    ``means`` for blocks of draws (a block's (draws, k, k, p) differences stay
    within ``block_bytes``: 256 MB on the GPU, 32 MB on the host by default).
    The (k, k) assignments are solved on the host by
    :func:`scipy.optimize.linear_sum_assignment`, which releases the GIL: on
    ``workers`` threads (None: one per CPU core this process may use), while
    the next block's costs are built and copied (on the GPU into page-locked
    memory). Each draw's assignment is the one a serial loop finds.
    """
    xp = _xp_of(means)
    means = means if hasattr(means, "reshape") else np.asarray(means, dtype=np.float64)
    k, p = np.shape(reference)
    flat = means.reshape(-1, k, p)
    wflat = None if weights is None else xp.asarray(weights).reshape(-1, k)
    if block_bytes is None:
        block_bytes = (256 if xp is not np else 32) * 2**20
    pool = _lsa_pool(workers)
    n_workers = pool._max_workers if pool is not None else 1
    # blocks of two draws per worker, so that solving one block overlaps building and copying the next
    step = max(1, min(int(block_bytes) // (k * k * p * 8), 2 * n_workers))
    d_total = flat.shape[0]
    perm = np.empty((d_total, k), dtype=np.int64)
    buffers = _HostBuffers(xp, 2, (min(step, d_total), k, k))
    pending = [None, None]  # the futures still reading each host buffer
    for bi, s in enumerate(range(0, d_total, step)):
        e = min(d_total, s + step)
        cost_dev = relabel_costs(flat[s:e], reference, scale, None if wflat is None else wflat[s:e],
                                 reference_weights, weight_cost)
        slot = bi % 2
        if pending[slot] is not None:  # the block two back must be solved before its buffer is refilled
            for f in pending[slot]:
                f.result()
        cost = buffers.fill(slot, cost_dev)
        if pool is None:
            for d in range(e - s):
                _solve_one(cost, d, perm, s + d)
            continue
        pending[slot] = [pool.submit(_solve_one, cost, d, perm, s + d) for d in range(e - s)]
    for fs in pending:
        for f in fs or ():
            f.result()
    return perm.reshape(means.shape[:-1])


def _solve_one(cost, d, perm, row):
    """``perm[row]`` from the assignment of the cost matrix ``cost[d]`` (host)."""
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(cost[d])
    perm[row, cols] = rows


_POOLS = memo.table("mixture.lsa_pools", device_at=None)  # (pid, workers) -> the thread pool


def _lsa_pool(workers=None):
    """A shared thread pool for the assignments (None where one thread is all there is)."""
    import os

    if workers is None:
        try:
            workers = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            workers = os.cpu_count() or 1
    workers = int(workers)
    if workers < 1:
        raise ValueError(f"workers must be a positive number of threads, got {workers}.")
    if workers == 1:
        return None
    key = (os.getpid(), workers)  # a forked child makes its own: the parent's threads are not in it
    pool = _POOLS.get(key)
    if pool is None:
        from concurrent.futures import ThreadPoolExecutor

        pool = _POOLS[key] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gpumcmc-relabel")
    return pool


class _HostBuffers:
    """Host copies of device blocks: page-locked buffers reused from block to block (NumPy: the arrays)."""

    def __init__(self, xp, count, shape):
        self.xp, self.bufs = xp, None
        if xp is not np:
            import cupyx

            self.bufs = [cupyx.empty_pinned(shape, dtype=np.float64) for _ in range(count)]

    def fill(self, slot, a):
        if self.bufs is None:
            return np.asarray(a)
        out = self.bufs[slot][:a.shape[0]]
        a.get(out=out)  # synchronises with the stream that built ``a``
        return out


def align_draws(weights, means, covariances, loglik, scale, rounds: int = 3):
    """Relabel Gibbs draws (chain, draw, k, ...) to a common reference, Stephens-style.

    The reference starts as the draw of largest log-likelihood and becomes the
    weight-averaged aligned means (and mean weights) for ``rounds`` rounds.
    Returns the aligned ``weights, means, covariances``, each on its own
    backend: with ``weights`` and ``means`` on the GPU the costs are built
    there (see :func:`relabel`).
    """
    xp = _xp_of(means)
    loglik = _backend.to_host(loglik)
    c, d = np.unravel_index(int(np.argmax(loglik)), loglik.shape)
    ref_mu, ref_w = means[c, d], weights[c, d]
    last = None
    for _ in range(rounds):
        perm = relabel(means, ref_mu, scale, weights, ref_w)
        if last is not None and np.array_equal(perm, last):
            break  # the same permutations give the same reference: every later round repeats this one
        last = perm
        w, mu = _take(weights, perm), _take(means, perm)
        ref_w = w.mean(axis=(0, 1))
        ref_mu = (w[..., None] * mu).sum(axis=(0, 1)) / xp.maximum(w.sum(axis=(0, 1)), 1e-300)[:, None]
    return w, mu, _take(covariances, perm)


def _take(a, perm):
    """``a[..., perm[...], ...]`` along the component axis (the one after the leading axes of perm)."""
    xp = _xp_of(a)
    idx = _backend.asarray(perm, xp).reshape(perm.shape + (1,) * (a.ndim - perm.ndim))
    return xp.take_along_axis(a, idx, axis=perm.ndim - 1)


class _KeptDraws:
    """The draws of a Gibbs run, kept on the device without a copy per sweep.

    Called after every sweep with the new state. A sweep's state arrays are
    new arrays that no later sweep writes (only the indicators ``z`` are
    updated in place, and they are not kept), so the kept iterations' fields
    are held by reference and stacked once at the end: no host read per sweep,
    and one small copy (the (C, k) counts, a view of the sweep's packed
    (C, k, q) statistics, which a reference would keep whole). The monitors' values (log-likelihood and alpha every
    ``every`` iterations and at the last) are held the same way.
    """

    def __init__(self, burn_in: int, n_iter: int, every: int = 10):
        self.burn_in, self.total, self.every = int(burn_in), int(burn_in) + int(n_iter), int(every)
        self.it = 0
        self.kept: list = []
        self.mon_it: list = []
        self.mon: list = []

    def __call__(self, s: State, info: Info) -> None:
        self.it += 1
        if self.it > self.burn_in:
            # counts is a view of the sweep's packed statistics: a copy keeps (C, k) values, not (C, k, q)
            self.kept.append((s.log_pi, s.mu, s.sigma, s.alpha, s.loglik, info.n_active, s.counts.copy()))
        if self.it % self.every == 0 or self.it == self.total:
            self.mon_it.append(self.it)
            self.mon.append((s.loglik, s.alpha))

    def draws(self, xp) -> dict:
        """The kept fields stacked as (chain, draw, ...) on the device (``weights = exp(log_pi)``)."""
        names = ("log_pi", "means", "covariances", "alpha", "loglik", "n_active", "counts")
        out = {}
        for i, name in enumerate(names):
            out[name] = xp.moveaxis(xp.stack([t[i] for t in self.kept]), 0, 1)
        out["weights"] = xp.exp(out.pop("log_pi"))
        return out

    def monitors(self) -> dict:
        """``Trace.monitors``: for "loglik" and "alpha", the iterations and the values there (one host read)."""
        its = np.asarray(self.mon_it, dtype=np.int64)
        if not self.mon:
            return {"loglik": (its, np.zeros((0,))), "alpha": (its, np.zeros((0,)))}
        xp = _xp_of(self.mon[0][0])
        vals = _backend.to_host(xp.stack([xp.stack([a.astype(np.float64), b.astype(np.float64)])
                                          for a, b in self.mon]))
        return {"loglik": (its, np.ascontiguousarray(vals[:, 0])), "alpha": (its, np.ascontiguousarray(vals[:, 1]))}


# ---------------------------------------------------------------------------
# The estimator
# ---------------------------------------------------------------------------

class DPGaussianMixture(mixin("DensityMixin"), Estimator):
    """Truncated Dirichlet-process Gaussian mixture, by blocked Gibbs or Bayesian EM, on GPU or CPU.

    The model of Suchard et al. (2010): ``n_components`` Gaussian components
    with Normal-inverse-Wishart priors ``(mu_j, Sigma_j) ~ N(m, gamma Sigma_j)
    IW(nu + 2, nu Phi)`` (West's parametrisation: ``InvWishart(nu + p + 1, nu
    Phi)`` in the usual one, prior mean ``Phi``), truncated stick-breaking
    weights ``v_j ~ Be(1, alpha)`` and ``alpha ~ Gamma(a, b)``.

    Defaults from the data (column means ``xbar``, column variances ``s^2``):
    ``m = xbar``, ``Phi = diag(s^2) / 64``, ``nu = 2`` (a weak covariance
    prior, so that tight populations such as flow-cytometry clusters stay
    tight), ``gamma = 16`` (prior spread of the means ``diag(s^2) / 4``),
    ``alpha ~ Gamma(1, k)`` (shape 1, rate ``k = n_components``: prior mean
    ``1 / k``, as scikit-learn's default concentration; with ``k - 1`` sticks
    in alpha's conditional the posterior mean stays near 1 whatever ``k``). A
    constant column is handled through the prior (its variance is floored at
    1e-3 of the mean positive variance).

    Parameters
    ----------
    n_components : int
        The truncation ``k``: an upper bound on the number of components.
    method : {"gibbs", "bem"}
        ``"gibbs"``: the blocked Gibbs sampler (indicators, NIW draws, sticks,
        alpha). ``"bem"``: Bayesian EM from ``n_init`` starts run side by side,
        as a mean-field variational fit of the truncated DP mixture (the
        paper's four steps with expected log weights and log densities in step
        1, Blei and Jordan 2006): the stick-breaking prior drains components
        the data do not need, and a component whose probabilities sum to less
        than half its number of parameters, ``(p + p (p + 1) / 2) / 2``
        events, is held at zero weight. Each start's means come from
        k-means++ on a subsample of the rows, and the start of largest lower
        bound is kept. (Before this, BEM took the
        plug-in modes from random data points, kept every component and could
        stop in local optima: its results differ from those of earlier
        versions.) The reported mixture is the posterior mean of the weights,
        means and covariances.
    n_iter : int
        Gibbs: kept iterations; BEM: the largest number of iterations.
    burn_in : int
        Gibbs iterations run before keeping draws.
    n_chains : int
        Gibbs chains, run side by side in one launch.
    n_init : int
        BEM starts; the one of largest variational lower bound is kept (the
        E-step's mean log-normaliser less the posteriors' KL divergences from
        the prior per sample, :func:`_bem_kl`), which charges every component
        for its parameters: the likelihood of the point estimate would prefer a
        start that split a cluster in two.
    tol : float
        BEM stops when no start's mean log-likelihood per sample has changed by
        more than ``tol`` per iteration over the last 10 iterations (checked
        every 10 iterations, the only times BEM reads back from the GPU).
        For comparison, scikit-learn's ``BayesianGaussianMixture`` stops when
        its lower bound changes by less than its ``tol = 1e-3`` in one
        iteration, and that bound is a sum over the samples (about ``n``
        times the mean log-likelihood), so its rule is ``1e-3 / n`` per
        sample: at ``n = 10**4`` that is ``1e-7``, a hundred times stricter
        than the default here.
        Pass ``tol=1e-3 / n_samples`` for scikit-learn's rule.
    mean_prior, mean_precision_prior, covariance_prior, degrees_of_freedom_prior :
        ``m``, ``1 / gamma``, ``Phi`` (matrix or diagonal) and ``nu``; None for
        the defaults above.
    alpha_prior : (float, float) or None
        Shape and rate of alpha's Gamma prior; None: ``(1, n_components)``.
    relabel : bool
        Align stored Gibbs draws to a common reference by a linear assignment on
        component means and weights (:func:`align_draws`) before summarising.
    random_state : int, SeedSequence, gpumcmc Generator or None
    chunk_size : int or None
        Rows per launch of the configuration kernel (None: sized from memory).
        Draws do not depend on it.
    dtype : "float32" or "float64"
        Precision of the data and of the kernel.
    progress : bool
        Show a progress bar.
    backend : {"numpy", "cupy", None}
        None: the active backend (CuPy where a GPU is present).
    devices : None, "all", int, list of int, or gpumcmc.shards.Shards
        Split the data and the indicators over devices: each device draws
        the indicators of its rows (Gibbs) or their configuration
        probabilities (BEM) and sums their statistics, and one all-reduce per
        iteration (NCCL between GPUs) adds them up; the global draws or the
        BEM update follow from the sums (see :func:`make_sharded_step` and
        :func:`make_sharded_bem_step`).
        ``"all"`` or a list of GPU ids drives those GPUs from this process; a
        :class:`~gpumcmc.shards.Shards` may also come from
        :func:`gpumcmc.shards.worker_shards` (one GPU per Dask worker),
        ``Shards(n_virtual=2)`` (two parts on NumPy) or
        :func:`gpumcmc.shards.one_device` (parts on one GPU). For a seed, the draws
        equal those of one device up to the rounding of the sums' order.
        In a Dask task each worker fits with the whole ``X`` and the same
        seed, keeps its own rows, and ends with the same draws as the others;
        its ``z_`` holds its own rows' indicators only.
        None (the default): one device, the backend's.

    Attributes
    ----------
    weights_, means_, covariances_ : host arrays (k,), (k, p), (k, p, p)
        The fitted mixture: Gibbs posterior means of the relabelled draws, or
        the BEM mode.
    alpha_ : float
    n_active_ : int  (components holding data / of positive weight)
    trace_ : gpumcmc.sampling.Trace (Gibbs)
    converged_, n_iter_ : BEM convergence.
    lower_bound_ : float  (BEM: the kept start's lower bound per sample)
    bem_logliks_ : (n_init,) host array  (BEM: each start's mean log-likelihood under its posterior-mean mixture)
    n_shards_ : int  (fits with ``devices``: the shards the data was split over)

    Examples
    --------
    >>> import numpy as np
    >>> from gpumcmc.models import DPGaussianMixture
    >>> rs = np.random.default_rng(0)
    >>> X = np.concatenate([rs.normal(-3, 1, (100, 2)), rs.normal(3, 1, (100, 2))])
    >>> gm = DPGaussianMixture(n_components=5, n_iter=50, burn_in=100, random_state=0,
    ...                        progress=False, backend="numpy").fit(X)
    >>> int((gm.weights_ > 0.2).sum())
    2
    >>> z = gm.predict(X)
    >>> bool((z[:100] == z[0]).mean() > 0.95 and (z[100:] != z[0]).mean() > 0.95)
    True
    >>> bem = DPGaussianMixture(n_components=2, method="bem", progress=False, backend="numpy").fit(X)
    >>> bool(abs(bem.score(X) - gm.score(X)) < 0.1)
    True
    """

    # A density estimator, as scikit-learn's GaussianMixture and BayesianGaussianMixture (DensityMixin
    # alone, no ClusterMixin): predict gives each sample's most probable component, but fit keeps no
    # labels_ for the training data (BEM never assigns them; Gibbs keeps its last draw, z_).
    # Checked by scikit-learn at fit where it imports (_check_params runs without it). The priors
    # (None or arrays), random_state and devices are checked where they are used.
    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "method": [StrOptions({"gibbs", "bem"})],
        "n_iter": [Interval(Integral, 1, None, closed="left")],
        "burn_in": [Interval(Integral, 0, None, closed="left")],
        "n_chains": [Interval(Integral, 1, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "mean_prior": "no_validation",
        "mean_precision_prior": [None, Interval(Real, 0, None, closed="neither")],
        "covariance_prior": "no_validation",
        "degrees_of_freedom_prior": [None, Interval(Real, 0, None, closed="neither")],
        "alpha_prior": [None, tuple, list],
        "relabel": ["boolean"],
        "random_state": "no_validation",
        "chunk_size": [None, Interval(Integral, 1, None, closed="left")],
        "dtype": "no_validation",
        "progress": ["boolean"],
        "backend": [None, StrOptions({"numpy", "cupy"})],
        "devices": "no_validation",
    }

    def _expected_failed_checks(self):
        why = ("the check reads classifier tags of any estimator with predict_proba, and a density estimator has "
               "none (an AttributeError inside scikit-learn's check); fit, predict and predict_proba on sparse "
               "input pass before it.")
        return {"check_estimator_sparse_array": why, "check_estimator_sparse_matrix": why}

    def __init__(self, n_components: int = 16, method: str = "gibbs", n_iter: int = 200, burn_in: int = 100,
                 n_chains: int = 1, n_init: int = 4, tol: float = 1e-5, mean_prior=None,
                 mean_precision_prior=None, covariance_prior=None, degrees_of_freedom_prior=None,
                 alpha_prior=None, relabel: bool = True, random_state=None, chunk_size=None,
                 dtype="float32", progress: bool = True, backend=None, devices=None):
        self.n_components = n_components
        self.method = method
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.n_chains = n_chains
        self.n_init = n_init
        self.tol = tol
        self.mean_prior = mean_prior
        self.mean_precision_prior = mean_precision_prior
        self.covariance_prior = covariance_prior
        self.degrees_of_freedom_prior = degrees_of_freedom_prior
        self.alpha_prior = alpha_prior
        self.relabel = relabel
        self.random_state = random_state
        self.chunk_size = chunk_size
        self.dtype = dtype
        self.progress = progress
        self.backend = backend
        self.devices = devices

    # -- checks -------------------------------------------------------------
    def _check_params(self):
        k = self.n_components
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"n_components must be an integer >= 1, got {k!r}.")
        if self.method not in ("gibbs", "bem"):
            raise ValueError(f"method must be 'gibbs' or 'bem', got {self.method!r}.")
        for name in ("n_iter", "n_chains", "n_init"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}.")
        if isinstance(self.burn_in, bool) or not isinstance(self.burn_in, (int, np.integer)) or self.burn_in < 0:
            raise ValueError(f"burn_in must be an integer >= 0, got {self.burn_in!r}.")
        return _validate.check_float_dtype(self.dtype)

    def _data(self, X, dtype):
        xp = self._xp()
        X = as_data(X, xp, dtype, "X")
        if X.shape[0] < 2:
            raise ValueError(f"DPGaussianMixture needs at least 2 samples, got n_samples={X.shape[0]}.")
        if X.shape[1] < 1:
            raise ValueError("X has no features (columns).")
        return X

    def _alpha_prior(self):
        if self.alpha_prior is None:
            return (1.0, float(self.n_components))
        a = tuple(self.alpha_prior)
        if len(a) != 2:
            raise ValueError(f"alpha_prior must be (shape, rate), got {self.alpha_prior!r}.")
        return a

    # -- fit ----------------------------------------------------------------
    def fit(self, X, y=None):
        """Fit the mixture to ``X`` (n_samples, n_features); returns self."""
        dtype = self._validate_settings(self._check_params)
        if self.devices is not None:
            return self._fit_sharded(X, dtype)
        X = self._data(X, dtype)
        chains = self.n_chains if self.method == "gibbs" else self.n_init
        model = make_model(X, int(self.n_components), dtype=dtype, mean_prior=self.mean_prior,
                           mean_precision_prior=self.mean_precision_prior,
                           covariance_prior=self.covariance_prior,
                           degrees_of_freedom_prior=self.degrees_of_freedom_prior,
                           alpha_prior=self._alpha_prior(), chunk_size=self.chunk_size, chains=chains,
                           # the GPU Gibbs sweep sums its statistics by kernel: no design matrix to cache
                           cache_bytes=0 if (self.method == "gibbs" and _xp_of(X) is not np) else None)
        rng = self._make_rng()
        self.n_features_in_ = X.shape[1]
        self._n_samples = X.shape[0]
        self._center = model.center
        self._scale = np.sqrt(np.diag(_backend.to_host(model.psi0)) / (model.df0 - X.shape[1] - 1))
        t0 = time.perf_counter()
        if self.method == "gibbs":
            self._fit_gibbs(model, rng)
        else:
            self._fit_bem(model, rng)
        self.fit_seconds_ = time.perf_counter() - t0
        self._point_params = {}  # kernel parameters by (array module, dtype), filled by predict
        return self

    def _fit_sharded(self, X, dtype):
        shards = _shards.resolve(self.devices, self.backend, "the events")[0]
        gibbs = self.method == "gibbs"
        gpu = shards.xp is not np
        X = as_data(X, _xp_of(X) if (gpu and _backend.is_cupy_array(X)) else np, dtype, "X")
        if X.shape[0] < 2:
            raise ValueError(f"DPGaussianMixture needs at least 2 samples, got n_samples={X.shape[0]}.")
        if X.shape[1] < 1:
            raise ValueError("X has no features (columns).")
        n = X.shape[0]
        models = make_sharded_models(
            X, int(self.n_components), shards, dtype=dtype, mean_prior=self.mean_prior,
            mean_precision_prior=self.mean_precision_prior, covariance_prior=self.covariance_prior,
            degrees_of_freedom_prior=self.degrees_of_freedom_prior, alpha_prior=self._alpha_prior(),
            chunk_size=self.chunk_size, chains=self.n_chains if gibbs else self.n_init,
            cache_bytes=0 if (gpu and gibbs) else None)
        del X
        from ...random import default_rng

        rng = default_rng(self.random_state, backend="cupy" if gpu else "numpy")
        m0 = models[0]
        p = m0.x.shape[1]
        self.n_features_in_ = p
        self._n_samples = n
        self._center = m0.center
        self._scale = np.sqrt(np.diag(_backend.to_host(m0.psi0)) / (m0.df0 - p - 1))
        self.n_shards_ = shards.world
        t0 = time.perf_counter()
        with shards.on(0):
            if gibbs:
                state = init_sharded(rng, models, shards, n, self.n_chains)
                self._fit_gibbs(m0, rng, state, make_sharded_step(models, shards, n))
            else:
                state = init_bem_sharded(rng, models, shards, n, self.n_init)
                self._fit_bem(m0, rng, state, make_sharded_bem_step(models, shards, n),
                              lambda params: _sharded_score(models, shards, params, n))
        self.fit_seconds_ = time.perf_counter() - t0
        self._point_params = {}  # kernel parameters by (array module, dtype), filled by predict
        return self

    def _fit_gibbs(self, model, rng, state=None, step_fn=None):
        if state is None:
            state = init(rng, model, self.n_chains)
            step_fn = make_step(model)
        xp = _xp_of(state.params)
        keep = _KeptDraws(self.burn_in, self.n_iter, every=10)

        def kept_step(rng_, s):
            s, info = step_fn(rng_, s)
            keep(s, info)
            return s, None

        # The progress bar shows the monitors (a host read every 10 iterations); without it nothing is read
        # back during the run: the monitors' values are kept on the device and read once at the end.
        monitors = ([Monitor("loglik", lambda s: s.loglik, every=10), Monitor("alpha", lambda s: s.alpha, every=10)]
                    if self.progress else [])
        tr = run(kept_step, state, rng, n_iter=self.n_iter, burn_in=self.burn_in, monitors=monitors,
                 progress=self.progress, desc="DP mixture (Gibbs)", n_chains=self.n_chains)
        d = keep.draws(xp)  # on the device, (chain, draw, ...)
        flags = xp.stack([xp.isfinite(d[name]).all() for name in ("loglik", "weights", "means", "alpha")])
        if not bool(_backend.to_host(flags).all()):
            _check_finite_fit([np.nan], "Gibbs")
        w, mu, cov = d["weights"], d["means"], d["covariances"]
        if self.relabel:
            w, mu, cov = align_draws(w, mu, cov, d["loglik"], self._scale)
        # Weights: posterior means; means and covariances: averages weighted by each draw's weight,
        # so that prior draws of momentarily empty components do not blur them.
        wm = w.mean(axis=(0, 1))
        ws = xp.maximum(w.sum(axis=(0, 1)), 1e-300)
        means = (w[..., None] * mu).sum(axis=(0, 1)) / ws[:, None]
        covs = (w[..., None, None] * cov).sum(axis=(0, 1)) / ws[:, None, None]
        host = {name: _backend.to_host(a) for name, a in d.items()}
        tr.draws = {name: host[name] for name in ("weights", "means", "covariances", "alpha", "loglik", "n_active",
                                                  "counts")}
        tr.stats = {"n_active": host["n_active"]}
        tr.monitors = keep.monitors()
        self.trace_ = tr
        w_h, mu_h = _backend.to_host(w), _backend.to_host(mu)
        self._draws = {"weights": w_h, "means": mu_h + self._center, "alpha": host["alpha"],
                       "loglik": host["loglik"], "n_active": host["n_active"]}
        wm = _backend.to_host(wm)
        self.weights_ = wm / wm.sum()
        self.means_ = _backend.to_host(means) + self._center
        self.covariances_ = _backend.to_host(covs)
        self.alpha_ = float(host["alpha"].mean())
        self.n_active_ = int(np.round(np.median(host["n_active"])))
        z = tr.state.z
        self.z_ = (np.concatenate([_backend.to_host(part[0]) for part in z]) if isinstance(z, tuple)
                   else _backend.to_host(z[0]))

    def _fit_bem(self, model, rng, state=None, bem=None, score=None, check_every: int = 10):
        if state is None:
            state = init_bem(rng, model, self.n_init)
            bem = make_bem_step(model)
            score = functools.partial(_score_params, model.x, chunk=model.chunk)
        bar = None
        if self.progress:
            from tqdm.auto import tqdm
            bar = tqdm(total=self.n_iter, desc="DP mixture (BEM)")
        prev = None
        converged = False
        it = 0
        try:
            for it in range(1, self.n_iter + 1):
                state = bem(state)
                if it % check_every == 0 or it == self.n_iter:
                    ll = _backend.to_host(state.loglik)  # synchronises, every check_every iterations
                    if bar is not None:
                        bar.set_postfix({"loglik": f"{ll.max():.5g}"}, refresh=False)
                    if prev is not None and np.all(np.abs(ll - prev) < self.tol * check_every):
                        converged = True
                    prev = ll
                if bar is not None:
                    bar.update(1)
                if converged:
                    break
        finally:
            if bar is not None:
                bar.close()
        # The probabilities of the last iterate were computed at the previous parameters: one more
        # E-step scores the final ones.
        point = kernel_params(state.log_pi, state.mu, _safe_cholesky(state.sigma), model.x.dtype)
        ll = _backend.to_host(score(point))
        _check_finite_fit([np.nanmax(ll)], "BEM")
        ll = np.where(np.isfinite(ll), ll, -np.inf)
        # the start kept: the largest variational lower bound (per sample), which charges every component
        # for its parameters, where the point estimate's likelihood rewards a cluster split in two
        elbo = _backend.to_host(score(state.params) - _bem_kl(model, state) / self._n_samples)
        elbo = np.where(np.isfinite(elbo) & np.isfinite(ll), elbo, -np.inf)  # a start that broke down is never chosen
        best = int(np.argmax(elbo))
        self.converged_ = converged
        self.n_iter_ = it
        self.lower_bound_ = float(elbo[best])
        self.bem_logliks_ = ll
        w = np.exp(_backend.to_host(state.log_pi[best]))
        self.weights_ = w / w.sum()
        self.means_ = _backend.to_host(state.mu[best]) + self._center
        self.covariances_ = _backend.to_host(state.sigma[best])
        self.alpha_ = float(_backend.to_host(state.alpha[best]))
        self.n_active_ = int((self.weights_ > 0).sum())

    # -- prediction ---------------------------------------------------------
    def _params(self, xp, dtype):
        key = (xp.__name__, np.dtype(dtype).str)
        memo = self._point_params  # fit's dict, filled in place: predict leaves the attributes as they were
        if key in memo:
            return memo[key]
        w = self.weights_
        with np.errstate(divide="ignore"):
            log_pi = np.log(w)
        mu = self.means_ - self._center
        chol = _safe_cholesky(np.asarray(self.covariances_, np.float64))
        params = kernel_params(log_pi[None], mu[None], chol[None], dtype)
        params = _backend.asarray(params, xp)
        memo[key] = params
        return params

    def _prepare(self, X):
        self._check_fitted("weights_")
        dtype = _validate.check_float_dtype(self.dtype)
        X = self._data(X, dtype) if np.shape(X)[0] >= 2 else as_data(X, self._xp(), dtype, "X")
        self._check_n_features(X)
        xp = _xp_of(X)
        xc = xp.ascontiguousarray((X - xp.asarray(self._center, dtype=X.dtype)).astype(dtype))
        return xc, self._params(xp, dtype)

    def _chunk(self, n, chains=1):
        x_gpu = self._xp() is not np
        if self.chunk_size is not None:
            return int(self.chunk_size)
        return default_chunk(n, int(self.n_components), chains, np.dtype(self.dtype).itemsize, x_gpu)

    def score_samples(self, X):
        """Log density ``log g(x_i)`` of every sample under the fitted mixture (host array)."""
        xc, params = self._prepare(X)
        return _backend.to_host(_score_params(xc, params, self._chunk(xc.shape[0]), per_sample=True))[0]

    def score(self, X, y=None) -> float:
        """Mean log-likelihood per sample."""
        return float(np.mean(self.score_samples(X)))

    def predict(self, X):
        """The most probable component of every sample (host int array)."""
        xc, params = self._prepare(X)
        xp = _xp_of(xc)
        n = xc.shape[0]
        z = xp.empty((1, n), dtype=np.int32)
        ch = self._chunk(n)
        for s in range(0, n, ch):
            assign(xc, params, s, min(ch, n - s), MODE_ARGMAX, z=z)
        return _backend.to_host(z[0]).astype(np.int64)

    def predict_proba(self, X):
        """Component probabilities, (n_samples, n_components) host array."""
        xc, params = self._prepare(X)
        xp = _xp_of(xc)
        n = xc.shape[0]
        k = params.shape[1]
        out = np.empty((n, k), dtype=xc.dtype)
        ch = self._chunk(n)
        lse = xp.empty((1, n), dtype=xc.dtype)
        for s in range(0, n, ch):
            e = min(n, s + ch)
            resp = xp.empty((1, k, e - s), dtype=xc.dtype)
            assign(xc, params, s, e - s, MODE_RESP, lse=lse, resp=resp)
            out[s:e] = _backend.to_host(resp[0]).T
        return out

    # -- draws --------------------------------------------------------------
    def to_arviz(self):
        """ArviZ data of the (relabelled) Gibbs draws: weights, means, alpha; log-likelihood and active components."""
        self._check_fitted("weights_")
        if getattr(self, "_draws", None) is None:
            raise ValueError("to_arviz() needs draws: fit with method='gibbs'.")
        from ...sampling import to_arviz

        d = self._draws
        k, p = d["means"].shape[-2:]
        return to_arviz({"weights": d["weights"], "means": d["means"], "alpha": d["alpha"]},
                        {"loglik": d["loglik"], "n_active": d["n_active"]},
                        coords={"component": np.arange(k), "feature": np.arange(p)},
                        dims={"weights": ["component"], "means": ["component", "feature"]})


def _check_finite_fit(arrays, method):
    for a in arrays:
        if not np.all(np.isfinite(np.asarray(a))):
            raise FloatingPointError(
                f"The {method} fit produced NaN or inf (a covariance lost positive definiteness); fit with "
                "dtype='float64', or strengthen the covariance prior (degrees_of_freedom_prior, covariance_prior).")


def _score_params(x, params, chunk, per_sample=False):
    """Mean log-likelihood per sample (C,) of every parameter set, or the (C, n) values."""
    xp = _xp_of(x)
    n = x.shape[0]
    chains = params.shape[0]
    lse = xp.empty((chains, n), dtype=x.dtype)
    for s in range(0, n, chunk):
        assign(x, params, s, min(chunk, n - s), MODE_ARGMAX, lse=lse)
    return lse if per_sample else _mean_rows(lse)
