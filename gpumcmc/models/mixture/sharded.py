"""Data-parallel Gibbs and Bayesian EM: :mod:`.algorithm`'s local parts and updates as
:class:`gpumcmc.sampling.DataParallel` algorithms (:func:`gibbs`, :func:`bem`), the data and the indicators
split over devices with one all-reduce per iteration. For a seed the draws equal one device's up to the
order of the sums, and over one shard (``sharded(gibbs(), Shards(n_virtual=1))``, or a single GPU) bit for
bit.
"""

from __future__ import annotations

import numpy as np

from gpumcmc import _validate, backend as _backend, shards as _shards
from gpumcmc.sampling import Algorithm, DataParallel, sharded
from gpumcmc.shards import Shards

from .ops import _score_params, _sum_rows
from .algorithm import (
    BemPart, Part, State, _bem_start_means, _init_from_means, _make_bem_stats, _start_rows, bem_local, gibbs_local,
    make_bem_update, make_gibbs_update, make_model)


def make_sharded_models(X, k: int, shards: Shards, **kwargs) -> list:
    """One :class:`Model` per local shard of ``X`` (rows split by ``shards.bounds``).

    The column means and variances behind the defaults and the centring are those of the whole data set, summed
    over the shards (two all-reduces of ``p`` values), so every shard has the same prior. ``kwargs`` go to
    :func:`make_model`.
    """
    n, p = X.shape
    if n < shards.world:
        raise ValueError(f"{n} rows cannot be split over {shards.world} shards: use fewer devices.")
    xp = shards.xp
    parts = shards.scatter(X)

    def total(f):
        sums = shards.each(parts, lambda _, part: xp.ascontiguousarray(f(part.astype(np.float64)).sum(axis=0)))
        return _backend.to_host(shards.allreduce(sums)[0]) / n

    center = total(lambda a: a)
    var = total(lambda a: (a - xp.asarray(center)) ** 2)
    return shards.each(parts, lambda _, part: make_model(part, k, moments=(center, var), **kwargs))


def gibbs_parts(models: list, shards: Shards, n: int) -> list:
    """The :class:`Part` of each local shard: its :class:`Model` (:func:`make_sharded_models`) and its rows'
    place among the ``n`` rows of the whole set."""
    return [Part(model, a, n) for model, (a, _) in zip(models, shards.bounds(n))]


def gibbs() -> DataParallel:
    """The blocked Gibbs sweep as a :class:`gpumcmc.sampling.DataParallel` over :class:`Part` s of the data.

    ``init(rng, parts, shards, chains=1)`` gives each shard :func:`init`'s starting state for the same
    ``rng`` (``z`` holds the shard's rows). ``local`` is :func:`gibbs_local`; its statistics are summed in
    one all-reduce of ``chains (k q + 1)`` float64 values a sweep (:func:`allreduce_bytes`). ``update``
    is :func:`make_gibbs_update`'s, run once per process on its first shard's device, every field but
    ``z`` copied to the other GPUs. :func:`sharded_gibbs` composes it over a :class:`Shards`.
    """
    return _over_shards(gibbs_local, make_gibbs_update, _gibbs_starts, lambda part: part.model.x.shape[0])


def _gibbs_starts(rng, parts: list, shards: Shards, chains: int) -> list:
    """:func:`init`'s starting means, (chains, k, p) float64 on each local shard's device, gathered from the
    shards that hold their rows."""
    k, p, n = parts[0].model.k, parts[0].model.x.shape[1], parts[0].n
    with shards.on(0):
        idx = _backend.to_host(_start_rows(rng, chains, k, n, shards.xp))
    return [mu.reshape(chains, k, p) for mu in _gather_rows([part.model for part in parts], shards, n, idx)]


def _over_shards(local, make_update, starts, z_rows) -> DataParallel:
    """A :class:`DataParallel` of the mixture whose ``init`` starts every shard from the means ``starts(rng,
    parts, shards, chains)`` with ``z_rows(part)`` indicators a chain, and makes ``make_update(model, n)``
    once per device. Those updates hold the data's prior: an ``init`` on another data set raises."""
    updates: dict = {}
    bound: list = []    # the models of the parts the updates were made for

    def init(rng, parts, shards: Shards, chains: int = 1) -> list:
        models = [part.model for part in parts]
        if bound and (len(bound) != len(models) or any(a is not b for a, b in zip(bound, models))):
            raise ValueError("this gibbs()/bem() algorithm was started on another data set, whose prior its "
                             "updates hold; make a new one (gibbs(), bem(), sharded_gibbs(shards), "
                             "sharded_bem(shards)) for each data set.")
        bound[:] = models
        updates.clear()
        mus = starts(rng, parts, shards, chains)
        states = []
        for i, part in enumerate(parts):
            with shards.on(i):
                if _device_of(part.model.x) not in updates:
                    updates[_device_of(part.model.x)] = make_update(part.model, part.n)
                z = shards.xp.zeros((chains, z_rows(part)), dtype=np.int32)
                states.append(_init_from_means(part.model, mus[i], z))
        return states

    def update(rng, state: State, stats):
        return updates[_device_of(state.params)](rng, state, stats)

    # Every field but the indicators is shared: the update's draws, made once per process on its first shard
    # and copied to the other GPUs, where making them on every GPU cost each its share of the host's launches.
    return DataParallel(init, local, update, shared=tuple(f for f in State._fields if f != "z"))


def sharded_gibbs(shards: Shards) -> Algorithm:
    """:func:`gibbs` over ``shards`` (:func:`gpumcmc.sampling.sharded`), its value checks off inside the
    sweep as one device's :func:`make_step` has them: ``init(rng, parts, chains)`` with
    ``parts = gibbs_parts(models, shards, n)``, and ``step(rng, state) -> (state, info)``, whose state
    holds one :class:`State` per local shard (``state[i]``)."""
    return _quiet(sharded(gibbs(), shards))


def _quiet(alg: Algorithm) -> Algorithm:
    """``alg`` with value checks off inside its step (deferred checks still record, see gpumcmc.check)."""

    def step(rng, state):
        with _validate.validation(False):
            return alg.step(rng, state)

    return Algorithm(alg.init, step)


def _moved(name: str, new: str):
    return _validate.gone("gpumcmc.models.mixture", name, new)


init_sharded = _moved("init_sharded", "sharded_gibbs(shards).init(rng, gibbs_parts(models, shards, n), chains)")
make_sharded_step = _moved("make_sharded_step", "sharded_gibbs(shards).step, after its init")
init_bem_sharded = _moved("init_bem_sharded", "sharded_bem(shards).init(rng, bem_parts(models, shards, n), starts)")
make_sharded_bem_step = _moved("make_sharded_bem_step", "sharded_bem(shards).step, after its init")


def _device_of(a):
    """The GPU of a CuPy array, None for a NumPy one."""
    return None if isinstance(a, np.ndarray) else a.device.id


def _gather_rows(models: list, shards: Shards, n: int, idx) -> list:
    """Rows ``idx`` (host integers, any shape) of the data split over ``shards``, float64, one copy on each
    local shard's device (each shard fills its rows, zeros elsewhere, and one all-reduce sums them)."""
    xp = shards.xp
    bufs = []
    for i, (model, (a, b)) in enumerate(zip(models, shards.bounds(n))):
        with shards.on(i):
            mine = (idx >= a) & (idx < b)
            local = np.where(mine, idx - a, 0)
            rows = model.x[_backend.asarray(local, xp)].astype(np.float64)
            bufs.append(xp.ascontiguousarray(xp.where(_backend.asarray(mine, xp)[..., None], rows, 0.0)))
    return shards.allreduce(bufs)


def bem_parts(models: list, shards: Shards, n: int) -> list:
    """The :class:`BemPart` of each local shard: its :class:`Model` (:func:`make_sharded_models`), its E-step
    (made on its device) and ``n``, the rows of the whole set."""
    return shards.each(models, lambda _, model: BemPart(model, _make_bem_stats(model), n))


def bem() -> DataParallel:
    """Bayesian EM as a :class:`gpumcmc.sampling.DataParallel` over :class:`BemPart` s of the data.

    ``init(rng, parts, shards, starts=1)`` gives each shard :func:`init_bem`'s starting state for the same
    ``rng``. ``local`` is :func:`bem_local`, summed by one all-reduce of ``starts (k q + 1)`` float64
    values an iterate; ``update`` is :func:`make_bem_update`, run and shared as in :func:`gibbs`.
    """
    alg = _over_shards(bem_local, make_bem_update, _bem_starts, lambda part: 0)
    return alg._replace(init=lambda rng, parts, shards, starts=1: alg.init(rng, parts, shards, starts))


def _bem_starts(rng, parts: list, shards: Shards, starts: int) -> list:
    """:func:`init_bem`'s starting means, (starts, k, p) float64 on each local shard's device, from rows
    gathered from the shards that hold them."""
    n, model0 = parts[0].n, parts[0].model
    models = [part.model for part in parts]

    def gather(idx):
        return _backend.to_host(_gather_rows(models, shards, n, idx)[0]).reshape(idx.shape + (model0.x.shape[1],))

    with shards.on(0):
        mu = _bem_start_means(rng, n, model0.k, starts, gather)
    return shards.each(parts, lambda _, part: _backend.asarray(mu, shards.xp))


def sharded_bem(shards: Shards) -> Algorithm:
    """:func:`bem` over ``shards`` (:func:`gpumcmc.sampling.sharded`), its value checks off inside the
    iterate as one device's :func:`make_bem_step` has them: ``init(rng, parts, starts)`` with
    ``parts = bem_parts(models, shards, n)``, and ``step(rng, state) -> (state, None)``."""
    return _quiet(sharded(bem(), shards))


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
    """Bytes all-reduced per Gibbs sweep or BEM iterate with the data split over devices: ``chains (k q + 1)``
    float64 values (``chains``: Gibbs chains or BEM starts)."""
    q = 1 + p + p * (p + 1) // 2
    return 8 * chains * (k * q + 1)
