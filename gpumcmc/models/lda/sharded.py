"""LDA with the documents split over devices: :func:`shard_corpus` gives each shard whole documents,
:func:`shard_data` places its tokens in one device's token stream (:class:`ShardPlace`), so that any
number of shards draws one device's draws bit for bit, and :func:`gibbs` is :mod:`.algorithm`'s sweep as
a :class:`gpumcmc.sampling.DataParallel`, run eagerly (no CUDA graph) by :func:`sharded_gibbs`.
"""

from __future__ import annotations

import copy
from typing import NamedTuple

import numpy as np

from gpumcmc import _validate
from gpumcmc import backend as _backend
from gpumcmc.sampling import Algorithm, DataParallel, sharded
from gpumcmc.shards import Shards, balanced_cuts

from .algorithm import (LDAState, _checked_start, _n_chains, _phi_once, _prepare, _start_local, gibbs_local,
                        gibbs_update, log_likelihood)
from .ops import _phi_store


class ShardPlace(NamedTuple):
    """Where a shard's tokens and documents lie in the whole corpus (see :func:`shard_data`).

    The z-draw keys local token ``t`` of chain ``c`` by ``c * n_tokens + g_t``, ``g_t`` its index in the
    whole corpus' token stream: ``index[t]`` for the ``n_head`` first tokens, ``index[n_head + t - (T -
    n_tail)]`` for the ``n_tail`` last ones (the tiles of documents shared with the neighbouring shards,
    whose tokens interleave), ``base + t`` between. Theta row ``d`` of chain ``c`` draws as row
    ``c * n_docs + first_doc + d`` of one device's batch.
    """

    n_tokens: int     # T of the whole corpus
    n_docs: int       # M of the whole corpus
    first_doc: int
    base: int
    index: object     # (n_head + n_tail,) int64 on the shard's backend
    n_head: int
    n_tail: int
    memo: dict | None = None  # per chain count, what the two-kernel z-draw makes once (_placed_products)


class CorpusPart(NamedTuple):
    """A shard's part of the corpus: its tokens, ``rows`` counted from its ``first_doc``, and ``corpus``,
    ``(rows, cols, starts)`` of the whole corpus sorted by document (``starts``: each document's first
    token, and T)."""

    rows: object
    cols: object
    n_docs: int
    first_doc: int = 0
    corpus: object = None


class LDAShardedState(NamedTuple):
    """A data-parallel state per field, one entry per local shard: ``theta`` and ``theta_sum`` the shard's
    documents, (C, M_s, K); ``phi`` and ``phi_sum`` in their (V, C, K) store; ``it`` the sweeps done."""

    theta: tuple
    theta_sum: tuple
    phi: tuple
    phi_sum: tuple
    it: int

    @classmethod
    def of(cls, state) -> "LDAShardedState":
        """The per-field view of :func:`sharded_gibbs`'s ``state`` (one :class:`LDAState` per shard)."""
        return cls(tuple(s.theta for s in state), tuple(s.theta_sum for s in state),
                   tuple(_phi_store(s.phi) for s in state), tuple(_phi_store(s.phi_sum) for s in state),
                   state[0].it)


def document_bounds(rows, n_docs: int, world: int) -> np.ndarray:
    """``world + 1`` document boundaries: shard ``r`` holds documents ``[b[r], b[r + 1])``, about ``T / world``
    tokens (the z-draw's work) and at least one. ``rows`` (any order, NumPy or CuPy): each token's document.
    """
    xp = _backend.get_array_module(rows)
    return _bounds_from_counts(np.asarray(_backend.to_host(xp.bincount(rows, minlength=int(n_docs)))), world)


def _bounds_from_counts(per_doc, world: int) -> np.ndarray:
    world = int(world)
    docs = np.flatnonzero(per_doc)                    # documents with tokens, ascending
    if docs.size < world:
        raise ValueError(f"the corpus has {docs.size} documents with tokens; it cannot be split over {world} "
                         "shards: use fewer devices.")
    cuts = balanced_cuts(per_doc[docs], world)        # over the documents with tokens
    return np.asarray([0, *(int(docs[j]) for j in cuts[1:-1]), int(per_doc.size)], dtype=np.int64)


def shard_corpus(rows, cols, n_docs: int, shards: Shards):
    """``(bounds, parts)``: :func:`document_bounds`, and this process's :class:`CorpusPart` of each local
    shard, on its device. ``rows`` and ``cols`` may be NumPy or CuPy arrays."""
    xp = _backend.get_array_module(rows)
    if xp is np or shards.xp is np:
        rows = np.asarray(_backend.to_host(rows), dtype=np.int64)
        cols = np.asarray(_backend.to_host(cols), dtype=np.int64)
        xp = np
    rows, cols = rows.astype(np.int64, copy=False), cols.astype(np.int64, copy=False)
    per_doc = np.asarray(_backend.to_host(xp.bincount(rows, minlength=int(n_docs))))
    bounds = _bounds_from_counts(per_doc, shards.world)
    if rows.size > 1 and bool((rows[1:] < rows[:-1]).any()):
        order = xp.argsort(rows)      # the order within a document does not matter: init re-orders the tokens
        rows, cols = rows[order], cols[order]
    starts = np.concatenate([[0], np.cumsum(per_doc)]).astype(np.int64)
    tok = starts[bounds]
    corpus = (rows, cols, starts)
    parts = []
    for i, r in enumerate(shards.ranks):
        a, b = int(tok[r]), int(tok[r + 1])
        with shards.on(i):
            if shards.xp is np:
                pr, pc = rows[a:b] - bounds[r], cols[a:b].copy()
            else:   # a copy made under the shard's device lands there (a peer copy between GPUs)
                pr = shards.xp.array(rows[a:b], copy=True)
                pr -= int(bounds[r])
                pc = shards.xp.array(cols[a:b], copy=True)
            parts.append(CorpusPart(pr, pc, int(bounds[r + 1] - bounds[r]), int(bounds[r]), corpus))
    return bounds, parts


def _place(part: CorpusPart, K: int, dtype, cache_bytes: int, xp) -> ShardPlace:
    """Where ``part``'s tokens lie in one device's token stream (:func:`gpumcmc.token_order`'s tiles of
    documents, by word then document inside each): the tiles inside the shard are contiguous blocks of
    both streams; its first and last tiles, which other shards' tokens may share, are ordered whole."""
    R, W, starts = part.corpus
    M = int(starts.size - 1)
    b, e = int(part.first_doc), int(part.first_doc) + int(part.n_docs)
    tile = max(1, int(cache_bytes) // 2 // (int(K) * np.dtype(dtype).itemsize))    # as token_order
    first, last = b // tile, (e - 1) // tile
    head = first * tile < b
    tail = min((last + 1) * tile, M) > e
    if head and tail and first == last:
        tail = False                      # one tile holds the whole shard: all of it is the head
    none = np.zeros(0, np.int64)
    hi = _tile_tokens(R, W, starts, first * tile, min((first + 1) * tile, M), b, e, xp) if head else none
    ti = _tile_tokens(R, W, starts, last * tile, min((last + 1) * tile, M), b, e, xp) if tail else none
    inner = min((first + 1) * tile, M) if head else b      # the first document after the head
    return ShardPlace(int(starts[-1]), M, b, int(starts[inner]) - hi.size, xp.asarray(np.concatenate([hi, ti])),
                      int(hi.size), int(ti.size), {})


def _tile_tokens(R, W, starts, lo: int, hi: int, b: int, e: int, xp=np):
    """Global stream indices (host integers, in stream order) of the tokens of documents ``[b, e)`` in the
    tile of documents ``[lo, hi)``, sorted on ``xp``'s device as ``numpy.lexsort((document, word))`` sorts."""
    a, z = int(starts[lo]), int(starts[hi])
    if xp is np:
        r = np.asarray(_backend.to_host(R[a:z]), dtype=np.int64)
        w = np.asarray(_backend.to_host(W[a:z]), dtype=np.int64)
    else:   # a copy made under the current device lands there (from the host, or a peer copy from another GPU)
        r = xp.array(R[a:z], copy=True).astype(np.int64, copy=False)
        w = xp.array(W[a:z], copy=True).astype(np.int64, copy=False)
    key = w * (hi - lo) + (r - lo)
    order = np.argsort(key, kind="stable") if xp is np else xp.argsort(key)    # CuPy's sort is stable
    r = r[order]
    return a + np.asarray(_backend.to_host(xp.flatnonzero((r >= b) & (r < e))), dtype=np.int64)


def _per_device(shards: Shards, make) -> list:
    """For each local shard, ``make()`` made under its device's first local shard, shared by the others."""
    first: dict = {}
    out = []
    for i, j in enumerate([first.setdefault(d, i) for i, d in enumerate(shards.devices)]):
        with shards.on(i):
            out.append(make() if j == i else out[j])
    return out


def shard_data(parts, shards: Shards, n_words: int, n_components: int, alpha: float, beta: float,
               dtype="float32", burn_in: int = 0, fused: bool | None = None, sparse: bool | None = None,
               cache_bytes: int | None = None) -> list:
    """Each local shard's :class:`LDAData`, on its device: what :func:`init` makes of the whole corpus.

    ``parts`` come from :func:`shard_corpus`. Each shard orders its own tokens as they lie in one device's
    token stream and is placed there (:class:`ShardPlace`), so that its draws equal one device's, bit for
    bit, with either z-draw. A shard that holds the whole corpus is not placed.
    """
    dtype = np.dtype(dtype)
    K = int(n_components)
    xp = shards.xp
    datas = []
    for i, part in enumerate(parts):
        if getattr(part, "corpus", None) is None:
            raise TypeError("shard_data needs the parts that shard_corpus gives (CorpusPart, with the whole "
                            f"corpus' layout), got {type(part).__name__}; split the corpus with shard_corpus.")
        with shards.on(i):   # cache_bytes as token_order resolves it on the shard's device
            cb = int(cache_bytes) if cache_bytes is not None else (
                32 << 20 if xp is np else int(xp.cuda.Device().attributes["L2CacheSize"]))
            data = _prepare(part.rows, part.cols, part.n_docs, n_words, K, alpha, beta, dtype, burn_in, True,
                            fused, sparse, cb, first_doc=int(part.first_doc))
            if int(part.n_docs) < int(part.corpus[2].size) - 1:       # not the whole corpus
                data = data._replace(place=_place(part, K, dtype, cb, xp))
            datas.append(data)
    return datas


def gibbs() -> DataParallel:
    """The uncollapsed Gibbs sweep as a :class:`gpumcmc.sampling.DataParallel` over :func:`shard_data`'s parts.

    ``init(rng, datas, shards, n_components, dtype="float32", n_chains=1, phi_start=None)``; ``local`` is
    :func:`gibbs_local`, whose word counts are all-reduced (integers, so phi is the same whatever the number
    of shards); ``update`` is :func:`gibbs_update`.
    """
    drawn: dict = {}      # this sweep's phi draws, by the phi_sum they add to (see gibbs_update)
    keeps: dict = {}      # (device, dtype, kept) -> a 0-d 0/1 array on that device
    prior: dict = {}      # beta and burn_in, from init's data

    def init(rng, datas, shards: Shards, n_components: int, dtype="float32", n_chains: int = 1,
             phi_start=None) -> list:
        drawn.clear()
        keeps.clear()
        prior.update(beta=datas[0].beta, burn_in=datas[0].burn_in)
        return _start(rng, datas, shards, int(n_components), np.dtype(dtype), n_chains, phi_start)

    def local(rng, state: LDAState, data, loglik: bool = False):
        drawn.clear()        # every shard's local runs before any update of the sweep
        return gibbs_local(rng, state, data, loglik=loglik, keeps=keeps)

    def update(rng, state: LDAState, stats):
        return gibbs_update(rng, state, stats, prior["beta"], prior["burn_in"], keeps=keeps, drawn=drawn)

    return DataParallel(init, local, update)


def _start(rng, datas, shards: Shards, K: int, dtype, n_chains: int, phi_start) -> list:
    """Every local shard's starting :class:`LDAState` (``it`` = 0), drawn as one device draws :func:`init`'s
    (phi once per device, whose shards share their phi and phi_sum), or ``phi_start`` and theta = 1 / K."""
    xp = shards.xp
    C, V = _n_chains(n_chains), int(datas[0].n_words)

    def running_sums():   # their zero start, made after the random start's per-token arrays are freed
        return _per_device(shards, lambda: xp.zeros((V, C, K), dtype).transpose(1, 0, 2))

    if phi_start is not None:
        thetas = shards.each(datas, lambda i, data: xp.full((C, data.n_docs, K), 1.0 / K, dtype))
        phis = _per_device(shards, lambda: _checked_start(phi_start, xp, V, C, K, dtype).transpose(1, 0, 2))
        zeros = running_sums()
    else:
        gens = [copy.copy(rng) for _ in shards.ranks]

        def local(i, data):    # random topics for the shard's tokens, theta given them
            theta, nwk = _start_local(gens[i], data, C, K, dtype)
            return theta, xp.ascontiguousarray(nwk)

        thetas, nwks = (list(x) for x in zip(*shards.each(datas, local)))
        _catch_up(rng, gens)
        shards.allreduce(nwks)
        zeros = running_sums()
        keeps = _per_device(shards, lambda: xp.zeros((), dtype))                     # keep = 0: none kept yet
        drawn: dict = {}
        gens = [copy.copy(rng) for _ in shards.ranks]
        phis = shards.each(gens, lambda i, g: _phi_once(drawn, g, nwks[i], zeros[i], datas[0].beta, keeps[i])[0])
        _catch_up(rng, gens)
    theta_sums = shards.each(thetas, lambda i, th: xp.zeros_like(th))
    return [LDAState(*fields, 0) for fields in zip(thetas, phis, zeros, theta_sums)]


def _catch_up(rng, gens) -> None:
    """Move ``rng`` past the calls that the shards' copies made: one device's calls, the same in every shard."""
    used = {g.offset for g in gens}
    if len(used) > 1:
        raise RuntimeError(f"the shards' draws took different numbers of generator calls ({sorted(used)}).")
    rng.advance(used.pop() - rng.offset)


def sharded_gibbs(shards: Shards) -> Algorithm:
    """:func:`gibbs` over ``shards`` (:func:`gpumcmc.sampling.sharded`), its value checks off inside the sweep
    as in :func:`step`: ``init(rng, datas, n_components, dtype, n_chains=1, phi_start=None)`` and
    ``step(rng, state, loglik=False) -> (state, info)``, whose state holds one :class:`LDAState` per local
    shard (:meth:`LDAShardedState.of` shows it per field) and whose ``info.loglik`` (``loglik=True``) is each
    chain's log-likelihood of the whole corpus, (C,) float64, summed over the shards.
    """
    alg = sharded(gibbs(), shards)

    def step(rng, state, **options):
        with _validate.validation(False):
            return alg.step(rng, state, **options)

    return Algorithm(alg.init, step)


init_sharded = _validate.gone("gpumcmc.models.lda", "init_sharded", "sharded_gibbs(shards).init(rng, shard_data("
                              "parts, shards, n_words, n_components, alpha, beta, dtype, ...), n_components, dtype, "
                              "n_chains, phi_start)")
make_sharded_step = _validate.gone("gpumcmc.models.lda", "make_sharded_step", "sharded_gibbs(shards).step(rng, "
                                   "state, loglik=...), after its init")


def sharded_loglik(lls, shards: Shards):
    """``(C,)`` float64 host array: per-shard (C,) sums ``lls`` summed over every shard (one all-reduce)."""
    bufs = shards.each(lls, lambda i, ll: shards.xp.array(ll, dtype=np.float64, copy=True))
    return np.asarray(_backend.to_host(shards.allreduce(bufs)[0]), dtype=np.float64)


def sharded_log_likelihood(state, datas, shards: Shards):
    """``(C,)`` float64 host array: each chain's log-likelihood of the whole corpus, for
    :func:`sharded_gibbs`'s ``state`` (or its :class:`LDAShardedState` view) and :func:`shard_data`'s
    ``datas``."""
    if not isinstance(state, LDAShardedState):
        state = LDAShardedState.of(state)

    def chains(i, data):
        th, ph = state.theta[i], state.phi[i]
        return shards.xp.stack([log_likelihood(th[c], ph[:, c], data.rows, data.cols) for c in range(th.shape[0])])

    return sharded_loglik(shards.each(datas, chains), shards)


def allreduce_bytes(n_words: int, n_components: int, n_chains: int = 1) -> int:
    """Bytes all-reduced per sweep with the documents split over devices: n_wk, ``V C K`` int32 counts."""
    return 4 * int(n_words) * int(n_chains) * int(n_components)
