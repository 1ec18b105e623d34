"""The sweep's launches of ``kernels_cu/ising.cu`` (:class:`_GpuOps`) and their NumPy twins (:class:`_NumpyOps`),
each with ``sweep(model, xp, state, key, off, out)``; the twins follow the kernels' counter layout."""

from __future__ import annotations

import numpy as np

from ... import _kernel_args, _loader
from ... import backend as _backend
from ..._config import config
from ...random._philox import philox_rounds

FILE = "ising.cu"
_NAMES = ("ising_multispin<true>", "ising_multispin<false>", "ising_bytes<true>", "ising_bytes<false>")
BLOCK = 256
_U64 = np.uint64
_MASK32 = _U64(0xFFFFFFFF)


def bond_sum(spins, periodic: bool = True):
    """sum_<ij> s_i s_j per chain (int64), for (chains, L, W) or (chains, D, L, W) spins of +-1; a periodic side
    of length 1 has no bonds along it (a 2-D lattice is a 3-D one of depth 1)."""
    xp = _backend.get_array_module(spins)
    s = spins.astype(xp.int8)  # products of +-1 stay in int8; sums go to int64
    axes, total = tuple(range(1, s.ndim)), xp.zeros(s.shape[0], dtype=xp.int64)
    for ax in axes:
        if s.shape[ax] < 2:
            continue
        if periodic:
            total += (s * xp.roll(s, -1, axis=ax)).sum(axis=axes, dtype=xp.int64)
        else:
            t = xp.moveaxis(s, ax, -1)
            total += (t[..., 1:] * t[..., :-1]).sum(axis=axes, dtype=xp.int64)
    return total


def _words(key, offset: int, first, count: int):
    """Philox words of counter indices first[n] + 0..count-1 (first: (chains,) uint64) -> (chains, count, 4)."""
    idx = first[:, None] + np.arange(count, dtype=_U64)[None, :]
    w = philox_rounds(idx & _MASK32, idx >> _U64(32), _U64(offset & 0xFFFFFFFF), _U64(offset >> 32),
                      key[0], key[1])
    return np.stack(w, axis=-1)


def _halves16(w):
    """(..., 4) Philox words -> (..., 8) 16-bit halves: half h of word e at position 2 e + h (h = 0: low bits)."""
    return np.stack([w & _U64(0xFFFF), w >> _U64(16)], axis=-1).reshape(*w.shape[:-1], 8)


def _decide(a, T, calls, pos, key, offset: int):
    """Heat-bath decisions U < T for U = a 2^16 + b, b drawn only where a equals T's high half: ``a`` (uint64)
    and the 32-bit ``T`` of one shape; ``calls``/``pos``, broadcastable to it, the Philox call (uint64) and
    position (0..7) of each; ``b`` is half ``pos % 2`` of word ``pos // 2`` of call ``calls | 2**63``."""
    T = T.astype(_U64)
    hi = T >> _U64(16)
    up, tie = a < hi, np.nonzero(a == hi)
    if tie[0].size:
        call = np.broadcast_to(calls, a.shape)[tie] | _U64(1 << 63)
        p = np.broadcast_to(pos, a.shape)[tie]
        w = np.stack(philox_rounds(call & _MASK32, call >> _U64(32), _U64(offset & 0xFFFFFFFF),
                                   _U64(offset >> 32), key[0], key[1]), axis=-1)
        b = _halves16(w)[np.arange(len(p)), p]
        up[tie] = b < (T[tie] & _U64(0xFFFF))
    return up


def _byte_index(D: int, L: int, W: int, c: int):
    """Sites of colour c in the kernel's half-index order f: (rows r = d L + i, columns, Philox call f // 8,
    16-bit half f % 8)."""
    Wh = (W + 1) // 2
    f = np.arange(D * L * Wh)
    r = f // Wh
    d, i = r // L, r % L
    j = 2 * (f - r * Wh) + ((d + i + c) & 1)
    keep = j < W
    f, r, j = f[keep], r[keep], j[keep]
    return r, j, f // 8, f % 8


def _neighbours(s, periodic: bool):
    """Neighbour spins of every site of (chains, D, L, W) spins, 0 where missing, int16:
    [up, down, left, right] and, for D > 1, [front, back]."""
    s, out = s.astype(np.int16), []
    for ax in (2, 3) + ((1,) if s.shape[1] > 1 else ()):
        for k in (1, -1):  # the neighbour before, then the one after
            nb = np.roll(s, k, ax)
            if not periodic:  # none past the edge
                nb[(slice(None),) * ax + (0 if k == 1 else -1,)] = 0
            out.append(nb)
    return out


def _byte_twin(spins, thr, per_site: bool, periodic: bool, key, offset: int, index, by_pattern: bool = False):
    """One sweep of the byte kernel on NumPy, in place; ``spins`` (chains, D, L, W). Returns (up, bond) per chain."""
    n, D, L, W = spins.shape
    G = (D * L * ((W + 1) // 2) + 7) // 8
    rows, chains = spins.reshape(n, D * L, W), np.arange(n, dtype=_U64)  # rows: a view, writes go to spins
    for c in (0, 1):
        i, j, g, q = index[c]
        first = (chains * _U64(2) + _U64(c)) * _U64(G)
        a = _halves16(_words(key, offset, first, G))[:, g, q]
        nb = [x.reshape(n, D * L, W)[:, i, j] for x in _neighbours(spins, periodic)]
        if by_pattern:
            idx = sum((x > 0).astype(np.int64) << k for k, x in enumerate(nb[:4]))
        else:
            idx = sum(x.astype(np.int64) for x in nb) + 6
        site = (i * W + j) if per_site else np.zeros_like(i)
        calls = first[:, None] + g.astype(_U64)[None, :]
        up = _decide(a, thr[site, idx], calls, q[None, :], key, offset)
        rows[:, i, j] = np.where(up, 1, -1).astype(np.int8)
    up = (spins > 0).sum(axis=(1, 2, 3), dtype=np.int64)
    return up, bond_sum(spins, periodic)


def _multispin_twin(packed, thr5, key, offset: int):
    """One sweep of the multispin kernel on NumPy, in place; returns (up, bond) per chain."""
    n, _, L, words = packed.shape
    per, chains, shifts = L * words, np.arange(n, dtype=_U64), _U64(4) * np.arange(16, dtype=_U64)
    odd_row, bond = (np.arange(L) & 1)[None, :, None], np.zeros(n, dtype=np.int64)
    for c in (0, 1):
        o = packed[:, 1 - c]
        left = (o << _U64(4)) | (np.roll(o, 1, axis=2) >> _U64(60))
        right = (o >> _U64(4)) | (np.roll(o, -1, axis=2) << _U64(60))
        side = np.where(((odd_row + c) & 1) == 0, left, right)
        total = o + side + np.roll(o, 1, axis=1) + np.roll(o, -1, axis=1)
        first = (chains * _U64(2) + _U64(c)) * _U64(per * 2)  # 2 calls of 8 spins per word
        a = _halves16(_words(key, offset, first, per * 2)).reshape(n, L, words, 16)  # nibble b = 8 q + pos
        cnt, b = ((total[..., None] >> shifts) & _U64(15)).astype(np.int64), np.arange(16)
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


class _NumpyOps:
    """The sweep on NumPy: the kernels' twins."""

    @staticmethod
    def sweep(model, xp, state, key, off, out) -> None:
        """One sweep of every chain of ``model``, in place; each chain's up spins and bond sum to ``out``."""
        if model._method == "multispin":
            up, bond = _multispin_twin(state.packed, model._thr5, key, off)
        else:
            if model._index is None:
                model._index = tuple(_byte_index(*model._dims, c) for c in (0, 1))
            thr = model._thr if model._thr.ndim == 2 else model._thr[None, :]
            spins = state.spins.reshape((state.spins.shape[0], *model._dims))
            up, bond = _byte_twin(spins, thr, model._thr.ndim == 2, model.boundary == "periodic", key, off,
                                  model._index, model._by_pattern)
        if out is not None:
            out[:, 0], out[:, 1] = up, bond


class _GpuOps:
    """The sweep on CuPy: two launches of one kernel, one per colour."""

    @staticmethod
    def sweep(model, cp, state, key, off, out) -> None:
        """One sweep of every chain of ``model``, in place; adds each chain's up spins and bond sum to ``out``."""
        counts = None if out is None else _loader.u64(out if isinstance(out, int) else out.data.ptr)
        philox = _kernel_args.philox(key, off)  # its own line: the CPU launch check reads the keywords it gives
        n, (D, L, W), obs = state.counts.shape[0], model._dims, out is not None
        if model._method == "multispin":
            # the second pass counts both colours (kernels_cu/ising.cu), so the first never observes
            thr = model._dev_array("thr5", cp, lambda: model._thr5)
            per = L * (W // 32)
            for c in (0, 1):
                o = obs and c == 1
                fn = _loader.get_function(FILE, "ising_multispin<true>" if o else "ising_multispin<false>", _NAMES,
                                          config.ising_defines)
                fn((_grid(fn, per, n), n), (BLOCK,),
                   _kernel_args.args(FILE, "ising_multispin", packed=state.packed, thr=thr, rows=_loader.i64(L),
                                     words=_loader.i64(W // 32), colour=_loader.i32(c), **philox,
                                     counts=counts if o else _loader.NULL))
        else:
            fn = _loader.get_function(FILE, "ising_bytes<true>" if obs else "ising_bytes<false>", _NAMES,
                                      config.ising_defines)
            thr = model._dev_array("thr", cp, lambda: np.ascontiguousarray(model._thr))
            stride = model._thr.shape[1] if model._thr.ndim == 2 else 0
            grid = _grid(fn, (D * L * ((W + 1) // 2) + 3) // 4, n)
            for c in (0, 1):
                fn((grid, n), (BLOCK,),
                   _kernel_args.args(FILE, "ising_bytes", spins=state.spins, thr=thr, thr_stride=_loader.i64(stride),
                                     by_pattern=_loader.i32(model._by_pattern), D=_loader.i64(D), L=_loader.i64(L),
                                     W=_loader.i64(W), periodic=_loader.i32(model.boundary == "periodic"),
                                     colour=_loader.i32(c), **philox, counts=counts if obs else _loader.NULL))


def _grid(fn, items: int, n_chains: int) -> int:
    """Blocks along x for ``items`` work items of each chain: one full wave of resident blocks over the GPU."""
    want = max(1, (_loader.sm_count() * _loader.resident_blocks(fn, BLOCK)) // max(1, n_chains))
    return max(1, min(-(-items // BLOCK), want))
