"""The sampler protocol, as types: an algorithm, a data-parallel algorithm, and :func:`sharded`.

An :class:`Algorithm` is a pair of functions over NamedTuple states, as in
BlackJAX::

    state = init(rng, data, ...)              # the starting state
    state, info = step(rng, state)            # one iteration, no host sync

and :func:`gpumcmc.sampling.run` loops over ``step``. A data-parallel
algorithm (:class:`DataParallel`) splits its iteration in two:

* ``local(rng, state, part) -> stats``: the work on one part of the data (its
  local latent variables, updated in place, and the sufficient statistics of
  the part), with no communication;
* ``update(rng, state, stats) -> (state, info)``: the global draws, from the
  statistics summed over every part.

:func:`sharded` composes them around :meth:`gpumcmc.shards.Shards.allreduce`
into an :class:`Algorithm`: one part per shard, each on its device, the
statistics summed over every shard, and the update made on every shard from
the same generator position, so that every shard holds the same global draws
with no second message. A model writes its iteration once, as ``local`` and
``update``; one device is one shard, and its step is ``update`` after
``local``.

Draws with several shards and with one
--------------------------------------

The sums over shards add the same terms as one device, in another order. Where
every sum is exact (integer counts, or values on a coarse dyadic grid) the
draws equal one device's bit for bit; elsewhere the statistics differ in their
last bits, and so may the draws that follow from them. A ``local`` that draws
random numbers must key them by the global index of each element (the
counter-based streams of :mod:`gpumcmc.random` make that a matter of the
counter), so that its draws do not depend on how the data are split.

Examples
--------
A normal model with unknown mean and precision, ``y_i ~ N(mu, 1/tau)``,
``mu ~ N(0, 100)``, ``tau ~ Gamma(2, rate 1)``, by two-block Gibbs. The parts
sum ``(n, sum y, sum y^2)``; ``update`` draws ``mu | tau`` and then
``tau | mu`` from the sums:

>>> import numpy as np
>>> from typing import NamedTuple
>>> import gpumcmc
>>> from gpumcmc.sampling import DataParallel, run, sharded
>>> from gpumcmc.shards import Shards
>>> class State(NamedTuple):
...     mu: np.ndarray           # (chain,) the mean
...     tau: np.ndarray          # (chain,) the precision
>>> class Stats(NamedTuple):
...     n: np.ndarray            # (1,) rows
...     s1: np.ndarray           # (1,) sum of y
...     s2: np.ndarray           # (1,) sum of y^2
>>> def init(rng, parts, shards, chains=4):
...     return [State(np.zeros(chains), np.ones(chains)) for _ in parts]
>>> def local(rng, state, y):
...     return Stats(np.array([y.size], float), y.sum(keepdims=True), (y * y).sum(keepdims=True))
>>> def update(rng, s, st):
...     prec = 0.01 + st.n * s.tau
...     mu = rng.normal(s.tau * st.s1 / prec, 1 / np.sqrt(prec))
...     ss = st.s2 - 2 * mu * st.s1 + st.n * mu * mu
...     return State(mu, rng.gamma(2 + st.n / 2, 1 / (1 + ss / 2))), None
>>> gibbs = DataParallel(init, local, update)
>>> y = np.round(np.random.default_rng(0).normal(3, 2, 1000) * 8) / 8   # a grid of 1/8: exact sums
>>> def fit(shards):
...     alg = sharded(gibbs, shards)
...     state = alg.init(gpumcmc.random.default_rng(1), shards.scatter(y))
...     return run(alg.step, state, 1, n_iter=200, progress=False, collect=lambda s, i: s[0]._asdict())
>>> one, three = fit(Shards(n_virtual=1)), fit(Shards(n_virtual=3))
>>> np.array_equal(one.draws["mu"], three.draws["mu"])
True
>>> bool(abs(one.draws["mu"].mean() - y.mean()) < 0.1)
True

Off the grid the three shards' sums may round differently, and the draws then
agree to about 1e-15 instead (``tests/test_protocol.py`` checks both).
"""

from __future__ import annotations

import collections
import copy
import functools
from typing import Any, Callable, NamedTuple, Sequence

from ..shards import Shards

__all__ = ["Algorithm", "DataParallel", "sharded", "shard_states"]


class Algorithm(NamedTuple):
    """A sampler: ``init(rng, data, ...) -> state`` and ``step(rng, state) -> (state, info)``.

    The state is a NamedTuple of arrays whose leading axis is the chain; the
    info a NamedTuple of diagnostics (or None). ``step`` makes no host-device
    synchronisation; :func:`gpumcmc.sampling.run` drives it.
    """

    init: Callable[..., Any]
    step: Callable[[Any, Any], tuple]


class DataParallel(NamedTuple):
    """A sampler whose iteration is a local part per shard of the data and a global update.

    init : ``init(rng, parts, shards, *args, **kwargs) -> [state, ...]``
        One starting state per local shard of ``shards`` (``parts[i]`` is
        shard ``i``'s data, on its device). It runs once, before the
        iterations, and may communicate through ``shards`` (e.g. to gather
        starting values from the parts that hold them). The states' global
        fields must be equal on every shard.
    local : ``local(rng, state, part) -> stats``
        Shard ``part``'s work, under its device and without communication:
        its local latent variables (updated in place in ``state``) and its
        sufficient statistics, an array or a (Named)tuple of arrays that are
        summed over every shard. It may instead return a function of no
        arguments that returns them: every shard's ``local`` is called before
        any such function, so that each device starts its long kernels before
        the host queues the rest of any shard's work.
    update : ``update(rng, state, stats) -> (state, info)``
        The global draws from the summed ``stats``; called once per local
        shard, on its device, from the same generator position, so every shard
        makes the same draws. It keeps the shard's local fields.
    """

    init: Callable[..., Sequence]
    local: Callable[[Any, Any, Any], Any]
    update: Callable[[Any, Any, Any], tuple]


@functools.lru_cache(maxsize=None)
def shard_states(n: int) -> type:
    """The NamedTuple type of a sharded state over ``n`` local shards: fields ``shard0`` to ``shard{n-1}``.

    ``state[i]`` is local shard ``i``'s state. Being a NamedTuple of states, it
    is walked, checkpointed and restored by :func:`gpumcmc.sampling.run` as
    any state is (``shard0/mu``, ...).
    """
    cls = collections.namedtuple(f"ShardStates{n}", [f"shard{i}" for i in range(n)])
    cls.__module__ = __name__
    return cls


def __getattr__(name: str):
    """``ShardStates{n}`` is :func:`shard_states` ``(n)``: pickle finds a sharded state's type by that name."""
    digits = name[len("ShardStates"):]
    if name.startswith("ShardStates") and digits.isdigit() and int(digits) >= 1 and digits == str(int(digits)):
        return shard_states(int(digits))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _fields_of(stats) -> tuple[list, Callable]:
    """The arrays of ``stats`` (an array or a (Named)tuple of arrays) and a function rebuilding it."""
    if isinstance(stats, tuple):
        if hasattr(stats, "_fields"):
            return list(stats), type(stats)._make
        return list(stats), tuple
    return [stats], lambda fields: fields[0]


def _sum_over_shards(shards: Shards, stats: list) -> list:
    """``stats`` (one per local shard) summed over every shard, as one all-reduce per dtype.

    Each shard's arrays of one dtype are packed into one contiguous buffer (a
    copy: the arrays ``local`` returned are never written), summed by
    :meth:`Shards.allreduce`, and handed back as views of the sums.
    """
    xp = shards.xp
    per_shard = [_fields_of(s) for s in stats]
    first = per_shard[0][0]
    groups: dict = {}
    for j, a in enumerate(first):
        groups.setdefault(a.dtype.str, []).append(j)
    out = [[None] * len(first) for _ in stats]
    for idx in groups.values():
        bufs = []
        for i, (arrays, _) in enumerate(per_shard):
            with shards.on(i):
                bufs.append(xp.concatenate([arrays[j].reshape(-1) for j in idx]))
        shards.allreduce(bufs)
        for i, buf in enumerate(bufs):
            start = 0
            for j in idx:
                size = first[j].size
                out[i][j] = buf[start:start + size].reshape(first[j].shape)
                start += size
    return [make(fields) for (_, make), fields in zip(per_shard, out)]


def _check_offsets(rng, gens: list) -> None:
    """Move ``rng`` past the calls the shards' copies of it made (the same number on every shard)."""
    used = {g.offset for g in gens}
    if len(used) > 1:
        raise RuntimeError(f"the shards' local or update functions took different numbers of generator calls "
                           f"({sorted(used)}); each must make the same calls on every shard.")
    rng.advance(used.pop() - rng.offset)


def _local_stats(shards: Shards, local, gens: list, state, parts) -> list:
    """Every local shard's statistics, each shard's ``local`` (then any deferred part of it) under its device."""
    stats = []
    for i, gen in enumerate(gens):
        with shards.on(i):
            stats.append(local(gen, state[i], parts[i]))
    for i, st in enumerate(stats):
        if callable(st):
            with shards.on(i):
                stats[i] = st()
    return stats


def _step(shards: Shards, local, update, rng, state, parts) -> tuple[list, Any]:
    """One iteration of :func:`sharded`'s step: ``(the shards' new states, local shard 0's info)``."""
    count = len(shards)
    if count == 1:   # one local shard: rng itself, no copies
        with shards.on(0):
            stats = _local_stats(shards, local, [rng], state, parts)
            if shards.world > 1:
                stats = _sum_over_shards(shards, stats)
            s, info = update(rng, state[0], stats[0])
        return [s], info
    gens = [copy.copy(rng) for _ in range(count)]
    stats = _local_stats(shards, local, gens, state, parts)
    _check_offsets(rng, gens)
    if shards.world > 1:
        stats = _sum_over_shards(shards, stats)
    gens = [copy.copy(rng) for _ in range(count)]
    states, infos = [], []
    for i, gen in enumerate(gens):
        with shards.on(i):
            s, info = update(gen, state[i], stats[i])
        states.append(s)
        infos.append(info)
    _check_offsets(rng, gens)
    return states, infos[0]


def sharded(algorithm: DataParallel, shards: Shards) -> Algorithm:
    """``algorithm`` with its data split over ``shards``, as an :class:`Algorithm`.

    ``init(rng, parts, *args, **kwargs)`` returns ``algorithm.init``'s states
    as one state of type :func:`shard_states` (``state[i]``: local shard
    ``i``'s), and binds ``parts`` to the step: the step runs on the parts of
    the latest ``init`` (one sharded algorithm per data set).
    ``step(rng, state)`` runs ``local`` on every local shard under its
    device, sums the statistics over every shard (one all-reduce per dtype,
    none over a single shard), and runs ``update`` on every local shard, each
    from the same position of ``rng``; its info is local shard 0's. With
    one local shard of one (``Shards(n_virtual=1)``, or a single GPU) the
    step is ``update(rng, s, local(rng, s, part))``, with no copy and no sum.

    Every shard's ``local`` and ``update`` see a copy of ``rng`` at the same
    offset, and ``rng`` then moves on as one call of each would move it, so a
    seed gives the draws of one device (up to the order of the sums, see the
    module's notes). A shard whose copy made another number of calls raises
    RuntimeError. The update runs once per local shard: shards that share a
    device (:func:`gpumcmc.shards.one_device`) each make it there, and GPUs
    make it side by side, each from its own copy of the sums, with no copy of
    the global draws between devices.

    Examples
    --------
    See :mod:`gpumcmc.sampling._protocol`.
    """
    if not isinstance(algorithm, DataParallel):
        raise TypeError("sharded takes a gpumcmc.sampling.DataParallel(init, local, update); "
                        f"got {type(algorithm).__name__}.")
    if not isinstance(shards, Shards):
        raise TypeError(f"shards must be a gpumcmc.shards.Shards, got {type(shards).__name__}.")
    init_, local, update = algorithm
    count = len(shards)
    states_type = shard_states(count)
    parts_of: dict = {}

    def init(rng, parts, *args, **kwargs):
        parts = list(parts)
        if len(parts) != count:
            raise ValueError(f"init needs one part of the data per local shard ({count}), got {len(parts)}.")
        states = list(init_(rng, parts, shards, *args, **kwargs))
        if len(states) != count:
            raise ValueError(f"the algorithm's init returned {len(states)} states for {count} local shards.")
        parts_of["parts"] = parts
        return states_type(*states)

    def step(rng, state):
        parts = parts_of.get("parts")
        if parts is None:
            raise RuntimeError("call this algorithm's init before its step: init places the data on the shards.")
        states, info = _step(shards, local, update, rng, state, parts)
        return states_type(*states), info

    return Algorithm(init, step)
