"""The Ising model: heat-bath checkerboard Gibbs sweeps over many chains at once.

Energy of a configuration ``s`` of +-1 spins on an L x W square lattice (or a
D x L x W simple cubic one, on the byte path)::

    E(s) = -J sum_<ij> s_i s_j - sum_i h_i s_i

(``J`` the coupling, ``h`` a field, one number or one per site), sampled at
inverse temperature ``beta``: ``p(s) ~ exp(-beta E(s))``.

The sites of one colour of the checkerboard are independent given the other
colour (Mahani & Sharabiani, section 4.3), so a sweep is two launches, each
updating every site of one colour in every chain. A site turns up with the
heat-bath probability ``1 / (1 + exp(-2 beta (J S + h)))``, S the sum of its
neighbours; these probabilities are precomputed as 32-bit integer thresholds
T and compared with a 32-bit uniform integer U = A 2^16 + B drawn in
registers from Philox, keyed by (chain, colour, site, sweep): A is half a
Philox word (8 spins per call), and B is drawn, from a second call, only when
A ties with T's high half (2^-16 of the updates), so P(U < T) = T / 2^32
exactly for half the Philox work (``kernels_cu/ising.cu`` documents the
layout). Two paths give the same states for one seed:

* ``"multispin"``: 16 spins per 64-bit word, 4 bits each, as in NVIDIA's
  ising-gpu; neighbour counts of 16 sites come from four word additions.
  Periodic lattices with a uniform field, W a multiple of 32.
* ``"byte"``: one byte per spin; any field per site, open or periodic
  boundaries, square or cubic lattices. A field per site costs a table of 13
  thresholds per site (52 bytes; couplings per bond: 16, 64 bytes), read
  once per site and sweep: exact integers on both backends, so the CPU and
  the GPU still agree bit for bit.

Every kernel has a NumPy twin here, following the same counter layout, so a
CPU run gives the same states as a GPU run for the same seed.

The magnetisation and the energy of each chain after each sweep come out of
the sweep itself (counts accumulated by the kernels), with no second pass over
the lattice. This is where the differential update of section 4.3.3 pays on a
GPU: the sweep already holds every site's neighbour sum, so the bond sum of
the new state is a by-product. Keeping neighbour sums between sweeps (and
scattering +-2 into four of them at every flip) does not: the four neighbour
words a thread reads are in cache, a flip would cost four atomic writes, and
the sweep's cost is the Philox call anyway (one per 8 spins, about 40 integer
instructions).
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np

from ... import _kernel_args, _loader, _validate
from ... import backend as _backend
from ...random._generator import default_rng
from ...random._philox import philox_rounds
from ...sampling._estimator import Estimator

__all__ = ["Ising", "IsingInfo", "IsingResult", "IsingState", "onsager_energy", "onsager_magnetization",
           "exact_energy_finite", "BETA_C"]

FILE = "ising.cu"
_NAMES = ("ising_multispin<true>", "ising_multispin<false>", "ising_bytes<true>", "ising_bytes<false>")
BLOCK = 256
_U64 = np.uint64
_MASK32 = _U64(0xFFFFFFFF)

#: Inverse critical temperature of the square lattice at J = 1: log(1 + sqrt 2) / 2.
BETA_C = 0.5 * math.log(1.0 + math.sqrt(2.0))


class IsingState(NamedTuple):
    """One state of every chain.

    spins : (chains, L, W) int8 of +-1 (byte path), or None
    packed : (chains, 2, L, W // 32) uint64 (multispin path), or None; colour c
        of chain n at ``[n, c]``, 16 sites of a half row per word, 4 bits each
    counts : (chains, 2) int64: up spins and the bond sum sum_<ij> s_i s_j of
        the state, as counted by the last sweep
    """

    spins: object
    packed: object
    counts: object


class IsingInfo(NamedTuple):
    """Per-chain figures of the state after a sweep: magnetisation and energy per site, (chains,)."""

    magnetization: object
    energy: object


class IsingResult:
    """What :meth:`Ising.sample` returns.

    Attributes
    ----------
    magnetization, energy : numpy.ndarray (chains, sweeps)
        Per site, after each kept sweep.
    states : array (chains, L, W) int8
        The final spins (on the backend the model ran on).
    trace : gpumcmc.sampling.Trace
        The run's record (monitors, timing).
    seconds : float
    """

    def __init__(self, trace, states):
        self.trace = trace
        self.magnetization = trace.draws["magnetization"]
        self.energy = trace.draws["energy"]
        self.states = states
        self.seconds = trace.seconds

    def __repr__(self) -> str:
        c, n = self.magnetization.shape
        return f"IsingResult(chains={c}, sweeps={n}, seconds={self.seconds:.3g})"

    def to_arviz(self):
        """Magnetisation and energy per site as an ArviZ ``InferenceData`` (ArviZ imported here)."""
        return self.trace.to_arviz(sample_stats=False)


# --------------------------------------------------------------------------- exact results

def onsager_magnetization(beta, coupling: float = 1.0):
    """Spontaneous magnetisation per site of the infinite 2-D lattice (Onsager, Yang): 0 above T_c."""
    k = 2.0 * np.asarray(beta, dtype=np.float64) * coupling
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.clip(1.0 - np.sinh(k) ** -4.0, 0.0, None) ** 0.125
    return np.where(k > 2.0 * BETA_C, m, 0.0)


def onsager_energy(beta, coupling: float = 1.0):
    """Energy per site of the infinite 2-D lattice at zero field (Onsager), via the elliptic integral K."""
    from scipy.special import ellipk

    K = np.asarray(beta, dtype=np.float64) * coupling
    kappa = 2.0 * np.sinh(2 * K) / np.cosh(2 * K) ** 2
    t = np.tanh(2 * K)
    a = 2.0 * t * t - 1.0  # zero at T_c, where K(kappa) diverges logarithmically: the product tends to 0
    with np.errstate(invalid="ignore"):
        term = np.where(np.abs(a) < 1e-12, 0.0, a * ellipk(np.minimum(kappa * kappa, 1.0)))
    return -coupling / t * (1.0 + (2.0 / np.pi) * term)


def _log_z_finite(K: float, rows: int, cols: int) -> float:
    """log Z of the periodic rows x cols lattice at zero field (Kaufman 1949), coupling K = beta J."""
    n, m = cols, rows
    k = np.arange(2 * n)
    Kd = np.arctanh(np.exp(-2.0 * K))  # the dual coupling
    ch = np.cosh(2 * K) * np.cosh(2 * Kd) - np.sinh(2 * K) * np.sinh(2 * Kd) * np.cos(np.pi * k / n)
    gamma = np.arccosh(np.maximum(ch, 1.0))
    gamma[0] = 2.0 * K + np.log(np.tanh(K))  # signed: negative above T_c
    odd, even = gamma[1::2], gamma[0::2]

    def log_prod_cosh(g):
        x = np.abs(m * g / 2)
        return float(np.sum(x + np.log1p(np.exp(-2 * x))))  # 2 cosh(x) = e^x (1 + e^-2x)

    def log_prod_sinh(g):
        x = m * g / 2
        sign = float(np.prod(np.sign(x)))
        ax = np.abs(x)
        if np.any(ax == 0):
            return -np.inf, 0.0
        return float(np.sum(ax + np.log1p(-np.exp(-2 * ax)))), sign  # 2 sinh(x) = e^x (1 - e^-2x)

    terms = [(log_prod_cosh(odd), 1.0), log_prod_sinh(odd), (log_prod_cosh(even), 1.0), log_prod_sinh(even)]
    top = max(t[0] for t in terms)
    total = sum(sign * np.exp(lv - top) for lv, sign in terms)
    return float(np.log(0.5) + 0.5 * m * n * np.log(2.0 * np.sinh(2.0 * K)) + top + np.log(total))


def exact_energy_finite(beta: float, shape, coupling: float = 1.0) -> float:
    """Exact mean energy per site of the periodic ``shape`` lattice at zero field (Kaufman's Z).

    ``-d log Z / d beta`` by a central difference of Kaufman's closed form
    (accurate to about 1e-7 for lattices up to 256 x 256).
    """
    rows, cols = shape
    K = beta * coupling
    h = 1e-5 * max(K, 1e-3)
    d = (_log_z_finite(K + h, rows, cols) - _log_z_finite(K - h, rows, cols)) / (2 * h)
    return -coupling * d / (rows * cols)


# --------------------------------------------------------------------------- thresholds

def _thresholds(beta: float, coupling: float, field) -> np.ndarray:
    """uint32 heat-bath thresholds by S + 6 (S = -6..6): (13,) for a number, (n_sites, 13) for a field per site."""
    from scipy.special import expit

    S = np.arange(-6, 7, dtype=np.float64)
    f = np.asarray(field, dtype=np.float64)
    x = 2.0 * beta * (coupling * S + f.reshape(-1, 1) if f.ndim else coupling * S + float(f))
    p = expit(x)
    t = np.minimum(np.floor(p * 2.0**32 + 0.5), 2.0**32 - 1)
    return t.astype(np.uint32)


def _bond_couplings(J, periodic: bool):
    """Couplings of each site's up, down, left and right bonds, (4, L, W), 0 where a bond is missing.

    ``J[0, i, j]`` couples (i, j) with its right neighbour, ``J[1, i, j]`` with the one below.
    """
    right, down = J[0], J[1]
    up, left = np.roll(down, 1, axis=0), np.roll(right, 1, axis=1)
    if not periodic:
        up, down, left, right = up.copy(), down.copy(), left.copy(), right.copy()
        up[0], down[-1], left[:, 0], right[:, -1] = 0, 0, 0, 0
    return np.stack([up, down, left, right])


def _pattern_thresholds(beta: float, J, field, periodic: bool) -> np.ndarray:
    """(L*W, 16) uint32 thresholds by the pattern of up neighbours (bit 0 up, 1 down, 2 left, 3 right)."""
    from scipy.special import expit

    Jk = _bond_couplings(J, periodic).reshape(4, -1)  # (4, sites)
    bits = (np.arange(16)[:, None] >> np.arange(4)[None, :]) & 1  # (16, 4)
    spins = 2.0 * bits - 1.0
    f = np.broadcast_to(np.asarray(field, dtype=np.float64), J.shape[1:]).reshape(-1)
    x = 2.0 * beta * (Jk.T @ spins.T + f[:, None])  # (sites, 16)
    t = np.minimum(np.floor(expit(x) * 2.0**32 + 0.5), 2.0**32 - 1)
    return t.astype(np.uint32)


def _weighted_bond_sum(spins, J, periodic: bool):
    """sum_<ij> J_ij s_i s_j per chain, for (chains, L, W) spins and couplings J (2, L, W) (float64)."""
    xp = _backend.get_array_module(spins)
    s = spins.astype(xp.float64)
    if periodic:
        return ((J[0] * s * xp.roll(s, -1, axis=2)).sum(axis=(1, 2))
                + (J[1] * s * xp.roll(s, -1, axis=1)).sum(axis=(1, 2)))
    return ((J[0, :, :-1] * s[:, :, :-1] * s[:, :, 1:]).sum(axis=(1, 2))
            + (J[1, :-1, :] * s[:, :-1, :] * s[:, 1:, :]).sum(axis=(1, 2)))


# --------------------------------------------------------------------------- packing

def _halves(W: int, c: int):
    """Column slices of colour c's sites in even and in odd rows: site k at column 2k + ((i + c) & 1)."""
    return slice(c, W, 2), slice(1 - c, W, 2)


def pack(spins):
    """(chains, L, W) +-1 spins -> (chains, 2, L, W // 32) uint64 words of the multispin path.

    Temporaries are a quarter of the lattice's bytes per colour (no index arrays).
    """
    xp = _backend.get_array_module(spins)
    n, L, W = spins.shape
    words = W // 32
    out = xp.zeros((n, 2, L, words), dtype=xp.uint64)
    for c in (0, 1):
        even, odd = _halves(W, c)
        for rows, cols in ((slice(0, L, 2), even), (slice(1, L, 2), odd)):
            half = spins[:, rows, cols].reshape(n, -1, words, 16)
            dst = out[:, c, rows]
            for b in range(16):
                dst |= (half[..., b] > 0).astype(xp.uint64) << xp.uint64(4 * b)
            out[:, c, rows] = dst
    return out


def unpack(packed):
    """The inverse of :func:`pack`: (chains, L, W) int8 of +-1."""
    xp = _backend.get_array_module(packed)
    n, _, L, words = packed.shape
    W = words * 32
    out = xp.empty((n, L, W), dtype=xp.int8)
    one = xp.uint64(1)
    for c in (0, 1):
        even, odd = _halves(W, c)
        for rows, cols in ((slice(0, L, 2), even), (slice(1, L, 2), odd)):
            src = packed[:, c, rows]
            half = xp.empty(src.shape + (16,), dtype=xp.int8)
            for b in range(16):
                half[..., b] = ((src >> xp.uint64(4 * b)) & one).astype(xp.int8)
            out[:, rows, cols] = (2 * half - 1).reshape(n, -1, W // 2)
    return out


# --------------------------------------------------------------------------- observables

def bond_sum(spins, periodic: bool = True):
    """sum_<ij> s_i s_j per chain (int64), for (chains, L, W) or (chains, D, L, W) spins of +-1.

    A periodic side of length 1 has no bonds along it (a 2-D lattice is a 3-D one of depth 1).
    """
    xp = _backend.get_array_module(spins)
    s = spins.astype(xp.int8)  # products of +-1 stay in int8; sums go to int64
    axes = tuple(range(1, s.ndim))
    total = xp.zeros(s.shape[0], dtype=xp.int64)
    for ax in axes:
        if s.shape[ax] < 2:
            continue
        if periodic:
            total += (s * xp.roll(s, -1, axis=ax)).sum(axis=axes, dtype=xp.int64)
        else:
            lo = [slice(None)] * s.ndim
            hi = [slice(None)] * s.ndim
            lo[ax], hi[ax] = slice(1, None), slice(None, -1)
            total += (s[tuple(lo)] * s[tuple(hi)]).sum(axis=axes, dtype=xp.int64)
    return total


# --------------------------------------------------------------------------- NumPy twins

def _words(key, offset: int, first, count: int):
    """Philox words of counter indices first[n] + 0..count-1 (first: (chains,) uint64) -> (chains, count, 4)."""
    idx = first[:, None] + np.arange(count, dtype=_U64)[None, :]
    w = philox_rounds(idx & _MASK32, idx >> _U64(32), _U64(offset & 0xFFFFFFFF), _U64(offset >> 32),
                      key[0], key[1])
    return np.stack(w, axis=-1)


_LOW_FLAG = _U64(1 << 63)


def _halves16(w):
    """(..., 4) Philox words -> (..., 8) 16-bit halves: half h of word e at position 2 e + h (h = 0: low bits)."""
    return np.stack([w & _U64(0xFFFF), w >> _U64(16)], axis=-1).reshape(*w.shape[:-1], 8)


def _decide(a, T, calls, pos, key, offset: int):
    """Heat-bath decisions U < T for U = a 2^16 + b, b drawn only where a equals T's high half.

    ``a``: high halves (uint64), ``T``: 32-bit thresholds, both of one shape;
    ``calls``/``pos``: the Philox call index (uint64) and position (0..7) of
    each, broadcastable to it. ``b`` is half ``pos % 2`` of word ``pos // 2``
    of call ``calls | 2**63``, computed only for the ties.
    """
    T = T.astype(_U64)
    hi = T >> _U64(16)
    up = a < hi
    tie = np.nonzero(a == hi)
    if tie[0].size:
        call = np.broadcast_to(calls, a.shape)[tie] | _LOW_FLAG
        p = np.broadcast_to(pos, a.shape)[tie]
        w = np.stack(philox_rounds(call & _MASK32, call >> _U64(32), _U64(offset & 0xFFFFFFFF),
                                   _U64(offset >> 32), key[0], key[1]), axis=-1)
        b = _halves16(w)[np.arange(len(p)), p]
        up[tie] = b < (T[tie] & _U64(0xFFFF))
    return up


class _ByteIndex(NamedTuple):
    i: np.ndarray  # rows of the colour's sites, in half-index order f
    j: np.ndarray  # their columns
    g: np.ndarray  # Philox call (f // 8)
    q: np.ndarray  # 16-bit half within it (f % 8)


def _byte_index(D: int, L: int, W: int, c: int) -> _ByteIndex:
    """Sites of colour c in the kernel's half-index order: rows r = d L + i, as (r, j) pairs."""
    Wh = (W + 1) // 2
    f = np.arange(D * L * Wh)
    r = f // Wh
    d, i = r // L, r % L
    j = 2 * (f - r * Wh) + ((d + i + c) & 1)
    keep = j < W
    f, r, j = f[keep], r[keep], j[keep]
    return _ByteIndex(r, j, f // 8, f % 8)


def _neighbours(s, periodic: bool):
    """Neighbour spins of every site of (chains, D, L, W) spins, 0 where missing, int16:
    [up, down, left, right] and, for D > 1, [front, back]."""
    s = s.astype(np.int16)
    axes = (2, 3) + ((1,) if s.shape[1] > 1 else ())
    if periodic:
        return [np.roll(s, k, ax) for ax in axes for k in (1, -1)]
    p = np.pad(s, ((0, 0), (1, 1), (1, 1), (1, 1)))
    core = (slice(None), slice(1, -1), slice(1, -1), slice(1, -1))
    out = []
    for ax in axes:
        for a, b in ((0, -2), (2, None)):
            sl = list(core)
            sl[ax] = slice(a, b)
            out.append(p[tuple(sl)])
    return out


def _byte_twin(spins, thr, per_site: bool, periodic: bool, key, offset: int, index, by_pattern: bool = False):
    """One sweep of the byte kernel on NumPy, in place; ``spins`` (chains, D, L, W). Returns (up, bond) per chain."""
    n, D, L, W = spins.shape
    Wh = (W + 1) // 2
    G = (D * L * Wh + 7) // 8
    rows = spins.reshape(n, D * L, W)  # a view: writes go to spins
    chains = np.arange(n, dtype=_U64)
    for c in (0, 1):
        ix = index[c]
        first = (chains * _U64(2) + _U64(c)) * _U64(G)
        a = _halves16(_words(key, offset, first, G))[:, ix.g, ix.q]
        nb = [a.reshape(n, D * L, W)[:, ix.i, ix.j] for a in _neighbours(spins, periodic)]
        if by_pattern:
            idx = sum((a > 0).astype(np.int64) << k for k, a in enumerate(nb[:4]))
        else:
            idx = sum(a.astype(np.int64) for a in nb) + 6
        site = (ix.i * W + ix.j) if per_site else np.zeros_like(ix.i)
        calls = first[:, None] + ix.g.astype(_U64)[None, :]
        up = _decide(a, thr[site, idx], calls, ix.q[None, :], key, offset)
        rows[:, ix.i, ix.j] = np.where(up, 1, -1).astype(np.int8)
    up = (spins > 0).sum(axis=(1, 2, 3), dtype=np.int64)
    return up, bond_sum(spins, periodic)


def _multispin_twin(packed, thr5, key, offset: int):
    """One sweep of the multispin kernel on NumPy, in place; returns (up, bond) per chain."""
    n, _, L, words = packed.shape
    per = L * words
    chains = np.arange(n, dtype=_U64)
    shifts = _U64(4) * np.arange(16, dtype=_U64)
    odd_row = (np.arange(L) & 1)[None, :, None]
    bond = np.zeros(n, dtype=np.int64)
    for c in (0, 1):
        o = packed[:, 1 - c]
        left = (o << _U64(4)) | (np.roll(o, 1, axis=2) >> _U64(60))
        right = (o >> _U64(4)) | (np.roll(o, -1, axis=2) << _U64(60))
        side = np.where(((odd_row + c) & 1) == 0, left, right)
        total = o + side + np.roll(o, 1, axis=1) + np.roll(o, -1, axis=1)
        first = (chains * _U64(2) + _U64(c)) * _U64(per * 2)  # 2 calls of 8 spins per word
        a = _halves16(_words(key, offset, first, per * 2)).reshape(n, L, words, 16)  # nibble b = 8 q + pos
        cnt = ((total[..., None] >> shifts) & _U64(15)).astype(np.int64)
        b = np.arange(16)
        calls = (first[:, None, None, None] + _U64(2) * np.arange(per, dtype=_U64).reshape(1, L, words, 1)
                 + (b // 8).astype(_U64))
        bit = _decide(a, thr5[cnt], calls, b % 8, key, offset).astype(_U64)
        packed[:, c] = (bit << shifts).sum(axis=-1, dtype=_U64)
        if c == 1:
            bond = np.where(bit == 1, 2 * cnt - 4, 4 - 2 * cnt).sum(axis=(1, 2, 3))
    up = np.zeros(n, dtype=np.int64)
    for c in (0, 1):
        up += np.unpackbits(packed[:, c].view(np.uint8).reshape(n, -1), axis=1).sum(axis=1, dtype=np.int64)
    return up, bond


# --------------------------------------------------------------------------- the model

def _check_spins(a, name="state"):
    vals = _backend.to_host(a)
    if not np.all((vals == 1) | (vals == -1)):  # synchronize! (once, before a run)
        raise ValueError(f"{name} must hold only +1 and -1 spins; map a 0/1 array b with 2 * b - 1.")


class Ising(Estimator):
    """The 2-D Ising model on an L x W square lattice, sampled by checkerboard heat-bath Gibbs.

    Parameters
    ----------
    shape : (int, int) or (int, int, int)
        Rows and columns of the square lattice, or depth, rows and columns of
        the simple cubic one (byte path). Periodic boundaries need every side
        even (the checkerboard must close on itself).
    coupling : float or array (2, L, W)
        J; ferromagnetic when positive. On a 2-D lattice, one coupling per
        bond: ``coupling[0, i, j]`` joins site (i, j) to its right neighbour,
        ``coupling[1, i, j]`` to the one below (wrapping round on a periodic
        lattice; ignored past the edge of an open one). The byte path then
        keeps 16 thresholds per site, by the pattern of up neighbours.
    field : float or array of ``shape``
        h, one number or one per site.
    beta : float
        Inverse temperature.
    boundary : {"periodic", "open"}
    method : {"auto", "multispin", "byte"}
        ``"auto"`` takes the multispin path where it applies (periodic, one
        field for every site, W a multiple of 32), else bytes. Both give the
        same states for the same seed.
    backend : {"numpy", "cupy", None}
        None: the active backend.

    The settings are checked when the model is made and when ``set_params``
    changes them; the model keeps no draws, so ``sklearn.base.clone`` copies
    it, and :meth:`sample` seeds at each call from its ``random_state``.

    Examples
    --------
    >>> from gpumcmc.models import Ising
    >>> res = Ising((8, 8), beta=0.3, backend="numpy").sample(20, n_chains=2, random_state=0, progress=False)
    >>> res.magnetization.shape, res.energy.shape, res.states.shape
    ((2, 20), (2, 20), (2, 8, 8))
    """

    def __init__(self, shape, coupling=1.0, field=0.0, beta=1.0, boundary="periodic", method="auto",
                 backend=None):
        self.shape = shape
        self.coupling = coupling
        self.field = field
        self.beta = beta
        self.boundary = boundary
        self.method = method
        self.backend = backend
        self._configure()

    def set_params(self, **params):
        """Set settings (scikit-learn's ``set_params``), checked and applied at once; bad ones change nothing."""
        old = self.get_params(deep=False)
        try:
            super().set_params(**params)  # an unknown name raises after the names before it were set
            self._configure()
        except (TypeError, ValueError):
            super().set_params(**old)
            self._configure()
            raise
        return self

    def _configure(self) -> None:
        """Check the settings and work out the thresholds and the path from them."""
        shape, coupling, field, beta = self.shape, self.coupling, self.field, self.beta
        boundary, method = self.boundary, self.method
        try:
            dims = tuple(shape)
        except TypeError:
            dims = ()
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in dims):
            raise ValueError(f"shape must hold integers (the number of sites along each side), got {shape!r}.")
        dims = tuple(int(v) for v in dims)
        if len(dims) not in (2, 3):
            raise ValueError(f"shape must be (rows, columns) for a square lattice or (depth, rows, columns) for a "
                             f"cubic one, got {shape!r}.")
        if min(dims) < 2:
            raise ValueError(f"every side must be at least 2, got {dims}.")
        if boundary not in ("periodic", "open"):
            raise ValueError(f"boundary must be 'periodic' or 'open', got {boundary!r}.")
        if boundary == "periodic" and any(v % 2 for v in dims):
            raise ValueError(f"A periodic lattice needs even sides for the two-colour checkerboard, got {dims}; "
                             "use an even size or boundary='open'.")
        L, W = dims[-2:]
        if not np.isfinite(float(beta)):
            raise ValueError(f"beta must be a finite number, got {beta!r}.")
        J = np.asarray(_backend.to_host(coupling), dtype=np.float64)
        if J.ndim and (len(dims) != 2 or J.shape != (2, *dims)):
            raise ValueError(f"coupling must be one number, or (2-D lattices) an array of shape (2, L, W) = "
                             f"{(2, *dims[-2:])} holding each site's bond to its right neighbour ([0]) and to the "
                             f"one below ([1]); got shape {J.shape} for a lattice of shape {dims}.")
        if not np.all(np.isfinite(J)):
            raise ValueError("coupling contains NaN or inf; every value must be finite.")
        if float(beta) < 0:
            raise ValueError(f"beta must be >= 0, got {beta}.")
        f = _backend.to_host(field)
        f = np.asarray(f, dtype=np.float64)
        if f.ndim and f.shape != dims:
            raise ValueError(f"field has shape {f.shape} but the lattice is {dims}; pass one number or an "
                             "array of the lattice's shape.")
        if not np.all(np.isfinite(f)):
            raise ValueError("field contains NaN or inf; every value must be finite.")
        if method not in ("auto", "multispin", "byte"):
            raise ValueError(f"method must be 'auto', 'multispin' or 'byte', got {method!r}.")
        multispin_ok = len(dims) == 2 and boundary == "periodic" and f.ndim == 0 and J.ndim == 0 and W % 32 == 0
        if method == "multispin" and not multispin_ok:
            raise ValueError("method='multispin' needs a 2-D periodic lattice, one field and one coupling "
                             "for every site and a width that is a multiple of 32 (got shape "
                             f"{dims}, boundary {boundary!r}, field {'per site' if f.ndim else 'uniform'}, "
                             f"coupling {'per bond' if J.ndim else 'uniform'}); use method='byte' or 'auto'.")
        self._shape = dims
        self._dims = dims if len(dims) == 3 else (1,) + dims  # (D, L, W)
        self._beta = float(beta)
        self._method = "multispin" if (method == "multispin" or (method == "auto" and multispin_ok)) else "byte"
        self._field = f
        self._J = J
        self._by_pattern = J.ndim > 0
        if self._by_pattern:
            self._thr = _pattern_thresholds(self._beta, J, f, boundary == "periodic")
        else:
            self._thr = _thresholds(self._beta, float(J), f)
        self._thr5 = np.ascontiguousarray(self._thr[2:11:2]) if self._thr.ndim == 1 else None  # S = 2n - 4
        self._dev = {}
        self._index = None

    @property
    def n_sites(self) -> int:
        return int(np.prod(self._shape))

    @property
    def path(self) -> str:
        """The path in use: ``"multispin"`` or ``"byte"``."""
        return self._method

    def _xp(self):
        return _backend.get_backend(self.backend)

    # -- functional layer ----------------------------------------------------
    def init(self, n_chains: int = 1, random_state=None, initial="random") -> IsingState:
        """The starting state of ``n_chains`` chains.

        ``initial`` is ``"random"`` (each spin +-1 with probability 1/2, drawn
        from ``random_state``), ``"up"``, ``"down"``, or an array of +-1 of
        shape ``shape`` or ``(n_chains, *shape)``.
        """
        xp = self._xp()
        full = (n_chains, *self._shape) if isinstance(n_chains, (int, np.integer)) else None
        if isinstance(n_chains, bool) or not isinstance(n_chains, (int, np.integer)) or n_chains < 1:
            raise ValueError(f"n_chains must be a positive integer, got {n_chains!r}.")
        if xp is not np and n_chains > 65535:
            raise ValueError("at most 65,535 chains run in one launch; split the run.")
        if isinstance(initial, str):
            if initial == "random":
                u = default_rng(random_state, backend="numpy" if xp is np else "cupy").random(
                    full, dtype=np.float32)
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
            _check_spins(a, "initial")
            spins = xp.ascontiguousarray(xp.broadcast_to(a.astype(xp.int8), full))
        counts = xp.zeros((n_chains, 2), dtype=xp.int64)
        counts[:, 0] = (spins > 0).sum(axis=tuple(range(1, spins.ndim)), dtype=xp.int64)
        counts[:, 1] = bond_sum(spins, self.boundary == "periodic")
        if self._method == "multispin":
            return IsingState(None, pack(spins), counts)
        return IsingState(spins, None, counts)

    def spins(self, state: IsingState):
        """The +-1 spins of ``state``, ``(chains, *shape)`` int8, whichever path made it."""
        return state.spins if state.packed is None else unpack(state.packed)

    def _info(self, state: IsingState, xp) -> IsingInfo:
        N = self.n_sites
        up = state.counts[:, 0].astype(xp.float64)
        bond = state.counts[:, 1].astype(xp.float64)
        mag = 2.0 * up - N
        if self._field.ndim:
            h = self._dev_array("field", xp, lambda: self._field)
            field_term = (state.spins * h).sum(axis=tuple(range(1, state.spins.ndim)))
        else:
            field_term = float(self._field) * mag
        if self._by_pattern:
            spins = state.spins
            bond_term = _weighted_bond_sum(spins, self._dev_array("J", xp, lambda: self._J),
                                           self.boundary == "periodic")
        else:
            bond_term = float(self._J) * bond
        return IsingInfo(mag / N, (-bond_term - field_term) / N)

    def _dev_array(self, name, xp, make):
        if xp is np:
            return make()
        a = self._dev.get(name)
        if a is None:
            a = self._dev[name] = xp.asarray(make())
        return a

    def step(self, rng, state: IsingState, observe: bool = True):
        """One sweep (both colours) of every chain: ``(state, info)``. The state's arrays are updated in place."""
        xp = _backend.get_array_module(state.counts)
        if observe and xp is not np:
            state.counts.fill(0)
        self._sweep(rng, state, state.counts if (observe or xp is np) else None)
        return state, (self._info(state, xp) if observe else None)

    def _sweep(self, rng, state: IsingState, out) -> None:
        """One sweep of every chain, in place; adds each chain's up spins and bond sum after it to ``out``.

        ``out``: None (not counted), or a zeroed (chains, 2) int64 array on the
        state's backend, such as one slot of a (sweeps, chains, 2) buffer; on
        CuPy also the device address of one.
        """
        xp = _backend.get_array_module(state.counts)
        off = rng.advance(1)
        key = rng.key
        if xp is np:
            if self._method == "multispin":
                up, bond = _multispin_twin(state.packed, self._thr5, key, off)
            else:
                if self._index is None:
                    self._index = tuple(_byte_index(*self._dims, c) for c in (0, 1))
                thr = self._thr if self._thr.ndim == 2 else self._thr[None, :]
                spins = state.spins.reshape((state.spins.shape[0], *self._dims))
                up, bond = _byte_twin(spins, thr, self._thr.ndim == 2, self.boundary == "periodic", key, off,
                                      self._index, self._by_pattern)
            if out is not None:
                out[:, 0] = up
                out[:, 1] = bond
        else:
            self._launch(xp, state, key, off, None if out is None else
                         _loader.u64(out if isinstance(out, int) else out.data.ptr))

    def _launch(self, cp, state, key, off, counts):
        """The sweep's two launches; ``counts``: the device address of a zeroed (chains, 2) int64 block, or None."""
        n = state.counts.shape[0]
        philox = _kernel_args.philox(key, off)
        D, L, W = self._dims
        obs = counts is not None
        if self._method == "multispin":
            # the second pass counts both colours (kernels_cu/ising.cu), so the first never observes
            thr = self._dev_array("thr5", cp, lambda: self._thr5)
            per = L * (W // 32)
            for c in (0, 1):
                o = obs and c == 1
                fn = _loader.get_function(FILE, "ising_multispin<true>" if o else "ising_multispin<false>", _NAMES)
                fn((_grid(fn, per, n), n), (BLOCK,),
                   _kernel_args.args(FILE, "ising_multispin", packed=state.packed, thr=thr, rows=_loader.i64(L),
                                     words=_loader.i64(W // 32), colour=_loader.i32(c), **philox,
                                     counts=counts if o else _loader.NULL))
        else:
            fn = _loader.get_function(FILE, "ising_bytes<true>" if obs else "ising_bytes<false>", _NAMES)
            thr = self._dev_array("thr", cp, lambda: np.ascontiguousarray(self._thr))
            stride = self._thr.shape[1] if self._thr.ndim == 2 else 0
            G = (D * L * ((W + 1) // 2) + 3) // 4
            grid = _grid(fn, G, n)
            for c in (0, 1):
                fn((grid, n), (BLOCK,),
                   _kernel_args.args(FILE, "ising_bytes", spins=state.spins, thr=thr, thr_stride=_loader.i64(stride),
                                     by_pattern=_loader.i32(self._by_pattern), D=_loader.i64(D), L=_loader.i64(L),
                                     W=_loader.i64(W), periodic=_loader.i32(self.boundary == "periodic"),
                                     colour=_loader.i32(c), **philox, counts=counts if obs else _loader.NULL))

    # -- high-level ------------------------------------------------------------
    def sample(self, n_sweeps: int, burn_in: int = 0, n_chains: int = 1, random_state=None, progress: bool = True,
               initial="random", thin: int = 1) -> IsingResult:
        """Run ``burn_in + n_sweeps`` heat-bath sweeps of ``n_chains`` chains.

        Returns an :class:`IsingResult` with the magnetisation and energy per
        site of each chain after each kept sweep, ``(chains, n_sweeps //
        thin)``, the final spins, and ``to_arviz()``. ``n_sweeps=0`` gives
        empty ``(chains, 0)`` figures and the spins after the burn-in.
        ``random_state`` (an int, a ``SeedSequence``, a gpumcmc ``Generator``
        or None) seeds this call: the same seed gives the same draws every
        time.

        With one coupling and one field for every site, the sweep's kernels
        count each kept sweep's up spins and bond sum into a slot of their own
        on the device (no pass of their own, nothing per sweep on the host but
        the launches), and the figures come to the host once, at the end.
        Sweeps that are not kept (burn-in, thinned out) count nothing. A field
        per site or couplings per bond need the spins for the energy: there
        each kept sweep computes it in a pass of its own.
        """
        from ...sampling import Monitor, run

        n_sweeps = _validate.check_int(n_sweeps, "n_sweeps", 0)
        burn_in = _validate.check_int(burn_in, "burn_in", 0)
        thin = _validate.check_int(thin, "thin", 1)
        xp = self._xp()
        rng = default_rng(random_state, backend="numpy" if xp is np else "cupy")
        state = self.init(n_chains, rng, initial)
        desc = f"Ising {'x'.join(map(str, self._shape))}"
        total = burn_in + n_sweeps
        every = max(1, total // 20)
        if self._field.ndim or self._by_pattern:
            mon = [Monitor("|m|", lambda s: float(abs(_backend.to_host(s.counts[:, 0]) * 2.0 / self.n_sites - 1)
                                                  .mean()), every=every)] if progress else []
            trace = run(self.step, state, rng, n_sweeps, burn_in=burn_in, thin=thin,
                        collect=lambda s, info: {"magnetization": info.magnetization, "energy": info.energy},
                        monitors=mon, progress=progress, desc=desc, n_chains=n_chains)
            for name in ("magnetization", "energy"):
                trace.draws.setdefault(name, np.zeros((n_chains, 0)))
            return IsingResult(trace, self.spins(trace.state))

        kept = n_sweeps // thin
        slots = xp.zeros((kept + 1, n_chains, 2), dtype=xp.int64)  # slot `kept`: the last sweep when not kept
        where = {"sweep": 0, "last": -1}
        slot = (lambda k: slots[k]) if xp is np else (lambda k, base=slots.data.ptr: base + 16 * n_chains * k)

        def sweep(r, s):
            j = where["sweep"]
            where["sweep"] = j + 1
            i = j - burn_in
            k = i // thin if i >= 0 and (i + 1) % thin == 0 else (kept if j + 1 == total else -1)
            if k >= 0:
                where["last"] = k
            self._sweep(r, s, slot(k) if k >= 0 else None)
            return s, None

        def abs_m(s):  # the progress bar's figure, from the last counted sweep (synchronises)
            k = where["last"]
            if k < 0:
                return float("nan")
            up = _backend.to_host(slots[k, :, 0])
            return float(np.abs(up * 2.0 / self.n_sites - 1).mean())

        mon = [Monitor("|m|", abs_m, every=every)] if progress else []
        trace = run(sweep, state, rng, n_sweeps, burn_in=burn_in, thin=thin, monitors=mon, progress=progress,
                    desc=desc, n_chains=n_chains)
        if where["last"] >= 0:
            state.counts[...] = slots[where["last"]]
        counts = np.moveaxis(_backend.to_host(slots[:kept]), 0, 1)  # (chains, kept, 2)
        N = self.n_sites
        up = counts[..., 0].astype(np.float64)
        bond = counts[..., 1].astype(np.float64)
        mag = 2.0 * up - N
        trace.draws = {"magnetization": mag / N,
                       "energy": (-(float(self._J) * bond) - float(self._field) * mag) / N}
        return IsingResult(trace, self.spins(trace.state))

    def energy(self, spins):
        """Energy per site of +-1 ``spins`` of the lattice's shape, or with a leading chain axis."""
        xp = _backend.get_array_module(spins)
        batched = spins.ndim == len(self._shape) + 1
        s = spins if batched else spins[None]
        periodic = self.boundary == "periodic"
        if self._by_pattern:
            bond = _weighted_bond_sum(s, self._J if xp is np else xp.asarray(self._J), periodic)
        else:
            bond = float(self._J) * bond_sum(s, periodic).astype(xp.float64)
        h = self._field if xp is np else xp.asarray(self._field)
        e = (-bond - (s * h).sum(axis=tuple(range(1, s.ndim)))) / self.n_sites
        return e if batched else e[0]


def _grid(fn, items: int, n_chains: int) -> int:
    """Blocks along x for ``items`` work items of each chain: one full wave of resident blocks over the GPU."""
    want = max(1, (_loader.sm_count() * _loader.resident_blocks(fn, BLOCK)) // max(1, n_chains))
    return max(1, min(-(-items // BLOCK), want))


# --------------------------------------------------------------------------- denoising

def denoise(image, coupling: float = 1.0, strength: float = 2.1, bias: float = 0.0, n_sweeps: int = 200,
            burn_in: int = 50, n_chains: int = 4, random_state=None, progress: bool = True, backend=None):
    """Posterior mean of a binary image under the Ising prior of Bishop (2006, section 8.3.3).

    The energy is ``-coupling sum_<ij> x_i x_j - strength sum_i x_i y_i - bias
    sum_i x_i`` for the clean image x and the noisy image y (both +-1), with
    open boundaries; chains start from the noisy image. ``image`` may hold
    0/1, booleans or +-1.

    Returns the posterior mean in the coding of the input: ``P(x_i = 1)`` for
    0/1 or boolean input, ``E[x_i]`` in [-1, 1] for +-1 input. Threshold it
    at 0.5 (or 0) for the MAP-like clean image.

    Examples
    --------
    >>> import numpy as np
    >>> from gpumcmc.models.ising import denoise
    >>> img = np.zeros((12, 12), dtype=np.uint8); img[3:9, 3:9] = 1
    >>> post = denoise(img, n_sweeps=20, burn_in=5, n_chains=2, random_state=0, progress=False, backend="numpy")
    >>> post.shape, float(post.min()) >= 0.0
    ((12, 12), True)
    """
    from ...sampling import run

    xp = _backend.get_backend(backend)
    y = np.asarray(_backend.to_host(image))
    if y.ndim != 2:
        raise ValueError(f"image must be 2-d (rows, columns), got shape {y.shape}.")
    vals = np.unique(y)
    if y.dtype == bool or set(vals.tolist()) <= {0, 1}:
        pm1, zero_one = 2 * y.astype(np.int8) - 1, True
    elif set(vals.tolist()) <= {-1, 1}:
        pm1, zero_one = y.astype(np.int8), False
    else:
        raise ValueError(f"image must be binary (0/1, booleans or +-1), got values {vals[:6].tolist()}...; "
                         "threshold it first, e.g. image > 0.5.")
    model = Ising(y.shape, coupling=coupling, field=strength * pm1 + bias, beta=1.0, boundary="open",
                  method="byte", backend=backend)
    rng = default_rng(random_state, backend="numpy" if xp is np else "cupy")
    state = model.init(n_chains, rng, initial=xp.asarray(pm1))
    acc = xp.zeros((y.shape[0], y.shape[1]), dtype=xp.float64)

    def add(it, s, info):
        if it > burn_in:
            acc[...] += s.spins.sum(axis=0)

    run(lambda r, s: model.step(r, s, observe=False), state, rng, n_sweeps, burn_in=burn_in, progress=progress,
        desc="denoise", n_chains=n_chains, callback=add)
    mean = acc / (n_sweeps * n_chains)
    return (mean + 1.0) / 2.0 if zero_one else mean


Ising.denoise = staticmethod(denoise)
