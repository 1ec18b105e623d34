"""Bayesian GLMs by slice-within-Gibbs with the differential update (Mahani & Sharabiani, §3-4).

Each coefficient is updated in turn by Neal's univariate slice sampler (stepping out, then shrinkage).
The linear predictor ``eta = X beta`` is kept per chain; a move of ``beta_k`` by ``Delta`` updates it as
``eta += Delta * X[:, k]`` (the differential update, §3.4.4), so a log-density evaluation costs O(N)
instead of O(NK). X is stored column-major, ``(K, N)``, so the column read is contiguous.

All chains, and in :class:`HierarchicalGLM` all groups (conditionally independent given the
hyperparameters, §4.1), move at once, with rows sorted by group and segment offsets (no padding). On
NumPy each candidate evaluation is one vectorised pass over ``X[:, k]`` and ``eta``, reduced by group,
and the stepping-out and shrinkage loops run as masked rounds over all chains and groups. On the GPU
(:mod:`.ops`) each group's rows are split into chunks, one block per (chain, chunk), so that the flat
model still fills the GPU. Every candidate Neal's procedure may need is known before it is evaluated
(the stepping-out points, and the shrinkage proposals given that all before were rejected), so one pass
evaluates up to 16 of them: a first launch per coordinate evaluates ``x0``, the stepping-out points and
the first proposals, a second the next proposals of the few (chain, group) still open, and the next
coordinate's first launch applies the step to ``eta``. No host synchronisation, and the same random
numbers (drawn per sweep) and, up to rounding at a slice boundary, the same draws as the NumPy path.

Both are bounded: ``max_steps_out`` expansions in all (Neal's split between the two sides) and
``max_shrink`` proposals. The step width is tuned in warm-up to about three times the typical move; a
chain whose shrinkage has not accepted after ``max_shrink`` proposals keeps its value (counted in the
sample stat ``fallbacks``). On the GPU the estimators replay each sweep (about 2 K small launches) from
a CUDA graph, for the same draws bit for bit.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ... import _validate
from ... import backend as _backend
from ..._config import config
from ...glm import _lgamma1p, pointwise_loglik
from .ops import (_PMAX, _chunk_plan, _niw_fits, _niw_kernel, _niw_twin, _prior_terms, _slice_kernel_coordinate,
                  _slice_pass_sweep, _tuned_width)

__all__ = ["HyperPrior", "SliceInfo", "SliceState", "init", "step", "sweep_randoms"]


class SliceState(NamedTuple):
    beta: object     # (C, G, K) coefficients
    eta: object      # (C, N) linear predictor, rows sorted by group
    width: object    # (C, G, K) slice step widths
    mu: object       # (C, K) prior mean of the groups' coefficients
    prec: object     # (C, K, K) prior precision
    sigma: object    # (C, K, K) prior covariance
    it: object       # (C,) iteration counter


class SliceInfo(NamedTuple):
    evaluations: object  # (C,) log-density evaluations in the sweep (the same for every chain; -1 on the GPU)
    fallbacks: object    # (C,) coordinates whose shrinkage ran out of proposals
    loglik: object       # (C,) log-likelihood after the sweep


class HyperPrior(NamedTuple):
    """The hierarchical model's conjugate hyperprior, as :func:`step` takes it.

    ``covariance="full"``: ``Sigma ~ InvWishart(nu0, psi0)`` with ``psi0`` a (K, K) scale matrix,
    ``mu | Sigma ~ N(0, Sigma / kappa0)``. ``covariance="diag"``: ``Sigma = diag(tau^2)`` with
    ``tau_k^2 ~ InvGamma(nu0 / 2, psi0_k / 2)`` (``psi0`` a number or a (K,) array on the backend of the
    state) and ``mu_k | tau_k^2 ~ N(0, tau_k^2 / kappa0)``.
    """

    kappa0: float
    nu0: float
    psi0: object
    covariance: str = "full"


class _Data(NamedTuple):
    Xt: object      # (K, N) column-major design
    y: object       # (N,)
    lgy: object     # (N,) lgamma(y + 1) (poisson) or None
    gid: object     # (N,) group of each row (None: one group)
    starts: object  # (G,) first row of each group
    ends: object    # (G,) one past the last row
    plan: object = None  # the GPU kernel's split of each group's rows into chunks (_ChunkPlan), CuPy only


def _segment_sum(xp, v, data):
    """Sum of ``v`` (C, N) over each group's rows -> (C, G), via a float64 prefix sum."""
    if data.starts.shape[0] == 1:  # one group: a plain row sum
        return v.sum(axis=1, dtype=np.float64)[:, None]
    cs = xp.cumsum(v.astype(np.float64), axis=1)
    cs = xp.concatenate([xp.zeros((v.shape[0], 1), dtype=np.float64), cs], axis=1)
    return cs[:, data.ends] - cs[:, data.starts]


def _moved(eta, data, k, delta):
    """``eta`` with coordinate ``k`` of each (chain, group) moved by ``delta`` (C, G): the differential update."""
    return eta + (delta[:, data.gid] if data.starts.shape[0] > 1 else delta) * data.Xt[k][None, :]


def _total_loglik(xp, data, family, sigma_noise, eta):
    """The log-likelihood of every chain (C,), float64, at the linear predictor ``eta``."""
    return pointwise_loglik(eta, data.y, family, sigma_noise, xp, data.lgy).sum(axis=1, dtype=np.float64)


def _loglik(xp, data, family, sigma_noise, eta, k):
    """``delta -> `` each group's log-likelihood (C, G), float64, with coordinate ``k`` moved by ``delta``."""
    return lambda delta: _segment_sum(xp, pointwise_loglik(_moved(eta, data, k, delta), data.y, family, sigma_noise,
                                                           xp, data.lgy), data)


def sweep_randoms(rng, shape, dtype, max_shrink: int):
    """The random numbers of one sweep over chains x groups x coefficients ``shape = (C, G, K)``, drawn
    up front and in this order by every path (NumPy, the GPU kernels, the sharded sweeps): per
    coordinate an exponential (the slice level), two uniforms (the bracket's position and the split of
    the stepping-out budget) and ``max_shrink`` uniforms (the shrinkage proposals)."""
    C, G, K = shape
    return (rng.standard_exponential(size=(K, C, G), dtype=dtype), rng.uniform(size=(K, 2, C, G), dtype=dtype),
            rng.uniform(size=(K, max_shrink, C, G), dtype=dtype))


def step(rng, state: SliceState, data: _Data, family: str, sigma_noise: float, n_warmup: int,
         max_steps_out: int = 4, max_shrink: int = 24, hyper=None):
    """One slice-within-Gibbs sweep over every coefficient of every chain and group; for the hierarchy,
    ``hyper`` (a :class:`HyperPrior`, or a ``(kappa0, nu0, psi0)`` tuple for ``covariance="full"``), after
    which ``mu, Sigma`` are drawn from their conjugate conditional."""
    xp = _backend.get_array_module(state.eta)
    C, G, K = state.beta.shape
    randoms = sweep_randoms(rng, (C, G, K), state.beta.dtype, max_shrink)
    beta, eta, width, fallbacks, evals = _sweep_coefs(xp, state, data, family, sigma_noise, n_warmup, max_steps_out,
                                                      max_shrink, *randoms)
    mu, prec, sigma = state.mu, state.prec, state.sigma
    if hyper is not None:
        mu, prec, sigma = _draw_hyper(rng, beta, hyper, xp)
    ll = _total_loglik(xp, data, family, sigma_noise, eta)
    new = SliceState(beta, eta, width, mu, prec, sigma, state.it + 1)
    return new, SliceInfo(xp.full((C,), evals, dtype=np.int64), fallbacks, ll)


def _sweep_coefs(xp, state, data, family, sigma_noise, n_warmup, max_steps_out, max_shrink, e_all, u_all, us_all):
    """:func:`step`'s new beta, eta and width, fallbacks per chain and evaluations (-1 on the GPU)."""
    if xp is np:
        return _coordinates(xp, state, n_warmup, max_steps_out, max_shrink, e_all, u_all, us_all,
                            lambda eta, k: _loglik(xp, data, family, sigma_noise, eta, k),
                            lambda eta, k, delta: _moved(eta, data, k, delta))
    beta, eta, width = state.beta.copy(), state.eta.copy(), state.width.copy()  # moved in place by the kernels
    if max_steps_out < _PMAX and data.plan is not None:
        fallbacks = _slice_pass_sweep(xp, state, beta, eta, width, data, family, sigma_noise, n_warmup,
                                      max_steps_out, max_shrink, e_all, u_all, us_all)
    else:
        warm = (state.it < n_warmup)[:, None]
        fallbacks = xp.zeros((beta.shape[0],), dtype=np.int64)
        for k in range(beta.shape[2]):
            fallbacks += _slice_kernel_coordinate(xp, state, beta, eta, width, warm, data, family, sigma_noise,
                                                  k, max_steps_out, max_shrink, e_all[k], u_all[k], us_all[k])
    return beta, eta, width, fallbacks, -1  # evaluations not counted (each block stops when it is done)


def _coordinates(xp, state, n_warmup, max_steps_out, max_shrink, e_all, u_all, us_all, loglik_of, moved):
    """The array code's sweep, returning as :func:`_sweep_coefs`: ``loglik_of(eta, k)`` and ``moved(eta, k,
    delta)`` take ``state.eta`` as it is held (one array, or one per shard)."""
    C, _, K = state.beta.shape
    beta, eta, width = state.beta.copy(), state.eta, state.width.copy()  # written in place below
    warm = (state.it < n_warmup)[:, None]
    fallbacks = xp.zeros((C,), dtype=np.int64)
    evals = 0
    for k in range(K):  # coordinate k's conditional log-density: the log-likelihood and the prior's terms
        x0, loglik = beta[:, :, k], loglik_of(eta, k)
        pkk, muk, c = _prior_terms(xp, beta, state.mu, state.prec, k)

        def target(x):
            z = x - muk
            return loglik(x - x0) - 0.5 * pkk * z * z - z * c

        xnew, done, n = _slice_update(xp, target, x0, width[:, :, k], max_steps_out, max_shrink, e_all[k],
                                      u_all[k], us_all[k])
        evals += n
        fallbacks = fallbacks + (~done).sum(axis=1)
        delta = xnew - x0
        eta = moved(eta, k, delta)
        beta[:, :, k] = xnew
        width[:, :, k] = _tuned_width(xp, warm, width[:, :, k], delta)
    return beta, eta, width, fallbacks, evals


def _slice_update(xp, target, x0, w, max_steps_out, max_shrink, e, u, us):
    """Neal's procedure for one coordinate of every (chain, group) in masked rounds: the new values, whether
    each accepted (else it keeps ``x0``) and the evaluations."""
    logy = target(x0) - e
    L = x0 - w * u[0]
    R = L + w
    J = xp.floor(max_steps_out * u[1])
    Jr = (max_steps_out - 1) - J
    evals = 1
    for s in range(max_steps_out):  # stepping out: each side while its budget lasts and it is in the slice
        aL, aR = J > s, Jr > s
        if not (aL.any() or aR.any()):
            break
        fL, fR = target(L), target(R)
        evals += 2
        aL, aR = aL & (fL > logy), aR & (fR > logy)
        L, R = xp.where(aL, L - w, L), xp.where(aR, R + w, R)
        J, Jr = xp.where(aL, J, 0), xp.where(aR, Jr, 0)
    xnew = x0
    done = xp.zeros(x0.shape, dtype=bool)
    for s in range(max_shrink):  # shrinkage: a rejected proposal becomes the bracket's end on its side
        if done.all():
            break
        x1 = L + us[s] * (R - L)
        f1 = target(x1)
        evals += 1
        ok = (~done) & (f1 > logy)
        xnew = xp.where(ok, x1, xnew)
        lower, upper = (~done) & (~ok) & (x1 < x0), (~done) & (~ok) & (x1 >= x0)
        L, R = xp.where(lower, x1, L), xp.where(upper, x1, R)
        done = done | ok
    return xnew, done, evals


def _draw_hyper(rng, beta, hyper, xp):
    """mu, Sigma | beta from their conjugate conditional, all chains at once.

    ``Sigma | beta ~ InvWishart(nu0 + G, psi)`` with ``psi = psi0 + S + kappa0 G / (kappa0 + G) bbar bbar^T``
    (``bbar`` the groups' mean, ``S`` their scatter) by the Bartlett decomposition, and
    ``mu | Sigma, beta ~ N(G bbar / (kappa0 + G), Sigma / (kappa0 + G))``. The random numbers come from the
    generator on either backend; ``glm_niw`` (a block per chain) or its twin :func:`.ops._niw_twin` the rest.
    """
    kappa0, nu0, psi0 = hyper[:3]
    if len(hyper) > 3 and hyper[3] == "diag":
        with _validate.validation(False):  # the shapes are positive by construction
            return _draw_hyper_diag(rng, beta, kappa0, nu0, psi0, xp)
    C, G, K = beta.shape
    # As gpumcmc.random's invwishart takes them: Gamma((df - i) / 2) for A_ii = sqrt(2 Gamma), df = nu0 + G.
    shape = xp.broadcast_to((nu0 + G - xp.arange(K, dtype=np.float64)) / 2, (C, K)).copy()
    with _validate.validation(False):  # nu0 > K - 1, so every shape is positive
        gam = rng.gamma(shape, dtype=np.float64)
        zn = rng.standard_normal(size=(C, K, K), dtype=np.float64)
        z = rng.standard_normal(size=(C, K), dtype=np.float64)
    if xp is not np and config.glm_niw_kernel and _niw_fits(K):
        return _niw_kernel(xp, beta, kappa0, psi0, gam, zn, z)
    return _niw_twin(xp, beta, kappa0, psi0, gam, zn, z)


def _draw_hyper_diag(rng, beta, kappa0, nu0, psi0, xp):
    """mu, diag(tau^2) | beta, coordinate by coordinate, all chains at once: with ``bbar_k`` the groups'
    mean and ``S_k`` their sum of squared deviations,
    ``tau_k^2 | beta ~ InvGamma((nu0 + G)/2, (psi0_k + S_k + kappa0 G bbar_k^2/(kappa0 + G))/2)``
    (``scale / Gamma(shape, 1)``) and ``mu_k | tau_k^2, beta ~ N(G bbar_k/(kappa0 + G), tau_k^2/(kappa0 + G))``."""
    C, G, K = beta.shape
    b = beta.astype(np.float64)
    bbar = b.mean(axis=1)                                         # (C, K)
    S = ((b - bbar[:, None, :]) ** 2).sum(axis=1)                 # (C, K)
    kn = kappa0 + G
    scale = 0.5 * (psi0 + S + (kappa0 * G / kn) * bbar * bbar)    # (C, K)
    shape = xp.full((C, K), 0.5 * (nu0 + G), dtype=np.float64)
    tau2 = scale / rng.gamma(shape, 1.0, dtype=np.float64)
    z = rng.standard_normal(size=(C, K), dtype=np.float64)
    mu = (G / kn) * bbar + xp.sqrt(tau2 / kn) * z
    eye = xp.eye(K, dtype=np.float64)[None]
    dt = beta.dtype
    return mu.astype(dt), (eye / tau2[:, None, :]).astype(dt), (eye * tau2[:, None, :]).astype(dt)


def _check_prior_scale(prior_scale, dtype) -> float:
    """``prior_scale`` as a float, refused (ValueError) where the state cannot hold its prior: the variance
    ``prior_scale**2`` and the precision ``1 / prior_scale**2`` must both be finite, positive numbers of
    ``dtype`` (float32 or float64). Past that, ``prior_scale**2`` raises OverflowError (beyond the float64
    range) or casts to inf (float32), and a square that rounds to 0 makes the precision infinite and every
    draw NaN. Reads only the number: no synchronisation."""
    dt = np.dtype(dtype)
    ps = float(prior_scale)
    if dt.kind != "f":      # not a float dtype: refused where the data are checked
        return ps
    with np.errstate(all="ignore"):
        var = dt.type(ps * ps)                  # as _init_state's casts round it (ps * ps: inf, not an error)
        ok = bool(np.isfinite(var)) and var > 0 and bool(np.isfinite(dt.type(1) / var))
    if not ok:
        big = math.sqrt(float(np.finfo(dt).max))
        hint = ("For an effectively flat prior pass prior_scale=1e6 (the likelihood then dominates)." if ps > 1
                else "A prior that tight holds every coefficient at 0: pass a larger prior_scale.")
        raise ValueError(f"prior_scale={prior_scale!r} is out of range for dtype {dt.name}: the prior variance "
                         f"prior_scale**2 and the prior precision 1 / prior_scale**2 must both be finite, positive "
                         f"{dt.name} numbers, so prior_scale must lie within about [{1 / big:.2g}, {big:.2g}]. {hint}")
    return ps


def _init_state(xp, C, G, K, N, dt, prior_scale):
    eye = xp.eye(K, dtype=dt)
    return SliceState(
        beta=xp.zeros((C, G, K), dtype=dt), eta=xp.zeros((C, N), dtype=dt),
        width=xp.ones((C, G, K), dtype=dt) * min(1.0, float(prior_scale)),
        mu=xp.zeros((C, K), dtype=dt), prec=xp.broadcast_to(eye / prior_scale**2, (C, K, K)).copy(),
        sigma=xp.broadcast_to(eye * prior_scale**2, (C, K, K)).copy(), it=xp.zeros((C,), dtype=np.int64))


def init(X, y, family="bernoulli", n_chains=4, prior_scale=2.5, groups=None, chunk_shape=None):
    """Initial state and data for :func:`step` (arrays on X's backend); see the estimators.
    ``chunk_shape``: the GPU kernel's (rows a chunk, threads a block), chosen from the data if None."""
    _check_prior_scale(prior_scale, X.dtype)
    data, G = _init_data(X, y, family, n_chains, groups, chunk_shape)
    N, K = X.shape
    return _init_state(_backend.get_array_module(X), n_chains, G, K, N, X.dtype, prior_scale), data


def _init_data(X, y, family, n_chains, groups, chunk_shape):
    """``(data, G)`` of :func:`init`."""
    xp = _backend.get_array_module(X)
    N, K = X.shape
    if groups is None:
        gid = None
        starts = xp.asarray([0], dtype=np.int64)
        ends = xp.asarray([N], dtype=np.int64)
        G = 1
    else:
        gid = groups
        G = int(gid.max()) + 1 if N else 0
        counts = xp.bincount(gid, minlength=G)
        ends = xp.cumsum(counts)
        starts = ends - counts
    lgy = _lgamma1p(xp, y) if family == "poisson" else None
    plan = _chunk_plan(xp, starts, ends, n_chains, chunk_shape) if xp is not np else None
    # y contiguous: the kernels read it by its address (a column of a CuPy table would be read as its
    # first N values)
    return _Data(xp.ascontiguousarray(X.T), xp.ascontiguousarray(y), lgy, gid, starts, ends, plan), G
