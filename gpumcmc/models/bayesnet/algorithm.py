"""SAME-replicated chromatic Gibbs for discrete Bayesian networks with missing cells (Seita, Chen &
Canny), as a :class:`gpumcmc.sampling.Collective` (:func:`collective`) that :func:`gpumcmc.sampling.sharded`
runs over the parts of the cases (:func:`case_parts`), one per device.

An iteration visits the batches of cases in turn. At each visit, colour group by colour group of the moral
graph, every missing cell of that colour, in every case of the batch and every one of the m SAME replicas,
is drawn from its conditional given its Markov blanket (exact: no two cells of one colour are in each
other's blanket); then every CPT row is drawn from ``Dirichlet(m (prior - 1) + 1 + counts)``, the posterior
raised to the power m, with the counts of the latest sweep of every batch (BIDMach's moving sum).

Each batch is cut into parts, one per device, at whole blocks of the cell order (:meth:`_Plan.batch`); every
missing cell draws from the Philox counter of its place in the whole batch, so the draws for a seed do not
depend on the devices. The parts' counts are summed (``reduce``, once a batch) and the first device draws
the CPTs. ``kernels_cu/bayesnet.cu`` documents the layout of :class:`_Plan` and :class:`_Batch`.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from gpumcmc import backend as _backend
from gpumcmc import shards as _shards
from gpumcmc.random import _gamma
from gpumcmc.sampling import Collective

from .ops import _GpuOps, _NumpyOps


class Data(NamedTuple):
    """What a fit keeps fixed: the layout, the settings, the launchers."""

    sh: Any          # the local shards (one shard of one for a fit without devices: _one_shard)
    xp: Any          # numpy or cupy
    plan: Any        # _Plan: the network as flat arrays
    ops: list        # per local shard: its _GpuOps or _NumpyOps
    parts: list      # parts[q][i]: local shard i's part of batch q (a _Batch)
    resident: bool   # one batch: each part's case matrix stays on its device between iterations
    ms: list         # m, the number of replicas swept, at each iteration
    m_max: int       # the largest m: the replicas every case matrix holds
    prior: float     # the Dirichlet prior of every CPT row
    learn: bool      # draw the CPTs (False: keep the given ones and only impute)


class State(NamedTuple):
    """The chain between iterations. With several batches, each batch's imputed cells stay in its
    parts' ``vals`` (host memory) between visits."""

    t: int           # iterations done
    tables: Any      # float64 (2, C): every CPT, the latest draw, as log-probabilities (row 0) and as
                     # probabilities (row 1), which the sweeps multiply
    Zs: list         # per local shard: its part's case matrix, uint8 (m_max, cases, nodes), replicas first
    total: Any       # float64 (C,): the counts of the latest sweep of every batch, summed (None: one batch)
    last: list       # per batch: its counts at its latest visit (None before the first), for the moving sum
    bads: list       # per local shard: int32 (1,), set where a missing cell had no possible state
    counts: Any = None  # the counts (over the m replicas) the latest CPTs were drawn from, on the first device
                        # (None when not learning); the estimator averages their posterior means


class OneDevice(NamedTuple):
    """The chain of a fit on one GPU with one batch and one m at every iteration, with its arrays as fields,
    so that :func:`gpumcmc.sampling.graph_step` can capture its iteration as a CUDA graph and replay it (the
    same draws: see :func:`graph_ready`)."""

    tables: Any      # State.tables
    Z: Any           # State.Zs[0]
    bad: Any         # State.bads[0]
    counts: Any      # State.counts


def graph_ready(step, state):
    """``step`` (:func:`collective`'s, through :func:`gpumcmc.sampling.sharded` on one device) over
    :class:`OneDevice` states: ``(its step, the first OneDevice, back)``, ``back(one)`` the :class:`State` of
    a OneDevice. Only for a fit whose m is the same at every iteration (the iteration count stays that of
    ``state``: no draw reads it then) and whose cases are one batch (nothing moves to the host)."""
    def one_step(rng, one):
        out, info = step(rng, back(one))
        return OneDevice(out.tables, out.Zs[0], out.bads[0], out.counts), info

    def back(one):
        return state._replace(tables=one.tables, Zs=[one.Z], bads=[one.bad], counts=one.counts)

    return one_step, OneDevice(state.tables, state.Zs[0], state.bads[0], state.counts), back


def case_parts(X, plan, shards, batch_size) -> list:
    """The cases ``X`` (int, (n_cases, n_nodes), -1 for missing) cut for ``shards``: ``parts[i][q]`` is
    local shard i's part (a :class:`_Batch`) of batch q of ``batch_size`` cases, cut at whole blocks."""
    n, obs, miss = X.shape[0], np.maximum(X, 0).astype(np.uint8), _missing(X)
    block, by_batch = _block_rows(min(n, batch_size)), []
    for s in range(0, n, batch_size):
        e = min(n, s + batch_size)
        cuts = _block_cuts(s, e, block)
        every = _shards.bounds(len(cuts) - 1, shards.world)
        by_batch.append([plan.batch(X, cuts[every[r][0]], cuts[every[r][1]], obs, within=(s, e), block=block,
                                    miss=miss) for r in shards.ranks])
    return [list(p) for p in zip(*by_batch)]


def collective(plan, ms, prior=1.0, cpts=None) -> Collective:
    """The sampler over :func:`case_parts` (one fit's): ``ms[t]`` replicas at iteration t, the Dirichlet
    ``prior`` of every CPT row, or ``cpts`` (node -> table) held fixed; ``step`` is :func:`step`."""
    held: dict = {}

    def init(rng, parts, shards):
        held["data"], state = _start(rng, parts, shards, plan, list(ms), prior, cpts)
        return state

    return Collective(init, lambda rng, state, parts, shards, reduce: step(rng, state, held["data"], reduce))


def _start(rng, parts, sh, plan, ms, prior, cpts):
    """``(Data, State)`` of a fit over the local shards ``sh`` of ``parts`` (:func:`case_parts`): every
    replica's missing cells drawn uniformly, the CPTs uniform (or ``cpts``). With one batch each part's
    case matrix stays on its device; with more, its cells stay in (pinned) host memory between visits."""
    xp, m_max, learn = sh.xp, max(ms), cpts is None
    ops, bads = [], []
    for i in range(len(sh)):
        with sh.on(i):
            ops.append(_GpuOps(plan) if xp is not np else _NumpyOps(plan))
            bads.append(xp.zeros(1, dtype=xp.int32))
    by_batch = [list(row) for row in zip(*parts)]
    resident = len(by_batch) == 1
    for row in by_batch:
        off = rng.advance(1)
        for i, b in enumerate(row):
            with sh.on(i):
                u = _uniforms(xp, rng.key, off, m_max, b)
                b.vals = xp.floor(u * xp.asarray(plan.card[b.node])).astype(xp.uint8)
                if not resident:
                    b.vals = _backend.to_host(b.vals)
                    if xp is not np and b.n:
                        b.pin()
    Zs = [None] * len(sh)
    if resident:
        for i, b in enumerate(by_batch[0]):
            with sh.on(i):
                Zs[i] = b.load(xp, m_max) if b.n else xp.empty((m_max, 0, b.obs.shape[1]), dtype=xp.uint8)
    with sh.on(0):
        tables = xp.asarray(plan.uniform_tables() if learn else plan.tables_of(cpts))
        total = xp.zeros(plan.C, dtype=xp.float64) if learn and not resident else None
        # the counts' type: a batch's counts (int32 on a GPU, int64 on NumPy), or the float64 moving sum
        drawn = (total if total is not None else xp.zeros(plan.C, dtype=np.int64 if xp is np else np.int32)) \
            if learn else None
    data = Data(sh, xp, plan, ops, by_batch, resident, ms, m_max, prior, learn)
    return data, State(0, tables, Zs, total, [None] * len(by_batch), bads, drawn)


def step(rng, state, data, reduce):
    """One iteration: every batch visited once, its missing cells swept in m replicas, then (when
    learning) the CPTs drawn from the counts summed over the shards by ``reduce`` (the Collective's).
    No host-device synchronisation."""
    m = data.ms[state.t]
    tables, total, last, Zs, drawn = state.tables, state.total, list(state.last), list(state.Zs), state.counts
    for q, row in enumerate(data.parts):
        off = rng.advance(1)
        counts = _sweep(rng.key, off, m, row, tables, Zs, state.bads, data)
        if data.learn:
            tables, last[q], drawn = _draw_cpts(rng, m, reduce(counts), total, last[q], data)
        if not data.resident:
            for i, b in enumerate(row):
                if b.n:
                    with data.sh.on(i):
                        b.store(Zs[i])
    return State(state.t + 1, tables, Zs, total, last, state.bads, drawn), None


def _sweep(key, off, m, row, tables, Zs, bads, data):
    """Sweep every colour group of the parts ``row`` of one batch in replicas 0..m-1 (in place in
    ``Zs``), each on its device, and return each part's CPT counts (when learning)."""
    sh, xp, plan = data.sh, data.xp, data.plan
    copies = _shards.Replica(sh, tables)
    counts = []
    for i, b in enumerate(row):
        if not b.n:
            if data.learn:
                with sh.on(i):  # in the counts' type, as a device with cases counts
                    counts.append(xp.zeros(plan.C, dtype=np.int64 if xp is np else np.int32))
            continue
        tc = copies(i)
        with sh.on(i):
            if not data.resident:
                Zs[i] = b.load(xp, data.m_max)
            for c in range(len(plan.groups)):
                data.ops[i].sweep(Zs[i], m, b, c, tc, key, off, bads[i])
            if data.learn:
                counts.append(data.ops[i].counts(Zs[i], m, b.n))
    return counts


def _draw_cpts(rng, m, counts, total, last, data):
    """The CPTs drawn from a batch's counts (summed over the devices) and the latest counts of the
    other batches: ``(tables, this batch's counts for its next visit, the counts drawn from)``; ``total`` is
    updated in place."""
    sh, xp = data.sh, data.xp
    with sh.on(0):
        # counts are whole numbers below 2**53, so every sum here is exact
        if len(data.parts) == 1:  # the total is this batch's counts, read as the gamma draw's shapes
            logg = _gamma.log_gamma_counts(rng, counts[0], np.float64(m * (data.prior - 1.0) + 1.0))
            return data.ops[0].normalise(logg), last, counts[0]
        cq = counts[0].astype(xp.float64)
        total += cq if last is None else cq - last
        last = cq
        return data.ops[0].normalise(rng.gamma(m * (data.prior - 1.0) + 1.0 + total, log=True)), last, total


def _uniforms(xp, key, off, m_max, b):
    """Uniforms (m_max, b.M) for the cells of part ``b``: those of ``rng.random((m_max, b.Mtot))``
    at call ``off`` in the columns of the cells' numbers in the whole batch."""
    from gpumcmc.random import _fill

    if b.M == b.Mtot:  # the whole batch: the fill itself
        return _fill.fill(xp, "uniform", m_max * b.M, np.float64, key, off).reshape(m_max, b.M)
    pos = xp.asarray(np.concatenate([int(b.g0[c]) + np.arange(int(b.gptr[c + 1] - b.gptr[c]), dtype=np.int64)
                                     for c in range(len(b.g0))]))
    elements = xp.arange(m_max, dtype=xp.int64)[:, None] * b.Mtot + pos[None, :]  # made where it is used
    return _fill.uniform_at(xp, elements, np.float64, key, off)


def allreduce_bytes(net, n_batches: int = 1) -> int:
    """Bytes all-reduced per iteration of ``net.fit(..., devices=...)``: the counts of every CPT
    cell (int32), once per visit to a batch (``n_batches`` = ceil(n_cases / batch_size))."""
    return 4 * _Plan(net).C * int(n_batches)


def _block_rows(rows: int) -> int:
    """Cases per block of the cell order: a power of two near rows / 128, from 32 to 4096. Devices take
    whole blocks (balanced to within one); in a block a node's cells are consecutive, so most warps of
    the sweep work on one node. The order, and so the draws for a seed, depend on the batch's size only."""
    want, b = -(-int(rows) // 128), 32
    while b < want and b < 4096:
        b *= 2
    return b


def _block_cuts(s: int, e: int, block: int) -> list:
    """The case boundaries of the blocks of batch s..e: s, the multiples of ``block`` inside, e."""
    return [s, *range((s // block + 1) * block, e, block), e]


def _one_shard(xp):
    """One shard of one on ``xp``'s device, the layout of a fit without ``devices``."""
    return _shards.Shards(n_virtual=1) if xp is np else _shards.one_device(1)


class _Plan:
    """The network as flat integer arrays (the layout documented in kernels_cu/bayesnet.cu)."""

    def __init__(self, net):
        nodes = net.nodes
        ix, self.V = {v: i for i, v in enumerate(nodes)}, len(nodes)
        self.card = np.array([net.card[v] for v in nodes], dtype=np.int32)
        rows = np.array([int(np.prod([net.card[p] for p in net.parents[v]])) for v in nodes], dtype=np.int64)
        self.toff = np.concatenate([[0], np.cumsum(rows * self.card)]).astype(np.int64)
        self.C = int(self.toff[-1])
        if self.C >= 2**31:
            raise ValueError("The CPTs have more than 2**31 cells together; this network is too large.")
        self.toff = self.toff.astype(np.int32)
        self.row_ptr = np.concatenate([[0], np.cumsum(np.repeat(self.card, rows))]).astype(np.int32)
        stride = {}  # stride[v][p]: parent p's stride in v's CPT row index (the last parent varies fastest)
        for v in nodes:
            stride[v], s = {}, 1
            for p in reversed(net.parents[v]):
                stride[v][p], s = s, s * net.card[p]
        # each node's parents, then its children, as (node, stride) pairs packed CSR-style
        self.par_ptr, self.par, self.par_stride = _csr([[(ix[p], stride[v][p]) for p in net.parents[v]]
                                                       for v in nodes])
        self.ch_ptr, self.ch, self.ch_stride = _csr([[(ix[c], stride[c][v]) for c in nodes if v in net.parents[c]]
                                                    for v in nodes])
        self.groups = [sorted(ix[v] for v in g) for g in net._colour()]

    def uniform_tables(self):
        """The tables (float64 (2, C): log-probabilities, probabilities) of uniform CPTs."""
        k = np.repeat(self.card.astype(np.float64), np.diff(self.toff))
        return np.stack([-np.log(k), 1.0 / k])

    def logc_of(self, cpts):
        with np.errstate(divide="ignore"):
            return np.concatenate([np.log(np.asarray(cpts[v], dtype=np.float64).ravel()) for v in cpts])

    def tables_of(self, cpts):
        """The tables (float64 (2, C): log-probabilities, probabilities) of the CPTs ``cpts`` (node -> table,
        in the nodes' order)."""
        return np.stack([self.logc_of(cpts), np.concatenate([np.asarray(cpts[v], dtype=np.float64).ravel()
                                                             for v in cpts])])

    def batch(self, X, start, stop, obs=None, within=None, block=None, miss=None):
        """The missing cells of cases start..stop-1 of the batch ``within`` = (s, e) (default: the cases
        themselves): colour by colour, then block of ``block`` cases by block, node by node, case by case.
        Numbered so over the whole batch, a part cut at block boundaries holds one range of the batch's
        cell numbers per colour (``g0``: where each colour's range starts). ``obs`` and ``miss`` (X's cells
        with missing ones as 0, and :func:`_missing` of X) may be given, made once for every part."""
        if obs is None:
            obs = np.maximum(X, 0).astype(np.uint8)
        if miss is None:
            miss = _missing(X)
        s, e = (start, stop) if within is None else within
        if block is None:
            block = _block_rows(e - s)
        lo = (start // block) * block  # pad to whole blocks, so that a reshape gives (block, node, case) order
        nb = -(-(stop - lo) // block) if stop > start else 0
        case, node, gptr, g0, first = [], [], [0], [], 0
        before, whole = miss[:, s:start].sum(1), miss[:, s:e].sum(1)
        for g in self.groups:
            pad = np.zeros((len(g), nb * block), dtype=bool)
            if nb:
                pad[:, start - lo:stop - lo] = miss[g, start:stop]
            # in (block, node, case) order, made contiguous: the flat positions of its missing cells, in order
            at = np.flatnonzero(np.ascontiguousarray(pad.reshape(len(g), nb, block).transpose(1, 0, 2)))
            it = np.int32 if pad.size < 2**31 else np.int64  # the narrower type divides faster
            bg, ri = np.divmod(at.astype(it, copy=False), it(block))
            bi, gi = np.divmod(bg, it(len(g)))
            case.append((bi * it(block) + ri + it(lo - start)).astype(np.int32, copy=False))
            node.append(np.asarray(g, dtype=np.int32)[gi])
            gptr.append(gptr[-1] + len(bi))
            g0.append(first + int(before[g].sum()))
            first += int(whole[g].sum())
        return _Batch(start, stop, obs[start:stop], np.concatenate(case), np.concatenate(node),
                      np.array(gptr, dtype=np.int64), np.array(g0, dtype=np.int64), first)


def _missing(X):
    """Where X's cells are missing, node by node: bool (n_nodes, n_cases), contiguous (its sums over cases
    and its row slices are the fast ones)."""
    return np.ascontiguousarray((X < 0).T)


def _csr(lists):
    """Lists of (node, stride) pairs as int32 arrays (ptr, node, stride): list k at ptr[k]:ptr[k + 1]."""
    flat = [pair for pairs in lists for pair in pairs]
    ptr = np.cumsum([0] + [len(pairs) for pairs in lists])
    return (np.array(ptr, dtype=np.int32), np.array([n for n, _ in flat], dtype=np.int32),
            np.array([st for _, st in flat], dtype=np.int32))


def _to_device(xp, a):
    if xp is np or isinstance(a, xp.ndarray):
        return a
    d = xp.empty(a.shape, dtype=a.dtype)
    d.set(a)  # from page-locked memory (_Batch.pin): a DMA copy without staging
    return d


class _Batch:
    """A batch of cases (or a device's part of one): its observed cells ``obs`` (0 where missing),
    its missing cells (``case`` relative to ``start``, ``node``), the colour groups' ranges in that
    list (``gptr``), where each range starts in the numbering of the whole batch's ``Mtot`` cells
    (``g0``) and, between visits, the replicas' imputed values ``vals`` (m_max, M)."""

    def __init__(self, start, stop, obs, case, node, gptr, g0, Mtot):
        self.start, self.stop, self.n, self.M = start, stop, stop - start, len(case)
        self.obs, self.case, self.node, self.gptr, self.g0, self.Mtot = obs, case, node, gptr, g0, Mtot
        self.vals = self.case_d = self.node_d = None
        self.launches = None  # the sweep's launch arguments (GPU) or cell lists by node (twin), per upload

    def pin(self):
        """Keep the host arrays in page-locked memory, for batches streamed to the GPU at each visit."""
        import cupyx

        for name in ("obs", "case", "node", "vals"):
            a = getattr(self, name)
            p = cupyx.empty_pinned(a.shape, dtype=a.dtype)
            p[...] = a
            setattr(self, name, p)

    def upload(self, xp):
        self.case_d, self.node_d, self.launches = _to_device(xp, self.case), _to_device(xp, self.node), None

    def load(self, xp, m_max):
        """The batch's case matrix, replicated m_max times, with the imputed cells filled in."""
        self.upload(xp)
        Z = xp.empty((m_max,) + self.obs.shape, dtype=xp.uint8)
        Z[...] = _to_device(xp, self.obs)[None]
        Z[:, self.case_d, self.node_d] = _to_device(xp, self.vals)
        return Z

    def store(self, Z):
        """Keep the imputed cells of ``Z`` (in host memory) and free the device copies."""
        v = Z[:, self.case_d, self.node_d]
        if isinstance(v, np.ndarray):
            self.vals = v
        else:
            v.get(out=self.vals)
        self.case_d = self.node_d = self.launches = None
