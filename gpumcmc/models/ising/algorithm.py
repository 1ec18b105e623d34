"""The Ising model: heat-bath checkerboard Gibbs sweeps over many chains at once.

``E(s) = -J sum_<ij> s_i s_j - sum_i h_i s_i`` for +-1 spins on an L x W square lattice (or a D x L x W
cubic one, byte path), sampled at ``p(s) ~ exp(-beta E(s))``. One colour of the checkerboard is independent
given the other (Mahani & Sharabiani, section 4.3), so a sweep is two launches, each updating one colour
of every chain. A site turns up with probability ``1 / (1 + exp(-2 beta (J S + h)))``, S its neighbours'
sum, as a 32-bit integer threshold T compared with a uniform U = A 2^16 + B from Philox keyed by (chain,
colour, site, sweep): A is half a Philox word (8 spins a call), B is drawn by a second call only when A
ties with T's high half (2^-16 of the updates), so P(U < T) = T / 2^32 exactly (``kernels_cu/ising.cu``
documents the layout). Two paths, each kernel with a NumPy twin of the same counters and thresholds,
give the same states for one seed on either backend:

* ``"multispin"``: 16 spins per 64-bit word, 4 bits each (NVIDIA's ising-gpu), neighbour counts of 16
  sites from four word additions; periodic lattices, uniform field, W a multiple of 32.
* ``"byte"``: one byte per spin; a field per site (13 thresholds a site; couplings per bond: 16), open or
  periodic boundaries, square or cubic lattices.

The sweep counts each chain's up spins and bond sum, having every site's neighbour sum at hand (the
differential update of section 4.3.3); neighbour sums are not kept between sweeps (a flip would cost four
atomic writes).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import backend as _backend
from ...random._generator import default_rng
from .ops import _GpuOps, _NumpyOps, bond_sum


class IsingState(NamedTuple):
    """One state of every chain.

    spins : (chains, L, W) int8 of +-1 (byte path), or None
    packed : (chains, 2, L, W // 32) uint64 (multispin path), or None; colour c of chain n at ``[n, c]``,
        16 sites of a half row per word, 4 bits each
    counts : (chains, 2) int64: up spins and the bond sum sum_<ij> s_i s_j, as counted by the last sweep
    lattice : str, the lattice, boundary and path the state was made for (``init``), or None
    """

    spins: object
    packed: object
    counts: object
    lattice: object = None


class IsingInfo(NamedTuple):
    """Per-chain figures of the state after a sweep: magnetisation and energy per site, (chains,)."""

    magnetization: object
    energy: object


def _thresholds(beta: float, coupling: float, field) -> np.ndarray:
    """uint32 heat-bath thresholds by S + 6 (S = -6..6): (13,) for a number, (n_sites, 13) for a field per site."""
    from scipy.special import expit

    S, f = np.arange(-6, 7, dtype=np.float64), np.asarray(field, dtype=np.float64)
    x = 2.0 * beta * (coupling * S + f.reshape(-1, 1) if f.ndim else coupling * S + float(f))
    return _as_thresholds(expit(x))


def _as_thresholds(p) -> np.ndarray:
    """Probabilities ``p`` as uint32 thresholds T, ``P(U < T) = T / 2**32`` for a uniform 32-bit U."""
    return np.minimum(np.floor(p * 2.0**32 + 0.5), 2.0**32 - 1).astype(np.uint32)


def _pattern_thresholds(beta: float, J, field, periodic: bool) -> np.ndarray:
    """(L*W, 16) uint32 thresholds by the pattern of up neighbours (bit 0 up, 1 down, 2 left, 3 right).
    ``J[0, i, j]`` couples (i, j) with its right neighbour, ``J[1, i, j]`` with the one below."""
    from scipy.special import expit

    right, down = J[0], J[1]
    up, left = np.roll(down, 1, axis=0), np.roll(right, 1, axis=1)
    if not periodic:  # no bonds past the edges
        up, down, left, right = up.copy(), down.copy(), left.copy(), right.copy()
        up[0], down[-1], left[:, 0], right[:, -1] = 0, 0, 0, 0
    Jk = np.stack([up, down, left, right]).reshape(4, -1)  # (4, sites)
    spins = 2.0 * ((np.arange(16)[:, None] >> np.arange(4)[None, :]) & 1) - 1.0  # (16, 4)
    f = np.broadcast_to(np.asarray(field, dtype=np.float64), J.shape[1:]).reshape(-1)
    x = 2.0 * beta * (Jk.T @ spins.T + f[:, None])  # (sites, 16)
    return _as_thresholds(expit(x))


def _weighted_bond_sum(spins, J, periodic: bool):
    """sum_<ij> J_ij s_i s_j per chain, for (chains, L, W) spins and couplings J (2, L, W) (float64)."""
    xp = _backend.get_array_module(spins)
    s = spins.astype(xp.float64)
    if periodic:
        return ((J[0] * s * xp.roll(s, -1, axis=2)).sum(axis=(1, 2))
                + (J[1] * s * xp.roll(s, -1, axis=1)).sum(axis=(1, 2)))
    return ((J[0, :, :-1] * s[:, :, :-1] * s[:, :, 1:]).sum(axis=(1, 2))
            + (J[1, :-1, :] * s[:, :-1, :] * s[:, 1:, :]).sum(axis=(1, 2)))


def _halves(L: int, W: int):
    """(colour, rows, columns) of each half of the sites: colour c's site k of row i at column 2k + ((i + c) & 1)."""
    for c in (0, 1):
        yield c, slice(0, L, 2), slice(c, W, 2)
        yield c, slice(1, L, 2), slice(1 - c, W, 2)


def pack(spins):
    """(chains, L, W) +-1 spins -> (chains, 2, L, W // 32) uint64 words of the multispin path."""
    xp, (n, L, W) = _backend.get_array_module(spins), spins.shape
    words = W // 32
    out = xp.zeros((n, 2, L, words), dtype=xp.uint64)
    for c, rows, cols in _halves(L, W):
        half = spins[:, rows, cols].reshape(n, -1, words, 16)
        dst = out[:, c, rows]
        for b in range(16):
            dst |= (half[..., b] > 0).astype(xp.uint64) << xp.uint64(4 * b)
        out[:, c, rows] = dst
    return out


def unpack(packed):
    """The inverse of :func:`pack`: (chains, L, W) int8 of +-1."""
    xp, (n, _, L, words) = _backend.get_array_module(packed), packed.shape
    W = words * 32
    out = xp.empty((n, L, W), dtype=xp.int8)
    for c, rows, cols in _halves(L, W):
        src = packed[:, c, rows]
        half = xp.empty(src.shape + (16,), dtype=xp.int8)
        for b in range(16):
            half[..., b] = ((src >> xp.uint64(4 * b)) & xp.uint64(1)).astype(xp.int8)
        out[:, rows, cols] = (2 * half - 1).reshape(n, -1, W // 2)
    return out


class _CheckerboardGibbs:
    """``init`` and ``step`` over :class:`IsingState`, inherited by :class:`Ising` (reading what its
    ``_configure`` works out)."""

    def _fresh(self) -> bool:
        """Where the settings were assigned since they were worked out, work them out again (see Ising)."""
        return False

    def init(self, n_chains: int = 1, random_state=None, initial="random") -> IsingState:
        """The starting state of ``n_chains`` chains: ``initial`` is ``"random"`` (each spin +-1 with
        probability 1/2, from ``random_state``), ``"up"``, ``"down"``, or +-1 of shape ``shape`` or
        ``(n_chains, *shape)``."""
        self._fresh()
        xp = self._xp()
        if isinstance(n_chains, bool) or not isinstance(n_chains, (int, np.integer)) or n_chains < 1:
            raise ValueError(f"n_chains must be a positive integer, got {n_chains!r}.")
        full = (n_chains, *self._shape)
        if xp is not np and n_chains > 65535:
            raise ValueError("at most 65,535 chains run in one launch; split the run.")
        if isinstance(initial, str):
            if initial == "random":
                u = default_rng(random_state, backend="numpy" if xp is np else "cupy").random(full, dtype=np.float32)
                spins = xp.where(u < 0.5, 1, -1).astype(xp.int8)
            elif initial in ("up", "down"):
                spins = xp.full(full, 1 if initial == "up" else -1, dtype=xp.int8)
            else:
                raise ValueError(f"initial must be 'random', 'up', 'down' or an array of +-1, got {initial!r}.")
        else:
            a = _backend.asarray(initial, xp)
            if a.shape not in (self._shape, full):
                raise ValueError(f"initial has shape {a.shape}; pass the lattice's shape {self._shape} or "
                                 f"(n_chains, *shape) = {full}.")
            if not np.all(np.isin(_backend.to_host(a), (-1, 1))):  # synchronize! (once, before a run)
                raise ValueError("initial must hold only +1 and -1 spins; map a 0/1 array b with 2 * b - 1.")
            spins = xp.broadcast_to(a.astype(xp.int8), full).copy()  # a copy of its own, which sweeps write
        counts = xp.zeros((n_chains, 2), dtype=xp.int64)
        counts[:, 0] = (spins > 0).sum(axis=tuple(range(1, spins.ndim)), dtype=xp.int64)
        counts[:, 1] = bond_sum(spins, self.boundary == "periodic")
        return IsingState(None, pack(spins), counts, self._lattice()) if self._method == "multispin" else \
            IsingState(spins, None, counts, self._lattice())

    def _lattice(self) -> str:
        """What a state depends on: the lattice's shape, its boundary and the path (not beta, the coupling or
        the field, which may change between sweeps, as in annealing)."""
        return repr((self._shape, self.boundary, self._method))  # a string: checkpoints store it

    def spins(self, state: IsingState):
        """The +-1 spins of ``state``, ``(chains, *shape)`` int8, whichever path made it."""
        return state.spins if state.packed is None else unpack(state.packed)

    def _info(self, state: IsingState, xp) -> IsingInfo:
        N = self.n_sites
        mag = 2.0 * state.counts[:, 0].astype(xp.float64) - N
        if self._field.ndim:
            h = self._dev_array("field", xp, lambda: self._field)
            field_term = (state.spins * h).sum(axis=tuple(range(1, state.spins.ndim)))
        else:
            field_term = float(self._field) * mag
        if self._by_pattern:
            bond_term = _weighted_bond_sum(state.spins, self._dev_array("J", xp, lambda: self._J),
                                           self.boundary == "periodic")
        else:
            bond_term = float(self._J) * state.counts[:, 1].astype(xp.float64)
        return IsingInfo(mag / N, (-bond_term - field_term) / N)

    def _dev_array(self, name, xp, make):
        if xp is np:
            return make()
        key = (name, xp.cuda.runtime.getDevice())  # per device: a sample on another GPU reads its own copy
        if (a := self._dev.get(key)) is None:
            a = self._dev[key] = xp.asarray(make())
        return a

    def step(self, rng, state: IsingState, observe: bool = True):
        """One sweep (both colours) of every chain: ``(state, info)``. The state's arrays are updated in place."""
        stale = self._fresh()  # a setting assigned since the last check
        if state.lattice is not None and state.lattice != self._lattice():  # shape, boundary or method changed
            raise ValueError("the state was made for other settings (its lattice, boundary or path); call init() "
                             "again after changing shape, boundary or method.")
        if stale:  # the state must still fit the lattice and the path
            L, W = self._dims[-2:]
            fits = (state.packed is not None and tuple(state.packed.shape[1:]) == (2, L, W // 32)
                    if self._method == "multispin" else
                    state.spins is not None and tuple(state.spins.shape[1:]) == tuple(self._shape))
            if not fits:
                raise ValueError("the state was made for other settings (its lattice or path); call init() again "
                                 "after changing shape, boundary or method.")
        xp = _backend.get_array_module(state.counts)
        if observe and xp is not np:
            state.counts.fill(0)
        self._sweep(rng, state, state.counts if (observe or xp is np) else None)
        return state, (self._info(state, xp) if observe else None)

    def _sweep(self, rng, state: IsingState, out) -> None:
        """One sweep of every chain, in place, adding each chain's up spins and bond sum after it to
        ``out``: None (not counted) or a zeroed (chains, 2) int64 array (on CuPy also its address)."""
        xp, off = _backend.get_array_module(state.counts), rng.advance(1)
        (_NumpyOps if xp is np else _GpuOps).sweep(self, xp, state, rng.key, off, out)
