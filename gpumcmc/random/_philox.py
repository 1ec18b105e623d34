"""Philox4x32-10 in NumPy, word for word the twin of ``kernels_cu/philox.cuh``.

Counter layout (shared with every kernel): ``(idx_lo, idx_hi, off_lo, off_hi)``
with key ``(k0, k1)``. ``off`` is the generator's call offset, advanced by one
for every public call so that no two calls share a counter; ``idx`` is a 64-bit
index chosen by the sampler: the block of elements a fill writes, or
``(element, attempt)`` for rejection samplers. Because the index is the
element's, not the thread's, draws do not depend on launch shape or GPU model.

The uniform and normal conversions below are the ones of ``philox.cuh``.
"""

from __future__ import annotations

import numpy as np

M0 = np.uint64(0xD2511F53)
M1 = np.uint64(0xCD9E8D57)
W0 = 0x9E3779B9
W1 = 0xBB67AE85
_MASK = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)

TWO_M23 = np.float32(2.0**-23)
TWO_M52 = 2.0**-52
TWO_M32 = 2.0**-32


def philox_rounds(c0, c1, c2, c3, k0: int, k1: int):
    """Ten Philox rounds on uint64 arrays (or scalars) holding 32-bit words.

    ``k0``/``k1`` are Python ints (one key for every counter) or uint64 arrays.
    Works unchanged on CuPy arrays. Returns the four output words as uint64.
    """
    k0 = np.uint64(k0) if isinstance(k0, int) else k0
    k1 = np.uint64(k1) if isinstance(k1, int) else k1
    arrays = (c0, c1, c2, c3, k0, k1)
    if all(isinstance(a, (np.ndarray, np.generic)) for a in arrays):
        return _philox_rounds_inplace(*arrays)
    for r in range(10):
        if r:
            k0 = (k0 + np.uint64(W0)) & _MASK
            k1 = (k1 + np.uint64(W1)) & _MASK
        p0 = M0 * c0
        p1 = M1 * c2
        c0, c1, c2, c3 = (p1 >> _S32) ^ c1 ^ k0, p1 & _MASK, (p0 >> _S32) ^ c3 ^ k1, p0 & _MASK
    return c0, c1, c2, c3


def _philox_rounds_inplace(c0, c1, c2, c3, k0, k1):
    """The NumPy rounds of :func:`philox_rounds` with preallocated buffers (about 1.5x faster)."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in (c0, c1, c2, c3, k0, k1)))
    c0, c1, c2, c3 = (np.array(np.broadcast_to(c, shape), dtype=np.uint64) for c in (c0, c1, c2, c3))
    p0 = np.empty(shape, dtype=np.uint64)
    p1 = np.empty(shape, dtype=np.uint64)
    for r in range(10):
        if r:
            k0 = (k0 + np.uint64(W0)) & _MASK
            k1 = (k1 + np.uint64(W1)) & _MASK
        np.multiply(c0, M0, out=p0)
        np.multiply(c2, M1, out=p1)
        np.right_shift(p1, _S32, out=c0)
        c0 ^= c1
        c0 ^= k0
        np.right_shift(p0, _S32, out=c2)
        c2 ^= c3
        c2 ^= k1
        np.bitwise_and(p1, _MASK, out=c1)
        np.bitwise_and(p0, _MASK, out=c3)
    return c0, c1, c2, c3


def block_words(start: int, count: int, key: tuple[int, int], offset: int):
    """Words of Philox blocks ``start .. start+count-1`` at call ``offset``.

    Returns four uint64 arrays of length ``count`` (each holding a 32-bit word).
    """
    idx = np.arange(start, start + count, dtype=np.uint64)
    off_lo = np.uint64(offset & 0xFFFFFFFF)
    off_hi = np.uint64((offset >> 32) & 0xFFFFFFFF)
    return philox_rounds(idx & _MASK, idx >> _S32, off_lo, off_hi, key[0], key[1])


def u01_f32(w):
    """float32 uniforms in (0, 1) from 32-bit words: ``((w >> 9) + 0.5) * 2**-23``."""
    return ((w >> np.uint64(9)).astype(np.float32) + np.float32(0.5)) * TWO_M23


def u01_f64(a, b):
    """float64 uniforms in (0, 1) from word pairs: 52 bits ``a << 20 | b >> 12``, plus half a step."""
    m = (a << np.uint64(20)) | (b >> np.uint64(12))
    return (m.astype(np.float64) + 0.5) * TWO_M52


def u01_f64_from32(w):
    """float64 uniforms in (0, 1) from one word: ``(w + 0.5) * 2**-32``."""
    return (w.astype(np.float64) + 0.5) * TWO_M32


def sincospi(x):
    """``(sin(pi x), cos(pi x))`` for float64 ``x``, reduced exactly like CUDA's ``sincospi``.

    Reducing ``x`` by half-turns before multiplying by pi keeps the relative
    error near the zeros of sine and cosine at a few ulp, where
    ``cos(2 * pi * u)`` would lose it.
    """
    n = np.rint(2.0 * x)
    r = x - 0.5 * n  # exact: |r| <= 1/4
    q = n.astype(np.int64) & 3
    s = np.sin(np.pi * r)
    c = np.cos(np.pi * r)
    sin = np.where(q == 0, s, np.where(q == 1, c, np.where(q == 2, -s, -c)))
    cos = np.where(q == 0, c, np.where(q == 1, -s, np.where(q == 2, -c, s)))
    return sin, cos


def box_muller(u1, u2):
    """Two standard normals from two float64 uniforms: ``r cos(2 pi u2)``, ``r sin(2 pi u2)``."""
    r = np.sqrt(-2.0 * np.log(u1))
    s, c = sincospi(2.0 * u2)
    return r * c, r * s
