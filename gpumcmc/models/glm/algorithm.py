"""Bayesian GLMs by slice-within-Gibbs with the differential update (Mahani & Sharabiani, §3-4).

Each coefficient is updated in turn by Neal's univariate slice sampler
(stepping out, then shrinkage). The linear predictor ``eta = X beta`` is kept
per chain; a move of ``beta_k`` by ``Delta`` updates it as
``eta += Delta * X[:, k]`` (the differential update, §3.4.4), so each
log-density evaluation costs O(N) instead of O(NK). X is stored
column-major, ``(K, N)``, so the column read is contiguous.

All chains, and in :class:`HierarchicalGLM` all groups (conditionally
independent given the hyperparameters, §4.1), move at once, with rows sorted
by group and segment offsets (no padding). On NumPy every candidate
evaluation is one vectorised pass over ``X[:, k]`` and ``eta`` of every chain,
reduced by group, and the stepping-out and shrinkage loops run as masked
rounds over all chains and groups. On the GPU each group's rows are split
into chunks, one block per (chain, chunk), so that a single group (the flat
model) still fills the GPU. Every candidate Neal's procedure may need is
known before it is evaluated (the stepping-out points, and the shrinkage
proposals, which follow from the uniforms given that all before were
rejected), so one pass over ``X[:, k]``, ``y`` and ``eta`` evaluates up to 16
of them at once: the first launch per coordinate evaluates ``x0``, the
stepping-out points and the first shrinkage proposals, and a second the next
proposals of the few (chain, group) still open. The last block of a (chain,
group) adds the blocks' sums in a fixed order and takes the decisions; the
step ``eta += Delta * X[:, k]`` is applied by the next coordinate's first
launch as it reads ``eta``. Two launches per coordinate, no host
synchronisation, and the same random numbers (drawn per sweep) and, up to
rounding at a slice boundary, the same draws as the NumPy path. Both are
bounded: ``max_steps_out``
expansions in all (Neal's split between the two sides) and ``max_shrink``
shrinkage proposals. The step width is tuned in warm-up to
about three times the typical move, so one expansion is rarely needed and
each shrinkage at least halves the bracket; a chain whose shrinkage has not
accepted after ``max_shrink`` proposals keeps its current value (a rare
fallback, counted in the sample stat ``fallbacks``).

On the GPU the estimators replay each sweep from a CUDA graph (``graph=None``,
the default): the sweep is about 2 K small launches and the Python around
them (random numbers, the hyperparameter draw, the last coordinate's step),
which took as long as the GPU's own work; one graph launch per sweep leaves
only the GPU's time, for the same draws bit for bit.

``BayesianGLM(devices=...)`` splits the rows over devices
(:func:`make_sharded_step`): each keeps ``eta`` of its rows and moves it by
the differential update. On the GPU the decision of ``glm_slice_pass`` is a
launch of its own: per coordinate and pass, every device evaluates the
candidates over its rows, the candidates' sums (16 float64 values a chain)
are all-reduced, and every device decides from the same sums in its own copy
of the state, so all take the same decisions with no broadcast and no host
synchronisation.

>>> import numpy as np
>>> from gpumcmc.models import BayesianGLM
>>> rs = np.random.default_rng(0)
>>> X = rs.normal(size=(200, 2)); y = (rs.random(200) < 1 / (1 + np.exp(-X @ [1.0, -1.0]))).astype(float)
>>> m = BayesianGLM("bernoulli", n_chains=2, n_samples=50, n_warmup=50, random_state=1,
...                 progress=False, backend="numpy").fit(X, y)
>>> m.coef_.shape
(2,)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ... import _kernel_args, _validate
from ..._config import config, forward
from ... import backend as _backend
from ...shards import Replica, balanced_cuts
from ...glm import check_family, check_y, mean_function, pointwise_loglik
from ...sampling import Estimator, as_data, run, to_arviz
from ...sampling._estimator import HAVE_SKLEARN, Integral, Interval, Real, StrOptions

__all__ = ["BayesianGLM", "HierarchicalGLM", "HyperPrior", "ShardedGroupState", "ShardedSliceState", "SliceState",
           "allreduce_bytes", "group_bounds", "groups_allreduce_bytes", "init", "init_groups_sharded", "init_sharded",
           "make_groups_sharded_step", "make_sharded_step", "shard_passes", "step"]


class SliceState(NamedTuple):
    beta: object     # (C, G, K) coefficients
    eta: object      # (C, N) linear predictor, rows sorted by group
    width: object    # (C, G, K) slice step widths
    mu: object       # (C, K) prior mean of the groups' coefficients
    prec: object     # (C, K, K) prior precision
    sigma: object    # (C, K, K) prior covariance
    it: object       # (C,) iteration counter


class SliceInfo(NamedTuple):
    evaluations: object  # (C,) log-density evaluations in the sweep (the same for every chain)
    fallbacks: object    # (C,) coordinates whose shrinkage ran out of proposals
    loglik: object       # (C,) log-likelihood after the sweep


class HyperPrior(NamedTuple):
    """The hierarchical model's conjugate hyperprior, as :func:`step` takes it.

    ``covariance="full"``: ``Sigma ~ InvWishart(nu0, psi0)`` with ``psi0`` a
    (K, K) scale matrix, ``mu | Sigma ~ N(0, Sigma / kappa0)``.
    ``covariance="diag"``: ``Sigma = diag(tau^2)`` with, for each k,
    ``tau_k^2 ~ InvGamma(nu0 / 2, psi0_k / 2)`` (``psi0`` a number or a (K,)
    array on the backend of the state) and ``mu_k | tau_k^2 ~ N(0, tau_k^2 / kappa0)``.
    """

    kappa0: float
    nu0: float
    psi0: object
    covariance: str = "full"


class _Data(NamedTuple):
    Xt: object      # (K, N) column-major design
    y: object       # (N,)
    lgy: object     # (N,) lgamma(y + 1) (poisson) or None
    gid: object     # (N,) group of each row
    starts: object  # (G,) first row of each group
    ends: object    # (G,) one past the last row
    plan: object = None  # the GPU kernel's split of each group's rows into chunks (_ChunkPlan), CuPy only


class _ChunkPlan(NamedTuple):
    chunk_rows: int     # rows per chunk (the last chunk of a group may hold fewer)
    n_chunks: int       # chunks over all groups (each group has at least one)
    chunk_group: object  # (n_chunks,) int32 group of each chunk
    chunk_first: object  # (G + 1,) int32 first chunk of each group, then n_chunks
    block: int          # threads per block


def _segment_sum(xp, v, data):
    """Sum of ``v`` (C, N) over each group's rows -> (C, G), via a float64 prefix sum."""
    if data.starts.shape[0] == 1:  # one group: a plain row sum
        return v.sum(axis=1, dtype=np.float64)[:, None]
    cs = xp.cumsum(v.astype(np.float64), axis=1)
    cs = xp.concatenate([xp.zeros((v.shape[0], 1), dtype=np.float64), cs], axis=1)
    return cs[:, data.ends] - cs[:, data.starts]


def _prior_terms(xp, beta, mu, prec, k):
    """The prior's part of coordinate ``k``'s conditional: ``-pkk (x - muk)^2 / 2 - (x - muk) c`` with
    pkk (C, 1), muk (C, 1) and the cross term c (C, G), in the dtype of beta."""
    d = beta - mu[:, None, :]                                  # (C, G, K)
    pk = prec[:, k, :]                                         # (C, K)
    c = xp.einsum("cgj,cj->cg", d, pk) - d[:, :, k] * pk[:, k][:, None]
    return pk[:, k][:, None], mu[:, k][:, None], c


def _make_target(xp, data, family, sigma_noise, state, k, G):
    """The conditional log-density of coordinate ``k`` of every (chain, group) as a function of its value."""
    beta, eta = state.beta, state.eta
    xk = data.Xt[k][None, :]
    x0 = beta[:, :, k]
    pkk, muk, c = _prior_terms(xp, beta, state.mu, state.prec, k)

    def target(x):
        delta = x - x0
        e = eta + (delta[:, data.gid] if G > 1 else delta) * xk
        ll = _segment_sum(xp, pointwise_loglik(e, data.y, family, sigma_noise, xp, data.lgy), data)
        z = x - muk
        return ll - 0.5 * pkk * z * z - z * c

    return target, x0


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
    """One slice-within-Gibbs sweep over every coefficient of every chain and group.

    ``hyper`` (for the hierarchical model) is a :class:`HyperPrior` (a plain
    ``(kappa0, nu0, psi0)`` tuple means ``covariance="full"``): after the
    sweep ``mu, Sigma`` are drawn from their conjugate conditional,
    normal-inverse-Wishart or, for a diagonal ``Sigma``, normal-inverse-gamma
    coordinate by coordinate.
    """
    xp = _backend.get_array_module(state.eta)
    C, G, K = state.beta.shape
    dt = state.beta.dtype
    e_all, u_all, us_all = sweep_randoms(rng, (C, G, K), dt, max_shrink)
    beta, eta, width, fallbacks, evals = _sweep_coefs(xp, state, data, family, sigma_noise, n_warmup, max_steps_out,
                                                      max_shrink, e_all, u_all, us_all)
    mu, prec, sigma = state.mu, state.prec, state.sigma
    if hyper is not None:
        mu, prec, sigma = _draw_hyper(rng, beta, hyper, xp)
    ll = pointwise_loglik(eta, data.y, family, sigma_noise, xp, data.lgy).sum(axis=1, dtype=np.float64)
    new = SliceState(beta, eta, width, mu, prec, sigma, state.it + 1)
    info = SliceInfo(xp.full((C,), evals, dtype=np.int64), fallbacks, ll)
    return new, info


def _sweep_coefs(xp, state, data, family, sigma_noise, n_warmup, max_steps_out, max_shrink, e_all, u_all, us_all):
    """The coefficients' part of :func:`step`, with its random numbers given: returns the new beta, eta,
    width, the fallbacks per chain and the evaluations (-1 on the GPU)."""
    C, G, K = state.beta.shape
    beta, eta, width = state.beta.copy(), state.eta, state.width.copy()  # written in place below
    warm = (state.it < n_warmup)[:, None]
    early_exit = xp is np
    evals = 0
    fallbacks = xp.zeros((C,), dtype=np.int64)
    if xp is not np:
        eta = eta.copy()  # moved in place by the kernels
        if max_steps_out < _PMAX and data.plan is not None:
            fallbacks = _slice_pass_sweep(xp, state, beta, eta, width, data, family, sigma_noise, n_warmup,
                                          max_steps_out, max_shrink, e_all, u_all, us_all)
        else:
            for k in range(K):
                fb = _slice_kernel_coordinate(xp, state, beta, eta, width, warm, data, family, sigma_noise,
                                              k, max_steps_out, max_shrink, e_all[k], u_all[k], us_all[k])
                fallbacks = fallbacks + fb
        evals = -1  # not counted on the GPU path (each block stops when its own slice update is done)
    for k in range(K if xp is np else 0):
        st = state._replace(beta=beta, eta=eta)
        target, x0 = _make_target(xp, data, family, sigma_noise, st, k, G)
        w = width[:, :, k]
        f0 = target(x0)
        logy = f0 - e_all[k]
        u = u_all[k]
        L = x0 - w * u[0]
        R = L + w
        J = xp.floor(max_steps_out * u[1])
        Jr = (max_steps_out - 1) - J
        evals += 1
        for s in range(max_steps_out):
            aL = J > s
            aR = Jr > s
            if early_exit and not (aL.any() or aR.any()):
                break
            fL = target(L)
            fR = target(R)
            evals += 2
            aL = aL & (fL > logy)
            aR = aR & (fR > logy)
            L = xp.where(aL, L - w, L)
            R = xp.where(aR, R + w, R)
            J = xp.where(aL, J, 0)
            Jr = xp.where(aR, Jr, 0)
        us = us_all[k]
        xnew = x0
        done = xp.zeros((C, G), dtype=bool)
        for s in range(max_shrink):
            if early_exit and done.all():
                break
            x1 = L + us[s] * (R - L)
            f1 = target(x1)
            evals += 1
            ok = (~done) & (f1 > logy)
            xnew = xp.where(ok, x1, xnew)
            lower = (~done) & (~ok) & (x1 < x0)
            upper = (~done) & (~ok) & (x1 >= x0)
            L = xp.where(lower, x1, L)
            R = xp.where(upper, x1, R)
            done = done | ok
        fallbacks = fallbacks + (~done).sum(axis=1)
        delta = xnew - x0
        eta = eta + (delta[:, data.gid] if G > 1 else delta) * data.Xt[k][None, :]
        beta[:, :, k] = xnew
        neww = 0.9 * w + 0.1 * (3.0 * xp.abs(delta) + 1e-3 * w)
        width[:, :, k] = xp.where(warm, neww, w)
    return beta, eta, width, fallbacks, evals


FILE = "glm.cu"
_FAMILY = {"bernoulli": 0, "poisson": 1, "gaussian": 2}  # the kernels' family codes


def _around(kernel: str, varying: tuple, values: tuple) -> tuple:
    """``(head, tail)``: ``values``, a launch's arguments of ``kernel`` in the declared order (as
    :func:`gpumcmc._kernel_args.packed` gives them), without the parameters ``varying``, which follow one
    another in the declaration. A launch that changes only those then takes ``*head, *varying values,
    *tail``: the arguments bound by name once, each launch costing the host a tuple."""
    names = _kernel_args.signature(FILE, kernel).names
    i = names.index(varying[0])
    if names[i:i + len(varying)] != tuple(varying):
        raise ValueError(f"{kernel} in {FILE}: the parameters {', '.join(varying)} do not follow one another.")
    return values[:i], values[i + len(varying):]


_SEG_NAMES = ("glm_slice_segment<float>", "glm_slice_segment<double>", "glm_slice_pass<float>",
              "glm_slice_pass<double>", "glm_slice_shard_eval<float>", "glm_slice_shard_eval<double>",
              "glm_slice_decide<float>", "glm_slice_decide<double>")
_PMAX = 16         # candidates one pass evaluates (GLM_PMAX in glm.cu: a constant of the kernels, not a knob)
# The GPU sweep's knobs in gpumcmc._config.config: glm_spec_shrink, glm_chunk_rows, glm_block (the old module
# names still read and set them).
forward(__name__, {"_SPEC_SHRINK": "glm_spec_shrink", "_CHUNK_ROWS": "glm_chunk_rows", "_BLOCK": "glm_block"})


def _slice_kernel_coordinate(xp, state, beta, eta, width, warm, data, family, sigma_noise, k,
                             max_steps_out, max_shrink, e, u, us):
    """Coordinate ``k`` of every chain and group by one block per (chain, group) (``glm_slice_segment``,
    which runs Neal's procedure to the end in one launch): the GPU sweep for ``max_steps_out >= _PMAX``,
    more stepping-out points than one pass of ``glm_slice_pass`` evaluates; ``beta``, ``eta``, ``width``
    are updated in place. ``e``, ``u``,
    ``us`` are the twin's random numbers for this coordinate."""
    from ... import _loader

    C, G, K = beta.shape
    dt = beta.dtype
    N = eta.shape[1]
    x0 = xp.ascontiguousarray(beta[:, :, k])
    w = xp.ascontiguousarray(width[:, :, k])
    d = beta - state.mu[:, None, :]
    pk = state.prec[:, k, :]
    cpr = xp.ascontiguousarray(xp.einsum("cgj,cj->cg", d, pk) - d[:, :, k] * pk[:, k][:, None], dtype=dt)
    pkk = xp.ascontiguousarray(pk[:, k], dtype=dt)
    muk = xp.ascontiguousarray(state.mu[:, k], dtype=dt)
    e, u, us = (xp.ascontiguousarray(a) for a in (e, u, us))
    xnew = xp.empty((C, G), dtype=dt)
    ok = xp.empty((C, G), dtype=np.uint8)
    name = _SEG_NAMES[0] if dt == np.float32 else _SEG_NAMES[1]
    fn = _loader.get_function("glm.cu", name, _SEG_NAMES)
    rows = N / max(G, 1)
    block = 1024 if rows >= 16384 else 256 if rows >= 1024 else 128 if rows >= 256 else 64
    # The kernel's registers may not allow 1,024 threads a block: take the largest power of two it allows.
    while block > 64 and block > fn.max_threads_per_block:
        block //= 2
    fn((G, C), (block,),
       _kernel_args.args(FILE, "glm_slice_segment", xk=data.Xt[k], y=data.y, lgy=_loader.NULL, eta=eta,
                         starts=data.starts, ends=data.ends, x0a=x0, wa=w, cpr=cpr, pkk=pkk, muk=muk, ea=e, ua=u,
                         usa=us, N=_loader.i64(N), G=_loader.i32(G), C=_loader.i32(C),
                         max_out=_loader.i32(max_steps_out), max_shrink=_loader.i32(max_shrink),
                         family=_loader.i32(_FAMILY[family]), sigma=np.float64(sigma_noise), xnew_out=xnew,
                         ok_out=ok))
    beta[:, :, k] = xnew
    delta = xnew - x0
    width[:, :, k] = xp.where(warm, 0.9 * w + 0.1 * (3.0 * xp.abs(delta) + 1e-3 * w), w)
    return (ok == 0).sum(axis=1)


def _chunk_plan(xp, starts, ends, n_chains, shape=None):
    """Split each group's rows into chunks for glm_slice_pass: enough blocks to fill the GPU.
    ``shape``: (rows a chunk, threads a block) to use instead of choosing them (the plan of a part of
    the groups that splits each group as the plan of all of them does)."""
    from ... import _loader

    st = np.asarray(_backend.to_host(starts), dtype=np.int64)
    en = np.asarray(_backend.to_host(ends), dtype=np.int64)
    sizes = en - st
    N = int(en[-1]) if len(en) else 0
    biggest = int(sizes.max()) if len(sizes) else 0
    # Threads a block: about two rows each in the largest group, 32 to 256. Small groups (the
    # hierarchical model's) then get small blocks, many of them resident per SM: a block's time is
    # mostly the latency of its few dependent steps, so more at once is what makes the pass short
    # (benchmarks/NOTES.md has the measurements).
    half = -(-biggest // 2)
    block = config.glm_block or min(256, max(32, 1 << max(0, half - 1).bit_length()))
    rows = config.glm_chunk_rows
    if shape is not None:
        rows, block = shape
    elif rows is None:  # about four blocks per SM over all chains, whole blocks of rows
        target = -(-N * n_chains // (4 * _loader.sm_count()))
        rows = max(block, -(-target // block) * block)
    rows = max(1, int(rows))
    nch = np.maximum(1, -(-sizes // rows))
    first = np.concatenate([[0], np.cumsum(nch)]).astype(np.int32)
    group = np.repeat(np.arange(len(sizes), dtype=np.int32), nch)
    return _ChunkPlan(rows, int(first[-1]), xp.asarray(group), xp.asarray(first), block)


def _slice_pass_sweep(xp, state, beta, eta, width, data, family, sigma_noise, n_warmup, max_steps_out,
                      max_shrink, e_all, u_all, us_all):
    """One sweep by glm_slice_pass: two launches per coordinate (the first evaluates x0, the
    stepping-out points and the first shrinkage proposals; the second the next proposals of the few
    (chain, group) still open), the differential update folded into the next coordinate's first
    launch. ``beta``, ``eta``, ``width`` are updated in place; returns the fallbacks per chain."""
    import cupy

    from ... import _loader

    C, G, K = beta.shape
    dt = beta.dtype
    N = eta.shape[1]
    plan = data.plan
    ctype = _loader.CTYPE[np.dtype(dt)]
    fn = _loader.get_function("glm.cu", f"glm_slice_pass<{ctype}>", _SEG_NAMES)
    launcher = _loader.packed_launcher(fn, "glm.cu", "glm_slice_pass", ctype)
    CG = C * G
    part = xp.empty((C * plan.n_chunks * _PMAX,), dtype=np.float64)
    counter = xp.zeros((CG,), dtype=np.int32)
    stL, stR = xp.empty((CG,), dtype=dt), xp.empty((CG,), dtype=dt)
    stLogy = xp.empty((CG,), dtype=np.float64)
    stS, stDone = xp.empty((CG,), dtype=np.int32), xp.empty((CG,), dtype=np.int32)
    dpend = xp.zeros((CG,), dtype=dt)
    fb = xp.zeros((CG,), dtype=np.int32)
    mu = xp.ascontiguousarray(state.mu, dtype=dt)
    prec = xp.ascontiguousarray(state.prec, dtype=dt)
    it = xp.ascontiguousarray(state.it, dtype=np.int64)
    e_all, u_all, us_all = (xp.ascontiguousarray(a) for a in (e_all, u_all, us_all))
    d1 = max(1, min(config.glm_spec_shrink, _PMAX - max_steps_out, max_shrink))
    # Every argument but k, kprev and first stays the same over the sweep: bound by name once.
    head, tail = _around("glm_slice_pass", ("k", "kprev", "first"), _kernel_args.packed(
        FILE, "glm_slice_pass", Xt=data.Xt.data.ptr, y=data.y.data.ptr, eta=eta.data.ptr, beta=beta.data.ptr,
        width=width.data.ptr, mu=mu.data.ptr, prec=prec.data.ptr, ea=e_all.data.ptr, ua=u_all.data.ptr,
        usa=us_all.data.ptr, starts=data.starts.data.ptr, ends=data.ends.data.ptr,
        chunk_group=plan.chunk_group.data.ptr, chunk_first=plan.chunk_first.data.ptr, iters=it.data.ptr,
        part=part.data.ptr, counter=counter.data.ptr, stL=stL.data.ptr, stR=stR.data.ptr, stLogy=stLogy.data.ptr,
        stS=stS.data.ptr, stDone=stDone.data.ptr, dpend=dpend.data.ptr, fb=fb.data.ptr, N=N,
        chunk_rows=plan.chunk_rows, n_chunks=plan.n_chunks, G=G, C=C, K=K, k=0, kprev=0, first=0,
        max_out=max_steps_out, max_shrink=max_shrink, d1=d1, n_warmup=int(n_warmup), family=_FAMILY[family],
        sigma=float(sigma_noise)))
    grid = C * plan.n_chunks
    stream = cupy.cuda.get_current_stream().ptr
    for k in range(K):
        for first in (1, 0):
            launcher(grid, plan.block, stream, *head, k, k - 1 if first else -1, first, *tail)
    # The last coordinate's step, as the twin adds it.
    d = dpend.reshape(C, G)
    eta += (d[:, data.gid] if G > 1 else d) * data.Xt[K - 1][None, :]
    return fb.reshape(C, G).sum(axis=1).astype(np.int64)


def _draw_hyper(rng, beta, hyper, xp):
    """mu, Sigma | beta from their conjugate conditional, all chains at once.

    ``Sigma | beta ~ InvWishart(nu0 + G, psi)`` with ``psi = psi0 + S +
    kappa0 G / (kappa0 + G) bbar bbar^T`` (``bbar`` the groups' mean, ``S``
    their scatter) by the Bartlett decomposition: with ``psi = C C^T`` and
    ``A`` the Bartlett factor, ``M = C A^-T`` gives ``Sigma = M M^T`` and
    ``Sigma^-1 = N N^T`` with ``N = C^-T A``; then
    ``mu = G bbar / (kappa0 + G) + M z / sqrt(kappa0 + G)``, a draw of
    ``N(G bbar / (kappa0 + G), Sigma / (kappa0 + G))``. The random numbers
    (gamma variates for the diagonal of ``A``, normals below it, then ``z``)
    are drawn by the generator on either backend; on the GPU one kernel
    (``glm_niw``, a block per chain) does the rest, with no host round trip;
    on NumPy :func:`_niw_twin` does the same arithmetic.
    """
    kappa0, nu0, psi0 = hyper[:3]
    if len(hyper) > 3 and hyper[3] == "diag":
        with _validate.validation(False):  # the shapes are positive by construction
            return _draw_hyper_diag(rng, beta, kappa0, nu0, psi0, xp)
    C, G, K = beta.shape
    # The Bartlett factor's draws, as gpumcmc.random's invwishart takes them: Gamma((df - i) / 2) for
    # A_ii = sqrt(2 Gamma), df = nu0 + G, and standard normals below the diagonal.
    shape = xp.broadcast_to((nu0 + G - xp.arange(K, dtype=np.float64)) / 2, (C, K)).copy()
    with _validate.validation(False):  # nu0 > K - 1, so every shape is positive
        gam = rng.gamma(shape, dtype=np.float64)
        zn = rng.standard_normal(size=(C, K, K), dtype=np.float64)
        z = rng.standard_normal(size=(C, K), dtype=np.float64)
    if xp is not np and config.glm_niw_kernel and _niw_fits(K):
        return _niw_kernel(xp, beta, kappa0, psi0, gam, zn, z)
    return _niw_twin(xp, beta, kappa0, psi0, gam, zn, z)


_NIW_CH = 16  # GLM_NIW_CH in glm.cu


def _niw_fits(K):
    """Whether ``glm_niw``'s shared memory takes K coefficients (else the draw takes :func:`_niw_twin`'s
    array code on the GPU too)."""
    return 8 * (4 * K * K + K + _NIW_CH * K) <= 48 * 1024


def _niw_kernel(xp, beta, kappa0, psi0, gam, zn, z):
    """The draw of :func:`_draw_hyper` by ``glm_niw`` (kernels_cu/glm.cu), one block per chain."""
    from ... import _loader

    C, G, K = beta.shape
    dt = beta.dtype
    ct = _loader.CTYPE[np.dtype(dt)]
    names = ("glm_niw<float>", "glm_niw<double>")
    fn = _loader.get_function("glm.cu", f"glm_niw<{ct}>", names)
    mu = xp.empty((C, K), dtype=dt)
    prec = xp.empty((C, K, K), dtype=dt)
    sigma = xp.empty((C, K, K), dtype=dt)
    fn((C,), (256,),
       _kernel_args.args(FILE, "glm_niw", beta=xp.ascontiguousarray(beta),
                         psi0=xp.ascontiguousarray(psi0, dtype=np.float64), gam=gam, zn=zn, z=z, G=_loader.i32(G),
                         K=_loader.i32(K), kappa0=np.float64(kappa0), mu_out=mu, prec_out=prec, sigma_out=sigma),
       shared_mem=8 * (4 * K * K + K + _NIW_CH * K))
    return mu, prec, sigma


def _niw_twin(xp, beta, kappa0, psi0, gam, zn, z):
    """The host twin of ``glm_niw`` (and its fallback on the GPU for large K): see :func:`_draw_hyper`."""
    C, G, K = beta.shape
    b = beta.astype(np.float64)
    bbar = b.mean(axis=1)                                         # (C, K)
    dev = b - bbar[:, None, :]
    S = xp.einsum("cgi,cgj->cij", dev, dev)
    kn = kappa0 + G
    psi = psi0[None] + S + (kappa0 * G / kn) * bbar[:, :, None] * bbar[:, None, :]
    psi = 0.5 * (psi + xp.swapaxes(psi, 1, 2))
    chol = xp.linalg.cholesky(psi)
    idx = xp.arange(K)
    A = xp.tril(zn, -1)
    A[:, idx, idx] = xp.sqrt(2.0 * gam)
    # M^T = A^-1 C^T and N = C^-T A, by general solves (the matrices are triangular)
    M = xp.swapaxes(xp.linalg.solve(A, xp.swapaxes(chol, 1, 2)), 1, 2)
    Nn = xp.linalg.solve(xp.swapaxes(chol, 1, 2), A)
    sigma = M @ xp.swapaxes(M, 1, 2)
    sigma = 0.5 * (sigma + xp.swapaxes(sigma, 1, 2))
    prec = Nn @ xp.swapaxes(Nn, 1, 2)
    prec = 0.5 * (prec + xp.swapaxes(prec, 1, 2))
    mu = (G / kn) * bbar + xp.einsum("cij,cj->ci", M, z) / math.sqrt(kn)
    dt = beta.dtype
    return mu.astype(dt), prec.astype(dt), sigma.astype(dt)


def _draw_hyper_diag(rng, beta, kappa0, nu0, psi0, xp):
    """mu, diag(tau^2) | beta, coordinate by coordinate, all chains at once.

    With ``bbar_k`` the groups' mean and ``S_k`` their sum of squared
    deviations, the conjugate update of ``tau_k^2 ~ InvGamma(nu0/2, psi0_k/2)``,
    ``mu_k | tau_k^2 ~ N(0, tau_k^2/kappa0)`` gives
    ``tau_k^2 | beta ~ InvGamma((nu0 + G)/2, (psi0_k + S_k + kappa0 G bbar_k^2/(kappa0 + G))/2)``
    and ``mu_k | tau_k^2, beta ~ N(G bbar_k/(kappa0 + G), tau_k^2/(kappa0 + G))``.
    The inverse gamma is ``scale / Gamma(shape, 1)``, from the generator's gamma draws.
    """
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



# ---------------------------------------------------------------------------
# Rows split over devices (BayesianGLM(devices=...))
# ---------------------------------------------------------------------------

class ShardedSliceState(NamedTuple):
    beta: object    # (C, 1, K) coefficients, on local shard 0's device
    width: object   # (C, 1, K) slice step widths, on local shard 0's device
    eta: tuple      # per local shard, (C, N_i) linear predictor of its rows
    it: object      # (C,) iteration counter, on local shard 0's device


class _ShardData(NamedTuple):
    Xt: object      # (K, N_i) column-major design of the shard's rows
    y: object       # (N_i,)
    lgy: object     # (N_i,) lgamma(y + 1) (poisson) or None
    starts: object = None  # (1,) int64 [0] (the kernels' one group), CuPy only
    ends: object = None    # (1,) int64 [N_i], CuPy only
    plan: object = None    # the kernels' split of the shard's rows into chunks (_ChunkPlan), CuPy only


# config.glm_shard_elements: candidates the NumPy twin evaluates together on a shard, at most this many
# elements (chains x candidates x rows) a pass.
forward(__name__, {"_SHARD_ELEMENTS": "glm_shard_elements"})


def shard_passes(max_shrink: int = 24) -> int:
    """Passes per coordinate of the sharded sweep: the first (``x0``, the stepping-out points and the
    first shrinkage proposals), then enough passes of ``_PMAX`` proposals for ``max_shrink`` of them
    (the first pass evaluates none when the bracket stepped out)."""
    return 1 + -(-int(max_shrink) // _PMAX)


def init_sharded(X, y, shards, family="bernoulli", n_chains=4, prior_scale=2.5):
    """The state and the per-shard data for :func:`make_sharded_step`: the rows of ``X`` (N, K) and ``y``
    (host arrays, or CuPy arrays on local shard 0's GPU) split by ``shards.bounds``; the global fields
    on local shard 0's device."""
    from ...glm import _lgamma1p

    N, K = X.shape
    if N < shards.world:
        raise ValueError(f"{N} rows cannot be split over {shards.world} shards: use fewer devices.")
    xp = shards.xp
    parts, ys = shards.scatter(X), shards.scatter(y)
    data, etas = [], []
    for i, yi in enumerate(ys):
        with shards.on(i):
            Xi, parts[i] = parts[i], None  # the row-major part is dropped once transposed
            Ni = Xi.shape[0]
            lgy = _lgamma1p(xp, yi) if family == "poisson" else None
            Xt = xp.ascontiguousarray(Xi.T)
            del Xi
            if xp is np:
                data.append(_ShardData(Xt, yi, lgy))
            else:
                starts, ends = xp.zeros((1,), dtype=np.int64), xp.full((1,), Ni, dtype=np.int64)
                data.append(_ShardData(Xt, yi, lgy, starts, ends, _chunk_plan(xp, starts, ends, n_chains)))
            etas.append(xp.zeros((n_chains, Ni), dtype=X.dtype))
    with shards.on(0):
        st = _init_state(xp, n_chains, 1, K, 0, X.dtype, prior_scale)
    state = ShardedSliceState(st.beta, st.width, tuple(etas), st.it)
    return state, data, (st.mu, st.prec)


def _first_bracket(xp, x0, w, u, max_out):
    """(L0, R0, J, Jr) of the first pass, as glm_first_bracket forms them: the bracket of width w placed
    by u[0], and the stepping-out budgets split by u[1] (J to the left, Jr = max_out - 1 - J)."""
    L0 = x0 - w * u[0]
    J = xp.floor(max_out * u[1]).astype(np.int64)
    return L0, L0 + w, J, (max_out - 1) - J


def _pass_points(xp, first, x0, w, bracket, st, us, max_out, d1, max_shrink):
    """A pass's candidates (C, G, _PMAX) in the dtype of x0 and their count (C, G), as glm_pass_points
    forms them (unused slots hold x0). ``us`` (max_shrink, C, G): the coordinate's shrinkage uniforms."""
    C, G = x0.shape
    pts = xp.broadcast_to(x0[..., None], (C, G, _PMAX)).copy()
    if first:
        L0, R0, J, _ = bracket
        m = max_out
        if m > 1:
            Ls, Rs = [L0], [R0]
            for _ in range(m - 2):
                Ls.append(Ls[-1] - w)
                Rs.append(Rs[-1] + w)
            Ls, Rs = xp.stack(Ls, axis=-1), xp.stack(Rs, axis=-1)                # (C, G, m - 1)
            t = xp.arange(m - 1)
            right = xp.take_along_axis(Rs, xp.clip(t - J[..., None], 0, m - 2), axis=-1)
            pts[..., 1:m] = xp.where(t < J[..., None], Ls, right)
        a, b = L0, R0
        n = min(d1, max_shrink)
        for j in range(n):
            x = a + us[j] * (b - a)
            pts[..., m + j] = x
            lower = x < x0
            a, b = xp.where(lower, x, a), xp.where(lower, b, x)
        return pts, xp.full((C, G), m + n, dtype=np.int64)
    a, b, s0 = st["L"], st["R"], st["S"]
    for j in range(_PMAX):
        u = xp.take_along_axis(us, xp.minimum(s0 + j, max_shrink - 1)[None], axis=0)[0]
        x = a + u * (b - a)
        pts[..., j] = x
        lower = x < x0
        a, b = xp.where(lower, x, a), xp.where(lower, b, x)
    return pts, xp.clip(max_shrink - s0, 0, _PMAX)


def _twin_eval(xp, d, eta, k, x0, pts, count, live, family, sigma_noise):
    """The NumPy twin of glm_slice_shard_eval on one shard (one group): the log-likelihood sums over the
    shard's rows at every candidate, (C, 1, _PMAX) float64, zeros past each count and where not live."""
    C = x0.shape[0]
    P = int(count[live].max()) if live.any() else 0
    out = xp.zeros((C, 1, _PMAX), dtype=np.float64)
    if P == 0:
        return out
    pd = (pts - x0[..., None])[:, 0, :P]                                        # (C, P)
    xk = d.Xt[k]
    Ni = eta.shape[1]
    step_p = max(1, config.glm_shard_elements // max(1, C * Ni))
    for a in range(0, P, step_p):
        e = eta[:, None, :] + pd[:, a:min(P, a + step_p), None] * xk[None, None, :]    # (C, p, Ni)
        out[:, 0, a:min(P, a + step_p)] = pointwise_loglik(e, d.y, family, sigma_noise, xp, d.lgy).sum(axis=-1,
                                                                                               dtype=np.float64)
    keep = (xp.arange(_PMAX) < count[..., None]) & live[..., None]
    return xp.where(keep, out, 0.0)


def _twin_decide(xp, dv, sums, k, first, max_out, max_shrink, d1, n_warmup, e, u, us):
    """The NumPy twin of glm_slice_decide: Neal's decisions of one pass for every (chain, group) from the
    all-reduced sums (C, G, _PMAX), in the device state ``dv`` (beta, width, the pass state, dpend, fb)."""
    beta, width = dv["beta"], dv["width"]
    x0, w = beta[:, :, k].copy(), width[:, :, k]
    C, G = x0.shape
    live = xp.ones((C, G), dtype=bool) if first else ~dv["settled"]
    bracket = _first_bracket(xp, x0, w, u, max_out) if first else None
    pts, count = _pass_points(xp, first, x0, w, bracket, dv, us, max_out, d1, max_shrink)
    pkk, muk, c = _prior_terms(xp, beta, dv["mu"], dv["prec"], k)
    z = pts - muk[..., None]
    F = sums - 0.5 * pkk[..., None] * z * z - z * c[..., None]                  # as _make_target's target
    xn, done = x0, xp.zeros((C, G), dtype=bool)
    if first:
        L0, R0, J, Jr = bracket
        logy = F[..., 0] - e
        a, b = L0, R0
        goL, goR, stepped = live, live, xp.zeros((C, G), dtype=bool)
        for j in range(max_out - 1):
            goL = goL & (J > j) & (F[..., 1 + j] > logy)
            fR = xp.take_along_axis(F, xp.clip(1 + J + j, 0, _PMAX - 1)[..., None], axis=-1)[..., 0]
            goR = goR & (Jr > j) & (fR > logy)
            a, b = xp.where(goL, a - w, a), xp.where(goR, b + w, b)
            stepped = stepped | goL | goR
        off = max_out
        nshr = xp.where(stepped, 0, count - max_out)  # proposals on (L0, R0) apply only without a step
        s = xp.zeros((C, G), dtype=np.int64)
    else:
        a, b, s, logy = dv["L"], dv["R"], dv["S"], dv["logy"]
        off, nshr = 0, count
    for j in range(_PMAX - off):
        act = live & ~done & (nshr > j)
        x = pts[..., off + j]
        s = s + act
        ok = act & (F[..., off + j] > logy)
        xn = xp.where(ok, x, xn)
        done = done | ok
        rej = act & ~ok
        lower = x < x0
        a, b = xp.where(rej & lower, x, a), xp.where(rej & ~lower, x, b)
    still = live & ~done & (s < max_shrink)
    settle = live & ~still
    for key, v in (("L", a), ("R", b), ("S", s), ("logy", logy)):
        dv[key] = xp.where(still, v, dv[key])
    dv["settled"] = xp.where(live, ~still, dv["settled"])
    xn = xp.where(settle, xn, x0)
    delta = xn - x0
    beta[:, :, k] = xn
    dv["dpend"] = xp.where(settle, delta, dv["dpend"])
    neww = 0.9 * w + 0.1 * (3.0 * xp.abs(delta) + 1e-3 * w)
    width[:, :, k] = xp.where(settle & (dv["it"] < n_warmup)[:, None], neww, w)
    dv["fb"] = dv["fb"] + (settle & ~done)
    return int(count[live].max()) if live.any() else 0


def make_sharded_step(data, shards, family, sigma_noise, n_warmup, prior, max_steps_out=4, max_shrink=24):
    """``step(rng, state) -> (state, info)``: one slice-within-Gibbs sweep with the rows split over ``shards``.

    The algorithm of :func:`step` (flat model: one group), with its log-density evaluations split: each
    shard keeps ``eta`` of its rows and moves it by the differential update. On the GPU, per coordinate
    and pass, every shard evaluates the pass's candidates over its rows (``glm_slice_shard_eval``: the
    candidates of ``glm_slice_pass``, at most ``_PMAX``), their sums, ``chains x _PMAX`` float64 values,
    are all-reduced (``Shards.allreduce``), and every device takes Neal's decisions from them
    (``glm_slice_decide``) in its own copy of the state: the same inputs, so the same decisions, with
    no broadcast and no host synchronisation within the sweep. The pass count is fixed,
    :func:`shard_passes` (3 for ``max_shrink=24``); a pass with nothing left open returns at once.
    The random numbers are drawn on local shard 0 in the order :func:`step` draws them and copied to
    the other devices once a sweep.

    On NumPy the same passes run as array code (``_twin_eval``, ``_twin_decide``: the same candidates,
    the same decisions, the prior's terms as :func:`step` computes them), stopping once every chain has
    settled.

    The draws: with one shard the sums are the single device's (the same chunks of rows, in the same
    order), so the draws equal ``devices=None`` (on the GPU, up to a coordinate that needs more than two
    passes of proposals, which ``glm_slice_pass`` finishes in one block); with several shards the sums
    add the same terms in another order, so the draws equal one device's up to that rounding (a decision
    can differ only where a candidate's log-density lies within rounding of the slice level, and a chain
    that takes another step there goes on from another point).
    """
    xp = shards.xp
    m = int(max_steps_out)
    if not 1 <= m < _PMAX:
        raise ValueError(f"max_steps_out must be between 1 and {_PMAX - 1} with devices=, got {max_steps_out}.")
    if int(max_shrink) < 1:
        raise ValueError(f"max_shrink must be at least 1, got {max_shrink}.")
    max_shrink = int(max_shrink)
    n_local = len(data)
    n_pass = shard_passes(max_shrink)
    d1 = max(1, min(config.glm_spec_shrink, _PMAX - m, max_shrink))
    # One copy of the state per distinct device (shards of one GPU share it, and it is decided once there).
    devs, dev_of = [], []
    for dev in shards.devices:
        if dev not in devs:
            devs.append(dev)
        dev_of.append(devs.index(dev))
    first_shard = [dev_of.index(j) for j in range(len(devs))]
    mu_r, prec_r = Replica(shards, prior[0]), Replica(shards, prior[1])
    gpu = xp is not np
    if gpu:
        import cupy

        from ... import _loader
        dt = prior[0].dtype
        ctype = _loader.CTYPE[np.dtype(dt)]
        fam = _FAMILY[family]
        C = prior[0].shape[0]
        launch_eval, launch_decide, bufs = [], [], []
        for j, i in enumerate(first_shard):
            with shards.on(i):
                fe = _loader.get_function("glm.cu", f"glm_slice_shard_eval<{ctype}>", _SEG_NAMES)
                fd = _loader.get_function("glm.cu", f"glm_slice_decide<{ctype}>", _SEG_NAMES)
                launch_eval.append(_loader.packed_launcher(fe, "glm.cu", "glm_slice_shard_eval", ctype))
                launch_decide.append(_loader.packed_launcher(fd, "glm.cu", "glm_slice_decide", ctype))
        for i in range(n_local):
            with shards.on(i):
                plan = data[i].plan
                bufs.append(dict(part=xp.empty((C * plan.n_chunks * _PMAX,), dtype=np.float64),
                                 counter=xp.zeros((C,), dtype=np.int32),
                                 sums=xp.zeros((C, 1, _PMAX), dtype=np.float64)))

    def device_states(state, draws):
        """The sweep's state on each distinct device: beta and width (copies, moved in place), the
        prior, the iteration counter, the random numbers, the pass state."""
        C, G, K = state.beta.shape
        reps = [Replica(shards, a) for a in (state.beta, state.width, state.it) + draws]
        out = []
        for j, i in enumerate(first_shard):
            with shards.on(i):
                beta, width, it, e, u, us = (r(i) for r in reps)
                dt = beta.dtype
                # (a copy for shard 0's device; the others' replicas are fresh copies already)
                dv = dict(beta=beta.copy() if j == 0 else beta, width=width.copy() if j == 0 else width,
                          mu=mu_r(i), prec=prec_r(i), it=it, e=e, u=u, us=us,
                          L=xp.zeros((C, G), dtype=dt), R=xp.zeros((C, G), dtype=dt),
                          S=xp.zeros((C, G), dtype=np.int64 if not gpu else np.int32),
                          logy=xp.zeros((C, G), dtype=np.float64), settled=xp.zeros((C, G), dtype=bool),
                          dpend=xp.zeros((C, G), dtype=dt), fb=xp.zeros((C, G), dtype=np.int64))
                if gpu:
                    dv["settled"] = xp.zeros((C, G), dtype=np.int32)
                    dv["fb"] = xp.zeros((C, G), dtype=np.int32)
                    for name in ("e", "u", "us", "mu", "prec"):
                        dv[name] = xp.ascontiguousarray(dv[name])
                out.append(dv)
        return out

    def gpu_launches(dvs, etas):
        """Per local shard and per distinct device, the launches of one sweep: every argument that stays the
        same over its coordinates and passes (the arrays' addresses, the stream, the sizes) is gathered
        once a sweep, so that each of the sweep's K x passes launches costs the host only the launch."""
        evals, decides = [], []
        for i in range(n_local):
            dv, d, b, plan = dvs[dev_of[i]], data[i], bufs[i], data[i].plan
            C, G, K = dv["beta"].shape
            with shards.on(i):
                stream = cupy.cuda.get_current_stream().ptr
            head, tail = _around("glm_slice_shard_eval", ("k", "kprev", "first"), _kernel_args.packed(
                FILE, "glm_slice_shard_eval", Xt=d.Xt.data.ptr, y=d.y.data.ptr, eta=etas[i].data.ptr,
                beta=dv["beta"].data.ptr, width=dv["width"].data.ptr, ua=dv["u"].data.ptr, usa=dv["us"].data.ptr,
                starts=d.starts.data.ptr, ends=d.ends.data.ptr, chunk_group=plan.chunk_group.data.ptr,
                chunk_first=plan.chunk_first.data.ptr, part=b["part"].data.ptr, counter=b["counter"].data.ptr,
                stL=dv["L"].data.ptr, stR=dv["R"].data.ptr, stS=dv["S"].data.ptr, stDone=dv["settled"].data.ptr,
                dpend=dv["dpend"].data.ptr, sums=b["sums"].data.ptr, N=d.Xt.shape[1], chunk_rows=plan.chunk_rows,
                n_chunks=plan.n_chunks, G=G, C=C, K=K, k=0, kprev=0, first=0, max_out=m, max_shrink=max_shrink,
                d1=d1, family=fam, sigma=float(sigma_noise)))
            evals.append((launch_eval[dev_of[i]], (C * plan.n_chunks, plan.block, stream) + head, tail))
        for j, i in enumerate(first_shard):
            dv = dvs[j]
            C, G, K = dv["beta"].shape
            with shards.on(i):
                stream = cupy.cuda.get_current_stream().ptr
            head, tail = _around("glm_slice_decide", ("k", "first"), _kernel_args.packed(
                FILE, "glm_slice_decide", beta=dv["beta"].data.ptr, width=dv["width"].data.ptr,
                mu=dv["mu"].data.ptr, prec=dv["prec"].data.ptr, ea=dv["e"].data.ptr, ua=dv["u"].data.ptr,
                usa=dv["us"].data.ptr, iters=dv["it"].data.ptr, sums=bufs[i]["sums"].data.ptr,
                stL=dv["L"].data.ptr, stR=dv["R"].data.ptr, stLogy=dv["logy"].data.ptr, stS=dv["S"].data.ptr,
                stDone=dv["settled"].data.ptr, dpend=dv["dpend"].data.ptr, fb=dv["fb"].data.ptr, G=G, C=C, K=K,
                k=0, first=0, max_out=m, max_shrink=max_shrink, d1=d1, n_warmup=int(n_warmup)))
            decides.append((launch_decide[j], (C * G, 32, stream) + head, tail))
        return evals, decides

    def gpu_passes(dvs, etas, K):
        """The sweep's K x n_pass passes on the GPUs: per pass each shard's evaluation, the all-reduce of
        the sums (in place, into each shard's bufs[i]["sums"]), each device's decision. The host sets each
        launch's device directly (one runtime call) and puts the caller's device back at the end."""
        eval_launches, decide_launches = gpu_launches(dvs, etas)
        sums = [bufs[i]["sums"] for i in range(n_local)]
        ev_dev = [shards.devices[i] for i in range(n_local)]
        de_dev = [shards.devices[i] for i in first_shard]
        rt = cupy.cuda.runtime
        prev = rt.getDevice()
        try:
            for k in range(K):
                for p in range(n_pass):
                    first = int(p == 0)
                    for (launch, head, tail), dev in zip(eval_launches, ev_dev):
                        rt.setDevice(dev)
                        launch(*head, k, k - 1 if first else -1, first, *tail)
                    rt.setDevice(prev)
                    shards.allreduce(sums)
                    for (launch, head, tail), dev in zip(decide_launches, de_dev):
                        rt.setDevice(dev)
                        launch(*head, k, first, *tail)
        finally:
            rt.setDevice(prev)

    def step(rng, state):
        C, G, K = state.beta.shape
        with shards.on(0):
            e_all, u_all, us_all = sweep_randoms(rng, (C, G, K), state.beta.dtype, max_shrink)
        dvs = device_states(state, (e_all, u_all, us_all))
        etas = list(state.eta)
        if gpu:
            for i in range(n_local):
                with shards.on(i):
                    etas[i] = etas[i].copy()  # moved in place by the kernels
        evals = 0
        if gpu:
            gpu_passes(dvs, etas, K)
        for k in range(0 if gpu else K):
            if k > 0:  # the previous coordinate's step (the kernels add it in the first pass)
                for i in range(n_local):
                    etas[i] = etas[i] + dvs[0]["dpend"] * data[i].Xt[k - 1][None, :]
            for p in range(n_pass):
                first = p == 0
                sums = []
                for i in range(n_local):
                    dv = dvs[dev_of[i]]
                    with shards.on(i):
                        x0 = dv["beta"][:, :, k]
                        w = dv["width"][:, :, k]
                        live = xp.ones(x0.shape, dtype=bool) if first else ~dv["settled"]
                        bracket = _first_bracket(xp, x0, w, dv["u"][k], m) if first else None
                        pts, count = _pass_points(xp, first, x0, w, bracket, dv, dv["us"][k], m, d1, max_shrink)
                        sums.append(_twin_eval(xp, data[i], etas[i], k, x0, pts, count, live, family, sigma_noise))
                shards.allreduce(sums)
                for j, i in enumerate(first_shard):
                    dv = dvs[j]
                    with shards.on(i):
                        evals += _twin_decide(xp, dv, sums[i], k, first, m, max_shrink, d1, n_warmup,
                                              dv["e"][k], dv["u"][k], dv["us"][k])
                if bool(dvs[0]["settled"].all()):
                    break  # (free on NumPy; the GPU runs every pass, those with nothing open return at once)
        lls = []
        for i in range(n_local):
            dv = dvs[dev_of[i]]
            with shards.on(i):
                d = data[i]
                if gpu:  # the last coordinate's step, as the twin adds it
                    etas[i] += dv["dpend"] * d.Xt[K - 1][None, :]
                else:
                    etas[i] = etas[i] + dv["dpend"] * d.Xt[K - 1][None, :]
                lls.append(xp.ascontiguousarray(
                    pointwise_loglik(etas[i], d.y, family, sigma_noise, xp, d.lgy).sum(axis=1, dtype=np.float64)))
        ll = shards.allreduce(lls)[0]
        with shards.on(0):
            dv = dvs[0]
            fallbacks = dv["fb"].sum(axis=1).astype(np.int64)
            new = ShardedSliceState(dv["beta"], dv["width"], tuple(etas), state.it + 1)
            info = SliceInfo(xp.full((C,), -1 if gpu else evals, dtype=np.int64), fallbacks, ll)
        return new, info

    return step


def allreduce_bytes(n_chains: int, K: int, max_shrink: int = 24) -> int:
    """Bytes all-reduced per sweep of ``BayesianGLM(devices=...)`` on the GPU with ``K`` coefficients
    (intercept included): per coordinate :func:`shard_passes` all-reduces of ``_PMAX`` float64 sums a
    chain, and the log-likelihood at the end."""
    return 8 * n_chains * (K * shard_passes(max_shrink) * _PMAX + 1)


# ---------------------------------------------------------------------------
# Groups split over devices (HierarchicalGLM(devices=...))
# ---------------------------------------------------------------------------

class ShardedGroupState(NamedTuple):
    beta: object    # (C, G, K) every group's coefficients, on local shard 0's device
    mu: object      # (C, K) the groups' mean, on local shard 0's device
    prec: object    # (C, K, K) its precision
    sigma: object   # (C, K, K) its covariance
    it: object      # (C,) iteration counter
    betas: tuple    # per local shard, (C, G, K) every group's coefficients on its device (the all-reduce's copy)
    eta: tuple      # per local shard, (C, N_i) linear predictor of its rows
    width: tuple    # per local shard, (C, G_i, K) its groups' slice step widths


def group_bounds(sizes, world: int) -> list:
    """``world`` contiguous ranges ``(g0, g1)`` of the groups, about equal in rows, each of at least one
    group (the same answer in every process, from the group sizes alone)."""
    G = len(sizes)
    if G < world:
        raise ValueError(f"{G} groups cannot be split over {world} shards (each holds whole groups): "
                         "use fewer devices.")
    cuts = balanced_cuts(sizes, world)
    return [(cuts[r], cuts[r + 1]) for r in range(world)]


def init_groups_sharded(X, y, gid, shards, family="bernoulli", n_chains=4, prior_scale=1.0):
    """The state, the per-shard data and each local shard's groups ``(g0, g1)`` for
    :func:`make_groups_sharded_step`: ``X`` (N, K), ``y`` (host arrays, or CuPy arrays on local shard 0's
    GPU) with their rows sorted by group, ``gid`` (N,) the group of each row, 0 .. G - 1, on the host.
    Each shard holds whole groups (:func:`group_bounds`); on the GPU every shard splits its groups' rows
    into chunks as one device would split them all, so each group's sums are those of one device."""
    N, K = X.shape
    xp = shards.xp
    gid = np.asarray(_backend.to_host(gid), dtype=np.int64)
    G = int(gid[-1]) + 1 if N else 0
    sizes = np.bincount(gid, minlength=G)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    bounds = [group_bounds(sizes, shards.world)[r] for r in shards.ranks]
    shape = None
    if xp is not np:
        with shards.on(0):
            whole = _chunk_plan(xp, starts, ends, n_chains)
            shape = (whole.chunk_rows, whole.block)
    datas, etas, widths, betas = [], [], [], []
    for i, (g0, g1) in enumerate(bounds):
        a, b = int(starts[g0]), int(ends[g1 - 1])
        with shards.on(i):
            # a copy made under the shard's device lands there (as Shards.scatter copies)
            Xi = np.ascontiguousarray(X[a:b]) if xp is np else xp.array(X[a:b], copy=True, order="C")
            yi = np.ascontiguousarray(y[a:b]) if xp is np else xp.array(y[a:b], copy=True, order="C")
            st, d = init(Xi, yi, family, n_chains, prior_scale, xp.asarray(gid[a:b] - g0), chunk_shape=shape)
            del Xi
            datas.append(d)
            etas.append(st.eta)
            widths.append(st.width)
            betas.append(xp.zeros((n_chains, G, K), dtype=X.dtype))
    with shards.on(0):
        st = _init_state(xp, n_chains, G, K, 0, X.dtype, prior_scale)
    state = ShardedGroupState(betas[0], st.mu, st.prec, st.sigma, st.it, tuple(betas), tuple(etas), tuple(widths))
    return state, datas, bounds


def make_groups_sharded_step(data, shards, bounds, family, sigma_noise, n_warmup, hyper, max_steps_out=4,
                             max_shrink=24):
    """``step(rng, state) -> (state, info)``: one sweep of the hierarchical model with its groups split
    over ``shards`` (each holds whole groups: their rows, coefficients, widths and eta).

    The random numbers of :func:`step` are drawn on local shard 0 for every group and each shard takes
    its groups' part, so group g's numbers are those of one device whatever shard holds it. Each shard
    sweeps its groups' coefficients by the single-device kernels (no all-reduce within the sweep: a
    group's rows are all on one shard); then the coefficients of every group are gathered by an
    all-reduce of a (C, G, K) array that holds zeros outside each shard's groups (exact: x + 0 = x), and
    ``mu, Sigma`` are drawn from them as :func:`step` draws them. On the GPU, where every shard splits
    its groups' rows as one device splits them (:func:`init_groups_sharded`), the draws equal those of
    ``devices=None`` bit for bit; on NumPy the sums over a group's rows come from a running sum over the
    shard's rows, whose rounding depends on the rows before it, so the draws equal one device's up to
    that rounding.
    """
    xp = shards.xp
    if hyper is None:
        raise ValueError("the groups' coefficients need their hyperprior: pass a HyperPrior.")

    def step(rng, state):
        C, G, K = state.beta.shape
        with shards.on(0):
            e_all, u_all, us_all = sweep_randoms(rng, (C, G, K), state.beta.dtype, max_shrink)
        reps = [Replica(shards, a) for a in (state.mu, state.prec, state.sigma, state.it, e_all, u_all, us_all)]
        fulls, lls, fbs, etas, widths = [], [], [], [], []
        for i, (g0, g1) in enumerate(bounds):
            with shards.on(i):
                mu, prec, sigma, it, e, u, us = (r(i) for r in reps)
                e, u, us = (xp.ascontiguousarray(a[..., g0:g1]) for a in (e, u, us))
                st = SliceState(xp.ascontiguousarray(state.betas[i][:, g0:g1]), state.eta[i], state.width[i], mu,
                                prec, sigma, it)
                beta_i, eta_i, width_i, fb, _ = _sweep_coefs(xp, st, data[i], family, sigma_noise, n_warmup,
                                                             max_steps_out, max_shrink, e, u, us)
                full = xp.zeros((C, G, K), dtype=state.beta.dtype)
                full[:, g0:g1] = beta_i
                fulls.append(full)
                fbs.append(xp.ascontiguousarray(fb, dtype=np.int64))
                etas.append(eta_i)
                widths.append(width_i)
                lls.append(xp.ascontiguousarray(
                    pointwise_loglik(eta_i, data[i].y, family, sigma_noise, xp, data[i].lgy).sum(axis=1,
                                                                                                 dtype=np.float64)))
        shards.allreduce(fulls)
        shards.allreduce(lls)
        shards.allreduce(fbs)
        with shards.on(0):
            mu, prec, sigma = _draw_hyper(rng, fulls[0], hyper, xp)
            new = ShardedGroupState(fulls[0], mu, prec, sigma, state.it + 1, tuple(fulls), tuple(etas),
                                    tuple(widths))
            info = SliceInfo(xp.full((C,), -1, dtype=np.int64), fbs[0], lls[0])
        return new, info

    return step


def groups_allreduce_bytes(n_chains: int, G: int, K: int, itemsize: int = 4) -> int:
    """Bytes all-reduced per sweep of ``HierarchicalGLM(devices=...)``: every group's coefficients
    (``itemsize`` bytes each: 4 for float32), then the log-likelihood and the fallbacks (8 bytes a chain
    each)."""
    return n_chains * (G * K * itemsize + 16)


def _check_xy(X, y, family, xp, dtype):
    if y is None:
        raise ValueError("This estimator requires y to be passed, but the target y is None; pass one target "
                         "per row of X.")
    if getattr(y, "ndim", None) == 2 and y.shape[1] == 1:  # a column vector, as scikit-learn takes it
        import warnings

        from ...sampling._estimator import DataConversionWarning

        warnings.warn("A column-vector y was passed when a 1d array was expected; y is raveled to shape "
                      "(n_samples,). Pass y.ravel() to avoid this warning.", DataConversionWarning, stacklevel=3)
        y = y[:, 0]
    X = as_data(X, xp, dtype, "X")
    y = as_data(y, xp, dtype, "y", ndim=1, finite=False)
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]} values; pass one y per row of X.")
    check_y(y, family, xp)
    return X, y


def _positive_float(value, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a positive number, got {value!r}.") from None
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}.")
    return v


def _available_if(check):
    """``sklearn.utils.metaestimators.available_if`` where scikit-learn imports, else the same idea: the
    method exists on an instance only where ``check(instance)`` holds (or raises AttributeError itself)."""
    try:
        from sklearn.utils.metaestimators import available_if
    except ImportError:
        available_if = None
    if available_if is not None:
        return available_if(check)

    class _Descriptor:
        def __init__(self, fn):
            self.fn = fn
            self.__doc__ = fn.__doc__

        def __get__(self, obj, owner=None):
            if obj is None:
                return self.fn
            if not check(obj):
                raise AttributeError(f"This {type(obj).__name__} has no attribute {self.fn.__name__!r}.")
            return self.fn.__get__(obj, owner)

    return _Descriptor


def _hidden(constraint):
    """scikit-learn's ``Hidden`` (valid, not named in messages) where it imports."""
    if not HAVE_SKLEARN:
        return constraint
    from sklearn.utils._param_validation import Hidden

    return Hidden(constraint)


# The settings both estimators share, checked by scikit-learn at fit where it imports (_check_settings runs
# without it). random_state (an int, a SeedSequence or a generator), dtype and devices are checked where
# they are resolved.
_SHARED_CONSTRAINTS = {
    "family": [StrOptions({"bernoulli", "poisson", "gaussian"}),
               _hidden(StrOptions({"Bernoulli", "Poisson", "Gaussian"}))],
    "n_chains": [Interval(Integral, 1, None, closed="left")],
    "n_samples": [Interval(Integral, 1, None, closed="left")],
    "n_warmup": [Interval(Integral, 0, None, closed="left")],
    "sigma": [Interval(Real, 0, None, closed="neither")],
    "fit_intercept": ["boolean"],
    "max_steps_out": [Interval(Integral, 1, None, closed="left")],
    "max_shrink": [Interval(Integral, 1, None, closed="left")],
    "random_state": "no_validation",
    "progress": ["boolean"],
    "backend": [None, StrOptions({"numpy", "cupy"})],
    "dtype": "no_validation",
    "graph": [None, "boolean"],
    "devices": "no_validation",
}


class _GLMBase(Estimator):
    def __sklearn_tags__(self):
        # One class for the three families, so the estimator type follows the family parameter, as
        # scikit-learn does for estimators whose kind depends on a parameter: bernoulli classifies (labels
        # 0 and 1), poisson and gaussian regress.
        from sklearn.utils import ClassifierTags, RegressorTags

        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        family = self.family.lower() if isinstance(self.family, str) else self.family
        if family == "bernoulli":
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags(multi_class=False)
        else:
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
            tags.target_tags.positive_only = family == "poisson"
        return tags

    def _expected_failed_checks(self):
        if (self.family.lower() if isinstance(self.family, str) else self.family) != "bernoulli":
            return {}
        why = ("family='bernoulli' takes y in {0, 1}, the likelihood's support, and refuses other labels with "
               "a ValueError that names them (it does not encode labels): the check fits on labels other than 0 "
               "and 1 (strings, three classes, a continuous target) and expects them encoded or refused in "
               "scikit-learn's words.")
        return dict.fromkeys(["check_estimators_dtypes", "check_classifier_data_not_an_array",
                              "check_classifiers_classes", "check_classifiers_regression_target",
                              "check_classifier_not_supporting_multiclass", "check_fit2d_1feature"], why)

    def _family_score(self, y, sample_weight, predict_mean):
        """Accuracy (bernoulli, threshold 0.5) or R^2 of ``predict_mean()`` against ``y``, weighted."""
        y = np.asarray(_backend.to_host(as_data(y, np, np.float64, "y", ndim=1)), dtype=np.float64)
        w = None if sample_weight is None else np.asarray(_backend.to_host(sample_weight), dtype=np.float64)
        if w is not None and w.shape != y.shape:
            raise ValueError(f"sample_weight must have one weight per value of y ({y.shape[0]}), got {w.shape}.")
        pred = predict_mean()
        if pred.shape != y.shape:
            raise ValueError(f"X has {pred.shape[0]} rows but y has {y.shape[0]} values; pass one y per row of X.")
        if self.family_ == "bernoulli":
            return float(np.average((pred > 0.5) == y, weights=w))
        ww = np.ones_like(y) if w is None else w
        ybar = np.average(y, weights=ww)
        ss_res = float(np.sum(ww * (y - pred) ** 2))
        ss_tot = float(np.sum(ww * (y - ybar) ** 2))
        if ss_tot == 0.0:  # scikit-learn's r2_score for constant y
            return 1.0 if ss_res == 0.0 else 0.0
        return 1.0 - ss_res / ss_tot

    def _check_settings(self):
        """The settings shared by both estimators, checked at fit (sigma: the gaussian noise)."""
        family = check_family(self.family)
        _validate.check_int(self.n_chains, "n_chains")
        _validate.check_int(self.n_samples, "n_samples")
        _validate.check_int(self.n_warmup, "n_warmup", 0)
        _validate.check_int(self.max_steps_out, "max_steps_out")
        _validate.check_int(self.max_shrink, "max_shrink")
        _positive_float(self.sigma, "sigma")
        self.family_ = family  # only once every setting passed: a refused refit leaves the last fit whole

    def _design(self, X):
        xp = _backend.get_array_module(X)
        if self.fit_intercept:
            X = xp.concatenate([xp.ones((X.shape[0], 1), dtype=X.dtype), X], axis=1)
        return X

    def _dtype(self):
        return np.dtype(self.dtype)

    def _run(self, state, data, hyper):
        rng = self._make_rng()
        fam = self.family_
        sig = float(self.sigma)

        def st(r, s):
            return step(r, s, data, fam, sig, self.n_warmup, self.max_steps_out, self.max_shrink, hyper)

        return run(st, state, rng, self.n_samples, burn_in=self.n_warmup, collect=self._collector(hyper),
                   progress=self.progress, desc=type(self).__name__, graph=self._use_graph(data))

    @staticmethod
    def _collector(hyper):
        """What the run driver keeps of each draw: beta, and mu with Sigma (or tau) for the hierarchy."""
        diag = hyper is not None and len(hyper) > 3 and hyper[3] == "diag"

        def collect(s, info):
            out = {"beta": s.beta}
            if hyper is not None:
                out["mu"] = s.mu
                if diag:
                    xp = _backend.get_array_module(s.sigma)
                    out["tau"] = xp.sqrt(xp.diagonal(s.sigma, axis1=1, axis2=2))
                else:
                    out["Sigma"] = s.sigma
            return out

        return collect

    def _use_graph(self, data):
        """Replay the sweep from a CUDA graph: on the GPU unless ``graph=False`` (by default not for
        ``max_steps_out >= _PMAX``, whose sweep is one launch per coordinate already)."""
        g = getattr(self, "graph", None)
        if data.plan is None:  # NumPy
            return False
        if g is None:
            return self.max_steps_out < _PMAX
        return bool(g)


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
    xp = _backend.get_array_module(X)
    N, K = X.shape
    if groups is None:
        gid = xp.zeros((N,), dtype=np.int64)
        starts = xp.asarray([0], dtype=np.int64)
        ends = xp.asarray([N], dtype=np.int64)
        G = 1
    else:
        gid = groups
        G = int(gid.max()) + 1 if N else 0
        counts = xp.bincount(gid, minlength=G)
        ends = xp.cumsum(counts)
        starts = ends - counts
    lgy = None
    if family == "poisson":
        from ...glm import _lgamma1p
        lgy = _lgamma1p(xp, y)
    plan = _chunk_plan(xp, starts, ends, n_chains, chunk_shape) if xp is not np else None
    data = _Data(xp.ascontiguousarray(X.T), y, lgy, gid, starts, ends, plan)
    return _init_state(xp, n_chains, G, K, N, X.dtype, prior_scale), data


class BayesianGLM(_GLMBase):
    _parameter_constraints = {**_SHARED_CONSTRAINTS, "prior_scale": [Interval(Real, 0, None, closed="neither")]}

    """Bayesian GLM with ``beta ~ N(0, prior_scale^2 I)``, sampled by slice-within-Gibbs.

    Parameters
    ----------
    family : {"bernoulli", "poisson", "gaussian"}
    prior_scale : float
        Prior standard deviation of every coefficient (and the intercept).
    n_chains, n_samples, n_warmup : int
        Chains run together; kept draws per chain; warm-up sweeps (step widths
        tuned, draws discarded).
    sigma : float
        Known noise standard deviation of the gaussian family.
    fit_intercept : bool
        Add a column of ones; its coefficient is ``intercept`` in the results.
    max_steps_out, max_shrink : int
        The fixed bounds of the stepping-out and shrinkage rounds.
    graph : bool or None
        On the GPU, capture one sweep as a CUDA graph and replay it
        (:func:`gpumcmc.sampling.graph_step`): one launch per sweep instead
        of about 2 K kernel launches and the Python around them, for the same
        draws bit for bit. ``None`` (the default): on the GPU, yes. The graph
        keeps a second copy of the state (``eta`` is chains x rows).
    devices : None, "all", int, list of int, or gpumcmc.shards.Shards
        Split the rows over devices (:func:`make_sharded_step`): each keeps
        ``eta`` of its rows and moves it by the differential update; the
        slice sampler's log-density evaluations are all-reduced, so every
        device takes the same decisions. ``Shards(n_virtual=k)`` splits on
        NumPy, :func:`gpumcmc.shards.one_device` on one GPU. With one shard
        the draws equal those of ``devices=None`` for the same seed; with
        several, up to the order of the sums over rows (a chain can take
        another step where a candidate lies within rounding of the slice
        level). X and y are checked on the host and copied part by part to
        the devices.
    random_state, progress, backend, dtype : as everywhere in gpumcmc.
    """

    def __init__(self, family="bernoulli", prior_scale=2.5, n_chains=4, n_samples=1000, n_warmup=500,
                 sigma=1.0, fit_intercept=True, max_steps_out=4, max_shrink=24, random_state=None,
                 progress=True, backend=None, dtype="float64", graph=None, devices=None):
        self.family = family
        self.prior_scale = prior_scale
        self.n_chains = n_chains
        self.n_samples = n_samples
        self.n_warmup = n_warmup
        self.sigma = sigma
        self.fit_intercept = fit_intercept
        self.max_steps_out = max_steps_out
        self.max_shrink = max_shrink
        self.random_state = random_state
        self.progress = progress
        self.backend = backend
        self.dtype = dtype
        self.graph = graph
        self.devices = devices

    def _check_flat_settings(self):
        self._check_settings()
        _positive_float(self.prior_scale, "prior_scale")

    def fit(self, X, y):
        self._validate_settings(self._check_flat_settings)
        if self.devices is not None:
            self.trace_ = self._fit_sharded(X, y)
        else:
            xp = self._xp()
            X, y = _check_xy(X, y, self.family_, xp, self._dtype())
            self.n_features_in_ = X.shape[1]
            D = self._design(X)
            state, data = init(D, y, self.family_, self.n_chains, float(self.prior_scale))
            self.trace_ = self._run(state, data, None)
        b = self.trace_.draws["beta"][:, :, 0, :]                    # (chain, draw, K')
        self.coef_draws_ = b
        if self.family_ == "bernoulli":
            self.classes_ = np.array([0, 1])  # y's support, as predict returns it
        else:
            self.__dict__.pop("classes_", None)  # from an earlier bernoulli fit
        if self.fit_intercept:
            self.intercept_ = float(b[..., 0].mean())
            self.coef_ = b[..., 1:].mean(axis=(0, 1))
        else:
            self.intercept_ = 0.0
            self.coef_ = b.mean(axis=(0, 1))
        return self

    def _fit_sharded(self, X, y):
        """The rows split over ``self.devices`` (see :func:`make_sharded_step`)."""
        from ...random import default_rng
        from ...shards import resolve

        if self.graph:
            raise ValueError("graph=True needs devices=None: the sweep over several devices is not captured as "
                             "a CUDA graph; leave graph at None or False.")
        shards = resolve(self.devices, self.backend, "the rows")[0]
        X = _backend.to_host(X) if _backend.is_cupy_array(X) else X
        y = _backend.to_host(y) if _backend.is_cupy_array(y) else y
        X, y = _check_xy(X, y, self.family_, np, self._dtype())   # on the host, before the split
        self.n_features_in_ = X.shape[1]
        D = self._design(X)
        state, data, prior = init_sharded(D, y, shards, self.family_, self.n_chains, float(self.prior_scale))
        step_fn = make_sharded_step(data, shards, self.family_, float(self.sigma), self.n_warmup, prior,
                                    self.max_steps_out, self.max_shrink)
        with shards.on(0):
            rng = default_rng(self.random_state, backend="numpy" if shards.xp is np else "cupy")
            return run(step_fn, state, rng, self.n_samples, burn_in=self.n_warmup,
                       collect=lambda s, info: {"beta": s.beta}, progress=self.progress,
                       desc=type(self).__name__)

    def _draws(self, max_draws=None):
        b = self.coef_draws_.reshape(-1, self.coef_draws_.shape[-1])
        if max_draws is not None and b.shape[0] > max_draws:
            b = b[np.linspace(0, b.shape[0] - 1, max_draws).astype(int)]
        return b

    def predict_mean(self, X, max_draws=1000):
        """The posterior predictive mean E[y | X] (averaged over the draws), on the host."""
        self._check_fitted("coef_draws_")
        X = np.asarray(_backend.to_host(as_data(X, self._xp(), self._dtype(), "X")), dtype=np.float64)
        self._check_n_features(X)
        b = self._draws(max_draws)
        if self.fit_intercept:
            eta = b[:, :1] + b[:, 1:] @ X.T
        else:
            eta = b @ X.T
        return mean_function(eta, self.family_, np).mean(axis=0)

    def _is_classifier(self) -> bool:
        family = getattr(self, "family_", self.family)
        if isinstance(family, str) and family.lower() == "bernoulli":
            return True
        raise AttributeError(f"predict_proba exists only for family='bernoulli' (this model has family={family!r}); "
                             "use predict_mean for the posterior predictive mean.")

    @_available_if(_is_classifier)
    def predict_proba(self, X, max_draws=1000):
        """(n, 2) class probabilities from the posterior predictive. Only for ``family="bernoulli"``:
        for the other families the attribute does not exist (``hasattr`` is False)."""
        p = self.predict_mean(X, max_draws)
        return np.stack([1 - p, p], axis=1)

    def score(self, X, y, sample_weight=None, max_draws=1000):
        """scikit-learn's score for the family: for ``"bernoulli"`` the accuracy of :meth:`predict` (as
        ``ClassifierMixin``), for ``"poisson"`` and ``"gaussian"`` the coefficient of determination R^2 of
        the posterior predictive mean (as ``RegressorMixin``). So ``GridSearchCV`` and
        ``cross_val_score`` rank fits as they rank scikit-learn's own classifiers and regressors."""
        self._check_fitted("coef_draws_")
        return self._family_score(y, sample_weight, lambda: self.predict_mean(X, max_draws))

    def predict(self, X, max_draws=1000):
        """Class labels (bernoulli, threshold 0.5) or the posterior predictive mean."""
        p = self.predict_mean(X, max_draws)
        return (p > 0.5).astype(np.int64) if self.family_ == "bernoulli" else p

    def to_arviz(self, feature_names=None):
        """ArviZ InferenceData: posterior ``beta`` (chain, draw, K), ``intercept``; sample stats."""
        self._check_fitted("coef_draws_")
        b = self.coef_draws_
        post = {"beta": b[..., 1:] if self.fit_intercept else b}
        if self.fit_intercept:
            post["intercept"] = b[..., 0]
        coords = {"feature": list(feature_names) if feature_names is not None else list(range(self.n_features_in_))}
        return to_arviz(post, self.trace_.stats, coords=coords, dims={"beta": ["feature"]})

    def summary(self, **kw):
        """ArviZ's summary table (means, intervals, R-hat, ESS)."""
        import arviz as az
        return az.summary(self.to_arviz(), **kw)


class HierarchicalGLM(_GLMBase):
    _parameter_constraints = {
        **_SHARED_CONSTRAINTS,
        "kappa0": [Interval(Real, 0, None, closed="left")],
        "nu0": [None, Interval(Real, 0, None, closed="neither")],
        "psi0": [Interval(Real, 0, None, closed="left")],
        "covariance": [StrOptions({"full", "diag"})],
    }

    """Hierarchical GLM: each group g has its own coefficients ``beta_g``, drawn around a common mean.

    The model, for groups g = 1..G and coefficients k = 1..K (the intercept
    first when ``fit_intercept``):

    ``covariance="full"`` (the default)::

        beta_g | mu, Sigma ~ N(mu, Sigma)
        mu | Sigma         ~ N(0, Sigma / kappa0)
        Sigma              ~ InvWishart(nu0, psi0 * I)        nu0 = K + 2 by default

    ``covariance="diag"``: the coefficients vary across groups independently,
    each with its own scale ``tau_k``::

        beta_gk | mu_k, tau_k ~ N(mu_k, tau_k^2)
        mu_k | tau_k          ~ N(0, tau_k^2 / kappa0)
        tau_k^2               ~ InvGamma(nu0 / 2, psi0 / 2)    nu0 = 3 by default

    (with ``nu0 = 3`` each ``tau_k^2`` has the same prior as a diagonal entry
    of ``Sigma`` under the full model's default), and ``y`` given ``beta_g``
    follows the GLM of ``family`` within each group.

    All groups' coefficients move at once (conditionally independent given
    ``mu, Sigma``), each by slice-within-Gibbs with the differential update;
    ``mu, Sigma`` are then drawn from their conjugate conditional for all
    chains at once: the inverse-Wishart by the Bartlett decomposition (on
    the GPU one kernel, a block per chain, from the groups' scatter to
    ``mu``, ``Sigma`` and its inverse, with no host round trip), or for
    ``"diag"`` an inverse-gamma per coefficient (from the generator's gamma
    draws) and a normal for ``mu``. The diagonal model has K variances to learn instead of
    K (K + 1) / 2 covariances, so it needs fewer groups and keeps no (K, K)
    matrix per draw. ``fit(X, y, groups)`` takes integer or string group
    labels, one per row (``groups=None``: one group); :meth:`predict`,
    :meth:`predict_mean` and :meth:`score` take labels seen at fit. In
    scikit-learn's ``cross_val_score`` or ``GridSearchCV``, route them with
    ``sklearn.set_config(enable_metadata_routing=True)`` and
    ``set_fit_request(groups=True).set_score_request(groups=True)``.

    Parameters
    ----------
    family : {"bernoulli", "poisson", "gaussian"}
    kappa0, nu0, psi0 : float
        The hyperprior above (``nu0=None``: the default for ``covariance``).
    covariance : {"full", "diag"}
        The groups' covariance: a full ``Sigma`` or ``diag(tau^2)``.
    n_chains, n_samples, n_warmup, sigma, fit_intercept, max_steps_out, max_shrink,
    random_state, progress, backend, dtype, graph : as for :class:`BayesianGLM`.
    devices : None, "all", int, list of int, or gpumcmc.shards.Shards
        Split the groups over devices (:func:`make_groups_sharded_step`):
        each holds whole groups (their rows, coefficients and ``eta``,
        about equal rows per device) and sweeps them with no communication;
        once a sweep, every group's coefficients are all-reduced (``C G K``
        values) for the draw of ``mu, Sigma``. Group g's random numbers are
        the same on any device, so on the GPU the draws equal those of
        ``devices=None`` for the same seed, bit for bit; on NumPy
        (``Shards(n_virtual=k)``), up to the rounding of the sums over a
        group's rows. There must be at least as many groups as devices.
    """

    def __init__(self, family="bernoulli", kappa0=1.0, nu0=None, psi0=1.0, n_chains=4, n_samples=1000,
                 n_warmup=500, sigma=1.0, fit_intercept=True, max_steps_out=4, max_shrink=24,
                 random_state=None, progress=True, backend=None, dtype="float64", covariance="full",
                 graph=None, devices=None):
        self.family = family
        self.kappa0 = kappa0
        self.nu0 = nu0
        self.psi0 = psi0
        self.n_chains = n_chains
        self.n_samples = n_samples
        self.n_warmup = n_warmup
        self.sigma = sigma
        self.fit_intercept = fit_intercept
        self.max_steps_out = max_steps_out
        self.max_shrink = max_shrink
        self.random_state = random_state
        self.progress = progress
        self.backend = backend
        self.dtype = dtype
        self.covariance = covariance
        self.graph = graph
        self.devices = devices

    def _check_hier_settings(self):
        self._check_settings()
        if self.covariance not in ("full", "diag"):
            raise ValueError(f"covariance must be 'full' (Sigma with an inverse-Wishart prior) or 'diag' "
                             f"(diag(tau^2) with inverse-gamma priors), got {self.covariance!r}.")
        if not (float(self.kappa0) >= 0 and float(self.psi0) >= 0):
            raise ValueError(f"kappa0 and psi0 must be non-negative numbers (0: the improper limit), "
                             f"got kappa0={self.kappa0!r}, psi0={self.psi0!r}.")
        if self.covariance == "diag" and self.nu0 is not None and not float(self.nu0) > 0:
            raise ValueError(f"nu0 must be positive for covariance='diag', got {float(self.nu0)}.")

    def fit(self, X, y, groups=None):
        """Sample the posterior given ``X``, ``y`` and one group label per row (``groups=None``: all rows in
        one group)."""
        self._validate_settings(self._check_hier_settings)
        shards = None
        if self.devices is not None:
            from ...shards import resolve

            if self.graph:
                raise ValueError("graph=True needs devices=None: the sweep over several devices is not captured "
                                 "as a CUDA graph; leave graph at None or False.")
            shards = resolve(self.devices, self.backend, "the groups")[0]
            xp = np  # X and y are checked on the host, then copied group by group to the devices
            X = _backend.to_host(X) if _backend.is_cupy_array(X) else X
            y = _backend.to_host(y) if _backend.is_cupy_array(y) else y
        else:
            xp = self._xp()
        X, y = _check_xy(X, y, self.family_, xp, self._dtype())
        groups = np.zeros(X.shape[0], np.int64) if groups is None else np.asarray(_backend.to_host(groups))
        if groups.ndim != 1 or groups.shape[0] != X.shape[0]:
            raise ValueError(f"groups must be 1-d with one label per row of X ({X.shape[0]}), "
                             f"got shape {groups.shape}.")
        missing = groups != groups  # NaN (float or object labels): a label that equals nothing
        if groups.dtype == object:
            missing = missing | np.array([g is None for g in groups], dtype=bool)
        if missing.any():
            raise ValueError(f"groups holds a missing label (NaN or None) at row {int(np.argmax(missing))}; give "
                             "every row a group, or drop the rows without one.")
        self.groups_, gid = np.unique(groups, return_inverse=True)
        order = np.argsort(gid, kind="stable")
        o = xp.asarray(order)
        X, y = X[o], y[o]
        self.n_features_in_ = X.shape[1]
        D = self._design(X)
        K = D.shape[1]
        if shards is None:
            state, data = init(D, y, self.family_, self.n_chains, 1.0, xp.asarray(gid[order].astype(np.int64)))
        else:
            state, datas, bounds = init_groups_sharded(D, y, gid[order], shards, self.family_, self.n_chains, 1.0)
            xp = shards.xp
        if self.covariance == "diag":
            nu0 = float(3.0 if self.nu0 is None else self.nu0)
            if not nu0 > 0:
                raise ValueError(f"nu0 must be positive for covariance='diag', got {nu0}.")
            hyper = HyperPrior(float(self.kappa0), nu0, float(self.psi0), "diag")
        else:
            nu0 = float(K + 2 if self.nu0 is None else self.nu0)
            if nu0 <= K - 1:
                raise ValueError(f"nu0 must exceed K - 1 = {K - 1}, got {nu0}.")
            if shards is None:
                hyper = HyperPrior(float(self.kappa0), nu0, xp.eye(K, dtype=np.float64) * float(self.psi0))
            else:
                with shards.on(0):
                    hyper = HyperPrior(float(self.kappa0), nu0, xp.eye(K, dtype=np.float64) * float(self.psi0))
        if shards is None:
            self.trace_ = self._run(state, data, hyper)
        else:
            from ...random import default_rng

            step_fn = make_groups_sharded_step(datas, shards, bounds, self.family_, float(self.sigma),
                                               self.n_warmup, hyper, self.max_steps_out, self.max_shrink)
            with shards.on(0):
                rng = default_rng(self.random_state, backend="numpy" if xp is np else "cupy")
                self.trace_ = run(step_fn, state, rng, self.n_samples, burn_in=self.n_warmup,
                                  collect=self._collector(hyper), progress=self.progress, desc=type(self).__name__)
        self.beta_draws_ = self.trace_.draws["beta"]              # (chain, draw, G, K')
        if self.family_ == "bernoulli":
            self.classes_ = np.array([0, 1])  # y's support, as predict returns it
        else:
            self.__dict__.pop("classes_", None)  # from an earlier bernoulli fit
        self.coef_ = self.beta_draws_.mean(axis=(0, 1))
        return self

    def _group_ids(self, groups, n):
        """Each row's index into ``groups_`` (labels seen at fit; ``None`` where fit saw one group)."""
        G = len(self.groups_)
        if groups is None:
            if G != 1:
                raise ValueError(f"groups is None but the model was fitted on {G} groups; pass one group label "
                                 "per row of X.")
            return np.zeros(n, np.int64)
        groups = np.asarray(_backend.to_host(groups))
        if groups.ndim != 1 or groups.shape[0] != n:
            raise ValueError(f"groups must be 1-d with one label per row of X ({n}), got shape {groups.shape}.")
        gid = np.minimum(np.searchsorted(self.groups_, groups), G - 1)   # groups_ is sorted (np.unique)
        unseen = self.groups_[gid] != groups
        if unseen.any():
            i = int(np.argmax(unseen))
            raise ValueError(f"groups holds the label {groups[i]!r} (row {i}), not seen at fit; predict for the "
                             "groups the model was fitted on.")
        return gid

    def predict_mean(self, X, groups=None, max_draws=1000):
        """The posterior predictive mean E[y | X] on the host, each row under the draws of its group's
        coefficients (``groups`` as at fit, one label per row; ``None`` where fit saw one group)."""
        self._check_fitted("beta_draws_")
        X = np.asarray(_backend.to_host(as_data(X, self._xp(), self._dtype(), "X")), dtype=np.float64)
        self._check_n_features(X)
        gid = self._group_ids(groups, X.shape[0])
        D = self._design(X)
        b = self.beta_draws_.reshape((-1,) + self.beta_draws_.shape[2:])          # (draw, G, K')
        if b.shape[0] > max_draws:
            b = b[np.linspace(0, b.shape[0] - 1, max_draws).astype(int)]
        eta = np.empty((b.shape[0], X.shape[0]))
        for g in np.unique(gid):
            rows = gid == g
            eta[:, rows] = b[:, g, :] @ D[rows].T
        return mean_function(eta, self.family_, np).mean(axis=0)

    def predict(self, X, groups=None, max_draws=1000):
        """Class labels (bernoulli, threshold 0.5) or the posterior predictive mean; ``groups`` as for
        :meth:`predict_mean`."""
        p = self.predict_mean(X, groups, max_draws)
        return (p > 0.5).astype(np.int64) if self.family_ == "bernoulli" else p

    def score(self, X, y, groups=None, sample_weight=None, max_draws=1000):
        """Accuracy (bernoulli) or R^2 of the posterior predictive mean, as :meth:`BayesianGLM.score`;
        ``groups`` as for :meth:`predict_mean`."""
        self._check_fitted("beta_draws_")
        return self._family_score(y, sample_weight, lambda: self.predict_mean(X, groups, max_draws))

    def to_arviz(self):
        """ArviZ InferenceData: ``beta`` (chain, draw, G, K), ``mu`` (chain, draw, K), and ``Sigma``
        (chain, draw, K, K) or, for ``covariance="diag"``, ``tau`` (chain, draw, K)."""
        self._check_fitted("beta_draws_")
        d = self.trace_.draws
        K = d["beta"].shape[-1]
        coords = {"group": list(self.groups_), "coef": list(range(K))}
        post = {"beta": d["beta"], "mu": d["mu"]}
        dims = {"beta": ["group", "coef"], "mu": ["coef"]}
        if "tau" in d:
            post["tau"] = d["tau"]
            dims["tau"] = ["coef"]
        else:
            post["Sigma"] = d["Sigma"]
            dims["Sigma"] = ["coef", "coef2"]
            coords["coef2"] = list(range(K))
        return to_arviz(post, self.trace_.stats, coords=coords, dims=dims)
