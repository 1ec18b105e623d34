"""The Bayesian GLM's sweep with its rows (:func:`over_rows`, for ``BayesianGLM(devices=...)``) or its groups
(:func:`over_groups`, for ``HierarchicalGLM(devices=...)``) split over devices: two
:class:`gpumcmc.sampling.Collective` algorithms for :func:`gpumcmc.sampling.sharded`, with the parts they
take (:func:`row_parts`, :func:`group_parts`) and the bytes they all-reduce.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import _validate, backend as _backend
from ..._config import config
from ...shards import Replica, balanced_cuts
from ...sampling import Collective
from .algorithm import (SliceInfo, SliceState, _coordinates, _draw_hyper, _init_data, _init_state, _loglik, _moved,
                        _sweep_coefs, _total_loglik, sweep_randoms)
from .ops import _PMAX, _chunk_plan, _ShardedPasses

__all__ = ["GroupPart", "ShardedGroupState", "ShardedSliceState", "allreduce_bytes", "group_bounds", "group_parts",
           "groups_allreduce_bytes", "over_groups", "over_rows", "row_parts", "shard_passes"]


class ShardedSliceState(NamedTuple):
    """The state of :func:`over_rows`: the global fields once, on local shard 0's device, and ``eta`` per shard."""

    beta: object    # (C, 1, K) coefficients, on local shard 0's device
    width: object   # (C, 1, K) slice step widths, on local shard 0's device
    eta: tuple      # per local shard, (C, N_i) linear predictor of its rows
    it: object      # (C,) iteration counter, on local shard 0's device


def shard_passes(max_shrink: int = 24) -> int:
    """Passes per coordinate of the sharded sweep: the first (``x0``, the stepping-out points and the
    first shrinkage proposals), then enough passes of ``_PMAX`` proposals for ``max_shrink`` of them
    (the first pass evaluates none when the bracket stepped out)."""
    return 1 + -(-int(max_shrink) // _PMAX)


def row_parts(X, y, shards, family="bernoulli", n_chains=4) -> list:
    """Each local shard's rows of ``X`` (N, K) and ``y`` for :func:`over_rows`, on its device, held as
    :func:`.algorithm.init` holds one group's data (on the GPU split into chunks for ``n_chains`` chains)."""
    N, K = X.shape
    if N < shards.world:
        raise ValueError(f"{N} rows cannot be split over {shards.world} shards: use fewer devices.")
    parts, ys = shards.scatter(X), shards.scatter(y)
    data = []
    for i, yi in enumerate(ys):
        with shards.on(i):
            Xi, parts[i] = parts[i], None  # the row-major part is dropped once transposed
            data.append(_init_data(Xi, yi, family, n_chains, None, None)[0])
            del Xi
    return data


def over_rows(family, sigma_noise, n_warmup, max_steps_out=4, max_shrink=24) -> Collective:
    """The flat model's sweep with its rows split over the shards, a :class:`gpumcmc.sampling.Collective`
    over :func:`row_parts` for ``sharded(over_rows(...), shards)``.

    ``init(rng, parts, shards, n_chains=4, prior_scale=2.5)`` gives a :class:`ShardedSliceState` (``rng``
    unused). ``step(rng, state, parts, shards, reduce)`` is :func:`.algorithm.step` with every sum over rows
    a sum of the shards' sums (``reduce``), from which every device takes the same decisions; the random
    numbers are drawn on local shard 0. On the GPUs each coordinate runs in :func:`shard_passes` passes of
    up to ``_PMAX`` candidates (``glm_slice_shard_eval``, ``reduce``, ``glm_slice_decide``), with no host
    synchronisation. With one shard the draws equal ``devices=None`` (on the GPU, up to a coordinate that
    needs more than two passes of proposals); with several, a decision can differ where a candidate lies
    within rounding of the slice level.
    """
    m = int(max_steps_out)
    if not 1 <= m < _PMAX:
        raise ValueError(f"max_steps_out must be between 1 and {_PMAX - 1} with devices=, got {max_steps_out}.")
    if int(max_shrink) < 1:
        raise ValueError(f"max_shrink must be at least 1, got {max_shrink}.")
    max_shrink = int(max_shrink)
    made: dict = {}  # what init makes for the steps: the prior, and on the GPU the passes

    def rows_loglik(parts, etas, k, reduce):
        """:func:`.algorithm._loglik` over every shard's rows, summed by ``reduce``."""
        lls = [_loglik(np, d, family, sigma_noise, e, k) for e, d in zip(etas, parts)]
        return lambda delta: reduce([f(delta) for f in lls])[0]

    def init_(rng, parts, shards, n_chains=4, prior_scale=2.5):
        xp = shards.xp
        K, dt = parts[0].Xt.shape[0], parts[0].Xt.dtype
        etas = shards.each(parts, lambda i, d: xp.zeros((n_chains, d.Xt.shape[1]), dtype=dt))
        with shards.on(0):
            st = _init_state(xp, n_chains, 1, K, 0, dt, prior_scale)
        made["prior"] = (st.mu, st.prec)
        if xp is not np:
            d1 = max(1, min(config.glm_spec_shrink, _PMAX - m, max_shrink))
            made["passes"] = _ShardedPasses(shards, parts, (st.mu, st.prec), family, sigma_noise, n_warmup, m,
                                            max_shrink, d1)
        return ShardedSliceState(st.beta, st.width, tuple(etas), st.it)

    def step(rng, state, parts, shards, reduce):
        xp = shards.xp
        gpu = xp is not np
        C, G, K = state.beta.shape
        with shards.on(0):
            draws = sweep_randoms(rng, (C, G, K), state.beta.dtype, max_shrink)
        if gpu:
            passes = made["passes"]
            dvs = passes.states(state, draws)
            etas = shards.each(state.eta, lambda i, e: e.copy())  # moved in place by the kernels
            passes(dvs, etas, K, shard_passes(max_shrink), reduce)
            evals = -1
        else:
            st = SliceState(state.beta, state.eta, state.width, *made["prior"], None, state.it)
            beta, etas, width, fallbacks, evals = _coordinates(
                xp, st, n_warmup, m, max_shrink, *draws, lambda etas, k: rows_loglik(parts, etas, k, reduce),
                lambda etas, k, delta: [_moved(e, d, k, delta) for e, d in zip(etas, parts)])
        lls = []
        for i, d in enumerate(parts):
            with shards.on(i):
                if gpu:  # the last coordinate's step, as the array code adds it
                    etas[i] += dvs[passes.dev_of[i]]["dpend"] * d.Xt[K - 1][None, :]
                lls.append(xp.ascontiguousarray(_total_loglik(xp, d, family, sigma_noise, etas[i])))
        ll = reduce(lls)[0]
        with shards.on(0):
            if gpu:
                beta, width, fallbacks = dvs[0]["beta"], dvs[0]["width"], dvs[0]["fb"].sum(axis=1).astype(np.int64)
            new = ShardedSliceState(beta, width, tuple(etas), state.it + 1)
            info = SliceInfo(xp.full((C,), evals, dtype=np.int64), fallbacks, ll)
        return new, info

    return Collective(init_, step)


def allreduce_bytes(n_chains: int, K: int, max_shrink: int = 24) -> int:
    """Bytes all-reduced per sweep of ``BayesianGLM(devices=...)`` on the GPU with ``K`` coefficients
    (intercept included): per coordinate :func:`shard_passes` all-reduces of ``_PMAX`` float64 sums a
    chain, and the log-likelihood at the end."""
    return 8 * n_chains * (K * shard_passes(max_shrink) * _PMAX + 1)


class ShardedGroupState(NamedTuple):
    """The state of :func:`over_groups`: the global fields on local shard 0's device, the rest per shard."""

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


class GroupPart(NamedTuple):
    """One local shard's part of the groups, for :func:`over_groups` (:func:`group_parts` makes them)."""

    data: object      # the shard's groups' data for the single-device sweep (.algorithm._Data), on its device
    groups: tuple     # (g0, g1): the shard holds groups g0 .. g1 - 1
    n_groups: int     # G, the groups of the whole data set


def group_parts(X, y, gid, shards, family="bernoulli", n_chains=4) -> list:
    """Each local shard's :class:`GroupPart` for :func:`over_groups`: its whole groups' rows of ``X`` (N, K)
    and ``y``, sorted by group, with ``gid`` (N,) on the host, the group of each row (0 to G - 1). On the
    GPU each shard splits its groups' rows into chunks as one device would, so each group's sums are one
    device's."""
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
    parts = []
    for i, (g0, g1) in enumerate(bounds):
        a, b = int(starts[g0]), int(ends[g1 - 1])
        with shards.on(i):
            # a copy made under the shard's device lands there (as Shards.scatter copies)
            Xi, yi = (np.ascontiguousarray(v[a:b]) if xp is np else xp.array(v[a:b], copy=True, order="C")
                      for v in (X, y))
            d, _ = _init_data(Xi, yi, family, n_chains, xp.asarray(gid[a:b] - g0), shape)
            del Xi
            parts.append(GroupPart(d, (g0, g1), G))
    return parts


def over_groups(family, sigma_noise, n_warmup, hyper, max_steps_out=4, max_shrink=24) -> Collective:
    """The hierarchical model's sweep with whole groups on each shard, a :class:`gpumcmc.sampling.Collective`
    over :func:`group_parts` for ``sharded(over_groups(...), shards)``.

    ``init(rng, parts, shards, n_chains=4, prior_scale=1.0)`` gives a :class:`ShardedGroupState` (``rng``
    unused). ``step(rng, state, parts, shards, reduce)`` draws every group's random numbers on local shard 0,
    sweeps each shard's groups by the single-device code, gathers the coefficients exactly (``reduce`` of
    (C, G, K) arrays, zero outside each shard's groups) and draws ``mu, Sigma`` on local shard 0. On the GPU
    the draws equal ``devices=None`` bit for bit; on NumPy, up to the rounding of a group's row sums.
    """
    if hyper is None:
        raise ValueError("the groups' coefficients need their hyperprior: pass a HyperPrior.")

    def init_(rng, parts, shards, n_chains=4, prior_scale=1.0):
        xp = shards.xp
        G = parts[0].n_groups
        K, dt = parts[0].data.Xt.shape[0], parts[0].data.Xt.dtype
        etas, widths, betas = [], [], []
        for i, part in enumerate(parts):
            g0, g1 = part.groups
            with shards.on(i):
                st = _init_state(xp, n_chains, g1 - g0, K, part.data.Xt.shape[1], dt, prior_scale)
                etas.append(st.eta)
                widths.append(st.width)
                betas.append(xp.zeros((n_chains, G, K), dtype=dt))
        with shards.on(0):
            st = _init_state(xp, n_chains, G, K, 0, dt, prior_scale)
        return ShardedGroupState(betas[0], st.mu, st.prec, st.sigma, st.it, tuple(betas), tuple(etas),
                                 tuple(widths))

    def step(rng, state, parts, shards, reduce):
        xp = shards.xp
        C, G, K = state.beta.shape
        with shards.on(0):
            draws = sweep_randoms(rng, (C, G, K), state.beta.dtype, max_shrink)
        reps = [Replica(shards, a) for a in (state.mu, state.prec, state.sigma, state.it) + draws]
        fulls, lls, fbs, etas, widths = [], [], [], [], []
        for i, part in enumerate(parts):
            g0, g1 = part.groups
            data = part.data
            with shards.on(i):
                mu, prec, sigma, it, e, u, us = (r(i) for r in reps)
                e, u, us = (xp.ascontiguousarray(a[..., g0:g1]) for a in (e, u, us))
                st = SliceState(xp.ascontiguousarray(state.betas[i][:, g0:g1]), state.eta[i], state.width[i], mu,
                                prec, sigma, it)
                beta_i, eta_i, width_i, fb, _ = _sweep_coefs(xp, st, data, family, sigma_noise, n_warmup,
                                                             max_steps_out, max_shrink, e, u, us)
                full = xp.zeros((C, G, K), dtype=state.beta.dtype)
                full[:, g0:g1] = beta_i
                fulls.append(full)
                fbs.append(xp.ascontiguousarray(fb, dtype=np.int64))
                etas.append(eta_i)
                widths.append(width_i)
                lls.append(xp.ascontiguousarray(_total_loglik(xp, data, family, sigma_noise, eta_i)))
        reduce(fulls)
        reduce(lls)
        reduce(fbs)
        with shards.on(0):
            mu, prec, sigma = _draw_hyper(rng, fulls[0], hyper, xp)
            new = ShardedGroupState(fulls[0], mu, prec, sigma, state.it + 1, tuple(fulls), tuple(etas),
                                    tuple(widths))
            info = SliceInfo(xp.full((C,), -1, dtype=np.int64), fbs[0], lls[0])
        return new, info

    return Collective(init_, step)


def groups_allreduce_bytes(n_chains: int, G: int, K: int, itemsize: int = 4) -> int:
    """Bytes all-reduced per sweep of ``HierarchicalGLM(devices=...)``: every group's coefficients
    (``itemsize`` bytes each: 4 for float32), then the log-likelihood and the fallbacks (8 bytes a chain
    each)."""
    return n_chains * (G * K * itemsize + 16)


_ROWS = "gpumcmc.sampling.sharded(over_rows(family, sigma_noise, n_warmup, max_steps_out, max_shrink), shards)"
_GROUPS = ("gpumcmc.sampling.sharded(over_groups(family, sigma_noise, n_warmup, hyper, max_steps_out, max_shrink), "
           "shards)")
init_sharded = _validate.gone("gpumcmc.models.glm", "init_sharded", f"{_ROWS}.init(rng, row_parts(X, y, shards, "
                              "family, n_chains), n_chains, prior_scale)")
make_sharded_step = _validate.gone("gpumcmc.models.glm", "make_sharded_step", f"the step of {_ROWS}, after its init")
init_groups_sharded = _validate.gone("gpumcmc.models.glm", "init_groups_sharded", f"{_GROUPS}.init(rng, group_parts("
                                     "X, y, gid, shards, family, n_chains), n_chains, prior_scale)")
make_groups_sharded_step = _validate.gone("gpumcmc.models.glm", "make_groups_sharded_step",
                                          f"the step of {_GROUPS}, after its init")
