"""Latent Dirichlet allocation by uncollapsed Gibbs sampling.

One sweep, for every token at once:

1. ``z_t ~ Cat(theta[d_t] * phi[w_t])``, the tokens in the cache-friendly :func:`gpumcmc.token_order`
   (computed once);
2. the counts ``n_dk`` and ``n_wk`` (no tokens x K array is built). On the GPU, where K is large and theta
   mostly zero (small priors make most of its entries underflow to exactly zero), steps 1 and 2 are one
   kernel (``lda_zdraw``): the tokens are read once a sweep, z is never stored, and a theta row with few
   non-zero entries is read as a compacted list. Elsewhere :func:`gpumcmc.categorical_products` and a
   count kernel take two passes (``init(fused=...)`` chooses). The NumPy twin (method ``"prefix"`` and a
   bincount) draws as the GPU does but where a prefix sum lies within rounding of the search target;
3. ``theta_d ~ Dir(alpha + n_d.)`` by the batched log-space :meth:`gpumcmc.random.Generator.dirichlet`,
   and ``phi_.k ~ Dir(beta + n_.k)`` from log-gammas normalised over each column (:func:`dirichlet_columns`).

With ``step(..., loglik=True)`` the z-draw also sums ``log sum_k theta[d_t, k] phi[w_t, k]``, the total it
forms for the draw anyway, over each chain's tokens: the log-likelihood of the state the sweep started from.

Chains run in the same launches: every array of the state leads with the chain axis, and token ``t`` of
chain ``c`` is row ``c T + t`` of one batched z-draw. ``phi`` and the word counts are stored word-major,
(V, C, K), as the z-draw reads them (the state shows phi's (C, V, K) view): the Dirichlet over words
normalises the columns of one (V, C K) array, every element in flight, where a Dirichlet per topic row
would give each of K rows of V elements to one warp.

The sweep is written once: :func:`gibbs_local` (steps 1 and 2 and theta, the work on the documents) and
:func:`gibbs_update` (phi from the word counts). Past ``burn_in`` each sweep adds to ``theta_sum`` and
``phi_sum`` the posterior means of theta and phi given its counts, ``(n + prior) / (total + L prior)``, not
the draws, whose mean misses a small prior's entries by orders of magnitude (most of their draws underflow). :func:`step` runs them on the whole
corpus, :mod:`.sharded` per shard (bit for bit one device's draws). One device's state keeps its sweep
counter ``it`` on the device, so that ``LDA(graph=...)`` replays the whole sweep from a CUDA graph.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gpumcmc import _validate
from gpumcmc import backend as _backend
from gpumcmc._config import config
from gpumcmc.discrete import token_order
from gpumcmc.random import _gamma
from gpumcmc.random._fill import uniform_at
from gpumcmc.sampling import Overlap

from .ops import (_accumulate_mean, _chain_tokens, _phi_store, _token_counters,
                  dirichlet_columns_counts, dirichlet_counts, fused_counts, zdraw_counts)


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


class LDAState(NamedTuple):
    """Arrays lead with the chain axis (C chains)."""

    theta: object     # (C, M, K) document-topic proportions
    phi: object       # (C, V, K) word-major topic-word distributions (a view of a (V, C, K) array)
    phi_sum: object   # (C, V, K) sum over kept sweeps of E[phi | n_wk] (same layout as phi)
    theta_sum: object  # (C, M, K) sum over kept sweeps of E[theta | n_dk]
    it: object        # (C,) int64 sweeps done (a shard's state, data-parallel: a Python int)


class LDAInfo(NamedTuple):
    """What a sweep reports besides the state."""

    loglik: object = None   # (C,) float64 with step(..., loglik=True): each chain's, at the state given


class GibbsStats(NamedTuple):
    """What a sweep's local part counts over its tokens (summed over shards where the documents are split)."""

    nwk: object       # (V C, K) int32 word-topic counts of the drawn topics (phi store's layout)
    loglik: object    # (C,) float64 log-likelihood of the tokens (loglik=True), else None


def init(rng, rows, cols, n_docs: int, n_words: int, n_components: int, alpha: float, beta: float,
         dtype="float32", burn_in: int = 0, order: bool = True, n_chains: int = 1, fused: bool | None = None,
         sparse: bool | None = None, cache_bytes: int | None = None, phi_start=None):
    """``(data, state)``: the token stream in ``token_order``, and theta, phi drawn given random topics
    (``n_chains`` chains, each from topics of its own).

    Not from the prior: at ``alpha = beta = 1/K`` and K = 1024 most float32 Dirichlet components underflow
    to zero, and many tokens would have no topic with a positive weight. Given the counts, each token's own
    topic has ``theta > 0`` and ``phi > 0``, and the sweep keeps it so.

    ``fused`` (GPU) draws z and counts in one kernel (default: where theta is expected to be mostly zero,
    see :func:`_fused_default`); ``sparse`` (default: K >= ``config.lda_sparse_min_k``) lets that kernel
    read mostly-zero theta rows as compacted lists. Neither changes the draws but for rounding near ties.
    ``cache_bytes`` is passed to :func:`gpumcmc.token_order`. ``phi_start`` ((V, C, K), e.g.
    :func:`seeded_topics`): start from these topics and theta = 1 / K instead (no draw).
    """
    dtype = np.dtype(dtype)
    K, C = int(n_components), _n_chains(n_chains)
    data = _prepare(rows, cols, n_docs, n_words, K, alpha, beta, dtype, burn_in, order, fused, sparse, cache_bytes)
    xp = _backend.get_array_module(data.rows)
    if phi_start is not None:
        phi = _checked_start(phi_start, xp, n_words, C, K, dtype)
        theta = xp.full((C, n_docs, K), 1.0 / K, dtype)
    else:
        theta, nwk = _start_local(rng, data, C, K, dtype)
        phi = dirichlet_columns_counts(rng, nwk.reshape(n_words, C * K), dtype.type(beta))
        phi = phi.reshape(n_words, C, K)
    return data, LDAState(theta, phi.transpose(1, 0, 2), xp.zeros((n_words, C, K), dtype).transpose(1, 0, 2),
                          xp.zeros((C, n_docs, K), dtype), xp.zeros(C, np.int64))


def step(rng, state: LDAState, data: LDAData, fixed_phi: bool = False, loglik: bool = False):
    """One sweep of every chain: z for every token, counts, then theta and (unless ``fixed_phi``) phi.

    ``loglik=True``: ``info.loglik`` is each chain's log-likelihood of the corpus, (C,) float64, under the
    theta and phi of ``state``, summed by the z-draw (the same draws as without it).
    """
    # The sweep's own draws are valid by construction and the tokens were checked when the data were
    # built, so the primitives run without their value checks.
    with _validate.validation(False):
        local = gibbs_local(rng, state, data, loglik=loglik)
        return gibbs_update(rng, local.finish(), local.stats, data.beta, data.burn_in, fixed_phi)


def gibbs_local(rng, state: LDAState, data: LDAData, loglik: bool = False, keeps: dict | None = None) -> Overlap:
    """Steps 1 and 2 of a sweep on ``data``'s documents, then their theta: an :class:`gpumcmc.sampling.Overlap`.

    The z-draw and its counts are queued here; ``stats`` is :class:`GibbsStats`; ``finish()`` draws theta
    from the document counts and returns the state with it and with theta's running sum (with the documents
    split over GPUs, beside the sum of the word counts, which it does not read). ``keeps``: as
    :func:`gibbs_update`'s, the 0/1 weights of the data-parallel sweep, one array a value.
    """
    xp = _backend.get_array_module(state.theta)
    theta = state.theta
    dtype = theta.dtype
    C, M, K = (int(x) for x in theta.shape)
    phi = _phi_store(state.phi)
    ll = xp.zeros(C, np.float64) if loglik else None
    ndk, nwk = zdraw_counts(rng, theta, phi, data, loglik=ll)

    def finish() -> LDAState:
        alpha = dtype.type(data.alpha)
        th = _theta_draw(rng, ndk, alpha, data, C).reshape(C, M, K)
        # the running sum of theta's posterior mean given this sweep's counts (see _accumulate_mean)
        total = _accumulate_mean(state.theta_sum.reshape(C * M, K), ndk, alpha, 1,
                                 _keep_weight(state, data.burn_in, dtype, keeps))
        return state._replace(theta=th, theta_sum=total.reshape(C, M, K))

    return Overlap(GibbsStats(nwk, ll), finish)


def gibbs_update(rng, state: LDAState, stats: GibbsStats, beta: float, burn_in: int, fixed_phi: bool = False,
                 keeps: dict | None = None, drawn: dict | None = None):
    """``(state, info)``: step 3's phi from the summed word counts (unless ``fixed_phi``) and its running sum.

    ``state.it`` past ``burn_in`` adds phi's posterior mean given this sweep's word counts to ``phi_sum``
    (theta's was added by :func:`gibbs_local`'s ``finish``); the 0/1 weight is :func:`_keep_weight`'s, taken
    from ``keeps`` in the data-parallel sweep. ``drawn`` (data-parallel): this sweep's phi draws by the
    ``phi_sum`` they add to, so that the shards of one device draw phi once.
    """
    theta = state.theta
    phi, phi_sum = state.phi, state.phi_sum
    if not fixed_phi:
        keep = _keep_weight(state, burn_in, theta.dtype, keeps)
        phi, phi_sum = _phi_once(drawn, rng, stats.nwk, state.phi_sum, beta, keep)
    return LDAState(theta, phi, phi_sum, state.theta_sum, state.it + 1), LDAInfo(stats.loglik)


def _keep_weight(state: LDAState, burn_in: int, dtype, keeps: dict | None = None):
    """This sweep's 0/1 weight in the running sums, ``it >= burn_in``: 0-d (or (1,)) on the state's device.
    One device keeps ``it`` as a (C,) array and forms it there (so a CUDA graph replays it); the
    data-parallel sweep keeps a Python int, and ``keeps`` (where given) holds one array per value."""
    if not isinstance(state.it, (int, np.integer)):
        return (state.it[:1] >= burn_in).astype(dtype)
    key = (getattr(getattr(state.theta, "device", None), "id", None), np.dtype(dtype).str, state.it >= burn_in)
    if keeps is None or key not in keeps:
        w = _backend.get_array_module(state.theta).full((), float(key[2]), dtype)
        if keeps is None:
            return w
        keeps[key] = w
    return keeps[key]


def _phi_once(drawn, rng, nwk, phi_sum, beta: float, keep):
    """``(phi, phi_sum + keep * E[phi | n_wk])`` as (C, V, K) views, ``phi ~ Dir(beta + n_wk)`` by columns of
    the (V, C K) store (see :func:`._accumulate_mean`); or, where ``drawn`` holds the draw for this
    ``phi_sum``, that draw (``rng`` moved on as it moved)."""
    got = None if drawn is None else drawn.get(id(phi_sum))
    if got is not None:
        rng.advance(got[2] - rng.offset)
        return got[0], got[1]
    store = _phi_store(phi_sum)
    V, C, K = (int(x) for x in store.shape)
    dtype = store.dtype
    p, t = dirichlet_columns_counts(rng, nwk.reshape(V, C * K), dtype.type(beta), store.reshape(V, C * K), keep)
    out = p.reshape(V, C, K).transpose(1, 0, 2), t.reshape(V, C, K).transpose(1, 0, 2)
    if drawn is not None:
        drawn[id(phi_sum)] = (*out, rng.offset)
    return out


def _n_chains(n_chains) -> int:
    C = int(n_chains)
    if isinstance(n_chains, bool) or C != n_chains or C < 1:
        raise ValueError(f"n_chains must be a positive integer, got {n_chains!r}.")
    return C


def _prepare(rows, cols, n_docs, n_words, K, alpha, beta, dtype, burn_in, order, fused, sparse, cache_bytes,
             first_doc: int = 0) -> LDAData:
    """The token stream in ``token_order`` (int32 on the GPU) and init's settings. ``first_doc``: the
    documents are those from ``first_doc`` on of a larger corpus, ordered as in that corpus' stream."""
    xp = _backend.get_array_module(rows)
    if order and rows.size:
        perm = token_order(rows + int(first_doc) if first_doc else rows, cols, K, dtype, cache_bytes=cache_bytes)
        rows, cols = xp.ascontiguousarray(rows[perm]), xp.ascontiguousarray(cols[perm])
    if xp is not np and max(int(n_docs), int(n_words)) < 2**31:
        rows, cols = rows.astype(np.int32), cols.astype(np.int32)   # what the kernels read, converted once
    fused = _fused_default(K, alpha, dtype) if fused is None else bool(fused)
    sparse = K >= config.lda_sparse_min_k if sparse is None else bool(sparse)
    return LDAData(rows, cols, int(n_docs), int(n_words), float(alpha), float(beta), int(burn_in), fused, sparse)


def _fused_default(K: int, alpha: float, dtype) -> bool:
    """Whether init picks the fused z-draw: K >= ``config.lda_fused_min_k`` and at most
    ``config.lda_fused_max_fill`` of theta's entries without a count expected non-zero (each underflows to
    zero with probability about ``exp(alpha * log(smallest subnormal))``)."""
    tiny = np.log(np.finfo(np.dtype(dtype)).smallest_subnormal)      # -103.3 (float32), -744.4 (float64)
    return K >= config.lda_fused_min_k and 1.0 - np.exp(float(alpha) * tiny) <= config.lda_fused_max_fill


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


def _start_local(rng, data, C: int, K: int, dtype):
    """``(theta, n_wk)``: random topics for every token, then theta given them (two generator calls); a shard's
    tokens take their uniforms from the whole corpus' draw."""
    xp = _backend.get_array_module(data.rows)
    T = int(data.rows.size)
    if data.place is None:
        u = rng.random(C * T, dtype=np.float32)
    else:   # what rng.random(C * n_tokens, dtype=float32) gives these tokens, without drawing the others'
        u = uniform_at(xp, _token_counters(data, C), np.float32, rng.key, rng.advance())
    z0 = xp.minimum((u * np.float32(K)).astype(np.int64), K - 1)
    del u
    r_all, c_all = _chain_tokens(data, C)
    ndk, nwk = fused_counts(r_all, c_all, z0, C * data.n_docs, data.n_words * C, K)
    theta = _theta_draw(rng, ndk, dtype.type(data.alpha), data, C).reshape(C, data.n_docs, K)
    return theta, nwk


def _theta_draw(rng, ndk, alpha, data, C: int):
    """``theta ~ Dir(ndk + alpha)`` for the (C M, K) int32 counts of ``data``'s documents and the prior ``alpha``
    (a NumPy scalar of theta's dtype), one generator call; a shard draws chain ``c``'s rows as rows
    ``c M_all + first_doc + d`` of one device's batch."""
    p = data.place
    if p is None:
        return dirichlet_counts(rng, ndk, alpha)
    xp = _backend.get_array_module(ndk)
    conc = xp.add(ndk, alpha, dtype=alpha.dtype)
    key, off = rng.key, rng.advance()
    M = int(data.n_docs)
    draw = _gamma.dirichlet_numpy if xp is np else _gamma.dirichlet_cupy
    out = [draw(conc[c * M:(c + 1) * M], key, off, start_row=c * p.n_docs + p.first_doc) for c in range(C)]
    return out[0] if C == 1 else xp.concatenate(out)


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
