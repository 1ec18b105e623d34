"""LDA with the documents split over devices: data-parallel uncollapsed Gibbs.

``LDA(devices=...)`` splits the documents over devices (:class:`gpumcmc.shards.Shards`):
:func:`shard_corpus` gives each shard whole documents; :func:`init_sharded` and
:func:`make_sharded_step` draw each shard's z and theta there, all-reduce n_wk and draw phi from
the sums with one key on every device. Each shard's tokens and documents keep the Philox counters
and generator offsets they have on one device (:class:`ShardPlace`), so any number of shards gives
one device's draws, bit for bit, with either z-draw.
"""

from __future__ import annotations

import copy
from typing import NamedTuple

import numpy as np

from gpumcmc import _validate
from gpumcmc import backend as _backend
from gpumcmc.shards import Shards, balanced_cuts

from .algorithm import LDAInfo, _checked_start, _prepare, _start_local, _theta_draw, log_likelihood
from .ops import _accumulate, dirichlet_columns, zdraw_counts

__all__ = ["ShardPlace", "CorpusPart", "LDAShardedState", "document_bounds", "shard_corpus", "init_sharded",
           "make_sharded_step", "sharded_loglik", "sharded_log_likelihood", "allreduce_bytes"]


class ShardPlace(NamedTuple):
    """Where a shard's tokens and documents lie in the whole corpus (see :func:`init_sharded`).

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
    """A shard's part of the corpus, as :func:`shard_corpus` gives it.

    ``rows`` count from the shard's ``first_doc``; ``corpus`` is ``(rows, cols, starts)`` of the whole
    corpus sorted by document (``starts``: the first token of each document, and T), from which
    :func:`init_sharded` places the shard's tokens in the token stream of one device.
    """

    rows: object
    cols: object
    n_docs: int
    first_doc: int = 0
    corpus: object = None


class LDAShardedState(NamedTuple):
    """The state of a data-parallel sampler: one entry per local shard, each on its shard's device.

    ``theta`` and ``theta_sum`` hold the shard's documents, (C, M_s, K). ``phi`` and ``phi_sum`` are the
    global topics in their (V, C, K) store (as ``LDAState.phi`` is a view of); shards on one device share
    one array. ``it`` counts sweeps.
    """

    theta: tuple
    theta_sum: tuple
    phi: tuple
    phi_sum: tuple
    it: int


def document_bounds(rows, n_docs: int, world: int) -> np.ndarray:
    """``world + 1`` document boundaries: shard ``r`` holds documents ``[b[r], b[r + 1])``.

    Whole documents, about ``T / world`` tokens in each shard (the z-draw's work), and at least one token
    in every shard. ``rows`` (any order, NumPy or CuPy) is the document of each token.
    """
    xp = _backend.get_array_module(rows)
    return _bounds_from_counts(np.asarray(_backend.to_host(xp.bincount(rows, minlength=int(n_docs)))), world)


def _bounds_from_counts(per_doc, world: int) -> np.ndarray:
    world = int(world)
    n_docs = per_doc.size
    docs = np.flatnonzero(per_doc)                    # documents with tokens, ascending
    if docs.size < world:
        raise ValueError(f"the corpus has {docs.size} documents with tokens; it cannot be split over {world} "
                         "shards: use fewer devices.")
    cuts = balanced_cuts(per_doc[docs], world)        # over the documents with tokens
    return np.asarray([0, *(int(docs[j]) for j in cuts[1:-1]), int(n_docs)], dtype=np.int64)


def shard_corpus(rows, cols, n_docs: int, shards: Shards):
    """``(bounds, parts)``: :func:`document_bounds`, and this process's parts of the corpus.

    ``parts[i]`` is the :class:`CorpusPart` ``(rows - bounds[r], cols, n_docs_r, bounds[r], corpus)`` of
    local shard ``i`` (global rank ``r``), on its device: the tokens of its documents, rows counted from
    its first document, and the whole corpus sorted by document (not copied), from which
    :func:`init_sharded` places the shard's tokens in one device's token stream. ``rows`` and ``cols``
    may be NumPy or CuPy arrays (then the parts are cut on their device and copied to the shards').
    """
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


def _local_rngs(rng, shards: Shards) -> list:
    """One copy of ``rng`` per local shard: each shard's draws take the generator offsets that one device's
    draws take (see :func:`_catch_up`)."""
    return [copy.copy(rng) for _ in shards.ranks]


def _catch_up(rng, gens) -> None:
    """Move ``rng`` past the calls that the shards' copies made: one device's calls, the same in every shard
    (so the phi draw that follows takes the same offset in every process)."""
    used = {g.offset for g in gens}
    if len(used) > 1:
        raise RuntimeError(f"the shards' draws took different numbers of generator calls ({sorted(used)}).")
    if used:
        rng.advance(used.pop() - rng.offset)


def _cache_bytes(xp, cache_bytes):
    """``cache_bytes`` as :func:`gpumcmc.token_order` resolves it on the current device of ``xp``."""
    if cache_bytes is not None:
        return int(cache_bytes)
    return 32 << 20 if xp is np else int(xp.cuda.Device().attributes["L2CacheSize"])


def _place(part: CorpusPart, K: int, dtype, cache_bytes: int, xp) -> ShardPlace:
    """Where ``part``'s tokens lie in one device's token stream (:func:`gpumcmc.token_order` of the whole
    corpus: tiles of ``tile`` documents, by word then document inside each).

    The shard's own stream is that order restricted to its documents. Tiles that lie inside its documents
    are contiguous blocks of both; the first and last tiles may hold other shards' documents too, whose
    tokens interleave with the shard's, and their global indices are found by ordering those tiles whole.
    """
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
    hi = _tile_tokens(R, W, starts, first * tile, min((first + 1) * tile, M), b, e) if head else none
    ti = _tile_tokens(R, W, starts, last * tile, min((last + 1) * tile, M), b, e) if tail else none
    inner = min((first + 1) * tile, M) if head else b      # the first document after the head
    return ShardPlace(int(starts[-1]), M, b, int(starts[inner]) - hi.size, xp.asarray(np.concatenate([hi, ti])),
                      int(hi.size), int(ti.size), {})


def _tile_tokens(R, W, starts, lo: int, hi: int, b: int, e: int):
    """Global stream indices, in stream order, of the tokens of documents ``[b, e)`` in the tile of documents
    ``[lo, hi)``: the tile's tokens sorted by word then document, after the ``starts[lo]`` tokens before it."""
    a, z = int(starts[lo]), int(starts[hi])
    r = np.asarray(_backend.to_host(R[a:z]), dtype=np.int64)
    w = np.asarray(_backend.to_host(W[a:z]), dtype=np.int64)
    r = r[np.lexsort((r, w))]
    return a + np.flatnonzero((r >= b) & (r < e)).astype(np.int64)


def _device_owners(shards: Shards) -> list[int]:
    """For each local shard, the first local shard on its device (which draws phi for both)."""
    first: dict = {}
    return [first.setdefault(d, i) for i, d in enumerate(shards.devices)]


def _per_device(shards: Shards, make) -> list:
    """For each local shard, ``make()`` made under its device's first local shard, shared by the others."""
    out = []
    for i, j in enumerate(_device_owners(shards)):
        with shards.on(i):
            out.append(make() if j == i else out[j])
    return out


def _each(shards: Shards, items, make) -> list:
    """``make(i, items[i])`` for each local shard ``i``, under its device."""
    out = []
    for i, item in enumerate(items):
        with shards.on(i):
            out.append(make(i, item))
    return out


def _draw_phi(rng, shards: Shards, nwks, phi_sums, beta: float, keeps):
    """``(phis, phi_sums)`` from the all-reduced counts ``nwks`` (V C, K), and ``phi_sums + keeps * phis``.

    Drawn once per device, with one key and offset (the same phi everywhere); ``rng`` then moves on as
    one draw would move it. ``phi_sums`` are (V, C, K) stores, ``keeps`` 0-d arrays (0 or 1).
    """
    xp = shards.xp
    owners = _device_owners(shards)
    phis, sums = [None] * len(owners), [None] * len(owners)
    used = rng.offset
    for i, j in enumerate(owners):
        if j != i:
            phis[i], sums[i] = phis[j], sums[j]
            continue
        with shards.on(i):
            g = copy.copy(rng)
            V, C, K = (int(x) for x in phi_sums[i].shape)
            dtype = phi_sums[i].dtype
            conc = xp.add(nwks[i].reshape(V, C * K), dtype.type(beta), dtype=dtype)
            p, t = dirichlet_columns(g, conc, phi_sums[i].reshape(V, C * K), keeps[i])
            phis[i], sums[i] = p.reshape(V, C, K), t.reshape(V, C, K)
            used = g.offset
    rng.advance(used - rng.offset)
    return phis, sums


def init_sharded(rng, parts, shards: Shards, n_words: int, n_components: int, alpha: float, beta: float,
                 dtype="float32", burn_in: int = 0, n_chains: int = 1, fused: bool | None = None,
                 sparse: bool | None = None, cache_bytes: int | None = None, phi_start=None):
    """``(datas, state)``: :func:`init` with the documents split over ``shards``.

    ``parts`` come from :func:`shard_corpus` (:class:`CorpusPart`, which carry the whole corpus' layout).
    Each shard orders its own tokens as they lie in one device's token stream (:func:`gpumcmc.token_order`
    of the whole corpus) and is placed there (:class:`ShardPlace`): its draws take the generator offsets
    and Philox counters that one device gives its tokens and documents, with either z-draw (the fused
    kernel, ``lda_zdraw``, or :func:`gpumcmc.categorical_products` with ``counter_base`` and
    ``counter_index``), so every draw equals one device's, bit for bit, for any number of shards. A shard
    that holds the whole corpus draws as one device does. The word counts are all-reduced and phi is
    drawn from them with one key on every device. ``phi_start``: as :func:`init` (the same start on every
    device, no draw).
    """
    dtype = np.dtype(dtype)
    K = int(n_components)
    xp = shards.xp
    datas, thetas, nwks = [], [], []
    for i, part in enumerate(parts):
        if getattr(part, "corpus", None) is None:
            raise TypeError("init_sharded needs the parts that shard_corpus gives (CorpusPart, with the whole "
                            f"corpus' layout), got {type(part).__name__}; split the corpus with shard_corpus.")
        with shards.on(i):
            cb = _cache_bytes(xp, cache_bytes)
            data, C = _prepare(part.rows, part.cols, part.n_docs, n_words, K, alpha, beta, dtype, burn_in, True,
                               n_chains, fused, sparse, cb, first_doc=int(part.first_doc))
            if int(part.n_docs) < int(part.corpus[2].size) - 1:       # not the whole corpus
                data = data._replace(place=_place(part, K, dtype, cb, xp))
            datas.append(data)
    if phi_start is not None:
        thetas = _each(shards, datas, lambda i, data: xp.full((C, data.n_docs, K), 1.0 / K, dtype))
        theta_sums = _each(shards, datas, lambda i, data: xp.zeros((C, data.n_docs, K), dtype))
        phis = _per_device(shards, lambda: _checked_start(phi_start, xp, int(n_words), C, K, dtype))
        zeros = _per_device(shards, lambda: xp.zeros((int(n_words), C, K), dtype))
        return datas, LDAShardedState(tuple(thetas), tuple(theta_sums), tuple(phis), tuple(zeros), 0)
    gens = _local_rngs(rng, shards)
    for i, data in enumerate(datas):
        with shards.on(i):
            theta, nwk = _start_local(gens[i], data, C, K, dtype)
            thetas.append(theta)
            nwks.append(xp.ascontiguousarray(nwk))
    _catch_up(rng, gens)
    shards.allreduce(nwks)
    zeros = _per_device(shards, lambda: xp.zeros((int(n_words), C, K), dtype))   # the running sums' start
    keeps = _per_device(shards, lambda: xp.zeros((), dtype))                     # keep = 0: none kept yet
    phis, _ = _draw_phi(rng, shards, nwks, zeros, beta, keeps)
    theta_sums = _each(shards, thetas, lambda i, th: xp.zeros_like(th))
    return datas, LDAShardedState(tuple(thetas), tuple(theta_sums), tuple(phis), tuple(zeros), 0)


def make_sharded_step(datas, shards: Shards, loglik: bool = False):
    """``step(rng, state) -> (state, info)``: one sweep of every chain with the documents split over ``shards``.

    Each shard draws the topics of its tokens and counts them (as :func:`step`), then its documents'
    theta, with one device's generator offsets and Philox counters (see :func:`init_sharded`); the
    word-topic counts n_wk, (V C, K) int32, are summed over every shard (one all-reduce, NCCL between
    GPUs); phi is drawn from the sums with one key on every device, so all shards hold the same phi. The
    counts are integers, so the sums are exact and phi is the same whatever the number of shards, given
    the counts. The sweep is not captured as a CUDA graph (the all-reduce and the per-device launches run
    eagerly).

    ``loglik=True``: ``info.loglik`` holds, per local shard, the (C,) float64 log-likelihood of its tokens
    under the theta and phi the sweep drew z from, summed by the z-draw (see :func:`step`);
    :func:`sharded_loglik` sums them over the shards.
    """
    xp = shards.xp
    made: dict = {}     # (dtype, kept) -> one 0-d keep array per local shard (0 or 1, on its device)

    def keeps_for(it: int, burn_in: int, dt):
        key = (np.dtype(dt).str, it >= burn_in)
        if key not in made:
            made[key] = _per_device(shards, lambda: xp.full((), float(key[1]), dt))
        return made[key]

    def sweep(rng, state: LDAShardedState):
        gens = _local_rngs(rng, shards)
        thetas, nwks = [], []
        data0 = datas[0]
        keeps = keeps_for(state.it, data0.burn_in, state.theta[0].dtype)
        with _validate.validation(False):
            # Every shard's z-draw is queued before any shard's theta draw, so that no GPU's z-draw
            # waits for the host to queue the previous shard's theta draw; the sums of n_wk over the
            # GPUs run beside the theta draws, which do not read them.
            ndks, lls = [], []
            for i, data in enumerate(datas):
                with shards.on(i):
                    ll = xp.zeros(int(state.theta[i].shape[0]), np.float64) if loglik else None
                    ndk, nwk = zdraw_counts(gens[i], state.theta[i], state.phi[i], data, loglik=ll)
                    ndks.append(ndk)
                    lls.append(ll)
                    nwks.append(xp.ascontiguousarray(nwk))
            summed = shards.allreduce_async(nwks)
            for i, data in enumerate(datas):
                with shards.on(i):
                    th = state.theta[i]
                    dt = th.dtype
                    C, M, K = (int(x) for x in th.shape)
                    theta = _theta_draw(gens[i], xp.add(ndks[i], dt.type(data.alpha), dtype=dt), data, C)
                    thetas.append(theta.reshape(C, M, K))
            _catch_up(rng, gens)
            summed()
            phis, phi_sums = _draw_phi(rng, shards, nwks, state.phi_sum, data0.beta, keeps)
            theta_sums = _each(shards, thetas, lambda i, th: _accumulate(state.theta_sum[i], th, keeps[i]))
        return (LDAShardedState(tuple(thetas), tuple(theta_sums), tuple(phis), tuple(phi_sums), state.it + 1),
                LDAInfo(tuple(lls) if loglik else None))

    return sweep


def sharded_loglik(lls, shards: Shards):
    """``(C,)`` float64 host array: the per-shard sums of a sharded sweep's ``info.loglik`` summed over every
    shard (one all-reduce of C values, then one wait)."""
    bufs = _each(shards, lls, lambda i, ll: shards.xp.array(ll, dtype=np.float64, copy=True))
    return np.asarray(_backend.to_host(shards.allreduce(bufs)[0]), dtype=np.float64)


def sharded_log_likelihood(state: LDAShardedState, datas, shards: Shards):
    """``(C,)`` float64 host array: each chain's log-likelihood of the whole corpus (summed over shards)."""
    xp = shards.xp

    def chains(i, data):
        th, ph = state.theta[i], state.phi[i]
        vals = [log_likelihood(th[c], ph[:, c], data.rows, data.cols) for c in range(th.shape[0])]
        return xp.ascontiguousarray(xp.stack(vals).astype(np.float64))

    bufs = _each(shards, datas, chains)
    return np.asarray(_backend.to_host(shards.allreduce(bufs)[0]), dtype=np.float64)


def allreduce_bytes(n_words: int, n_components: int, n_chains: int = 1) -> int:
    """Bytes all-reduced per sweep with the documents split over devices: n_wk, ``V C K`` int32 counts."""
    return 4 * int(n_words) * int(n_chains) * int(n_components)
