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

import functools

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
    """The NumPy rounds of :func:`philox_rounds` with preallocated buffers, written in place: faster
    than a new array for every operation of every round."""
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


# ---------------------------------------------------------------------------
# The NumPy twins' fast path: the same words and conversions, fewer passes
# ---------------------------------------------------------------------------
# Product words as uint32 views of a uint64 array: the low word first on a
# little-endian machine.
_LO, _HI = (0, 1) if np.little_endian else (1, 0)
_U32 = np.uint32
_U64 = np.uint64
_INT32 = 0xFFFFFFFF


class Words:
    """Scratch for :func:`philox32` on up to ``n`` counters at a time.

    NumPy spends most of a Philox call moving its temporaries, so the twins
    reuse one workspace per call and go through their counters in chunks
    whose temporaries stay in the CPU's cache.
    """

    def __init__(self, n: int):
        self.n = n
        self._prod = [np.empty(n, dtype=np.uint64) for _ in range(4)]
        self._out = [np.empty(n, dtype=np.uint32) for _ in range(2)]
        self._views: dict = {}

    def views(self, n: int):
        """For ``n`` counters: the four products (uint64) with their (high, low)
        uint32 views, and the two uint32 outputs; made once per ``n``."""
        v = self._views.get(n)
        if v is None:
            if n > self.n:
                raise ValueError(f"Words holds {self.n} counters, not {n}.")
            prods = []
            for p in self._prod:
                w = p[:n].view(np.uint32)
                prods.append((p[:n], w[_HI::2], w[_LO::2]))
            v = self._views[n] = (prods, self._out[0][:n], self._out[1][:n])
            if len(self._views) > 8:  # calls of many sizes: keep the latest few
                self._views.pop(next(iter(self._views)))
        return v


def philox32(c0, c1, c2, c3, k0: int, k1: int, work: Words, n: int, *, u01=None):
    """Philox4x32-10 of ``n`` counters, as :func:`philox_rounds` computes it.

    Each counter word is a Python int (the same for every counter) or a
    uint32 array of length ``n``; the key is two Python ints. Words that are
    ints stay ints for as long as the rounds allow, so a counter that varies
    in one word only costs half a round in each of the first two rounds.
    Returns the four output words as uint32 arrays of length ``n``: views of
    ``work``, valid until its next use.

    With ``u01``, two float64 arrays of length ``n``, fills them with
    ``u01_f64(w0, w1)`` and ``u01_f64(w2, w3)`` instead and returns them. The
    last round then forms each pair as one uint64, high word first: the
    product ``c2 M1`` holds ``w1`` as its low word and, with the previous
    round's product shifted up 32 bits and the key, ``w0`` above it (so for
    ``w2, w3`` from ``c0 M0``); ``u01_f64``'s 52 bits are its top 52.
    """
    prods, o0, o2 = work.views(n)
    mul, xor = np.multiply, np.bitwise_xor
    for r, (k0, k1, s0, s1) in enumerate(_round_keys(k0, k1)):
        (p0, h0, l0), (p1, h1, l1) = prods[2 * (r & 1):2 * (r & 1) + 2]
        if r == 9 and u01 is not None and not any(isinstance(c, int) for c in (c0, c1, c2, c3)):
            mul(c0, M0, out=p0, dtype=np.uint64)
            mul(c2, M1, out=p1, dtype=np.uint64)
            (q0, _, _), (q1, _, _) = prods[0:2]  # round 8's products: their low words are c3, c1
            for prev, p, k, out in ((q1, p1, k0, u01[0]), (q0, p0, k1, u01[1])):
                np.left_shift(prev, _S32, out=prev)
                xor(prev, p, out=prev)
                bits = out.view(np.uint64)
                np.right_shift(prev, _S12, out=bits)
                xor(bits, _U64((k << 20) | 0x3FF0000000000000), out=bits)  # the key and 1.0's exponent
                out -= 1.0 - 2.0**-53
            return u01
        if isinstance(c0, int):
            p = c0 * 0xD2511F53
            h0, l0 = p >> 32, p & _INT32
        else:
            mul(c0, M0, out=p0, dtype=np.uint64)
        if isinstance(c2, int):
            p = c2 * 0xCD9E8D57
            h1, l1 = p >> 32, p & _INT32
        else:
            mul(c2, M1, out=p1, dtype=np.uint64)
        if isinstance(h1, int) or isinstance(c1, int):
            c0 = _xor3(h1, c1, k0, o0)
        else:
            xor(h1, c1, out=o0)
            xor(o0, s0, out=o0)
            c0 = o0
        if isinstance(h0, int) or isinstance(c3, int):
            c2 = _xor3(h0, c3, k1, o2)
        else:
            xor(h0, c3, out=o2)
            xor(o2, s1, out=o2)
            c2 = o2
        c1, c3 = l1, l0
    words = tuple(np.full(n, c, dtype=np.uint32) if isinstance(c, int) else c for c in (c0, c1, c2, c3))
    if u01 is not None:
        u01_f64_into(words[0], words[1], u01[0])
        u01_f64_into(words[2], words[3], u01[1])
        return u01
    return words


@functools.lru_cache(maxsize=64)
def _round_keys(k0: int, k1: int):
    """The ten rounds' keys: as ints and as uint32 scalars."""
    out = []
    for r in range(10):
        if r:
            k0 = (k0 + W0) & _INT32
            k1 = (k1 + W1) & _INT32
        out.append((k0, k1, _U32(k0), _U32(k1)))
    return tuple(out)


def _xor3(a, b, k: int, out):
    """``a ^ b ^ k`` into ``out`` (an int when ``a`` and ``b`` are ints)."""
    if isinstance(a, int) and isinstance(b, int):
        return a ^ b ^ k
    if isinstance(a, int):
        a, b = b, a
    if isinstance(b, int):
        return np.bitwise_xor(a, _U32(b ^ k), out=out)
    np.bitwise_xor(a, b, out=out)
    np.bitwise_xor(out, _U32(k), out=out)
    return out


_EXP32 = _U32(0x3F800000)  # the bits of 1.0f
_EXP64 = _U64(0x3FF0000000000000)  # the bits of 1.0
_S20 = _U64(20)
_S12 = _U64(12)


def u01_f32_into(w, out):
    """:func:`u01_f32` of uint32 words into the float32 array ``out``.

    Sets the 23 bits ``w >> 9`` under the exponent of 1.0, which gives
    ``1 + m 2**-23``, and subtracts ``1 - 2**-24``: the difference
    ``(m + 0.5) 2**-23`` is exact, so the bits are those of :func:`u01_f32`.
    """
    bits = out.view(np.uint32)
    np.right_shift(w, _U32(9), out=bits)
    np.bitwise_or(bits, _EXP32, out=bits)
    out -= np.float32(1.0 - 2.0**-24)
    return out


def u01_f64_into(a, b, out):
    """:func:`u01_f64` of uint32 word pairs into the float64 array ``out`` (exact, as above)."""
    bits = out.view(np.uint64)
    np.left_shift(a, _S20, out=bits, dtype=np.uint64)
    np.bitwise_or(bits, np.right_shift(b, _U32(12)), out=bits, dtype=np.uint64)
    np.bitwise_or(bits, _EXP64, out=bits)
    out -= 1.0 - 2.0**-53
    return out


def u01_f64_from32_into(w, out):
    """:func:`u01_f64_from32` of uint32 words into the float64 array ``out`` (exact, as above)."""
    bits = out.view(np.uint64)
    np.left_shift(w, _S20, out=bits, dtype=np.uint64)
    np.bitwise_or(bits, _EXP64, out=bits)
    out -= 1.0 - 2.0**-33
    return out


# i**n for n = round(4 u2) in 0 .. 4: the quadrant of sincospi(2 u2) (see box_muller_into).
_QUADRANT = np.array([1, 1j, -1, -1j, 1], dtype=np.complex128)


def box_muller_into(u1, u2, z, tmp):
    """:func:`box_muller` of float64 ``u1, u2`` as one complex array ``z``:
    ``z.real = r cos(2 pi u2)``, ``z.imag = r sin(2 pi u2)``, the same bits.

    ``tmp`` is a float64 scratch array; ``u1`` is overwritten with ``r``,
    which is returned with ``z``. As :func:`sincospi`, ``4 u2 = n + f`` with
    ``n`` the nearest integer (never a tie: ``4 u2`` is an odd multiple of a
    power of two below 1/2) and ``|f| <= 1/2`` exact; ``pi/2 f`` is the
    argument ``pi r`` that it passes to sine and cosine, rounded the same;
    and the quadrant is applied as a product with ``i**n``, exact because
    ``i**n`` has one non-zero part, of modulus 1.
    """
    np.log(u1, out=u1)
    u1 *= -2.0
    np.sqrt(u1, out=u1)
    np.multiply(u2, 4.0, out=tmp)
    n = np.rint(tmp)
    tmp -= n
    tmp *= 0.5 * np.pi
    np.cos(tmp, out=z.real)
    np.sin(tmp, out=z.imag)
    z *= _QUADRANT[n.astype(np.intp)]
    return u1, z
