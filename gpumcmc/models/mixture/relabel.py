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
    32 MB on the host). On the GPU every draw's assignment is solved there at once, one warp a draw
    (``lsa_solve`` in ``kernels_cu/relabel.cu``), with SciPy's ``linear_sum_assignment`` method step for
    step, so the permutations are SciPy's. On the host, or for k above :data:`GPU_MAX_K`, SciPy solves
    them on ``workers`` threads (None: one per CPU core this process may use).

    Raises ValueError where a draw's costs are not finite (NaN or infinite means or weights).
    """
    xp = _xp_of(means)
    means = means if hasattr(means, "reshape") else np.asarray(means, dtype=np.float64)
    k, p = np.shape(reference)
    flat = means.reshape(-1, k, p)
    wflat = None if weights is None else xp.asarray(weights).reshape(-1, k)
    if block_bytes is None:
        block_bytes = (256 if xp is not np else 32) * 2**20
    if xp is not np and 0 < k <= GPU_MAX_K:
        perm = _relabel_gpu(xp, flat, wflat, reference, scale, reference_weights, weight_cost, block_bytes)
        return perm.reshape(means.shape[:-1])
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


GPU_MAX_K = 1024  # the largest k lsa_solve takes: 32 columns a lane, 33 KB of shared memory a warp
_LSA_FILE = "relabel.cu"
_SOLVE_BYTES = 2**30  # the costs of at most this many bytes of draws are solved in one launch


def _lsa_shared_bytes(k: int) -> int:
    """Shared memory of one ``lsa_solve`` warp: two double and four int arrays and one byte flag of k."""
    return k * (2 * 8 + 4 * 4 + 1)


_LSA_NAMES = ("lsa_solve<8>", "lsa_solve<16>", "lsa_solve<32>")  # columns a lane holds: k <= 256, 512, 1024


def _relabel_gpu(xp, flat, wflat, reference, scale, reference_weights, weight_cost, block_bytes):
    """:func:`relabel`'s permutations (D, k), host int64, with every assignment solved on the GPU."""
    d_total, k, p = flat.shape
    step = max(1, int(block_bytes) // (k * k * p * 8))  # draws per block of the costs' (D, k, k, p) terms
    per_launch = max(step, _SOLVE_BYTES // (k * k * 8))
    perms = [np.empty((0, k), dtype=np.int64)]
    for s0 in range(0, d_total, per_launch):
        e0 = min(d_total, s0 + per_launch)
        if p <= _FUSED_MAX_P:
            cost = _costs_fused(flat[s0:e0], None if wflat is None else wflat[s0:e0], reference, reference_weights,
                                scale, weight_cost)
        else:
            cost = xp.empty((e0 - s0, k, k), dtype=np.float64)
            for s in range(s0, e0, step):
                e = min(e0, s + step)
                cost[s - s0:e - s0] = relabel_costs(flat[s:e], reference, scale,
                                                    None if wflat is None else wflat[s:e],
                                                    reference_weights, weight_cost)
        perms.append(_assign_gpu(cost))
    return np.concatenate(perms)


_FUSED_MAX_P = 64  # relabel_costs_fused keeps a draw's p terms in one array of 64
_SQUARE_BY_POW = False  # how CuPy squares ``x ** 2`` in relabel_costs: x * x (False) or pow(x, 2.0)


def _costs_fused(means, weights, reference, reference_weights, scale, weight_cost):
    """:func:`relabel_costs` of GPU ``means`` (D, k, p) in one launch of ``relabel_costs_fused``, the same bits."""
    import cupy as cp

    from gpumcmc import _kernel_args, _loader

    d, k, p = means.shape
    f64 = lambda a: cp.ascontiguousarray(_backend.asarray(a, cp, np.float64))
    scale = cp.ones(p) if scale is None else f64(scale)
    use_w = weights is not None and reference_weights is not None
    cost = cp.empty((d, k, k), dtype=np.float64)
    fn = _loader.get_function(_LSA_FILE, "relabel_costs_fused", _LSA_NAMES)
    _loader.launch(fn, d * k * k, _kernel_args.args(
        _LSA_FILE, "relabel_costs_fused", means=f64(means), weights=f64(weights) if use_w else np.uint64(0),
        ref=f64(reference), ref_w=f64(reference_weights) if use_w else np.uint64(0), scale=scale,
        wc=_loader.real(weight_cost, np.float64), by_pow=_loader.i32(_SQUARE_BY_POW), D=_loader.i64(d),
        k=_loader.i32(k), p=_loader.i32(p), cost=cost))
    return cost


def _lsa_solve(cost, perm, status):
    """Launch ``lsa_solve``: ``perm[d]`` from the assignment of each float64 cost matrix ``cost[d]`` (D, k, k),
    ``status[0]`` set where one has no finite assignment."""
    from gpumcmc import _kernel_args, _loader

    d, k = cost.shape[0], cost.shape[-1]
    if d == 0:
        return
    slots = next(s for s in (8, 16, 32) if k <= 32 * s)
    fn = _loader.get_function(_LSA_FILE, f"lsa_solve<{slots}>", _LSA_NAMES)
    fn((d,), (32,), _kernel_args.args(_LSA_FILE, "lsa_solve", cost=cost, n=_loader.i32(k), perm=perm,
                                      status=status), shared_mem=_lsa_shared_bytes(k))


def _assign_gpu(cost):
    """Host permutations (D, k) solving each of the GPU cost matrices ``cost`` (D, k, k), as SciPy's
    ``linear_sum_assignment`` would: ``perm[d, cols] = rows``. ValueError where a matrix's costs are not
    finite."""
    import cupy as cp

    cost = cp.ascontiguousarray(cost, dtype=np.float64)
    perm = cp.empty(cost.shape[:2], dtype=np.int64)
    status = cp.zeros(1, dtype=np.int32)
    _lsa_solve(cost, perm, status)
    if int(status.get()[0]):
        raise ValueError("relabel: some draw's assignment costs are not finite; the means, weights, scale and "
                         "reference must be finite numbers.")
    return perm.get()


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


def align_draws(weights, means, covariances, loglik, scale, rounds: int = 3, return_perm: bool = False):
    """Relabel Gibbs draws (chain, draw, k, ...) to a common reference, Stephens-style.

    The reference starts as the draw of largest log-likelihood and becomes the weight-averaged aligned
    means (and mean weights) for ``rounds`` rounds. Returns the aligned ``weights, means, covariances``,
    each on its own backend (with ``weights`` and ``means`` on the GPU the costs are built there), and with
    ``return_perm`` the permutations (chain, draw, k), host int: aligned component j of a draw is its
    component ``perm[c, d, j]``.
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
    out = w, mu, _take(covariances, perm)
    return out + (np.asarray(_backend.to_host(perm)),) if return_perm else out


def _weighted_mean(w, a):
    """The mean over (chain, draw) of ``a`` (chain, draw, k, ...) weighted by ``w`` (chain, draw, k): prior draws
    of momentarily empty components do not blur it."""
    more = (None,) * (a.ndim - 3)
    ws = _xp_of(a).maximum(w.sum(axis=(0, 1)), 1e-300)
    return (w[(...,) + more] * a).sum(axis=(0, 1)) / ws[(slice(None),) + more]


def _take(a, perm):
    """``a[..., perm[...], ...]`` along the component axis (the one after the leading axes of perm): one
    gather of whole components."""
    xp = _xp_of(a)
    k = perm.shape[-1]
    rows = int(np.prod(perm.shape[:-1], dtype=np.int64))
    idx = _backend.asarray(perm, xp).reshape(rows, k) + (xp.arange(rows, dtype=np.int64) * k)[:, None]
    flat = a.reshape((rows * k,) + a.shape[perm.ndim:])
    return xp.take(flat, idx.ravel(), axis=0).reshape(a.shape)
