"""Text corpora for topic models: the ``lda`` package's Reuters subset, UCI bag-of-words, synthetic LDA corpora."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from .. import backend as _backend

__all__ = ["load_reuters", "load_uci_bow", "synthetic_lda_corpus"]


def _lda_dir() -> Path:
    try:
        import lda  # noqa: F401
    except ImportError:
        raise ImportError("load_reuters reads the Reuters subset bundled with the 'lda' package; "
                          "install it with `pip install lda`.") from None
    return Path(lda.__file__).parent / "tests"


def load_reuters():
    """The Reuters subset bundled with the ``lda`` package: 395 documents, 4,258 words.

    Returns ``(X, vocab, titles)``: ``X`` a SciPy CSR count matrix (395, 4258)
    of int64, ``vocab`` and ``titles`` lists of str.
    """
    import scipy.sparse as sp

    d = _lda_dir()
    rows, cols, vals = [], [], []
    with open(d / "reuters.ldac") as f:
        for i, line in enumerate(f):
            for item in line.split()[1:]:
                w, c = item.split(":")
                rows.append(i)
                cols.append(int(w))
                vals.append(int(c))
    vocab = (d / "reuters.tokens").read_text().split()
    titles = [t for t in (d / "reuters.titles").read_text().splitlines() if t.strip()]
    X = sp.csr_matrix((np.array(vals, np.int64), (np.array(rows), np.array(cols))),
                      shape=(i + 1, len(vocab)))
    return X, vocab, titles


def _open(path):
    path = Path(path)
    return gzip.open(path, "rt") if path.suffix.lower() == ".gz" else open(path)


def load_uci_bow(docword_path, vocab_path=None):
    """A corpus in the UCI bag-of-words format (``docword.*.txt[.gz]``, ``vocab.*.txt``).

    Returns ``(X, vocab)``: ``X`` a SciPy CSR count matrix (D, W) and
    ``vocab`` a list of str (None without ``vocab_path``). Ids in the file are
    1-based.
    """
    import scipy.sparse as sp

    with _open(docword_path) as f:
        try:
            D, W, NNZ = (int(f.readline()) for _ in range(3))
        except ValueError:
            raise ValueError(f"{docword_path} does not start with the three UCI header lines D, W, NNZ; "
                             "pass a docword.*.txt file of the UCI bag-of-words format.") from None
        a = np.loadtxt(f, dtype=np.int64, ndmin=2) if NNZ else np.zeros((0, 3), np.int64)
    if a.size == 0:
        a = np.zeros((0, 3), np.int64)
    if a.shape[1:] != (3,):
        raise ValueError(f"{docword_path} has lines of {a.shape[1]} numbers after its header; each must be "
                         "'doc word count'.")
    if a.shape[0] != NNZ:
        raise ValueError(f"{docword_path} declares {NNZ} entries of 'doc word count' but holds {a.shape[0]}.")
    if NNZ and a[:, 2].min() < 0:
        raise ValueError(f"{docword_path} holds a negative count (line {int(np.argmax(a[:, 2] < 0)) + 4}); counts "
                         "are numbers of occurrences.")
    if NNZ and (a[:, 0].min() < 1 or a[:, 0].max() > D or a[:, 1].min() < 1 or a[:, 1].max() > W):
        raise ValueError(f"{docword_path} has ids outside 1..D or 1..W; ids in this format are 1-based.")
    X = sp.csr_matrix((a[:, 2], (a[:, 0] - 1, a[:, 1] - 1)), shape=(D, W))
    vocab = None
    if vocab_path is not None:
        with _open(vocab_path) as f:
            vocab = [line.strip() for line in f if line.strip()]
        if len(vocab) != W:
            raise ValueError(f"{vocab_path} has {len(vocab)} words but {docword_path} declares W = {W}.")
    return X, vocab


def synthetic_lda_corpus(n_docs=1000, n_words=5000, n_tokens=None, doc_length=100, n_components=10, zipf=1.0,
                         doc_topic_prior=0.1, topic_concentration=0.1, random_state=None, backend=None):
    """A corpus drawn from the LDA model, with Zipf word frequencies overall.

    Each topic ``phi_k ~ Dir(c * V * f)`` where ``f_w ∝ (w + 1)^-zipf`` and
    ``c = topic_concentration``, so topics are sparse variations of the Zipf
    frequencies; ``theta_d ~ Dir(doc_topic_prior)``; each document has
    ``doc_length`` tokens (``n_tokens // n_docs`` when ``n_tokens`` is given,
    the remainder spread over the first documents). Topics and words are
    drawn by one vectorised inverse-CDF search each, so the 100 M-token corpora take
    seconds on the GPU.

    Returns ``(rows, cols, theta, phi)``: token arrays (document and word ids,
    sorted by document) on the backend, and the planted ``theta`` (M, K) and
    ``phi`` (K, V).
    """
    from ..random import default_rng

    from .._validate import check_int

    M, V, K = check_int(n_docs, "n_docs"), check_int(n_words, "n_words"), check_int(n_components, "n_components")
    doc_length = check_int(doc_length, "doc_length", 0)
    n_tokens = None if n_tokens is None else check_int(n_tokens, "n_tokens", 0, "or None")
    for value, name in ((zipf, "zipf"), (doc_topic_prior, "doc_topic_prior"),
                        (topic_concentration, "topic_concentration")):
        if isinstance(value, (bool, str)) or not np.isfinite(float(value)) or float(value) < 0 or (
                name != "zipf" and float(value) == 0):
            raise ValueError(f"{name} must be a finite number, {'at least 0' if name == 'zipf' else 'above 0'}, "
                             f"got {value!r}.")
    rng = default_rng(random_state, backend=backend)
    xp = _backend.get_backend(backend)
    if n_tokens is not None:
        base, extra = divmod(int(n_tokens), M)
        lengths = np.full(M, base, np.int64)
        lengths[:extra] += 1
    else:
        lengths = np.full(M, int(doc_length), np.int64)
    f = (np.arange(1, V + 1, dtype=np.float64)) ** -float(zipf)
    f /= f.sum()
    conc = xp.asarray(np.maximum(topic_concentration * V * f, 1e-3))
    phi = rng.dirichlet(xp.broadcast_to(conc, (K, V)).copy(), dtype=np.float64)
    theta = rng.dirichlet(xp.full((M, K), float(doc_topic_prior)), dtype=np.float64)
    # Document of each token: its position among the documents' end offsets (CuPy's repeat takes no array).
    ends = xp.asarray(np.cumsum(lengths))
    rows = xp.searchsorted(ends, xp.arange(int(lengths.sum()), dtype=np.int64), side="right").astype(np.int64)
    # Topic of each token, then its word, by inverse CDF on row-offset cumulative sums: row r's CDF
    # lies in [r, r + 1], so one searchsorted over the flattened (rows, K) CDF serves every row.
    T = int(lengths.sum())
    cdf = xp.cumsum(theta, axis=1)
    cdf = (cdf / cdf[:, -1:] + xp.arange(M, dtype=np.float64)[:, None]).ravel()
    u = rng.random(T) * (1 - 1e-12)
    z = xp.searchsorted(cdf, rows + u, side="right") - rows * K
    z = xp.clip(z, 0, K - 1)
    cdf = xp.cumsum(phi, axis=1)
    cdf = (cdf / cdf[:, -1:] + xp.arange(K, dtype=np.float64)[:, None]).ravel()
    u = rng.random(T) * (1 - 1e-12)
    cols = xp.clip(xp.searchsorted(cdf, z + u, side="right") - z * V, 0, V - 1).astype(np.int64)
    return rows, cols, theta, phi
