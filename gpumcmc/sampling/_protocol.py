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
with no second message (or, where the algorithm names its global fields as
``shared``, made once on the first shard and copied to the others). A model writes its iteration once, as ``local`` and
``update``; one device is one shard, and its step is ``update`` after
``local``.

An iteration that needs many sums, one after another, is a
:class:`Collective` instead: its step is written against a
``reduce(arrays)`` callback, which :func:`sharded` supplies as
:meth:`~gpumcmc.shards.Shards.allreduce` (and as the identity over one shard of
one). A slice sampler is the case in point: Neal's procedure decides after each
slice step, from the log-density summed over every shard, so the GLM's sweep
with its rows split sums about three times per coefficient. As rounds of
``local`` and ``update`` each of those sums would pass through :func:`sharded`'s
loops (a device switch per shard and two generator copies a round), host work
that outlasts a round of a few microseconds on the GPUs; and the shards that
share a GPU take their decisions once there, where ``update`` runs once per
shard.

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

import numpy as np

from ..shards import Shards

__all__ = ["Algorithm", "Collective", "DataParallel", "Overlap", "sharded", "shard_states"]


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
        the host queues the rest of any shard's work. Or it may return an
        :class:`Overlap`: statistics ready now, summed beside the rest of
        the shard's local work.
    update : ``update(rng, state, stats) -> (state, info)``
        The global draws from the summed ``stats``; called once per local
        shard, on its device, from the same generator position, so every shard
        makes the same draws (once only, on local shard 0, where ``shared`` is
        given). It keeps the shard's local fields.
    shared : tuple of str, optional
        The names of the state's fields that ``update`` writes: its global
        draws, which every shard holds alike. Where given, :func:`sharded`
        makes the update once per process, on local shard 0, and hands its
        shared fields to every other local shard (a copy on each other GPU,
        queued there after the update, with no host synchronisation; the same
        arrays on shard 0's device). The draws are the same, bit for bit: every
        shard would have made them from the same sums and generator position.
        It spares the host the update's launches on every GPU but one, which
        bound an iteration of many small global draws (the mixture's NIW draws)
        over several GPUs. Leave it empty where the update is long GPU work on
        large arrays (LDA's phi): every GPU then draws its own copy side by
        side, which is quicker than copying it. Every field that ``update``
        changes must be named, and no ``local`` may write a shared field in
        place (shards on one device share those arrays).
    """

    init: Callable[..., Sequence]
    local: Callable[[Any, Any, Any], Any]
    update: Callable[[Any, Any, Any], tuple]
    shared: tuple = ()


class Overlap(NamedTuple):
    """What a :class:`DataParallel`'s ``local`` may return when its statistics are ready before its local work
    is done: the sum over shards then runs beside that work.

    stats : an array or a (Named)tuple of arrays (a None field is left as None)
        The shard's statistics, complete when ``local`` returns. :func:`sharded`
        starts their sum over every shard (:meth:`gpumcmc.shards.Shards.allreduce_async`,
        one per dtype) once every shard's ``local`` has returned, and sums an
        array that is alone of its dtype in place (its values are then the sums).
    finish : ``finish() -> state``
        The rest of the shard's local work, which must not read ``stats``: it
        runs under the shard's device while the sums are made, and returns the
        shard's state with its new local fields, which ``update`` then takes.

    Between GPUs this puts the all-reduce beside the local draws that follow
    the statistics (LDA's theta draw, after the topic counts that phi needs).
    """

    stats: Any
    finish: Callable[[], Any]


class Collective(NamedTuple):
    """A data-parallel sampler whose iteration sums over the shards several times: its step takes ``reduce``.

    init : ``init(rng, parts, shards, *args, **kwargs) -> state``
        The starting state of every local shard of ``shards`` (``parts[i]``
        is shard ``i``'s data, on its device), as one state of the
        algorithm's own type: typically its global fields once, on local
        shard 0's device, and a tuple of one array per local shard for each
        local field. It runs once, before the iterations, and may make there
        what every step reuses (kernels, buffers, copies of constants).
    step : ``step(rng, state, parts, shards, reduce) -> (state, info)``
        One iteration over every local shard's part, on its device.
        ``reduce(arrays)`` sums ``arrays`` (one per local shard, each on its
        shard's device, equal shapes and dtypes) over every shard in place
        and returns them: :meth:`gpumcmc.shards.Shards.allreduce`, and the
        identity over one shard of one (``Shards(1)``, one device), so a
        step written once runs on one device and on many. A step that draws
        random numbers draws them from ``rng`` as one device would, whatever
        the number of shards.

    Where one sum an iteration is enough, :class:`DataParallel` is simpler;
    a Collective is for iterations that alternate work on the shards and
    decisions from their sums many times, such as a slice sampler's (see the
    module's notes).
    """

    init: Callable[..., Any]
    step: Callable[..., tuple]


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
    """The arrays of ``stats`` (an array or a (Named)tuple of arrays, whose None fields are left out) and a
    function rebuilding it from them."""
    if isinstance(stats, tuple):
        make = type(stats)._make if hasattr(stats, "_fields") else tuple
        where = [j for j, a in enumerate(stats) if a is not None]

        def rebuild(fields):
            out = [None] * len(stats)
            for j, a in zip(where, fields):
                out[j] = a
            return make(out)

        return [stats[j] for j in where], rebuild
    return [stats], lambda fields: fields[0]


def _dtype_groups(arrays: list) -> list:
    """The indices of ``arrays`` grouped by dtype, in order of first appearance: one buffer per group."""
    groups: dict = {}
    for j, a in enumerate(arrays):
        groups.setdefault(a.dtype.str, []).append(j)
    return list(groups.values())


def _packed(xp, arrays: list, idx: list, copy: bool = True):
    """``arrays[j]`` for ``j`` in ``idx`` in one contiguous buffer: flattened and concatenated (a copy), or,
    for a lone array with ``copy=False``, the array itself (made contiguous, a copy only where it is not)."""
    if len(idx) == 1 and not copy:
        return xp.ascontiguousarray(arrays[idx[0]])
    return xp.concatenate([arrays[j].reshape(-1) for j in idx])


def _unpacked(buf, like: list) -> list:
    """Views of :func:`_packed`'s ``buf`` shaped as the arrays ``like``, in order (``buf`` itself where it
    holds one array of that shape)."""
    if len(like) == 1 and buf.shape == like[0].shape:
        return [buf]
    out, start = [], 0
    for a in like:
        out.append(buf[start:start + a.size].reshape(a.shape))
        start += a.size
    return out


def _sum_over_shards(shards: Shards, stats: list) -> list:
    """``stats`` (one per local shard) summed over every shard, as one all-reduce per dtype.

    Each shard's arrays of one dtype are packed into one contiguous buffer (a
    copy: the arrays ``local`` returned are never written), summed by
    :meth:`Shards.allreduce`, and handed back as views of the sums.
    """
    xp = shards.xp
    per_shard = [_fields_of(s) for s in stats]
    _check_same_stats(per_shard, stats)
    first = per_shard[0][0]
    out = [[None] * len(first) for _ in stats]
    for idx in _dtype_groups(first):
        bufs = []
        for i, (arrays, _) in enumerate(per_shard):
            with shards.on(i):
                bufs.append(_packed(xp, arrays, idx))
        shards.allreduce(bufs)
        for i, buf in enumerate(bufs):
            for j, view in zip(idx, _unpacked(buf, [first[j] for j in idx])):
                out[i][j] = view
    return [make(fields) for (_, make), fields in zip(per_shard, out)]


def _sum_async(shards: Shards, stats: list) -> tuple[list, Callable]:
    """``(sums, wait)``: the sums over every shard of ``stats`` (one per local shard) started with
    :meth:`Shards.allreduce_async`, one per dtype, and a function that waits for them all.

    An array alone of its dtype is summed in place (made contiguous first, a copy only where it is not);
    several of one dtype are packed into one buffer, as :func:`_sum_over_shards` packs them.
    """
    xp = shards.xp
    per_shard = [_fields_of(s) for s in stats]
    _check_same_stats(per_shard, stats)
    first = per_shard[0][0]
    out = [[None] * len(first) for _ in stats]
    waits = []
    for idx in _dtype_groups(first):
        bufs = []
        for i, (arrays, _) in enumerate(per_shard):
            with shards.on(i):
                bufs.append(_packed(xp, arrays, idx, copy=False))
        waits.append(shards.allreduce_async(bufs))
        for i, buf in enumerate(bufs):
            for j, view in zip(idx, _unpacked(buf, [first[j] for j in idx])):
                out[i][j] = view

    def wait():
        for w in waits:
            w()

    return [make(fields) for (_, make), fields in zip(per_shard, out)], wait


def _check_offsets(rng, gens: list) -> None:
    """Move ``rng`` past the calls the shards' copies of it made (the same number on every shard)."""
    used = {g.offset for g in gens}
    if len(used) > 1:
        raise RuntimeError(f"the shards' local or update functions took different numbers of generator calls "
                           f"({sorted(used)}); each must make the same calls on every shard.")
    rng.advance(used.pop() - rng.offset)


def _check_stats(st) -> None:
    """``local``'s statistics must be one array, or a (named) tuple whose fields are arrays (or None): what
    an all-reduce sums. Checked on every shard count, so that a sampler that runs on one shard does not fail
    on two."""
    if isinstance(st, list):
        raise TypeError("local must return an array, or a (named) tuple of arrays, the statistics summed over the "
                        "shards; it returned a list: return tuple(...) of the arrays.")
    for v in (st if isinstance(st, tuple) else (st,)):
        if isinstance(v, (tuple, list)):
            raise TypeError(f"local must return an array, or a (named) tuple of arrays, the statistics summed over "
                            f"the shards; it returned a {type(v).__name__} inside {type(st).__name__}: flatten it "
                            "into one (named) tuple of arrays.")
        if v is not None and not (hasattr(v, "dtype") and hasattr(v, "shape")):
            raise TypeError(f"local must return an array, or a (named) tuple of arrays, the statistics summed "
                            f"over the shards; it returned a {type(v).__name__} among them (a Python number is "
                            f"not summed across devices: return xp.asarray(value)).")


def _check_same_stats(per_shard, stats) -> None:
    """Every shard's statistics must have shard 0's fields, shapes and dtypes (they are summed element by
    element): a ValueError naming the statistic where one differs."""
    first, names = per_shard[0][0], getattr(stats[0], "_fields", None)

    def present(st):
        return [j for j, a in enumerate(st) if a is not None] if isinstance(st, tuple) else [0]

    where = present(stats[0])
    for i, (arrays, _) in enumerate(per_shard[1:], 1):
        if present(stats[i]) != where:
            raise ValueError(f"local returned statistics {where} (those not None) on shard 0 and "
                             f"{present(stats[i])} on shard {i}; every shard must return the same fields.")
        for j, (a, b) in enumerate(zip(first, arrays)):
            if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
                what = repr(names[where[j]]) if names else str(where[j])
                raise ValueError(f"local's statistic {what} is {tuple(a.shape)} {a.dtype} on shard 0 and "
                                 f"{tuple(b.shape)} {b.dtype} on shard {i}: every shard must give the same shapes "
                                 "and dtypes (sizes fixed by the model, e.g. np.bincount(z, minlength=k)).")


def _local_stats(shards: Shards, local, gens: list, state, parts, options: dict) -> tuple[list, list]:
    """``(states, stats)``: every local shard's ``local`` (then any deferred part of it) under its device.

    Where ``local`` returns an :class:`Overlap`, the stats come back summed over every shard (the sums run
    beside the ``finish`` parts) and ``states`` are those ``finish`` returned; else ``states`` is ``state``
    and the stats are the shard's own."""
    stats = []
    for i, gen in enumerate(gens):
        with shards.on(i):
            stats.append(local(gen, state[i], parts[i], **options))
    states = list(state)
    if stats and isinstance(stats[0], Overlap):
        sums, wait = [o.stats for o in stats], None
        if shards.world > 1:
            sums, wait = _sum_async(shards, sums)
        for i, o in enumerate(stats):
            with shards.on(i):
                states[i] = o.finish()
        if wait is not None:
            wait()
        return states, sums
    for i, st in enumerate(stats):
        if callable(st):
            with shards.on(i):
                stats[i] = st()
    if stats and shards.xp is np:  # NumPy parts (Shards(n_virtual=k)), where samplers are written and tested
        _check_stats(stats[0])
    if shards.world > 1:
        stats = _sum_over_shards(shards, stats)
    return states, stats


def _share(shards: Shards, s0, states: list, shared: tuple) -> list:
    """Every local shard's state after an update made on shard 0 alone (``s0``): ``states[i]`` (i > 0) with
    the ``shared`` fields of ``s0``, as they are on shard 0's device and as copies on each other GPU
    (:func:`_pack`, :func:`_unpack_on`: one copy per dtype, waiting on that GPU for the update, not on the
    host)."""
    dev0 = shards.devices[0]
    fields = {f: getattr(s0, f) for f in shared}
    made = {dev0: fields}
    packed = None
    out = [s0]
    for i in range(1, len(states)):
        dev = shards.devices[i]
        if dev not in made:
            if packed is None:
                packed = _pack(shards, fields)
            made[dev] = _unpack_on(shards, i, fields, *packed)
        out.append(states[i]._replace(**made[dev]))
    return out


def _pack(shards: Shards, fields: dict) -> tuple[list, list, Any]:
    """``(groups, buffers, ready)``: the names of the fields that are not None, by dtype, each group packed
    into one flat contiguous buffer on shard 0's device (CuPy copies no strided array between GPUs), and
    an event recorded there after the packing."""
    xp = shards.xp
    names = [f for f, a in fields.items() if a is not None]
    arrays = [fields[f] for f in names]
    idxs = _dtype_groups(arrays)
    with shards.on(0):
        bufs = [_packed(xp, arrays, idx, copy=False).reshape(-1) for idx in idxs]
        ready = xp.cuda.Event(disable_timing=True)
        ready.record()
    return [[names[j] for j in idx] for idx in idxs], bufs, ready


def _unpack_on(shards: Shards, i: int, fields: dict, groups: list, bufs: list, ready) -> dict:
    """The fields of :func:`_pack`'s buffers on local shard ``i``'s GPU: one copy of each buffer, made there
    after ``ready``, and views of it shaped as the fields."""
    from ..shards import _peer_copy

    xp, dev = shards.xp, shards.devices[i]
    out = {f: None for f, a in fields.items() if a is None}
    with shards.on(i):
        xp.cuda.get_current_stream().wait_event(ready)
        for names, buf in zip(groups, bufs):
            out.update(zip(names, _unpacked(_peer_copy(xp, buf, dev), [fields[f] for f in names])))
        copied = xp.cuda.Event(disable_timing=True)
        copied.record()
    # The buffers go back to shard 0's memory pool when the step returns: shard 0's later work, which may
    # reuse their memory, waits on its GPU until this GPU has read them.
    with shards.on(0):
        xp.cuda.get_current_stream().wait_event(copied)
    return out


def _step(shards: Shards, local, update, rng, state, parts, options: dict, shared: tuple = ()) -> tuple[list, Any]:
    """One iteration of :func:`sharded`'s step: ``(the shards' new states, local shard 0's info)``."""
    count = len(shards)
    if count == 1:   # one local shard: rng itself, no copies
        with shards.on(0):
            states, stats = _local_stats(shards, local, [rng], state, parts, options)
            s, info = update(rng, states[0], stats[0])
        return [s], info
    gens = [copy.copy(rng) for _ in range(count)]
    states, stats = _local_stats(shards, local, gens, state, parts, options)
    _check_offsets(rng, gens)
    if shared:
        gen = copy.copy(rng)
        with shards.on(0):
            s0, info = update(gen, states[0], stats[0])
        _check_offsets(rng, [gen])
        return _share(shards, s0, states, shared), info
    gens = [copy.copy(rng) for _ in range(count)]
    new, infos = [], []
    for i, gen in enumerate(gens):
        with shards.on(i):
            s, info = update(gen, states[i], stats[i])
        new.append(s)
        infos.append(info)
    _check_offsets(rng, gens)
    return new, infos[0]


def _identity(arrays):
    """The sum of ``arrays`` over one shard of one: the arrays themselves."""
    return list(arrays)


def _sharded_collective(algorithm: Collective, shards: Shards) -> Algorithm:
    """:func:`sharded` of a :class:`Collective`: ``init`` binds the parts, ``step`` passes them and ``reduce``."""
    init_, step_ = algorithm
    count = len(shards)
    reduce = shards.allreduce if shards.world > 1 else _identity
    parts_of: dict = {}

    def init(rng, parts, *args, **kwargs):
        parts = list(parts)
        if len(parts) != count:
            raise ValueError(f"init needs one part of the data per local shard ({count}), got {len(parts)}.")
        state = init_(rng, parts, shards, *args, **kwargs)
        parts_of["parts"] = parts
        return state

    def step(rng, state):
        parts = parts_of.get("parts")
        if parts is None:
            raise RuntimeError("call this algorithm's init before its step: init places the data on the shards.")
        return step_(rng, state, parts, shards, reduce)

    return Algorithm(init, step)


def sharded(algorithm: DataParallel | Collective, shards: Shards) -> Algorithm:
    """``algorithm`` with its data split over ``shards``, as an :class:`Algorithm`.

    ``init(rng, parts, *args, **kwargs)`` returns ``algorithm.init``'s states
    as one state of type :func:`shard_states` (``state[i]``: local shard
    ``i``'s), and binds ``parts`` to the step: the step runs on the parts of
    the latest ``init`` (one sharded algorithm per data set).
    ``step(rng, state, **options)`` runs ``local(rng, state, part, **options)``
    on every local shard under its device (the options choose among variants
    of the local part, such as LDA's ``loglik=True``), sums the statistics over every shard (one all-reduce per dtype,
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
    the global draws between devices; unless the algorithm names its global
    fields (``DataParallel(..., shared=...)``): then it runs on local shard 0
    alone, and those fields are copied to the other GPUs.

    A :class:`Collective` keeps its own state type: ``init(rng, parts, *args,
    **kwargs)`` returns ``algorithm.init``'s state and binds ``parts``, and
    ``step(rng, state)`` is ``algorithm.step(rng, state, parts, shards,
    reduce)``, with ``reduce`` the all-reduce over ``shards`` (the identity
    over one shard of one).

    Examples
    --------
    See :mod:`gpumcmc.sampling._protocol`.
    """
    if not isinstance(algorithm, (DataParallel, Collective)):
        raise TypeError("sharded takes a gpumcmc.sampling.DataParallel(init, local, update) or "
                        f"Collective(init, step); got {type(algorithm).__name__}.")
    if not isinstance(shards, Shards):
        raise TypeError(f"shards must be a gpumcmc.shards.Shards, got {type(shards).__name__}.")
    if isinstance(algorithm, Collective):
        return _sharded_collective(algorithm, shards)
    init_, local, update, shared = algorithm
    if not isinstance(shared, (tuple, list)) or not all(isinstance(f, str) for f in shared):
        raise TypeError(f"DataParallel's shared must be a tuple of the state's field names, such as "
                        f"('mu', 'sigma'); got {shared!r}.")
    shared = tuple(shared)
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
        unknown = [f for f in shared if f not in getattr(states[0], "_fields", ())]
        if unknown:
            raise ValueError(f"shared names {unknown}, which are not fields of the algorithm's state "
                             f"{type(states[0]).__name__}; name the fields its update writes.")
        parts_of["parts"] = parts
        return states_type(*states)

    def step(rng, state, **options):
        parts = parts_of.get("parts")
        if parts is None:
            raise RuntimeError("call this algorithm's init before its step: init places the data on the shards.")
        states, info = _step(shards, local, update, rng, state, parts, options, shared)
        return states_type(*states), info

    return Algorithm(init, step)
