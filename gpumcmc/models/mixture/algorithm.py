"""Truncated Dirichlet-process Gaussian mixtures: blocked Gibbs and Bayesian EM.

The model of Suchard et al. (2010, Appendix A), for data ``x_1..x_n`` in R^p and at most ``k`` components:

* ``(mu_j, Sigma_j) ~ N(mu_j | m, gamma Sigma_j) IW(Sigma_j | nu + 2, nu Phi)`` independently over ``j``,
  in West's parametrisation: in the usual one (density ``|Sigma|^{-(df + p + 1)/2}``) ``IW(nu + 2, nu Phi)``
  is ``InvWishart(df = nu + p + 1, scale = nu Phi)``, whose mean is ``Phi``.
* Truncated stick-breaking weights: ``v_j ~ Be(1, alpha)`` for ``j < k``, ``v_k = 1``,
  ``pi_j = v_j prod_{r<j} (1 - v_r)``.
* ``alpha ~ Gamma(a, b)`` (shape ``a``, rate ``b``).

Read top-down: :class:`Model` (data and prior), :class:`State`, :func:`init` and :func:`step` (one Gibbs
sweep of every chain: indicators, NIW draws, stick-breaking Betas, alpha), :func:`init_bem` and
:func:`bem_step` (one Bayesian-EM iterate of every start).

A sweep draws ``z_i`` by Gumbel-max with Philox uniforms keyed by the global row (chunking does not change
the draws); a BEM iterate never reads back to the host. :mod:`.ops` says which kernel does what.
"""

from __future__ import annotations

import functools
import importlib
import math
from typing import NamedTuple

import numpy as np

from gpumcmc import _validate, backend as _backend
from gpumcmc._config import config

from .ops import (
    MODE_RESP, MODE_SAMPLE, _gibbs_acc, _gibbs_params_kernel, _gibbs_params_twin, _packed_prior,
    _posterior_kernel, _resp_blocks, _safe_cholesky, _sum_rows, _unpack_stats, _use_component_kernel, _xp_of,
    _y_block, assign, kernel_params, niw_posterior)

_V_MAX = 1.0 - 2.0**-40  # sticks are kept below 1 so that log(1 - v) stays finite


class Model(NamedTuple):
    """Data and prior of one fit (fixed during a run)."""

    x: object           # (n, p) array of the fit's dtype: the data minus center
    center: np.ndarray  # (p,) float64 host array added back to reported means
    m: object           # (p,) float64 prior mean (centred coordinates)
    kappa0: float       # 1 / gamma
    psi0: object        # (p, p) float64, nu Phi
    df0: float          # nu + p + 1
    a: float            # alpha ~ Gamma(shape a, rate b)
    b: float
    k: int              # the number of components
    chunk: int          # rows per launch of the probability (BEM) kernel
    sample_rows: int    # rows per launch of the Gibbs indicator kernel (all rows unless chunk_size is given)
    stats_rows: int     # rows per block of the sufficient-statistics products
    y_blocks: object    # cached [1, x, x_a x_b (a <= b)] row blocks, or None


class State(NamedTuple):
    """State of every chain (leading axis: chain), or of every BEM start."""

    z: object       # (C, n) int32 configuration indicators (Gibbs; BEM leaves them empty)
    v: object       # (C, k) float64 stick fractions (v[:, -1] == 1)
    log_pi: object  # (C, k) float64 log weights
    mu: object      # (C, k, p) float64 component means (centred coordinates)
    sigma: object   # (C, k, p, p) float64 component covariances
    params: object  # (C, k, q) kernel parameters [c_j, U_j mu_j, vech(U_j)] of the data's dtype
    alpha: object   # (C,) float64 DP precision
    counts: object  # (C, k) float64 points per component (Gibbs) or summed probabilities (BEM)
    loglik: object  # (C,) float64 mean log-likelihood per sample at the parameters z was drawn from


class Info(NamedTuple):
    """Per-iteration diagnostics: ``n_active`` (C,) components holding data."""

    n_active: object


def default_chunk(n: int, k: int, chains: int, itemsize: int, gpu: bool) -> int:
    """Rows per launch so that a (chains, k, rows) block stays within 256 MB (GPU) or 16 MB (CPU)."""
    budget = (256 if gpu else 16) * 2**20
    return int(max(256, min(n, budget // max(1, chains * k * itemsize))))


def make_model(x, k: int, *, dtype=np.float32, mean_prior=None, mean_precision_prior=None,
               covariance_prior=None, degrees_of_freedom_prior=None, alpha_prior=(1.0, 1.0),
               chunk_size=None, chains: int = 1, cache_bytes: int | None = None, moments=None) -> Model:
    """A :class:`Model` from data ``x`` (an (n, p) array on its backend) with the data-based defaults that
    :class:`DPGaussianMixture` documents (``alpha ~ Gamma(alpha_prior)``).

    ``moments = (center, var)``, host float64 (p,) arrays, replaces the column means and variances of
    ``x`` (a shard takes those of the whole set, see :func:`make_sharded_models`).
    """
    xp = _xp_of(x)
    n, p = x.shape
    dtype = np.dtype(dtype)
    if moments is None:
        xh = x.astype(np.float64)
        center = xh.mean(axis=0)
        var = _backend.to_host(((xh - center) ** 2).mean(axis=0))
        center = _backend.to_host(center)
    else:
        center, var = (np.asarray(t, np.float64).reshape(p) for t in moments)
    # Each column's variance is its own scale: a constant column (variance 0) takes 1e-3 of the mean positive
    # variance; a column that varies keeps its variance, down to what the dtype can resolve about its mean
    # (a floor shared by all columns made a column in small units look constant beside one in large units).
    pos = var[var > 0]
    resolve = (64 * np.finfo(dtype).eps * np.maximum(np.abs(center), np.sqrt(var))) ** 2
    var = np.where(var > 0, np.maximum(var, resolve), 1e-3 * (pos.mean() if pos.size else 1.0))
    if mean_prior is None:
        m = np.zeros(p)
    else:
        m = _finite_prior(mean_prior, "mean_prior")
        if m.size != p:
            raise ValueError(f"mean_prior must hold one value per feature, shape ({p},), got shape {m.shape}.")
        m = m.reshape(p) - center
    for name, v in (("mean_precision_prior", mean_precision_prior), ("degrees_of_freedom_prior",
                                                                    degrees_of_freedom_prior)):
        arr = None if v is None else _finite_prior(v, name)
        if arr is not None and (arr.size != 1 or not arr.item() > 0):
            raise ValueError(f"{name} must be a positive number, got {v!r}.")
    gamma = 16.0 if mean_precision_prior is None else 1.0 / float(mean_precision_prior)
    nu = 2.0 if degrees_of_freedom_prior is None else float(degrees_of_freedom_prior)
    if gamma <= 0 or not np.isfinite(gamma):
        raise ValueError("mean_precision_prior must be positive and finite.")
    if covariance_prior is None:
        phi = np.diag(var / 64.0)
    else:
        phi = _finite_prior(covariance_prior, "covariance_prior")
        if phi.ndim == 1:
            phi = np.diag(phi)
        if phi.shape != (p, p):
            raise ValueError(f"covariance_prior must be ({p}, {p}) or ({p},), got {phi.shape}.")
        # symmetric up to rounding (float32's included): the sweeps read its lower triangle in some places and
        # all of it in others
        if np.abs(phi - phi.T).max() > 1e-5 * np.abs(phi).max():
            raise ValueError("covariance_prior must be a symmetric matrix, got an asymmetric one; pass "
                             "(C + C.T) / 2.")
        try:
            np.linalg.cholesky(phi)
        except np.linalg.LinAlgError:
            raise ValueError("covariance_prior must be symmetric positive definite.") from None
    a, b = (float(t) for t in _finite_prior(alpha_prior, "alpha_prior"))
    if not (a > 0 and b > 0):
        raise ValueError(f"alpha_prior = (shape, rate) must be positive, got {alpha_prior}.")
    xc = xp.ascontiguousarray((x - xp.asarray(center, dtype=x.dtype)).astype(dtype))
    gpu = xp is not np
    q = 1 + p + p * (p + 1) // 2
    # the design [1, x, vech(x x^T)] (n, q) in float64, kept whole up to 1 GB (built once, not at each sweep)
    cache_bytes = (1 << 30) if cache_bytes is None else cache_bytes
    cached = n * q * 8 <= cache_bytes
    stats_rows = default_chunk(n, k, chains, dtype.itemsize, gpu)
    if not cached and not gpu:  # built block by block at each sweep: blocks of at most 64 MB (q grows as p^2)
        stats_rows = min(stats_rows, max(256, (64 << 20) // (q * 8)))
    if chunk_size is None:
        chunk, sample_rows = stats_rows, (n if gpu else stats_rows)  # the kernel stores nothing per (row, component)
    elif int(chunk_size) < 1:
        raise ValueError(f"chunk_size must be a positive number of rows, got {chunk_size}.")
    else:
        chunk = sample_rows = int(chunk_size)
    y_blocks = [_y_block(xc[s:s + stats_rows], xp) for s in range(0, n, stats_rows)] if cached else None
    return Model(xc, center, xp.asarray(m), 1.0 / gamma, xp.asarray(nu * phi), nu + p + 1.0, a, b, int(k),
                 chunk, sample_rows, stats_rows, y_blocks)


def _finite_prior(value, name: str):
    """``value`` of prior ``name`` (a number or an array of numbers) as a host float64 array, checked finite."""
    try:
        # to_host: a CuPy prior, or CuPy numbers in a tuple (NumPy and Python values pass through)
        a = np.asarray([_backend.to_host(v) for v in value] if isinstance(value, (tuple, list))
                       else _backend.to_host(value), np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number or an array of numbers, got {value!r}.") from None
    if not np.isfinite(a).all():
        raise ValueError(f"{name} must be finite, got {value!r}." if a.ndim == 0 else
                         f"{name} must be finite, got NaN or inf in it.")
    return a


def _log_pi(v):
    return _log_pi_l1(v)[0]


def _log_pi_l1(v):
    """``log pi`` of the sticks ``v`` and the ``log(1 - min(v, _V_MAX))`` it sums (which the Gibbs sweep's
    alpha draw reuses)."""
    xp = _xp_of(v)
    lv = xp.log(v)
    l1 = xp.log1p(-xp.minimum(v, _V_MAX))
    before = xp.cumsum(l1, axis=-1) - l1
    return lv + before, l1


def init(rng, model: Model, chains: int = 1, z=True) -> State:
    """Starting states: means at random data points, covariances ``Phi``, equal weights (``z=False``: no
    indicators, as BEM's states)."""
    xp = _xp_of(model.x)
    n = model.x.shape[0]
    mu = model.x[_start_rows(rng, chains, model.k, n, xp)].astype(np.float64)
    return _init_from_means(model, mu, xp.zeros((chains, n if z else 0), dtype=np.int32))


def _start_rows(rng, chains: int, k: int, n: int, xp):
    """The rows (chains, k) int64 on ``xp`` that :func:`init` starts the means at."""
    u = _backend.asarray(rng.random((chains, k), dtype=np.float64), xp)
    return xp.minimum((u * n).astype(np.int64), n - 1)


def _init_from_means(model: Model, mu, zz) -> State:
    xp = _xp_of(mu)
    chains, k, p = mu.shape
    sigma = xp.broadcast_to(model.psi0 / (model.df0 - p - 1), (chains, k, p, p)).copy()
    v = xp.broadcast_to(1.0 / (k - xp.arange(k, dtype=np.float64)), (chains, k)).copy()
    log_pi = _log_pi(v)
    params = kernel_params(log_pi, mu, _safe_cholesky(sigma), model.x.dtype)
    alpha = xp.full((chains,), model.a / model.b)
    return State(zz, v, log_pi, mu, sigma, params, alpha, xp.zeros((chains, k)), xp.zeros((chains,)))


class Part(NamedTuple):
    """Rows ``row0 .. row0 + model.x.shape[0] - 1`` of a data set of ``n`` rows: what a sweep's step (1)
    runs on (the whole set on one device, one shard's rows with the data split over devices)."""

    model: Model
    row0: int
    n: int


class GibbsStats(NamedTuple):
    """What step (1) of a sweep sums over the rows, float64 (summed over shards where the data are split)."""

    acc: object     # (C, k, q) [n_j, s1_j, vech(s2_j)], the statistics of the drawn indicators
    loglik: object  # (C,) the rows' log-likelihoods at the parameters the indicators were drawn from


def gibbs_local(rng, state: State, part: Part):
    """Step (1) of a Gibbs sweep on the rows of ``part``: returns ``stats() -> GibbsStats``.

    Draws the part's indicators into ``state.z`` (in place), keyed by the global row. Their statistics
    wait for ``stats()``, so that with the data split over GPUs every GPU's indicator kernel is queued
    before any shard's statistics (see :class:`gpumcmc.sampling.DataParallel`).
    """
    model = part.model
    x = model.x
    xp = _xp_of(x)
    rows = x.shape[0]
    chains = state.z.shape[0]
    offset = rng.advance()
    lse = xp.empty((chains, rows), dtype=x.dtype)
    # the cached design of the rows (NumPy: the logits as one GEMM with it), where its blocks are the chunks'
    design = model.y_blocks if model.y_blocks is not None and model.sample_rows == model.stats_rows else None
    for bi, s in enumerate(range(0, rows, model.sample_rows)):
        assign(x, state.params, s, min(model.sample_rows, rows - s), MODE_SAMPLE, rng.key, offset, z=state.z,
               lse=lse, row0=part.row0, ctr_rows=part.n, design=None if design is None else design[bi])

    def stats() -> GibbsStats:
        return GibbsStats(_gibbs_acc(model, state.z), _sum_rows(lse))

    return stats


def make_gibbs_update(model: Model, n: int):
    """``update(rng, state, stats) -> (state, info)``: steps (2)-(4) of a Gibbs sweep from the summed
    :class:`GibbsStats` of all ``n`` rows (:func:`_make_global_draws`); ``state.z`` is kept."""
    draws = _make_global_draws(model)

    def update(rng, state: State, stats: GibbsStats):
        return draws(rng, state, state.z, stats.acc, stats.loglik / n)

    return update


def make_step(model: Model):
    """``step(rng, state) -> (state, info)``: one blocked-Gibbs sweep of every chain (the paper's four steps):
    :func:`gibbs_local` on all the rows, then :func:`make_gibbs_update`'s global draws. The indicators
    ``state.z`` are drawn in place (the returned state holds the same array), as ``Ising.step`` updates its
    spins: copy ``z`` to keep a state of your own loop."""
    part = Part(model, 0, model.x.shape[0])
    update = make_gibbs_update(model, part.n)

    def step(rng, state: State):
        with _validate.validation(False):
            return update(rng, state, gibbs_local(rng, state, part)())

    return step


def _make_global_draws(model: Model):
    """``draws(rng, state, z, acc, loglik) -> (state, info)``: steps (2)-(4) of a Gibbs sweep, the NIW draws,
    the sticks, alpha and the next kernel parameters from the packed statistics ``acc`` (C, k, q), float64."""
    xp = _xp_of(model.x)
    p = model.x.shape[1]
    k = model.k
    dtype = model.x.dtype
    kernel = _use_component_kernel(xp, p)
    gibbs_params = _gibbs_params_kernel if kernel else _gibbs_params_twin
    prior = _packed_prior(model) if kernel else None
    consts: dict = {}  # chains -> (ones (C, 1), a + k - 1 (C,)), made once: read, never written

    def draws(rng, state: State, z, acc, loglik):
        chains = acc.shape[0]
        if chains not in consts:
            consts[chains] = (xp.ones((chains, 1)), xp.full((chains,), model.a + k - 1.0))
        ones, shape_alpha = consts[chains]
        counts = acc[..., 0]
        # (2) NIW draws; empty components draw from the prior.
        if kernel:
            kn, mn, dfn, psi = _posterior_kernel(model, acc, prior)
        else:
            kn, mn, dfn, psi = niw_posterior(model, *_unpack_stats(acc, p))
        sigma = rng.invwishart(dfn, psi, dtype=np.float64)
        eps = rng.standard_normal((chains, k, p), dtype=np.float64)
        if _xp_of(eps) is not xp:
            eps = _backend.asarray(eps, xp)
        # (3) stick-breaking Betas: v_j ~ Be(1 + n_j, alpha + sum_{r>j} n_r).
        tail = counts.sum(axis=1, keepdims=True) - xp.cumsum(counts, axis=1)
        vb = rng.beta(1.0 + counts[:, :-1], state.alpha[:, None] + tail[:, :-1], dtype=np.float64)
        v = xp.concatenate([xp.clip(vb, 1e-300, _V_MAX), ones], axis=1)
        log_pi, l1 = _log_pi_l1(v)
        # (4) alpha | v ~ Gamma(a + k - 1, b - sum_{j<k} log(1 - v_j)) (Ishwaran and James 2001). The sticks
        # j < k were clipped to at most _V_MAX, so log1p(-v_j) is log_pi's l1_j, bit for bit. Summed as a
        # contiguous array: CuPy may reduce a strided view in another order (CUB takes only contiguous rows),
        # which would move alpha's last bits.
        rate = model.b - xp.ascontiguousarray(l1[:, :-1]).sum(axis=1)
        alpha = xp.maximum(rng.gamma(shape_alpha, 1.0 / rate, dtype=np.float64), 1e-300)
        # (2, cont.) means mu_j = m_n + L_j eps_j / sqrt(kappa_n), and the kernel parameters.
        mu, params = gibbs_params(log_pi, mn, kn, sigma, eps, dtype)
        # counts are sums of ones, never negative or NaN: nonzero is positive (one reduction, no comparison)
        n_active = xp.count_nonzero(counts, axis=1)
        return State(z, v, log_pi, mu, sigma, params, alpha, counts, loglik), Info(n_active)

    return draws


def step(rng, state: State, model: Model):
    """One Gibbs sweep (see :func:`make_step`, which builds the closure the driver calls): ``state.z`` is
    drawn in place, and the returned state holds the same array; copy it to keep the state given."""
    return make_step(model)(rng, state)


# config.mixture_kmeans_lloyd: Lloyd iterations on the subsample after the k-means++ seeding
def _kmeanspp(xs, k: int, u):
    """k-means++ centres of the host rows ``xs`` (m, p), float64, chosen by the host uniforms ``u`` (k,)
    (the same on every backend), then Lloyd iterations; a centre that loses all its rows stays."""
    m, p = xs.shape
    centres = np.empty((k, p))
    centres[0] = xs[min(int(u[0] * m), m - 1)]
    d2 = ((xs - centres[0]) ** 2).sum(1)
    for j in range(1, k):
        cum = np.cumsum(d2)  # all zero where every row sits on a centre already: then any row
        i = int(np.searchsorted(cum, u[j] * cum[-1], side="right")) if cum[-1] > 0 else int(u[j] * m)
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
    """Starting means (starts, k, p), host float64: k-means++ on each start's own subsample of rows (drawn
    with replacement; at most ``config.mixture_kmeans_rows``, at least 16 per component). ``gather(idx)``
    gives the centred rows at global indices ``idx`` (starts, m) as host float64 (starts, m, p)."""
    m = int(min(n, max(16 * k, min(config.mixture_kmeans_rows, n))))
    u = _backend.to_host(rng.random((starts, m + k), dtype=np.float64))
    idx = np.minimum((u[:, :m] * n).astype(np.int64), n - 1)
    rows = gather(idx)
    return np.stack([_kmeanspp(rows[s], k, u[s, m:]) for s in range(starts)])


def init_bem(rng, model: Model, starts: int = 1) -> State:
    """BEM starting states: means from k-means++ (and a few Lloyd iterations) on a subsample for each start,
    covariances ``Phi``, equal weights."""
    x, xp = model.x, _xp_of(model.x)

    def gather(idx):
        return _backend.to_host(x[_backend.asarray(idx.ravel(), xp)].astype(np.float64)).reshape(idx.shape + (-1,))

    mu = _bem_start_means(rng, x.shape[0], model.k, starts, gather)
    return _init_from_means(model, _backend.asarray(mu, xp), xp.zeros((starts, 0), dtype=np.int32))


def make_bem_step(model: Model):
    """``bem(state) -> state``: one Bayesian-EM iterate of every start (the paper's four BEM steps):
    :func:`bem_local` on all the rows, then :func:`make_bem_update`. Nothing is read back to the host; the
    closure keeps its scratch buffers between calls, and returned states never share memory with them."""
    part = BemPart(model, _make_bem_stats(model), model.x.shape[0])
    update = make_bem_update(model, part.n)

    def bem(state: State) -> State:
        with _validate.validation(False):
            return update(None, state, bem_local(None, state, part))[0]

    return bem


class BemPart(NamedTuple):
    """One part of the rows for a BEM iterate."""

    model: Model
    stats: object  # its E-step, _make_bem_stats (which keeps the scratch buffers)
    n: int         # the rows of the whole set


class BemStats(NamedTuple):
    """What step (1) of a BEM iterate sums over the rows, float64."""

    acc: object     # (C, k, q) the probabilities' weighted statistics, packed as GibbsStats'
    loglik: object  # (C,) the rows' log-normalisers


def bem_local(rng, state: State, part: BemPart) -> BemStats:
    """Step (1) of a BEM iterate on the rows of ``part``: their configuration probabilities at
    ``state.params`` and the probabilities' weighted statistics (``rng`` is not used: BEM draws nothing)."""
    acc, lse = part.stats(state.params)
    return BemStats(acc, _sum_rows(lse))


def make_bem_update(model: Model, n: int):
    """``update(rng, state, stats) -> (state, None)``: steps (2)-(4) of a BEM iterate from the summed
    :class:`BemStats` of all ``n`` rows (:func:`_bem_vb_update`)."""

    def update(rng, state: State, stats: BemStats):
        v, log_pi, mu, sigma, params, alpha, counts = _bem_vb_update(model, stats.acc, state.alpha)
        return State(state.z, v, log_pi, mu, sigma, params, alpha, counts, stats.loglik / n), None

    return update


# config.mixture_gemm_rows: rows per block of the Bayesian-EM statistics GEMM (None: one GEMM per chunk);
# config.mixture_gemm_min_blocks: chunks of fewer blocks take one GEMM (there launches, not the GEMM, take the time)
def _make_bem_stats(model: Model):
    """``stats(params) -> (acc, lse)``: step (1) of a BEM iterate, chunk by chunk. ``acc`` (C, k, q) float64
    packs ``[sum_i r_ij, sum_i r_ij x_i, vech(sum_i r_ij x_i x_i^T)]`` (one float64 GEMM per chunk with the
    design); ``lse`` (C, n), each row's log-likelihood, is the closure's buffer, overwritten by the next call."""
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
    buffers: dict = {}  # chains -> scratch: probabilities, logits, log-sum-exp, the chunks' statistics

    def stats(params):
        chains = params.shape[0]
        if chains not in buffers:
            size = chains * k * (spans[0][1] - spans[0][0])
            # float32 logits beside the float64 probabilities (the kernel on float32 data only)
            logits = xp.empty(size, dtype=x.dtype) if kernel and x.dtype != np.float64 else None
            parts = xp.empty((len(spans), chains * k, q), dtype=np.float64) if len(spans) > 1 else None
            buffers[chains] = (xp.empty(size, dtype=np.float64), logits, xp.empty((chains, n), dtype=x.dtype), parts)
        resp_flat, logits_flat, lse, parts = buffers[chains]
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
                    acc = xp.matmul(head, y[:nb * blocks].reshape(nb, blocks, q)).sum(axis=0)
                    if tail.shape[1]:
                        acc += xp.matmul(tail, y[nb * blocks:m])
                    if parts is not None:
                        parts[ci] = acc
                else:
                    assign(x, params, s, m, MODE_RESP, lse=lse, resp=resp, design=y, scratch=logits)
                    # one GEMM for every start: (C k, m) x (m, q)
                    r = resp.reshape(chains * k, m)
                    acc = xp.matmul(r, y) if parts is None else xp.matmul(r, y, out=parts[ci])
            if parts is not None:
                acc = parts.sum(axis=0)
        return acc.reshape(chains, k, q), lse

    return stats


def _bem_vb_update(model: Model, acc, alpha):
    """Steps (2)-(4) of a BEM iterate as a mean-field variational update of the truncated DP mixture.

    From the weighted statistics ``acc`` (C, k, q), float64: every component's NIW posterior (step 2), the
    sticks' Beta posteriors ``Be(1 + p_j, alpha + sum_{r>j} p_r)`` (step 3) and alpha's Gamma posterior
    ``Gamma(a + k - 1, b - sum_j E log(1 - v_j))`` (step 4), as in Blei and Jordan (2006). The next
    probabilities use the expected log weights and log densities: a component that holds few points pays
    for its uncertainty there, and the stick-breaking prior drains it. A component whose probabilities sum
    to less than half its free parameters (Figueiredo and Jain 2002: less support does not pay for them) is
    held at zero weight from then on: else a few points far in a cluster's tail keep a tight component. As in
    their component-wise rule, one such component goes an iterate (:func:`_pruned`).

    Returns ``v, log_pi, mu, sigma, params, alpha, counts`` (posterior means; ``log_pi = log E pi_j``, -inf
    for pruned components), the components in order of decreasing summed probability.
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
    dead = _pruned(counts, prune_count(p))
    counts = xp.where(dead, 0.0, counts)
    kn, mn, dfn, psi = niw_posterior(model, counts, s1 * ~dead[..., None], s2 * ~dead[..., None, None])
    sigma = psi / (dfn - p - 1)[..., None, None]
    chol = _safe_cholesky(psi)
    logdet = _logdet(chol)
    # E log|Lambda| for Lambda ~ Wishart(df_n, Psi_n^-1)
    elogdet = _multi(_digamma, dfn, p) + p * math.log(2.0) - logdet
    g1, g2, dg = _sticks(counts, alpha)
    elv = _digamma(g1) - dg
    el1v = _digamma(g2) - dg
    zero = xp.zeros((chains, 1))
    elogpi = xp.concatenate([elv, zero], axis=1) + xp.concatenate([zero, xp.cumsum(el1v, axis=1)], axis=1)
    v = xp.where(dead, 0.0, xp.concatenate([g1 / (g1 + g2), xp.ones((chains, 1))], axis=1))
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


def prune_count(p: int) -> float:
    """The support below which BEM holds a component at zero weight: half the free parameters of a mean and a
    covariance in p dimensions (Figueiredo and Jain 2002)."""
    return 0.5 * (p + p * (p + 1) / 2)


def _pruned(counts, limit: float):
    """The components held at zero weight after this iterate, (C, k) bool, from ``counts`` (C, k) in
    decreasing order: those with no probability left (pruned before, or out of every point's reach) and, of
    the others below ``limit``, the smallest alone (Figueiredo and Jain's component-wise annihilation). The
    points of a component pruned go to the others before the next is judged: pruning every one below the
    limit at once dropped whole clusters, when the start split a cluster over several components none of which
    held enough on its own. The largest component always stays."""
    xp = _xp_of(counts)
    below = counts < limit
    below[:, 0] = False  # the largest component stays, however few the events (n < the prune count)
    gone = below & (counts == 0.0)
    fresh = below & ~gone
    k = counts.shape[1]
    last = k - 1 - xp.argmax(fresh[:, ::-1], axis=1)  # the smallest such component (counts decrease)
    return gone | ((xp.arange(k)[None, :] == last[:, None]) & fresh.any(axis=1, keepdims=True))


def _bem_kl(model: Model, state: State):
    """The KL divergences of a BEM state's variational posteriors from the prior, summed, (C,) float64: the
    sticks against ``Be(1, alpha)`` (at the state's ``E alpha``) and every live component's NIW posterior
    against the prior. ``n`` times the E-step's mean log-sum-exp less this is the variational lower bound
    (alpha's own term left out: it is the same order for every start)."""
    xp = _xp_of(state.counts)
    p = model.x.shape[1]
    counts = state.counts
    g1, g2, dg = _sticks(counts, state.alpha)
    alpha = state.alpha[:, None]
    # log B(1, alpha) = -log alpha
    kl_v = (-xp.log(alpha) - (_gammaln(g1) + _gammaln(g2) - _gammaln(g1 + g2))
            + (g1 - 1.0) * (_digamma(g1) - dg) + (g2 - alpha) * (_digamma(g2) - dg)).sum(axis=1)
    kn = model.kappa0 + counts
    dfn = model.df0 + counts
    psi = state.sigma * (dfn - p - 1)[..., None, None]
    logdet_n = _logdet(_safe_cholesky(psi))
    psi0 = 0.5 * (model.psi0 + model.psi0.T)
    logdet_0 = 2.0 * xp.log(xp.diagonal(xp.linalg.cholesky(psi0))).sum()
    inv_n = xp.linalg.inv(psi)
    tr = (psi0[None, None] * inv_n).sum(axis=(-2, -1))  # tr(Psi_0 Psi_n^-1), both symmetric
    lmg_n = _multi(_gammaln, dfn, p)
    lmg_0 = _gammaln((model.df0 - xp.arange(p, dtype=np.float64)) / 2.0).sum()
    dmg_n = _multi(_digamma, dfn, p)
    df0 = model.df0
    # Wishart(df_n, Psi_n^-1) against Wishart(df_0, Psi_0^-1)
    kl_w = (-0.5 * df0 * (logdet_0 - logdet_n) + 0.5 * dfn * (tr - p) + lmg_0 - lmg_n
            + 0.5 * (dfn - df0) * dmg_n)
    d = state.mu - model.m
    quad = (d[..., :, None] * inv_n * d[..., None, :]).sum(axis=(-2, -1)) * dfn
    kl_m = 0.5 * (p * model.kappa0 / kn - p + p * xp.log(kn / model.kappa0) + model.kappa0 * quad)
    live = xp.isfinite(state.log_pi)
    return kl_v + xp.where(live, kl_w + kl_m, 0.0).sum(axis=1)


def _sticks(counts, alpha):
    """The sticks' Beta posteriors ``Be(g1, g2) = Be(1 + p_j, alpha + sum_{r>j} p_r)``, j < k, and
    ``digamma(g1 + g2)``."""
    xp = _xp_of(counts)
    tail = counts.sum(axis=1, keepdims=True) - xp.cumsum(counts, axis=1)
    g1, g2 = 1.0 + counts[:, :-1], alpha[:, None] + tail[:, :-1]
    return g1, g2, _digamma(g1 + g2)


def _logdet(chol):
    """``log|S|`` from the Cholesky factors of ``S``."""
    xp = _xp_of(chol)
    return 2.0 * xp.log(xp.diagonal(chol, axis1=-2, axis2=-1)).sum(-1)


def _multi(fn, df, p: int):
    """``sum_i fn((df - i) / 2)`` over ``i < p``: the multivariate gamma function's terms."""
    return fn((df[..., None] - _xp_of(df).arange(p, dtype=np.float64)) / 2.0).sum(-1)


def _special(name: str, x):
    """scipy.special's function ``name`` of ``x``, or cupyx.scipy.special's for a CuPy array."""
    return getattr(importlib.import_module("scipy.special" if _xp_of(x) is np else "cupyx.scipy.special"), name)(x)


_gammaln, _digamma = functools.partial(_special, "gammaln"), functools.partial(_special, "digamma")


def bem_step(model: Model, state: State) -> State:
    """One Bayesian-EM iterate of every start (see :func:`make_bem_step`, which keeps buffers between calls)."""
    return make_bem_step(model)(state)
