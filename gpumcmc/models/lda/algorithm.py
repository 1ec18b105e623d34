"""Latent Dirichlet allocation by uncollapsed Gibbs sampling.

One sweep, for every token at once:

1. ``z_t ~ Cat(theta[d_t] * phi[w_t])``, the tokens in the cache-friendly
   :func:`gpumcmc.token_order` (computed once);
2. the counts ``n_dk`` and ``n_wk`` (no tokens x K array is built).

   On the GPU, where K is large and theta mostly zero (small priors make most
   of its entries underflow to exactly zero; see ``init``), both happen in one
   kernel (``lda_zdraw`` in ``kernels_cu/lda.cu``): the tokens are read once
   per sweep, z is never stored, and a theta row with few non-zero entries is
   read as a compacted list of them. Elsewhere
   :func:`gpumcmc.categorical_products` and a count kernel take two passes
   (``init(fused=...)`` chooses). On NumPy the twin is
   :func:`gpumcmc.categorical_products` (method ``"prefix"``) and a bincount;
   the draws agree with the GPU's but where a prefix sum lies within rounding
   of the search target;
3. ``theta_d ~ Dir(alpha + n_d.)`` with the batched log-space Dirichlet of
   :meth:`gpumcmc.random.Generator.dirichlet`, and ``phi_.k ~ Dir(beta + n_.k)``
   from log-gammas normalised over each column (:func:`dirichlet_columns`).

Asked (``step(..., loglik=True)``, as ``LDA.fit``'s monitor does), the z-draw
also sums ``log sum_k theta[d_t, k] phi[w_t, k]`` over each chain's tokens as
it draws (the total it forms for the draw anyway): the log-likelihood of the
theta and phi the sweep started from, with no pass of its own.

``phi`` is stored word-major, shape (V, K), as the z-draw reads it, and the
word counts are kept in the same layout: the Dirichlet over words normalises
columns, which costs a few passes over V x K elements with every element in
flight, where a Dirichlet per topic row would give each of K rows of V
elements to one warp.

Chains. ``init(..., n_chains=C)`` runs C independent chains in the same
launches: every array of the state leads with the chain axis, and the draws of
chain ``c`` use Philox counters of their own (token ``t`` of chain ``c`` is row
``c * T + t`` of one batched z-draw; the Dirichlet draws are batched over
chains the same way). ``phi`` is stored as (V, C, K) and shown in the state as
its (C, V, K) view, so that the Dirichlet over words normalises the columns of
one (V, C K) array.

Devices. ``LDA(devices=...)`` splits the documents over devices
(:class:`gpumcmc.shards.Shards`): :func:`shard_corpus` gives each shard whole
documents, :func:`init_sharded` and :func:`make_sharded_step` draw each
shard's z and theta there, all-reduce n_wk (V C K int32 values, exact) and
draw phi from the sums with one key on every device. Each shard's tokens keep
the place they have in one device's token stream (:class:`ShardPlace`): the
z-draw keys token ``t`` of chain ``c`` by ``c T + g_t``, ``g_t`` its index in
the whole stream (the fused kernel ``lda_zdraw`` takes a base and the indices
of the tokens in tiles of documents shared with the neighbouring shards;
:func:`gpumcmc.categorical_products` takes ``counter_base`` and
``counter_index``, and puts each token in the lane of a warp that one device's
call gives it), and the Dirichlet of theta draws document ``d`` as row
``c M + d`` of one device's batch (``start_row`` of ``dirichlet_draw``), at
the generator offsets of one device; so any number of shards gives one
device's draws, bit for bit, with either z-draw (see :class:`LDA`).

The functional layer (:func:`init`, :func:`step`) follows the sampler core's
conventions.
"""

from __future__ import annotations

import copy
import functools
import os
from typing import NamedTuple

import numpy as np

from gpumcmc import _kernel_args, _validate
from gpumcmc import backend as _backend
from gpumcmc._config import config, memo
from gpumcmc.discrete import CounterIndex, categorical_products, token_order
from gpumcmc.sampling import Estimator, Monitor, run, to_arviz
from gpumcmc.sampling._estimator import Integral, Interval, Real, StrOptions, _is_sparse, mixin
from gpumcmc.shards import Shards, balanced_cuts, resolve

__all__ = ["LDA", "LDAState", "LDAInfo", "LDAData", "init", "step", "tokens_from", "completion_split",
           "log_likelihood",
           "dirichlet_columns", "LDAShardedState", "CorpusPart", "ShardPlace", "document_bounds", "shard_corpus",
           "init_sharded", "seeded_topics",
           "make_sharded_step", "sharded_log_likelihood", "sharded_loglik", "allreduce_bytes"]


class LDAData(NamedTuple):
    """The corpus as a token stream (in ``token_order``) and the priors."""

    rows: object      # (T,) int64 document of each token
    cols: object      # (T,) int64 word of each token
    n_docs: int
    n_words: int
    alpha: float
    beta: float
    burn_in: int
    fused: bool = True        # GPU: the fused z-draw and counts kernel (False: categorical_products, lda_counts)
    sparse: bool = True       # GPU, fused: read theta rows with few non-zeros from a compacted list
    place: object = None      # ShardPlace: these documents are a shard of a corpus, drawn as one device draws it


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


class LDAState(NamedTuple):
    """Arrays lead with the chain axis (C chains)."""

    theta: object     # (C, M, K) document-topic proportions
    phi: object       # (C, V, K) word-major topic-word distributions (a view of a (V, C, K) array)
    phi_sum: object   # (C, V, K) sum of phi over kept sweeps (same layout as phi)
    theta_sum: object  # (C, M, K) sum of theta over kept sweeps
    it: object        # (C,) int64 sweeps done


class LDAInfo(NamedTuple):
    """What a sweep reports besides the state."""

    # (C,) float64 with step(..., loglik=True), else None: each chain's log-likelihood of the corpus,
    # sum_t log sum_k theta[d_t, k] phi[w_t, k], under the theta and phi the sweep drew z from (those of
    # the state it was given), summed by the z-draw as it drew (no pass of its own).
    loglik: object = None


def completion_split(rows):
    """``(first, second)``: boolean masks of the tokens of each document's two halves, for document
    completion (:meth:`LDA.score` with ``method="completion"``).

    ``rows`` (the document of each token, sorted, as :func:`tokens_from` gives them) on NumPy or CuPy. The
    tokens of a document alternate between the halves in their order (by word, for a count matrix): tokens
    0, 2, 4, ... are the first half, 1, 3, 5, ... the second, so a word seen twice lands once in each. The
    split is the same on every backend and for every seed.

    Examples
    --------
    >>> import numpy as np
    >>> first, second = completion_split(np.array([0, 0, 0, 1, 2, 2]))
    >>> first.astype(int).tolist(), second.astype(int).tolist()
    ([1, 0, 1, 1, 1, 0], [0, 1, 0, 0, 0, 1])
    """
    xp = _backend.get_array_module(rows)
    idx = xp.arange(int(rows.size), dtype=np.int64)
    pos = idx - xp.searchsorted(rows, rows, side="left")      # the token's place within its document
    second = (pos % 2) == 1
    return ~second, second


def tokens_from(X, xp, n_words: int | None = None, name: str = "X", allow_empty: bool = False):
    """``(rows, cols, n_docs, n_words)`` from counts or a list of token-id arrays, checked once.

    The tokens come by document (``rows`` sorted), by word within a document for a count matrix and in the
    given order for a list. ``allow_empty``: a corpus with documents but no token gives empty arrays rather
    than a ValueError."""
    if isinstance(X, (list, tuple)) and (len(X) == 0 or not np.isscalar(X[0])):
        if len(X) == 0:
            raise ValueError(f"{name} is an empty corpus; pass at least one document.")
        docs = [np.asarray(_backend.to_host(d) if hasattr(d, "get") else d).ravel() for d in X]
        for d in docs:
            if d.size and (d.dtype.kind not in "iu"):
                if d.dtype.kind != "f" or not np.all(np.isfinite(d)) or np.any(d != np.round(d)):
                    raise ValueError(f"{name} token ids must be integers; convert the documents to "
                                     "integer arrays of word ids.")
            if d.size and d.min() < 0:
                raise ValueError(f"{name} has negative token ids; word ids must be in 0..n_words-1.")
        lengths = np.array([d.size for d in docs], dtype=np.int64)
        cols = np.concatenate([d.astype(np.int64) for d in docs]) if lengths.sum() else np.zeros(0, np.int64)
        rows = np.repeat(np.arange(len(docs), dtype=np.int64), lengths)
        V = int(cols.max()) + 1 if cols.size else 0
        if n_words is not None:
            if V > n_words:
                raise ValueError(f"{name} has word id {V - 1} but the model has {n_words} words; "
                                 "use the vocabulary the model was fitted with.")
            V = n_words
        M = len(docs)
    else:
        if _is_sparse(X):
            S = X.tocoo()
            data, r, c = S.data, S.row, S.col
            M, V = S.shape
            if hasattr(data, "get"):
                data, r, c = data.get(), r.get(), c.get()
            data, r, c = np.asarray(data), np.asarray(r, np.int64), np.asarray(c, np.int64)
        else:
            A = np.asarray(_backend.to_host(X) if hasattr(X, "get") else X)
            if A.ndim != 2:
                hint = (" Reshape your data with X.reshape(1, -1) for a single document." if A.ndim == 1 else "")
                raise ValueError(f"{name} must be a 2-d (n_docs, n_words) count matrix or a list of "
                                 f"token-id arrays, got shape {A.shape}.{hint}")
            if A.dtype.kind == "c":
                raise ValueError(f"Complex data not supported: {name} holds complex numbers; pass word counts.")
            if A.dtype.kind == "O":  # numbers held as Python objects (e.g. from a DataFrame)
                try:
                    A = A.astype(np.float64)
                except (TypeError, ValueError) as e:
                    raise TypeError(f"{name} must hold counts: {e}") from None
            if A.dtype.kind not in "biuf":
                raise TypeError(f"{name} must hold counts, got dtype {A.dtype}.")
            M, V = A.shape
            if V == 0:
                raise ValueError(f"{name} has 0 feature(s) (shape={A.shape}) while a minimum of 1 is required: "
                                 "an empty corpus; pass documents over at least one word.")
            r, c = np.nonzero(A)
            data = A[r, c]
        if data.dtype.kind == "f":
            if not np.all(np.isfinite(data)):
                raise ValueError(f"{name} contains NaN or inf; counts must be finite non-negative integers.")
            if np.any(data != np.round(data)):
                raise ValueError(f"{name} has non-integer counts; pass word counts (e.g. from "
                                 "sklearn's CountVectorizer), not TF-IDF weights.")
        if data.size and data.min() < 0:
            raise ValueError(f"Negative values in data passed to {name}: it has negative counts; counts must be "
                             "non-negative integers.")
        if n_words is not None and V != n_words:
            raise ValueError(f"{name} has {V} features, but LDA is expecting {n_words} features as input (the "
                             "words it was fitted on); build X with the same vocabulary (e.g. the same fitted "
                             "CountVectorizer).")
        data = data.astype(np.int64)
        r, c = r.astype(np.int64, copy=False), c.astype(np.int64, copy=False)
        # The tokens by document, then word. A CSR matrix in canonical form and np.nonzero give the entries
        # in that order already; others are sorted here, entries (not the more numerous tokens).
        if r.size > 1 and not bool(np.all((r[1:] > r[:-1]) | ((r[1:] == r[:-1]) & (c[1:] >= c[:-1])))):
            order = np.lexsort((c, r))
            r, c, data = r[order], c[order], data[order]
        if M == 0 or not data.sum():
            if allow_empty and M:
                return xp.zeros(0, np.int64), xp.zeros(0, np.int64), int(M), int(V)
            raise ValueError(f"{name} is an empty corpus (no tokens); pass documents with at least one word.")
        rows, cols = _expand(r, c, data, xp)
        return rows, cols, int(M), int(V)
    if M == 0 or (rows.size == 0 and not allow_empty):
        raise ValueError(f"{name} is an empty corpus (no tokens); pass documents with at least one word.")
    return xp.asarray(rows), xp.asarray(cols), int(M), int(V)


def _expand(r, c, n, xp):
    """``(rows, cols)`` int64 on ``xp``: entry ``i`` of ``(r, c)`` repeated ``n[i]`` times, in order.

    On the GPU the entries travel (not the tokens, which are more numerous) and are expanded there: token
    ``t`` belongs to the entry whose running count first exceeds ``t``.
    """
    if xp is np:
        return np.repeat(r, n), np.repeat(c, n)
    keep = n > 0
    if not keep.all():
        r, c, n = r[keep], c[keep], n[keep]
    small = np.int32 if max(int(r.max()), int(c.max())) < 2**31 else np.int64
    ends = xp.cumsum(xp.asarray(n.astype(small if int(n.max()) < 2**31 else np.int64)), dtype=np.int64)
    owner = xp.searchsorted(ends, xp.arange(int(n.sum()), dtype=np.int64), side="right")
    rows = xp.asarray(r.astype(small))[owner].astype(np.int64)
    cols = xp.asarray(c.astype(small))[owner].astype(np.int64)
    return rows, cols


def init(rng, rows, cols, n_docs: int, n_words: int, n_components: int, alpha: float, beta: float,
         dtype="float32", burn_in: int = 0, order: bool = True, n_chains: int = 1, fused: bool | None = None,
         sparse: bool | None = None, cache_bytes: int | None = None, phi_start=None):
    """``(data, state)``: the token stream in ``token_order``, and theta, phi drawn given random topics.

    Every token starts in a topic drawn uniformly at random; theta and phi are then drawn from their
    conditionals given those counts, ``Dir(alpha + n_dk)`` and ``Dir(beta + n_kw)``. A draw from the prior
    alone is not a usable start with small priors: at ``alpha = beta = 1/K`` and K = 1024 most float32
    Dirichlet components underflow to zero, and many tokens would have no topic with a positive weight.
    Given the counts, each token's own topic has ``theta > 0`` and ``phi > 0``, and the sweep keeps it so.

    ``n_chains`` independent chains start from independent topics. ``fused`` (GPU) draws z and counts in
    one kernel (default: where theta is expected to be mostly zero, see ``_fused_default``); ``sparse``
    (default: K >= ``config.lda_sparse_min_k``) lets that kernel read mostly-zero theta rows as compacted lists.
    Neither changes the draws but for rounding near ties.
    ``cache_bytes`` is passed to :func:`gpumcmc.token_order`.

    ``phi_start`` ((V, C, K), e.g. :func:`seeded_topics`): start from these topics and theta = 1 / K
    instead (no draw; the first sweep draws the topics of the tokens from them).
    """
    dtype = np.dtype(dtype)
    K = int(n_components)
    data, C = _prepare(rows, cols, n_docs, n_words, K, alpha, beta, dtype, burn_in, order, n_chains, fused, sparse,
                       cache_bytes)
    xp = _backend.get_array_module(data.rows)
    if phi_start is not None:
        phi = _checked_start(phi_start, xp, n_words, C, K, dtype)
        return data, LDAState(xp.full((C, n_docs, K), 1.0 / K, dtype), phi.transpose(1, 0, 2),
                              xp.zeros((n_words, C, K), dtype).transpose(1, 0, 2), xp.zeros((C, n_docs, K), dtype),
                              xp.zeros(C, np.int64))
    theta, nwk = _start_local(rng, data, C, K, dtype)
    phi = dirichlet_columns(rng, xp.add(nwk.reshape(n_words, C * K), dtype.type(beta), dtype=dtype))
    phi = phi.reshape(n_words, C, K).transpose(1, 0, 2)
    state = LDAState(theta, phi, xp.zeros((n_words, C, K), dtype).transpose(1, 0, 2),
                     xp.zeros((C, n_docs, K), dtype), xp.zeros(C, np.int64))
    return data, state


def _checked_start(phi_start, xp, V: int, C: int, K: int, dtype):
    """``phi_start`` as a (V, C, K) array of ``dtype`` on ``xp``, its shape and values checked (once)."""
    phi = xp.ascontiguousarray(xp.asarray(phi_start), dtype=dtype)
    if tuple(phi.shape) != (V, C, K):
        raise ValueError(f"phi_start must have shape (n_words, n_chains, n_components) = {(V, C, K)}, got "
                         f"{tuple(phi.shape)}; make it with seeded_topics.")
    if not bool(xp.all(phi >= 0)) or not bool(xp.all(xp.isfinite(phi))):  # synchronize! (once, at the start)
        raise ValueError("phi_start must be finite and non-negative (and positive somewhere for every word of "
                         "the corpus, so that every token has a topic to draw).")
    return phi


# The seeded start's work bound: exact cosines while K times the candidates' tokens is at most
# config.lda_seed_exact_work (each pick is one sparse product over the candidates); beyond, cosines of a
# config.lda_seed_sketch-wide count sketch of the candidates (their Gram matrix formed once where they are at
# most config.lda_seed_gram_max, else one dense product per pick). The default candidates number
# max(2 K, lda_seed_exact_work // (K * mean tokens per document)): every document of the planted corpora of
# issue 37 (K = 10, 1,000 documents of 80 tokens), 2 K of a 29 M-token corpus of 23.6 k documents at K = 1024.
# LDA's default start seeds where K times the corpus' tokens is at most lda_seed_exact_work: every document a
# candidate, exact cosines.


def seeded_topics(rows, cols, n_docs: int, n_words: int, n_components: int, n_chains: int = 1, seed=None,
                  dtype="float32", max_candidates: int | None = None):
    """``(V, C, K)`` starting topics, one set per chain, from documents picked by k-means++ seeding.

    For each chain, K documents are picked one after another, each with probability proportional to the
    squared cosine distance of its word counts to the nearest document already picked (the first in
    proportion to its length), so that the starting topics are spread over the corpus; topic k starts as
    the word frequencies of document k, mixed half and half with the corpus' word frequencies (so every
    word of the corpus has a positive weight in every topic). ``LDA(start="seeded")`` uses it, and so does
    the default start (``"auto"``) on small corpora; pass it as ``init(..., phi_start=...)`` to start a
    chain by hand.

    A random start (every token's topic uniform) begins with every topic close to the corpus' word
    frequencies; on small planted corpora an uncollapsed chain then settles more often than collapsed Gibbs
    in a mode where two topics share one sampled topic.

    The work is bounded whatever the corpus: the documents are picked among at most ``max_candidates``
    of them, drawn at random (default ``max(2 K, lda_seed_exact_work // (K * mean tokens per document))``,
    a knob of ``gpumcmc._config.config``), and only their tokens are read on the host, with the corpus'
    word and document counts (two bincounts on the array module of ``rows``). While K times the
    candidates' tokens is at most ``config.lda_seed_exact_work``, the cosines are exact; beyond, they are
    those of a ``config.lda_seed_sketch``-wide count sketch of the candidates (each word added, with a
    random sign, to one of ``lda_seed_sketch`` columns), whose inner products are the exact ones on
    average. The passes over every token (the two bincounts, and the sort of unsorted ``rows``) run on
    the GPU for CuPy arrays; the host reads the candidates' tokens alone (benchmarks/NOTES.md gives the
    cost on a large corpus). ``seed``: of the host generator (``numpy.random.default_rng``). ``rows``, ``cols``: NumPy or CuPy, ``rows`` best sorted (as
    :func:`tokens_from` gives them; others are sorted here). Returns a NumPy array.
    """
    parts = _seed_picks(rows, cols, n_docs, n_words, n_components, n_chains, seed, max_candidates)
    return _seeded_phi(parts, n_words, n_chains, n_components, np, dtype)


def _seed_picks(rows, cols, n_docs, n_words, n_components, n_chains, seed, max_candidates=None, fallback=False):
    """The host part of :func:`seeded_topics`: ``(uni (V,), picks)``, the corpus' word frequencies and, per
    chain, ``(words, topics, freqs)`` of the picked documents' words (each document's own frequencies).
    ``fallback``: None, not a ValueError, where fewer than K documents have tokens."""
    import scipy.sparse as sp

    xp = _backend.get_array_module(rows)
    M, V, K, C = int(n_docs), int(n_words), int(n_components), int(n_chains)
    T = int(rows.size)
    if T > 1 and not bool((rows[1:] >= rows[:-1]).all()):  # synchronize! (once, at the start)
        order = xp.argsort(rows, kind="stable") if xp is np else xp.argsort(rows)   # CuPy's sort is stable
        rows, cols = rows[order], cols[order]
    lens = np.asarray(_backend.to_host(xp.bincount(rows, minlength=M)), np.int64)[:M] if T else np.zeros(M, np.int64)
    docs = np.flatnonzero(lens)
    if docs.size < K:
        if fallback:
            return None
        raise ValueError(f"seeded_topics needs at least n_components = {K} documents with tokens, got "
                         f"{docs.size}; use the random start.")
    uni = np.asarray(_backend.to_host(xp.bincount(cols, minlength=V)), np.float64)[:V] / T
    starts = np.concatenate([[0], np.cumsum(lens)])
    rs = np.random.default_rng(seed)
    if max_candidates is None:
        max_candidates = max(2 * K, config.lda_seed_exact_work // (K * max(1, T // docs.size)))
    picks = []
    exact_work, sketch, gram_max = config.lda_seed_exact_work, config.lda_seed_sketch, config.lda_seed_gram_max
    for _ in range(C):
        pool = docs if docs.size <= max_candidates else np.sort(rs.choice(docs, max_candidates, replace=False))
        # the candidates' tokens: their documents' ranges of the sorted stream, gathered on rows' module
        n_tok = lens[pool]
        first = np.repeat(starts[pool] - np.concatenate([[0], np.cumsum(n_tok)[:-1]]), n_tok)
        at = first + np.arange(int(n_tok.sum()))
        w = np.asarray(_backend.to_host(cols[xp.asarray(at)]), np.int64)
        r = np.repeat(np.arange(pool.size), n_tok)
        P = pool.size
        if K * w.size <= exact_work:   # exact cosines, one sparse product per pick
            Xp = sp.csr_matrix((np.ones(w.size), (r, w)), shape=(P, V))
            Xp.sum_duplicates()
            norms = np.sqrt(np.asarray(Xp.multiply(Xp).sum(axis=1)).ravel())
            Xn = sp.diags(1.0 / norms) @ Xp

            def sims(j, Xn=Xn):
                return (Xn @ Xn[j].T).toarray().ravel()
        else:   # cosines of a count sketch: word v adds sign_v to column h_v of its document's row
            h, sign = rs.integers(0, sketch, V), rs.choice(np.array([-1.0, 1.0]), V)
            Y = np.bincount(r * sketch + h[w], weights=sign[w], minlength=P * sketch)
            Y = Y.reshape(P, sketch)
            Y = (Y / np.maximum(np.sqrt((Y * Y).sum(axis=1)), 1e-300)[:, None]).astype(np.float32)
            G = Y @ Y.T if P <= gram_max else None

            def sims(j, Y=Y, G=G):
                return (G[j] if G is not None else Y @ Y[j]).astype(np.float64)
        wts = n_tok / n_tok.sum()
        picked = [int(rs.choice(P, p=wts))]
        dist = 1.0 - sims(picked[0])
        for _ in range(1, K):
            p = np.maximum(dist, 0.0) ** 2
            p[picked] = 0.0
            if not p.sum() > 0:           # every candidate left equals a pick: take them by length
                p = wts.copy()
                p[picked] = 0.0
            j = int(rs.choice(P, p=p / p.sum()))
            picked.append(j)
            dist = np.minimum(dist, 1.0 - sims(j))
        # the picked documents' word frequencies, from their tokens alone, counted as runs of (candidate,
        # word): tokens_from gives each document's tokens by word, so only other input needs the sort
        sel = np.full(P, -1, np.int64)
        sel[picked] = np.arange(K)
        keep = sel[r] >= 0
        key = r[keep] * V + w[keep]
        if key.size > 1 and not bool((key[1:] >= key[:-1]).all()):
            key = np.sort(key)
        run = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
        count = np.diff(np.append(run, key.size))
        doc, word = np.divmod(key[run], V)
        picks.append((word, sel[doc], count / n_tok[doc]))
    return uni, picks


def _seeded_phi(parts, V, C, K, xp, dtype):
    """The ``(V, C, K)`` seeded topics on ``xp``: ``(uni + f_k) / 2`` for topic k's document frequencies
    ``f_k``, written in ``dtype`` from float64 values computed on the host (the same on every backend)."""
    uni, picks = parts
    dtype = np.dtype(dtype)
    out = xp.empty((V, C, K), dtype)
    out[...] = xp.asarray((0.5 * uni).astype(dtype))[:, None, None]
    for ch, (w, k, f) in enumerate(picks):   # each (word, topic) once: a document's words are distinct
        out[xp.asarray(w), ch, xp.asarray(k)] = xp.asarray((0.5 * uni[w] + 0.5 * f).astype(dtype))
    return out


def _prepare(rows, cols, n_docs, n_words, K, alpha, beta, dtype, burn_in, order, n_chains, fused, sparse,
             cache_bytes, first_doc: int = 0):
    """``(data, C)``: the token stream in ``token_order`` (int32 on the GPU) and init's settings, checked.

    ``first_doc``: the documents are those from ``first_doc`` on of a larger corpus, and the tokens are
    ordered as they lie in that corpus' ``token_order`` (its tiles of documents).
    """
    xp = _backend.get_array_module(rows)
    C = int(n_chains)
    if isinstance(n_chains, bool) or C != n_chains or C < 1:
        raise ValueError(f"n_chains must be a positive integer, got {n_chains!r}.")
    if order and rows.size:
        perm = token_order(rows + int(first_doc) if first_doc else rows, cols, K, dtype, cache_bytes=cache_bytes)
        rows, cols = xp.ascontiguousarray(rows[perm]), xp.ascontiguousarray(cols[perm])
    if xp is not np and max(int(n_docs), int(n_words)) < 2**31:
        rows, cols = rows.astype(np.int32), cols.astype(np.int32)   # what the kernels read, converted once
    fused = _fused_default(K, alpha, dtype) if fused is None else bool(fused)
    sparse = K >= config.lda_sparse_min_k if sparse is None else bool(sparse)
    data = LDAData(rows, cols, int(n_docs), int(n_words), float(alpha), float(beta), int(burn_in), fused, sparse)
    return data, C


def _start_local(rng, data, C: int, K: int, dtype):
    """``(theta, n_wk)``: random topics for every token, then theta given them (two generator calls).

    The draws that concern the documents of ``data`` alone; the phi draw, from the word counts, follows.
    A shard (``data.place``) takes the uniforms of its tokens from those of the whole corpus' tokens.
    """
    xp = _backend.get_array_module(data.rows)
    T = int(data.rows.size)
    if data.place is None:
        u = rng.random(C * T, dtype=np.float32)
    else:
        from gpumcmc.random._fill import uniform_at

        # what rng.random(C * n_tokens, dtype=float32) gives these tokens, without drawing the others'
        u = uniform_at(xp, _token_counters(data, C), np.float32, rng.key, rng.advance())
    z0 = xp.minimum((u * np.float32(K)).astype(np.int64), K - 1)
    del u
    r_all, c_all = _chain_tokens(data, C)
    ndk, nwk = fused_counts(r_all, c_all, z0, C * data.n_docs, data.n_words * C, K)
    theta = _theta_draw(rng, xp.add(ndk, dtype.type(data.alpha), dtype=dtype), data, C).reshape(C, data.n_docs, K)
    return theta, nwk


def _theta_draw(rng, conc, data, C: int):
    """``theta ~ Dir(conc)`` for the (C M, K) concentrations of ``data``'s documents (one generator call).

    A shard (``data.place``) draws chain ``c``'s rows as rows ``c M_all + first_doc + d`` of one device's
    batch: one launch per chain, at one offset.
    """
    p = data.place
    if p is None:
        return rng.dirichlet(conc, dtype=conc.dtype)
    from gpumcmc.random import _gamma

    xp = _backend.get_array_module(conc)
    key, off = rng.key, rng.advance()
    M = int(data.n_docs)
    draw = _gamma.dirichlet_numpy if xp is np else _gamma.dirichlet_cupy
    out = [draw(conc[c * M:(c + 1) * M], key, off, start_row=c * p.n_docs + p.first_doc) for c in range(C)]
    return out[0] if C == 1 else xp.concatenate(out)


def _token_counters(data, C: int):
    """``(C T,)`` int64: the z-draw's counter of each token of every chain, ``c n_tokens + g_t`` (ShardPlace)."""
    xp = _backend.get_array_module(data.rows)
    p = data.place
    T = int(data.rows.size)
    g = xp.arange(T, dtype=np.int64) + p.base
    if p.n_head:
        g[:p.n_head] = p.index[:p.n_head]
    if p.n_tail:
        g[T - p.n_tail:] = p.index[p.n_head:]
    if C == 1:
        return g
    return (xp.arange(C, dtype=np.int64)[:, None] * p.n_tokens + g[None, :]).reshape(-1)


# init's defaults. The fused z-draw and counts (a warp per token, and the theta rows read as compacted lists
# of their non-zero entries) pays where K is large and most of theta is exactly zero; at small K, and with
# dense theta rows read whole, the two kernels are faster (benchmarks/lda.py; benchmarks/NOTES.md, under
# gpumcmc.models.lda, has the measurements). A Dirichlet entry
# with no count underflows to zero with probability about exp(-alpha * 103) in float32 (exp(-alpha * 744)
# in float64; 103 and 744 are minus the log of the smallest subnormal); the fused kernel is the default
# from config.lda_fused_min_k topics where at most config.lda_fused_max_fill of those entries are expected to
# be non-zero; it reads theta rows as compacted lists from config.lda_sparse_min_k topics.
# LDA(graph=None) replays sweeps from a CUDA graph below config.lda_graph_max_tokens tokens (times chains): there
# a sweep is bound by launches and their Python (benchmarks/lda.py, rows "graph ...").


def _fused_default(K: int, alpha: float, dtype) -> bool:
    """Whether init picks the fused z-draw: K >= config.lda_fused_min_k and theta expected mostly zero."""
    tiny = np.log(np.finfo(np.dtype(dtype)).smallest_subnormal)      # -103.3 (float32), -744.4 (float64)
    return K >= config.lda_fused_min_k and 1.0 - np.exp(float(alpha) * tiny) <= config.lda_fused_max_fill


def _chain_tokens(data, C: int):
    """Token rows and columns of all chains as one batch: theta row ``c M + d``, phi row ``w C + c``.

    Token ``t`` of chain ``c`` is entry ``c T + t``, so its uniform is the z-draw's row ``c T + t``.
    """
    xp = _backend.get_array_module(data.rows)
    rows, cols = data.rows, data.cols
    if C == 1:
        return rows, cols
    rows, cols = rows.astype(np.int64), cols.astype(np.int64)
    chains = xp.arange(C, dtype=np.int64)[:, None]
    return (rows[None, :] + chains * data.n_docs).reshape(-1), (cols[None, :] * C + chains).reshape(-1)


def _phi_store(phi):
    """The (V, C, K) array behind a state's (C, V, K) ``phi`` (a view when it is one; else a copy)."""
    xp = _backend.get_array_module(phi)
    return xp.ascontiguousarray(phi.transpose(1, 0, 2))


def counts(rows, z, n_rows: int, K: int):
    """``n[r, k]`` = number of tokens with row ``r`` and topic ``k`` (bincount of ``rows * K + z``)."""
    xp = _backend.get_array_module(rows)
    return xp.bincount(rows * K + z, minlength=n_rows * K).reshape(n_rows, K)


FILE = "lda.cu"
_NAMES = ("lda_counts<long long>", "lda_counts<int>")


def counts_twin(rows, cols, z, M: int, V: int, K: int):
    """NumPy twin of the ``lda_counts`` kernel: ``(n_dk (M, K), n_wk (V, K))`` as int32.

    Tokens with a topic outside ``[0, K)`` (the z-draw's -1) are not counted.
    """
    ok = (z >= 0) & (z < K)
    if not ok.all():
        rows, cols, z = rows[ok], cols[ok], z[ok]
    ndk = np.bincount(rows * K + z, minlength=M * K).astype(np.int32).reshape(M, K)
    nwk = np.bincount(cols * K + z, minlength=V * K).astype(np.int32).reshape(V, K)
    return ndk, nwk


def fused_counts(rows, cols, z, M: int, V: int, K: int, out=None):
    """``(n_dk (M, K), n_wk (V, K))`` int32 in one pass over the tokens (one kernel on the GPU).

    ``out`` is an optional pair of int32 arrays to reuse (they are zeroed here).
    """
    xp = _backend.get_array_module(rows)
    if xp is np:
        return counts_twin(rows, cols, z, M, V, K)
    from gpumcmc import _loader

    if out is None:
        out = (xp.zeros((M, K), np.int32), xp.zeros((V, K), np.int32))
    else:
        out[0].fill(0)
        out[1].fill(0)
    if z.dtype != np.int64:
        z = z.astype(np.int64)     # the kernel reads topics as int64 (the z-draw's output type)
    name = "lda_counts<int>" if rows.dtype == np.int32 else "lda_counts<long long>"
    fn = _loader.get_function(FILE, name, _ALL)
    _loader.launch(fn, int(rows.size), _kernel_args.args(
        FILE, "lda_counts", rows=_loader.contiguous(rows), cols=_loader.contiguous(cols), z=_loader.contiguous(z),
        ndk=out[0], nwk=out[1], T=_loader.i64(rows.size), K=_loader.i32(K)))
    return out


_Z_NAMES = tuple(f"{k}<{t}>" for t in ("float", "double") for k in ("lda_theta_compact", "lda_zdraw"))
# config.lda_zwarps: warps per block of lda_zdraw (at most 4, its launch bound); config.lda_zwaves: its grid in
# multiples of the resident blocks (the same draws at any value: benchmarks/lda.py times the variants).


def zdraw_counts(rng, theta, phi, data, zout=None, loglik=None):
    """One sweep's z-draw and counts for every chain: ``(n_dk (C M, K), n_wk (V C, K))`` int32.

    ``theta`` is (C, M, K) and ``phi`` the (V, C, K) store. Token ``t`` of chain ``c`` draws
    ``z ~ Cat(theta[c, d_t] * phi[w_t, c])`` with the uniform of row ``c T + t`` at one generator offset
    (a shard, ``data.place``: of row ``c T_all + g_t``, see :class:`ShardPlace`).
    On the GPU (``data.fused``) one kernel draws and counts; on NumPy (and with ``fused=False``) z comes
    from :func:`gpumcmc.categorical_products` over all chains' tokens (a shard: with their counters,
    ``counter_base`` / ``counter_index``), then the counts. ``zout`` (int64, C T) receives z (for tests).
    ``loglik`` ((C,) float64, optional): chain ``c``'s ``sum_t log(max(total_t, 1e-300))`` is added to
    ``loglik[c]``, ``total_t = sum_k theta[c, d_t, k] phi[w_t, c, k]`` as the draw summed it (the fused
    kernel, or ``categorical_products(log_total=...)``): the log-likelihood with no pass of its own.
    """
    xp = _backend.get_array_module(theta)
    C, M, K = (int(x) for x in theta.shape)
    V = int(phi.shape[0])
    th2, ph2 = theta.reshape(C * M, K), phi.reshape(V * C, K)
    row_bytes = (K + K // 32 + 1) * theta.dtype.itemsize     # a padded phi row in shared memory (lda.cu)
    if (xp is np or not data.fused or row_bytes > 48 * 1024 or data.rows.dtype != np.int32
            or data.cols.dtype != np.int32):
        r_all, c_all = _chain_tokens(data, C)
        method = "prefix" if xp is np else "auto"
        if data.place is None:
            z = categorical_products(th2, ph2, r_all, c_all, rng, method=method, log_total=loglik)
        else:
            z = _placed_products(th2, ph2, r_all, c_all, rng, data, C, method, loglik)
        if zout is not None:
            zout[...] = z
        return fused_counts(r_all, c_all, z, C * M, V * C, K)
    from gpumcmc import _loader

    T = int(data.rows.size)
    p = data.place
    NULL = _loader.NULL
    if p is None:
        n_all, base, gidx, n_head, n_tail = T, 0, NULL, 0, 0
    else:
        n_all, base, n_head, n_tail = p.n_tokens, p.base, p.n_head, p.n_tail
        gidx = p.index if p.index.size else NULL
    offset = rng.advance()
    t = _loader.CTYPE[theta.dtype]
    th2 = _loader.contiguous(th2)
    nnz = sidx = sval = NULL
    if data.sparse:
        nnz = xp.empty(C * M, np.int32)
        sidx = xp.empty((C * M, K), np.int32)
        sval = xp.empty((C * M, K), theta.dtype)
        _loader.launch(_loader.get_function(FILE, f"lda_theta_compact<{t}>", _ALL), C * M * 32,
                       _kernel_args.args(FILE, "lda_theta_compact", theta=th2, n_rows=_loader.i64(C * M),
                                         K=_loader.i32(K), nnz=nnz, sidx=sidx, sval=sval), block=256)
    ndk = xp.zeros((C * M, K), np.int32)
    nwk = xp.zeros((V * C, K), np.int32)
    warps = max(1, min(config.lda_zwarps, 4, (48 * 1024) // row_bytes))   # 4: the kernel's launch bound
    fn = _loader.get_function(FILE, f"lda_zdraw<{t}>", _ALL)
    smem = warps * row_bytes
    blocks = _loader.resident_blocks(fn, 32 * warps, smem) * _loader.sm_count() * config.lda_zwaves
    gx = max(1, min(-(-T // (32 * warps)), -(-blocks // C)))
    fn((gx, C), (32 * warps,), _kernel_args.args(
        FILE, "lda_zdraw", theta=th2, phi=_loader.contiguous(ph2), rows=data.rows, cols=data.cols, nnz=nnz,
        sidx=sidx, sval=sval, ndk=ndk, nwk=nwk, zout=zout if zout is not None else NULL, n=_loader.i64(T),
        M=_loader.i32(M), C=_loader.i32(C), K=_loader.i32(K), **_kernel_args.philox_dev(rng.key, offset),
        n_all=_loader.i64(n_all), base=_loader.i64(base), gidx=gidx, n_head=_loader.i64(n_head),
        n_tail=_loader.i64(n_tail), ll=loglik if loglik is not None else NULL), shared_mem=smem)
    return ndk, nwk


def _placed_products(th2, ph2, r_all, c_all, rng, data, C: int, method: str, loglik=None):
    """:func:`gpumcmc.categorical_products` of a shard's tokens (all chains, ``r_all``, ``c_all``) at one
    generator offset, token ``t`` of chain ``c`` drawn as token ``c T_all + g_t`` of one device's call
    (:class:`ShardPlace`): the same uniform and, for the butterfly, the same lane, so the same index.

    On the GPU each chain's run of tokens between the head and the tail is one call with a counter base
    (no per-token read), and the heads and tails of all chains one call with their counters (one call per
    chain where ``loglik``, (C,), sums each chain's log totals).
    """
    xp = _backend.get_array_module(th2)
    if xp is np:
        return categorical_products(th2, ph2, r_all, c_all, rng, method=method,
                                    counter_index=_token_counters(data, C), log_total=loglik)
    p = data.place
    T = int(data.rows.size)
    z = xp.empty(C * T, np.int64)
    for c in range(C):
        a, b = c * T + p.n_head, (c + 1) * T - p.n_tail
        if b > a:
            categorical_products(th2, ph2, r_all[a:b], c_all[a:b], copy.copy(rng), method=method, out=z[a:b],
                                 counter_base=c * p.n_tokens + p.base + p.n_head,
                                 log_total=None if loglik is None else loglik[c:c + 1])
    if p.n_head or p.n_tail:
        ends = None if p.memo is None else p.memo.get(C)
        if ends is None:  # the heads' and tails' places, tokens and counters: the same every sweep
            local = xp.concatenate([xp.arange(p.n_head, dtype=np.int64),
                                    xp.arange(T - p.n_tail, T, dtype=np.int64)])
            chains = xp.arange(C, dtype=np.int64)[:, None]
            pos = (chains * T + local[None, :]).reshape(-1)
            counters = CounterIndex((chains * p.n_tokens + p.index[None, :]).reshape(-1))
            ends = (pos, r_all[pos], c_all[pos], counters)
            if p.memo is not None:
                p.memo[C] = ends
        pos, r_ends, c_ends, counters = ends
        if loglik is None or C == 1:
            z[pos] = categorical_products(th2, ph2, r_ends, c_ends, copy.copy(rng), method=method,
                                          counter_index=counters, log_total=loglik)
        else:   # one call per chain, so that each chain's log totals have a sum of their own
            E = p.n_head + p.n_tail
            per = p.memo.get((C, "chains")) if p.memo is not None else None
            if per is None:
                per = [CounterIndex(counters.index[c * E:(c + 1) * E]) for c in range(C)]
                if p.memo is not None:
                    p.memo[(C, "chains")] = per
            for c in range(C):
                e = slice(c * E, (c + 1) * E)
                z[pos[e]] = categorical_products(th2, ph2, r_ends[e], c_ends[e], copy.copy(rng), method=method,
                                                 counter_index=per[c], log_total=loglik[c:c + 1])
    rng.advance()
    return z


def dirichlet_columns(rng, concentration, total=None, keep=None):
    """``out[:, k] ~ Dir(concentration[:, k])`` for each column of a (V, K) array, in its dtype.

    Log-gammas (``Generator.gamma(log=True)``, exact for tiny shapes), then
    each column normalised as ``exp(x - max) / sum(exp(x - max))``, the row
    formula of ``Generator.dirichlet``. On the GPU the column reductions are
    tiled so that every read is coalesced (see ``kernels_cu/lda.cu``).

    With ``total`` and ``keep`` (a 0-d array, 0 or 1) it returns
    ``(out, total + keep * out)``, the running sum formed in the same pass.

    Examples
    --------
    >>> import numpy as np
    >>> from gpumcmc.random import default_rng
    >>> from gpumcmc.models.lda import dirichlet_columns
    >>> phi = dirichlet_columns(default_rng(0, backend="numpy"), np.full((5, 3), 0.5))
    >>> np.allclose(phi.sum(axis=0), 1)
    True
    """
    xp = _backend.get_array_module(concentration)
    dtype = concentration.dtype
    lg = rng.gamma(concentration, dtype=dtype, log=True)
    if xp is not np:
        return _columns_gpu(lg, total, keep)
    with np.errstate(under="ignore"):
        lg -= lg.max(axis=0)
        e = np.exp(lg, out=lg)
        e /= e.sum(axis=0, dtype=dtype)
    return e if total is None else (e, _accumulate(total, e, keep))


_COL_NAMES = tuple(f"{k}<{t}>" for t in ("float", "double")
                   for k in ("lda_col_partials", "lda_col_combine", "lda_col_normalise"))
_ALL = _NAMES + _COL_NAMES + _Z_NAMES   # every instantiation, so that lda.cu compiles once


def _columns_gpu(lg, total, keep):
    """``dirichlet_columns`` on CuPy log-gammas ``lg`` (normalised out of place)."""
    import cupy

    from gpumcmc import _loader

    V, K = lg.shape
    t = "float" if lg.dtype == np.float32 else "double"
    fns = [_loader.get_function(FILE, f"{k}<{t}>", _ALL)
           for k in ("lda_col_partials", "lda_col_combine", "lda_col_normalise")]
    # About 2048 threads per SM in the partial pass: K columns a tile, tiles of whole rows.
    tiles = int(max(1, min(V, (_loader.sm_count() * 2048) // K)))
    per_tile = -(-V // tiles)
    tiles = -(-V // per_tile)
    pm = cupy.empty((tiles, K), lg.dtype)
    ps = cupy.empty((tiles, K), lg.dtype)
    bx = min(256, 32 * -(-K // 32))
    fns[0]((-(-K // bx), tiles), (bx,), _kernel_args.args(FILE, "lda_col_partials", x=lg, V=_loader.i64(V),
                                                           K=_loader.i32(K), rows_per_tile=_loader.i64(per_tile),
                                                           pm=pm, ps=ps))
    fns[1]((-(-K // 32),), (32, 32), _kernel_args.args(FILE, "lda_col_combine", pm=pm, ps=ps,
                                                        tiles=_loader.i32(tiles), K=_loader.i32(K)))
    out = cupy.empty_like(lg)
    new_total = None if total is None else cupy.empty_like(total)
    null = total is None    # no running sum: the kernel reads neither sum nor keep
    _loader.launch(fns[2], int(lg.size), _kernel_args.args(
        FILE, "lda_col_normalise", x=lg, m=pm, s=ps, out=out, sum_in=_loader.NULL if null else total,
        sum_out=_loader.NULL if null else new_total, keep=_loader.NULL if null else _loader.contiguous(keep, lg.dtype),
        n=_loader.i64(lg.size), K=_loader.i32(K)))
    return out if total is None else (out, new_total)


def _accumulate(total, x, keep):
    """``total + keep * x`` (keep is 0 or 1, so the product is exact), one pass on the GPU."""
    xp = _backend.get_array_module(x)
    if xp is np:
        return total + keep * x
    return _axpy_kernel()(total, x, keep)


_KERNELS = memo.table("lda.kernels", device_at=None)  # name -> an ElementwiseKernel (compiled per device by CuPy)


def _axpy_kernel():
    k = _KERNELS.get("accumulate")
    if k is None:
        import cupy

        k = _KERNELS["accumulate"] = cupy.ElementwiseKernel("T s, T x, T k", "T y", "y = s + k * x",
                                                            "gpumcmc_lda_accumulate")
    return k


def step(rng, state: LDAState, data: LDAData, fixed_phi: bool = False, loglik: bool = False):
    """One sweep of every chain: z for every token, counts, then theta and (unless ``fixed_phi``) phi.

    ``loglik=True``: ``info.loglik`` is each chain's log-likelihood of the corpus, (C,) float64, under the
    theta and phi of ``state`` (those the sweep draws z from, not the new ones), summed by the z-draw as
    it draws: no pass of its own, and the same draws as without it.

    The sweep's own draws (theta, phi, counts plus positive priors) are valid
    by construction, and the tokens were checked when the data were built, so
    the primitives run without their value checks here.
    """
    xp = _backend.get_array_module(state.theta)
    theta = state.theta
    dtype = theta.dtype
    C, M, K = (int(x) for x in theta.shape)
    phi = _phi_store(state.phi)
    V = int(phi.shape[0])
    ll = xp.zeros(C, np.float64) if loglik else None
    with _validate.validation(False):
        ndk, nwk = zdraw_counts(rng, theta, phi, data, loglik=ll)
        theta = _theta_draw(rng, xp.add(ndk, dtype.type(data.alpha), dtype=dtype), data, C).reshape(C, M, K)
    keep = (state.it[:1] >= data.burn_in).astype(dtype)
    phi_sum = state.phi_sum
    if not fixed_phi:
        with _validate.validation(False):
            phi, phi_sum = dirichlet_columns(rng, xp.add(nwk.reshape(V, C * K), dtype.type(data.beta), dtype=dtype),
                                             _phi_store(state.phi_sum).reshape(V, C * K), keep)
        phi = phi.reshape(V, C, K)
        phi_sum = phi_sum.reshape(V, C, K).transpose(1, 0, 2)
    theta_sum = _accumulate(state.theta_sum, theta, keep)
    return LDAState(theta, phi.transpose(1, 0, 2), phi_sum, theta_sum, state.it + 1), LDAInfo(ll)


# ---------------------------------------------------------------------------
# Data-parallel sweeps: the documents split over devices
# ---------------------------------------------------------------------------

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
        owners = _device_owners(shards)
        thetas, theta_sums, phis, zeros = [], [], [], []
        for i, (j, data) in enumerate(zip(owners, datas)):
            with shards.on(i):
                thetas.append(xp.full((C, data.n_docs, K), 1.0 / K, dtype))
                theta_sums.append(xp.zeros((C, data.n_docs, K), dtype))
                phis.append(_checked_start(phi_start, xp, int(n_words), C, K, dtype) if j == i else phis[j])
                zeros.append(xp.zeros((int(n_words), C, K), dtype) if j == i else zeros[j])
        return datas, LDAShardedState(tuple(thetas), tuple(theta_sums), tuple(phis), tuple(zeros), 0)
    gens = _local_rngs(rng, shards)
    for i, data in enumerate(datas):
        with shards.on(i):
            theta, nwk = _start_local(gens[i], data, C, K, dtype)
            thetas.append(theta)
            nwks.append(xp.ascontiguousarray(nwk))
    _catch_up(rng, gens)
    shards.allreduce(nwks)
    owners = _device_owners(shards)
    zeros, keeps = [], []       # the running sums' start, and keep = 0 (none kept yet)
    for i, j in enumerate(owners):
        with shards.on(i):
            zeros.append(xp.zeros((int(n_words), C, K), dtype) if j == i else zeros[j])
            keeps.append(xp.zeros((), dtype) if j == i else keeps[j])
    phis, _ = _draw_phi(rng, shards, nwks, zeros, beta, keeps)
    theta_sums = []
    for i, th in enumerate(thetas):
        with shards.on(i):
            theta_sums.append(xp.zeros_like(th))
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
    owners = _device_owners(shards)
    made: dict = {}     # (dtype, kept) -> one 0-d keep array per local shard (0 or 1, on its device)

    def keeps_for(it: int, burn_in: int, dt):
        key = (np.dtype(dt).str, it >= burn_in)
        if key not in made:
            out = []
            for i, j in enumerate(owners):
                with shards.on(i):
                    out.append(xp.full((), float(key[1]), dt) if j == i else out[j])
            made[key] = out
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
            theta_sums = []
            for i, th in enumerate(thetas):
                with shards.on(i):
                    theta_sums.append(_accumulate(state.theta_sum[i], th, keeps[i]))
        return (LDAShardedState(tuple(thetas), tuple(theta_sums), tuple(phis), tuple(phi_sums), state.it + 1),
                LDAInfo(tuple(lls) if loglik else None))

    return sweep


def sharded_loglik(lls, shards: Shards):
    """``(C,)`` float64 host array: the per-shard sums of a sharded sweep's ``info.loglik`` summed over every
    shard (one all-reduce of C values, then one wait)."""
    xp = shards.xp
    bufs = []
    for i, ll in enumerate(lls):
        with shards.on(i):
            bufs.append(xp.array(ll, dtype=np.float64, copy=True))
    return np.asarray(_backend.to_host(shards.allreduce(bufs)[0]), dtype=np.float64)


def sharded_log_likelihood(state: LDAShardedState, datas, shards: Shards):
    """``(C,)`` float64 host array: each chain's log-likelihood of the whole corpus (summed over shards)."""
    xp = shards.xp
    bufs = []
    for i, data in enumerate(datas):
        with shards.on(i):
            th, ph = state.theta[i], state.phi[i]
            vals = [log_likelihood(th[c], ph[:, c], data.rows, data.cols) for c in range(th.shape[0])]
            bufs.append(xp.ascontiguousarray(xp.stack(vals).astype(np.float64)))
    return np.asarray(_backend.to_host(shards.allreduce(bufs)[0]), dtype=np.float64)


def allreduce_bytes(n_words: int, n_components: int, n_chains: int = 1) -> int:
    """Bytes all-reduced per sweep with the documents split over devices: n_wk, ``V C K`` int32 counts."""
    return 4 * int(n_words) * int(n_chains) * int(n_components)


def log_likelihood(theta, phi, rows, cols, chunk: int | None = None):
    """``sum_t log sum_k theta[d_t, k] phi[w_t, k]`` in chunks (no tokens x K array)."""
    xp = _backend.get_array_module(theta)
    chunk = chunk or max(4096, (1 << 25) // theta.shape[1])
    total = xp.zeros((), np.float64)
    for s in range(0, int(rows.size), chunk):
        r, c = rows[s:s + chunk], cols[s:s + chunk]
        p = (theta[r] * phi[c]).sum(axis=1, dtype=np.float64)
        total = total + xp.log(xp.maximum(p, 1e-300)).sum()
    return total


def _monitored(step_fn, read, plain_fn=None):
    """``(sweep, monitor)``: ``step_fn`` (a sweep with ``loglik=True``) that keeps its ``info.loglik`` aside
    and reports an empty info to the run driver (nothing stored per sweep), and the monitor's function,
    ``read(loglik)`` of the latest sweep's sums (the state is not read: those sums score the state the
    sweep started from, so the value at iteration i is the log-likelihood after i - 1 sweeps).

    ``plain_fn``, the same sweep without the sums, runs where no monitor reads the sweep: the run driver
    sets ``sweep.monitored`` before each call (see :func:`gpumcmc.sampling.run`), so the sums cost only the
    monitored sweeps. Under a CUDA graph (:func:`gpumcmc.sampling.graph_step`) the driver leaves it set and
    the captured sweep always sums; its ``loglik`` is the array every replay writes, so the monitor reads
    the latest replay's sums.
    """
    last = [None]

    class _Sweep:
        monitored = True

        def __call__(self, rng, state):
            if self.monitored or plain_fn is None:
                state, info = step_fn(rng, state)
                last[0] = info.loglik
            else:
                state, _ = plain_fn(rng, state)
            return state, LDAInfo()

    def monitor(state):
        return read(last[0])

    return _Sweep(), monitor


def _lda_shards(devices, backend) -> Shards:
    """``devices`` as :class:`~gpumcmc.shards.Shards`, its form checked on the host before any GPU is asked."""
    return resolve(devices, backend, "the documents")[0]


class LDA(mixin("TransformerMixin"), Estimator):
    """Latent Dirichlet allocation by uncollapsed Gibbs sampling, on the GPU or NumPy.

    Parameters follow scikit-learn's ``LatentDirichletAllocation``:
    ``doc_topic_prior`` (alpha) and ``topic_word_prior`` (beta) default to
    ``1 / n_components``. ``n_iter`` sweeps are kept after ``burn_in``;
    ``components_`` and ``doc_topic_`` are posterior means over kept sweeps.
    ``checkpoint=path`` saves the sampler every ``checkpoint_every`` sweeps;
    fitting again with the same path and data resumes where it stopped, with
    the same draws as an uninterrupted fit.

    ``n_chains`` independent chains run together (one launch per stage for
    all of them). Topics are not identified across chains (any permutation of
    them is as likely), so ``components_`` and ``doc_topic_`` come from one
    chain, ``best_chain_``, the one with the highest final log-likelihood,
    and so does ``loglik_trace_`` (iterations, values); ``loglik_traces_``
    holds every chain's values, shape ``(n_chains, n)``, and :meth:`to_arviz`
    returns them with a chain axis.

    The log-likelihood per token (every ``monitor_every`` sweeps and at the
    last) is summed by the z-draw itself, ``log sum_k theta_dk phi_wk`` of
    each token as it draws (no pass of its own): the value recorded at sweep
    ``i`` scores the theta and phi that sweep ``i`` drew from, i.e. the state
    after ``i - 1`` sweeps (the last one, the state before the final sweep).

    ``start`` is where the chains begin. ``"seeded"`` starts every chain from
    topics seeded by documents picked k-means++-style (:func:`seeded_topics`)
    and theta = 1 / K; ``"random"`` gives every token a topic drawn at random
    and draws theta and phi given those (the default of earlier versions,
    whose draws it keeps); ``"auto"``, the default, is the seeded start where
    K times the corpus' tokens is at most ``config.lda_seed_exact_work`` (2**26) and at
    least K documents have tokens, the random start elsewhere. On small
    planted corpora (K = 10, V = 500, 1,000 documents of 80 tokens, NumPy) a
    single chain from the random start stuck with two topics merged in 5 of
    20 corpora, the ``lda`` package's collapsed Gibbs in 2 of 20, the
    default (seeded there) in 1 of 20. On large corpora the default keeps
    the random start, which needs no work on the host; there
    ``start="seeded"`` reads the tokens of at most ``max(2 K, ...)``
    documents on the host (see :func:`seeded_topics`). The default changed from ``"random"``
    to ``"auto"``, so default fits of small corpora draw differently from
    earlier versions; ``start="random"`` gives the earlier draws.

    Choosing a model (``n_components``, the priors): compare held-out
    documents by ``perplexity(X_test, method="completion")`` (document
    completion: theta fitted on half of each document's tokens, the other half
    scored); the default ``method="full"`` scores the tokens theta was fitted
    on, which flatters larger models.

    ``graph=True`` (GPU) captures the sweep once as a CUDA graph and replays
    it, one launch per sweep (:func:`gpumcmc.sampling.graph_step`), with the
    same draws; it pays where a sweep is short, bound by its launches and
    their Python, and gains little on corpora of millions of tokens. The
    graph keeps a second copy of the sampler's state and temporaries, so the
    default (None) takes it below ``config.lda_graph_max_tokens`` tokens (all chains).

    ``devices`` splits the documents over devices (data-parallel Gibbs):
    ``"all"``, a GPU id, a list of ids, or a :class:`gpumcmc.shards.Shards`
    (:func:`gpumcmc.shards.one_device` for parts on one GPU,
    ``Shards(n_virtual=k)`` for parts on NumPy, :func:`gpumcmc.shards.worker_shards`
    in a Dask task). Each shard holds whole documents, about the same number
    of tokens in each (:func:`document_bounds`), with their theta; it draws
    its tokens' topics and its theta; the word-topic counts are summed over
    the shards (one all-reduce of ``V K n_chains`` int32 values per sweep,
    NCCL between GPUs) and phi is drawn from the sums with the same key on
    every device (:func:`make_sharded_step`). The sharded sweep runs
    eagerly, never from a CUDA graph, and does not checkpoint.
    The draws are those of ``devices=None`` for any number of shards, bit
    for bit, with the fused z-draw and with the two-kernel one alike: every
    shard draws its tokens and documents with the Philox counters and
    generator offsets that one device gives them (see :func:`init_sharded`).
    The log-likelihood trace is a sum over shards, equal to one device's but
    for the rounding of that sum. ``doc_topic_`` holds this process's documents
    (all of them, but in a Dask task); ``n_shards_`` and ``doc_bounds_``
    record the split.

    Examples
    --------
    >>> import numpy as np
    >>> from gpumcmc.models import LDA
    >>> X = np.random.default_rng(0).poisson(1.0, size=(20, 30))
    >>> lda = LDA(n_components=3, n_iter=20, burn_in=10, random_state=0, progress=False, backend="numpy")
    >>> theta = lda.fit_transform(X)
    >>> theta.shape, lda.components_.shape
    ((20, 3), (3, 30))
    """

    # Checked by scikit-learn at fit where it imports (the own checks in fit_transform run without it).
    # devices (None, "all", ids or a Shards) and random_state (an int, a SeedSequence or a generator) are
    # checked where they are resolved; dtype by gpumcmc's float-dtype check.
    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "doc_topic_prior": [None, Interval(Real, 0, None, closed="neither")],
        "topic_word_prior": [None, Interval(Real, 0, None, closed="neither")],
        "n_iter": [Interval(Integral, 1, None, closed="left")],
        "burn_in": [Interval(Integral, 0, None, closed="left")],
        "transform_iter": [Interval(Integral, 1, None, closed="left")],
        "monitor_every": [Interval(Integral, 1, None, closed="left")],
        "random_state": "no_validation",
        "dtype": "no_validation",
        "progress": ["boolean"],
        "backend": [None, StrOptions({"numpy", "cupy"})],
        "checkpoint": [None, str, os.PathLike],
        "checkpoint_every": [Interval(Integral, 1, None, closed="left")],
        "n_chains": [Interval(Integral, 1, None, closed="left")],
        "graph": [None, "boolean"],
        "devices": "no_validation",
        "start": [StrOptions({"auto", "random", "seeded"})],
    }

    def __init__(self, n_components=10, doc_topic_prior=None, topic_word_prior=None, n_iter=200, burn_in=100,
                 transform_iter=50, monitor_every=10, random_state=None, dtype="float32", progress=True,
                 backend=None, checkpoint=None, checkpoint_every=100, n_chains=1, graph=None, devices=None,
                 start="auto"):
        self.n_components = n_components
        self.doc_topic_prior = doc_topic_prior
        self.topic_word_prior = topic_word_prior
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.transform_iter = transform_iter
        self.monitor_every = monitor_every
        self.random_state = random_state
        self.dtype = dtype
        self.progress = progress
        self.backend = backend
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every
        self.n_chains = n_chains
        self.graph = graph
        self.devices = devices
        self.start = start

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # X holds word counts: non-negative integers. scikit-learn has no tag for counts; "categorical"
        # with "positive_only" is the one that makes its checks pass non-negative integers.
        tags.input_tags.positive_only = True
        tags.input_tags.categorical = True
        # transform's output has the dtype parameter's precision, whatever X's dtype.
        tags.transformer_tags.preserves_dtype = []
        return tags

    def _expected_failed_checks(self):
        why = ("fit_transform returns doc_topic_, the fit's posterior mean of theta, and transform draws theta "
               "anew with the topics fixed: two Monte Carlo estimates of one mean, which agree to their Monte "
               "Carlo error, not to the check's 0.01.")
        return {"check_transformer_general": why, "check_transformer_data_not_an_array": why}

    def _priors(self):
        K = self.n_components
        if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
            raise ValueError(f"n_components must be a positive integer, got {K!r}.")
        K = int(K)
        a = 1.0 / K if self.doc_topic_prior is None else float(self.doc_topic_prior)
        b = 1.0 / K if self.topic_word_prior is None else float(self.topic_word_prior)
        if not (a > 0 and b > 0):
            raise ValueError("doc_topic_prior and topic_word_prior must be positive.")
        return K, a, b

    def fit(self, X, y=None):
        self.fit_transform(X)
        return self

    def _check_settings(self):
        K, a, b = self._priors()
        C = self.n_chains
        if isinstance(C, bool) or not isinstance(C, (int, np.integer)) or C < 1:
            raise ValueError(f"n_chains must be a positive integer, got {C!r}.")
        if self.start not in ("auto", "random", "seeded"):
            raise ValueError(f"start must be 'auto', 'random' or 'seeded', got {self.start!r}.")
        for name, least in (("n_iter", 1), ("burn_in", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < least:
                raise ValueError(f"{name} must be an integer >= {least}, got {v!r}: the posterior means "
                                 "(components_, doc_topic_) average the sweeps after burn_in, so at least one "
                                 "is needed.")
        return K, a, b

    def fit_transform(self, X, y=None):
        K, a, b = self._validate_settings(self._check_settings)
        C = self.n_chains
        if self.devices is not None:
            return self._fit_sharded(X, K, a, b, int(C))
        xp = self._xp()
        rng = self._make_rng()
        rows, cols, M, V = tokens_from(X, xp)
        data, state = init(rng, rows, cols, M, V, K, a, b, self.dtype, burn_in=int(self.burn_in), n_chains=int(C),
                           phi_start=self._phi_start(rng, rows, cols, M, V, K, int(C)))
        n_tok = int(rows.size)
        sweep, ll = _monitored(functools.partial(step, data=data, loglik=True), lambda v: v / n_tok,
                               functools.partial(step, data=data))
        trace = run(sweep, state, rng, int(self.n_iter), burn_in=int(self.burn_in),
                    monitors=[Monitor("loglik_per_token", ll, every=int(self.monitor_every))],
                    progress=self.progress, desc="LDA", checkpoint=self.checkpoint,
                    checkpoint_every=int(self.checkpoint_every),
                    graph=(n_tok * C < config.lda_graph_max_tokens) if self.graph is None else bool(self.graph))
        s = trace.state
        n_kept = max(int(self.n_iter), 1)
        it, vals = trace.monitors["loglik_per_token"]
        vals = np.asarray(vals, dtype=float).reshape(len(it), C).T      # (chain, monitor point)
        best = int(np.argmax(vals[:, -1]))
        self.trace_ = trace
        self.n_features_in_ = V
        self.n_tokens_ = n_tok
        self.best_chain_ = best
        self.phi_ = s.phi_sum[best] / n_kept                   # (V, K) on the backend
        self.components_ = _backend.to_host(self.phi_.T)      # (K, V)
        self.doc_topic_ = _backend.to_host(s.theta_sum[best] / n_kept)
        self.loglik_trace_ = (np.asarray(it), vals[best])
        self.loglik_traces_ = vals
        return self.doc_topic_

    def _fit_sharded(self, X, K, a, b, C):
        shards = _lda_shards(self.devices, self.backend)
        if self.checkpoint is not None:
            raise ValueError("checkpoint= is not available with devices=: fit on one device (devices=None) to "
                             "checkpoint, or drop checkpoint.")
        if self.graph:
            raise ValueError("graph=True needs devices=None: the sweep over several devices is not captured as "
                             "a CUDA graph; leave graph at None or False.")
        from gpumcmc.random import default_rng

        gpu = shards.xp is not np
        rows, cols, M, V = tokens_from(X, np)
        bounds, parts = shard_corpus(rows, cols, M, shards)
        n_tok = int(rows.size)
        rng = default_rng(self.random_state, backend="cupy" if gpu else "numpy")
        phi_start = self._phi_start(rng, rows, cols, M, V, K, C)
        del rows, cols
        with shards.on(0):
            datas, state = init_sharded(rng, parts, shards, V, K, a, b, self.dtype, burn_in=int(self.burn_in),
                                        n_chains=C, phi_start=phi_start)
            del parts
            sweep, ll = _monitored(make_sharded_step(datas, shards, loglik=True),
                                   lambda v: sharded_loglik(v, shards) / n_tok, make_sharded_step(datas, shards))
            trace = run(sweep, state, rng, int(self.n_iter), burn_in=int(self.burn_in),
                        monitors=[Monitor("loglik_per_token", ll, every=int(self.monitor_every))],
                        progress=self.progress, desc="LDA", n_chains=C)
            s = trace.state
            n_kept = max(int(self.n_iter), 1)
            it, vals = trace.monitors["loglik_per_token"]
            vals = np.asarray(vals, dtype=float).reshape(len(it), C).T
            best = int(np.argmax(vals[:, -1]))
            self.phi_ = s.phi_sum[0][:, best] / n_kept             # (V, K) on local shard 0's device
            doc_topic = []
            for i, t in enumerate(s.theta_sum):
                with shards.on(i):
                    doc_topic.append(_backend.to_host(t[best] / n_kept))
            self.doc_topic_ = np.concatenate(doc_topic)
        self.trace_ = trace
        self.n_features_in_ = V
        self.n_tokens_ = n_tok
        self.best_chain_ = best
        self.components_ = _backend.to_host(self.phi_.T)
        self.loglik_trace_ = (np.asarray(it), vals[best])
        self.loglik_traces_ = vals
        self.n_shards_ = shards.world
        self.doc_bounds_ = bounds
        return self.doc_topic_

    def _phi_start(self, rng, rows, cols, M, V, K, C):
        """The topics every chain starts from, on the array module of ``rows``: :func:`seeded_topics`' (its host
        generator seeded by ``rng``'s key, which ``rng`` does not advance) for ``start="seeded"``, and for
        ``"auto"`` where K times the tokens is at most ``config.lda_seed_exact_work`` and at least K documents have
        tokens; else None, the random start."""
        if self.start == "random" or (self.start == "auto" and K * int(rows.size) > config.lda_seed_exact_work):
            return None
        parts = _seed_picks(rows, cols, M, V, K, C, [int(k) for k in rng.key], fallback=self.start == "auto")
        if parts is None:
            return None
        return _seeded_phi(parts, V, C, K, _backend.get_array_module(rows), self.dtype)

    def _tokens(self, X):
        """``(rows, cols, M, V)`` of ``X`` on the backend phi_ lives on (a corpus with no token is allowed)."""
        self._check_fitted("phi_")
        xp = _backend.get_array_module(self.phi_)
        return tokens_from(X, xp, n_words=self.n_features_in_, allow_empty=True)

    def _theta(self, X, tokens=None):
        """``(theta (M, K), rows, cols)``: each document's theta averaged over ``transform_iter`` Gibbs sweeps
        of theta with phi fixed (half of them burn-in), fitted on the tokens ``rows``, ``cols`` (by default
        all of ``X``'s); a document with no token gets the prior mean, 1 / K."""
        K, a, b = self._priors()
        rows, cols, M, V = self._tokens(X) if tokens is None else tokens
        xp = _backend.get_array_module(self.phi_)
        if rows.size == 0:
            return xp.full((M, K), 1.0 / K, dtype=np.dtype(self.dtype)), rows, cols
        from gpumcmc.random import default_rng

        # On the backend phi_ lives on (a fit with devices= may differ from self.backend); the same draws.
        rng = default_rng(self.random_state, backend="numpy" if xp is np else "cupy")
        n_b = max(1, int(self.transform_iter) // 2)
        data, state = init(rng, rows, cols, M, V, K, a, b, self.dtype, burn_in=n_b)
        # phi is the fitted one; theta starts uniform, so each token's weights sum to the mean of its word's
        # topic probabilities, which is positive for every word seen in training.
        xp_t = _backend.get_array_module(state.theta)
        state = state._replace(phi=self.phi_.astype(state.phi.dtype)[None],
                               theta=xp_t.full_like(state.theta, 1.0 / K))
        for _ in range(n_b + max(1, int(self.transform_iter) - n_b)):
            state, _ = step(rng, state, data, fixed_phi=True)
        theta = state.theta_sum[0] / max(1, int(self.transform_iter) - n_b)
        empty = xp.bincount(rows, minlength=M) == 0
        theta[empty] = 1.0 / K          # the prior mean, not one noisy draw from the prior
        return theta, rows, cols

    def transform(self, X):
        """Doc-topic distributions of new documents, averaged over Gibbs sweeps of theta with phi fixed.

        A document with no token (in the fitted vocabulary) gets the prior mean, ``1 / n_components`` in
        every topic."""
        return _backend.to_host(self._theta(X)[0])

    def _held_out(self, X, method: str):
        """``(log-likelihood, tokens scored)`` of ``X`` by ``method`` (see :meth:`score`)."""
        if method not in ("completion", "full"):
            raise ValueError(f"method must be 'completion' or 'full', got {method!r}.")
        rows, cols, M, V = self._tokens(X)
        if rows.size == 0:
            raise ValueError("X has no token in the fitted vocabulary; there is nothing to score.")
        if method == "full":
            theta, _, _ = self._theta(X, (rows, cols, M, V))
            return float(log_likelihood(theta.astype(self.phi_.dtype), self.phi_, rows, cols)), int(rows.size)
        est, ev = completion_split(rows)
        if not bool(ev.any()):
            raise ValueError("method='completion' needs documents of at least 2 tokens (one to fit theta on, "
                             "one to score); X has none. Use method='full', or longer documents.")
        theta, _, _ = self._theta(X, (rows[est], cols[est], M, V))
        r, c = rows[ev], cols[ev]
        return float(log_likelihood(theta.astype(self.phi_.dtype), self.phi_, r, c)), int(r.size)

    def score(self, X, y=None, method: str = "full"):
        """Log-likelihood of ``X`` under the fitted topics, summed over the tokens scored.

        ``method="completion"`` (document completion, the held-out measure to choose models by, e.g.
        ``n_components``): each document's tokens are split in two halves (:func:`completion_split`),
        theta is fitted on the first half (as :meth:`transform` does, phi fixed) and the second half is
        scored, ``sum log sum_k theta_dk phi_wk`` over its tokens. Documents of one token only add to theta.

        ``method="full"`` (the default, as in earlier versions): theta fitted on all of a document's tokens
        and those same tokens scored. It measures how well the topics can fit the documents, not how well
        they predict unseen words, so it favours larger models: use it to follow a fit, not to compare
        models.
        """
        return self._held_out(X, method)[0]

    def perplexity(self, X, method: str = "full"):
        """``exp(-log-likelihood per token scored)`` of ``X``; ``method`` as for :meth:`score`
        (``"completion"`` for model choice: the perplexity of each document's second half given its first)."""
        ll, n = self._held_out(X, method)
        return float(np.exp(-ll / n))

    def top_words(self, vocab=None, n=10):
        """The ``n`` most probable words of each topic (indices when ``vocab`` is None)."""
        self._check_fitted("components_")
        idx = np.argsort(-self.components_, axis=1)[:, :n]
        if vocab is None:
            return idx.tolist()
        vocab = np.asarray(vocab)
        return [list(vocab[i]) for i in idx]

    def to_arviz(self):
        """The log-likelihood per token as ArviZ data, ``(chain, draw)`` at the monitor's iterations."""
        self._check_fitted("trace_")
        return to_arviz({"loglik_per_token": np.asarray(self.loglik_traces_, dtype=float)})

