"""Relabelling Gibbs draws: a linear assignment per draw on the components' means and weights
(:func:`relabel`), in the Stephens-style rounds of :func:`align_draws` that ``DPGaussianMixture.fit`` runs."""

from __future__ import annotations

import numpy as np

from gpumcmc import backend as _backend
from gpumcmc._config import memo

from .ops import _xp_of


def relabel_costs(means, reference, scale=None, weights=None, reference_weights=None,
                  weight_cost: float = 100.0):
    """Assignment costs (D, k, k) of every draw's components (rows) against the reference's (columns).

    ``cost[d, j, l] = |mu_dj - ref_l|^2 / scale^2 + weight_cost (sqrt w_dj - sqrt ref_w_l)^2`` for ``means``
    (..., k, p) flattened to D draws, one batched expression on the backend of ``means``.
    """
    xp = _xp_of(means)
    means = xp.asarray(means, dtype=np.float64)
    ref = _backend.asarray(reference, xp, np.float64)
    k, p = ref.shape
    scale = xp.ones(p) if scale is None else _backend.asarray(scale, xp, np.float64)
    flat = means.reshape(-1, k, p)
    cost = (((flat[:, :, None, :] - ref[None, None, :, :]) / scale) ** 2).sum(-1)
    if weights is not None and reference_weights is not None:
        sw = xp.sqrt(_backend.asarray(weights, xp, np.float64).reshape(-1, k))
        sref = xp.sqrt(_backend.asarray(reference_weights, xp, np.float64))
        cost = cost + weight_cost * (sw[:, :, None] - sref[None, None, :]) ** 2
    return cost


def relabel(means, reference, scale=None, weights=None, reference_weights=None, weight_cost: float = 100.0,
            block_bytes: int | None = None, workers: int | None = None):
    """Permutations aligning each draw's components to ``reference`` by their means (and weights).

    ``means`` is (..., k, p), on the host or the GPU; ``reference`` (k, p). Returns host int indices
    ``perm`` of shape (..., k) with ``means[..., perm, :]`` matched to the reference components in order,
    from a linear assignment per draw on the costs of :func:`relabel_costs` (whose weight term keeps the
    means of empty components, prior draws scattered over the data, from taking an occupied one's label).

    The costs are built on the backend of ``means`` in blocks of ``block_bytes`` (default 256 MB on the GPU,
    32 MB on the host) and solved on the host on ``workers`` threads (None: one per CPU core this process may
    use), each draw's assignment as a serial loop finds it.
    """
    xp = _xp_of(means)
    means = means if hasattr(means, "reshape") else np.asarray(means, dtype=np.float64)
    k, p = np.shape(reference)
    flat = means.reshape(-1, k, p)
    wflat = None if weights is None else xp.asarray(weights).reshape(-1, k)
    if block_bytes is None:
        block_bytes = (256 if xp is not np else 32) * 2**20
    pool = _lsa_pool(workers)
    n_workers = pool._max_workers if pool is not None else 1
    # blocks of two draws per worker, so that solving one block overlaps building and copying the next
    step = max(1, min(int(block_bytes) // (k * k * p * 8), 2 * n_workers))
    d_total = flat.shape[0]
    perm = np.empty((d_total, k), dtype=np.int64)
    buffers = _HostBuffers(xp, 2, (min(step, d_total), k, k))
    pending = [None, None]  # the futures still reading each host buffer
    for bi, s in enumerate(range(0, d_total, step)):
        e = min(d_total, s + step)
        cost_dev = relabel_costs(flat[s:e], reference, scale, None if wflat is None else wflat[s:e],
                                 reference_weights, weight_cost)
        slot = bi % 2
        if pending[slot] is not None:  # the block two back must be solved before its buffer is refilled
            for f in pending[slot]:
                f.result()
        cost = buffers.fill(slot, cost_dev)
        if pool is None:
            for d in range(e - s):
                _solve_one(cost, d, perm, s + d)
            continue
        pending[slot] = [pool.submit(_solve_one, cost, d, perm, s + d) for d in range(e - s)]
    for fs in pending:
        for f in fs or ():
            f.result()
    return perm.reshape(means.shape[:-1])


def _solve_one(cost, d, perm, row):
    """``perm[row]`` from the assignment of the cost matrix ``cost[d]`` (host)."""
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(cost[d])
    perm[row, cols] = rows


_POOLS = memo.table("mixture.lsa_pools", device_at=None)  # (pid, workers) -> the thread pool


def _lsa_pool(workers=None):
    """A shared thread pool for the assignments (None where one thread is all there is)."""
    import os

    if workers is None:
        try:
            workers = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            workers = os.cpu_count() or 1
    workers = int(workers)
    if workers < 1:
        raise ValueError(f"workers must be a positive number of threads, got {workers}.")
    if workers == 1:
        return None
    key = (os.getpid(), workers)  # a forked child makes its own: the parent's threads are not in it
    pool = _POOLS.get(key)
    if pool is None:
        from concurrent.futures import ThreadPoolExecutor

        pool = _POOLS[key] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gpumcmc-relabel")
    return pool


class _HostBuffers:
    """Host copies of device blocks: page-locked buffers reused from block to block (NumPy: the arrays)."""

    def __init__(self, xp, count, shape):
        self.xp, self.bufs = xp, None
        if xp is not np:
            import cupyx

            self.bufs = [cupyx.empty_pinned(shape, dtype=np.float64) for _ in range(count)]

    def fill(self, slot, a):
        if self.bufs is None:
            return np.asarray(a)
        out = self.bufs[slot][:a.shape[0]]
        a.get(out=out)  # synchronises with the stream that built ``a``
        return out


def align_draws(weights, means, covariances, loglik, scale, rounds: int = 3):
    """Relabel Gibbs draws (chain, draw, k, ...) to a common reference, Stephens-style.

    The reference starts as the draw of largest log-likelihood and becomes the weight-averaged aligned
    means (and mean weights) for ``rounds`` rounds. Returns the aligned ``weights, means, covariances``,
    each on its own backend (with ``weights`` and ``means`` on the GPU the costs are built there).
    """
    loglik = _backend.to_host(loglik)
    c, d = np.unravel_index(int(np.argmax(loglik)), loglik.shape)
    ref_mu, ref_w = means[c, d], weights[c, d]
    last = None
    for _ in range(rounds):
        perm = relabel(means, ref_mu, scale, weights, ref_w)
        if last is not None and np.array_equal(perm, last):
            break  # the same permutations give the same reference: every later round repeats this one
        last = perm
        w, mu = _take(weights, perm), _take(means, perm)
        ref_w, ref_mu = w.mean(axis=(0, 1)), _weighted_mean(w, mu)
    return w, mu, _take(covariances, perm)


def _weighted_mean(w, a):
    """The mean over (chain, draw) of ``a`` (chain, draw, k, ...) weighted by ``w`` (chain, draw, k): prior draws
    of momentarily empty components do not blur it."""
    more = (None,) * (a.ndim - 3)
    ws = _xp_of(a).maximum(w.sum(axis=(0, 1)), 1e-300)
    return (w[(...,) + more] * a).sum(axis=(0, 1)) / ws[(slice(None),) + more]


def _take(a, perm):
    """``a[..., perm[...], ...]`` along the component axis (the one after the leading axes of perm)."""
    xp = _xp_of(a)
    idx = _backend.asarray(perm, xp).reshape(perm.shape + (1,) * (a.ndim - perm.ndim))
    return xp.take_along_axis(a, idx, axis=perm.ndim - 1)
