"""Data-parallel Gibbs and Bayesian EM: the data and the indicators split over devices.

Each shard (:class:`gpumcmc.shards.Shards`) runs step (1) of a sweep or an
iterate on its own rows with the launchers of :mod:`.ops` and sums its
statistics; one all-reduce per iteration adds them up, and the global draws
or the BEM update of :mod:`.algorithm` follow from the sums. For a seed the
draws equal one device's up to the rounding of the sums' order.
"""

from __future__ import annotations

import numpy as np

from gpumcmc import _validate, backend as _backend, shards as _shards
from gpumcmc.shards import Shards

from .ops import MODE_SAMPLE, _gibbs_acc, _score_params, _sum_rows, assign
from .algorithm import (
    State, _bem_start_means, _bem_update, _init_from_means, _make_bem_stats, _make_global_draws, make_model)

__all__ = ["make_sharded_models", "init_sharded", "make_sharded_step", "make_sharded_bem_step", "init_bem_sharded",
           "allreduce_bytes"]

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
