"""The corpus as a token stream (:func:`tokens_from`), its halves for document completion
(:func:`completion_split`) and the seeded start (:func:`seeded_topics`)."""

from __future__ import annotations

import numpy as np

from gpumcmc import backend as _backend
from gpumcmc._config import config
from gpumcmc.sampling._estimator import _is_sparse


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
    listed = isinstance(X, (list, tuple)) and (len(X) == 0 or not np.isscalar(X[0]))
    if listed:
        rows, cols, M, V = _tokens_from_list(X, n_words, name)
        n_tokens = rows.size
    else:
        r, c, n, M, V = _count_entries(X, n_words, name)
        n_tokens = n.sum()
    if M == 0 or not (n_tokens or allow_empty):
        raise ValueError(f"{name} is an empty corpus (no tokens); pass documents with at least one word.")
    if not n_tokens:
        return xp.zeros(0, np.int64), xp.zeros(0, np.int64), int(M), int(V)
    rows, cols = (xp.asarray(rows), xp.asarray(cols)) if listed else _expand(r, c, n, xp)
    return rows, cols, int(M), int(V)


def _tokens_from_list(X, n_words, name):
    """``(rows, cols, M, V)`` on the host from a list of token-id arrays (one per document), checked."""
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
    return rows, cols, len(docs), V


def _count_entries(X, n_words, name):
    """``(r, c, n, M, V)``: the non-zero entries of a count matrix (dense or sparse) on the host, checked and
    sorted by document then word, and its shape."""
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
    # A CSR matrix in canonical form and np.nonzero give the entries in order already; others are sorted
    # here, entries (not the more numerous tokens).
    if r.size > 1 and not bool(np.all((r[1:] > r[:-1]) | ((r[1:] == r[:-1]) & (c[1:] >= c[:-1])))):
        order = np.lexsort((c, r))
        r, c, data = r[order], c[order], data[order]
    return r, c, data, M, V


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


def seeded_topics(rows, cols, n_docs: int, n_words: int, n_components: int, n_chains: int = 1, seed=None,
                  dtype="float32", max_candidates: int | None = None):
    """``(V, C, K)`` starting topics, one set per chain, from documents picked by k-means++ seeding.

    For each chain, K documents are picked one after another, each with probability proportional to the
    squared cosine distance of its word counts to the nearest document already picked (the first in
    proportion to its length); topic k starts as the word frequencies of document k, mixed half and half
    with the corpus' (so every word of the corpus has a positive weight in every topic). ``LDA(start=...)``
    uses it; pass it as ``init(..., phi_start=...)`` to start a chain by hand.

    The work is bounded whatever the corpus: the documents are picked among at most ``max_candidates`` of
    them, drawn at random (default ``max(2 K, config.lda_seed_exact_work // (K * mean tokens per
    document))``), and only their tokens are read on the host. While K times the candidates' tokens is at
    most ``config.lda_seed_exact_work`` the cosines are exact; beyond, they are those of a
    ``config.lda_seed_sketch``-wide count sketch (each word added, with a random sign, to one column), whose
    inner products are the exact ones on average. ``seed``: of the host generator
    (``numpy.random.default_rng``). ``rows``, ``cols``: NumPy or CuPy, ``rows`` best sorted (as
    :func:`tokens_from` gives them). Returns a NumPy array.
    """
    parts = _seed_picks(rows, cols, n_docs, n_words, n_components, n_chains, seed, max_candidates)
    return _seeded_phi(parts, n_words, n_chains, n_components, np, dtype)


def _seed_picks(rows, cols, n_docs, n_words, n_components, n_chains, seed, max_candidates=None, fallback=False):
    """The host part of :func:`seeded_topics`: ``(uni (V,), picks)``, the corpus' word frequencies and, per
    chain, ``(words, topics, freqs)`` of the picked documents' words. ``fallback``: None, not a ValueError,
    where fewer than K documents have tokens."""
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
        # the picked documents' word frequencies, from their tokens alone, counted by (candidate, word)
        sel = np.full(P, -1, np.int64)
        sel[picked] = np.arange(K)
        keep = sel[r] >= 0
        key, count = np.unique(r[keep] * V + w[keep], return_counts=True)
        doc, word = np.divmod(key, V)
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
