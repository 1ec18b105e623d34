"""Gamma, beta, Dirichlet and exponential variates: CUDA launchers and their NumPy twin.

The kernels are in ``kernels_cu/gamma.cu`` and ``kernels_cu/gamma.cuh``; the
twin below follows them counter for counter and expression for expression.

Gamma (Marsaglia and Tsang, 2000). Element ``i`` of a call at offset ``off``
(``i`` the flat index of the output, ``i < 2**40``) draws from Philox blocks
``j`` of 64-bit indices ``x`` (the block at ``idx = x + 2**40 * j``). Elements
come in pairs ``p = i // 2`` (halves ``h = i % 2``) that share trial 0, so that
one Box-Muller pair and one Philox block (two in float64) serve two elements:

================  ==========================================  ==========================================
                  float32                                     float64
================  ==========================================  ==========================================
trial 0           block 0 of ``2p``: ``z0, z1`` = Box-Muller  block 0 of ``2p``: ``z0, z1`` = Box-Muller
                  of ``u01_f32(w0), u01_f32(w1)``; half       of ``u01_f64(w0, w1), u01_f64(w2, w3)``;
                  ``h`` takes ``(z_h, u01_f32(w2))`` or       block 0 of ``2p + 1``: half ``h`` takes
                  ``(z_h, u01_f32(w3))``                      ``u01_f64(w0, w1)`` or ``u01_f64(w2, w3)``
boost ``U``       block 1 of ``2p``: ``u01_f32(w0)`` or       block 1 of ``2p``: ``u01_f64(w0, w1)`` or
(shape < 1)       ``u01_f32(w1)``                             ``u01_f64(w2, w3)``
attempt ``t>=1``  block ``1 + t`` of ``i``: trials ``2t - 1   block ``2t`` of ``i``: the normals as above;
                  = (z0, u01_f32(w2))``, ``2t = (z1,          block ``2t + 1`` of ``i``: the trials'
                  u01_f32(w3))``, normals as above            uniforms ``u01_f64(w0, w1), (w2, w3)``
================  ==========================================  ==========================================

Trial ``k`` is ``(x, u)``; with ``a' = a`` (or ``a + 1`` below 1),
``d = a' - 1/3`` and ``c = 1 / sqrt(9 d)``: ``v = 1 + c x`` must be
positive, and the trial is accepted if ``u m < m - (c x**2)**2 / 12`` with
``m = min(v, 1)`` (a squeeze inside the next test's region, proved in
``gamma.cuh``) or ``log u < x**2 / 2 + d (log(v**3) - v**3 + 1)`` (see
:func:`mt_log_term`).
Then ``G(a') = d v**3``; below shape 1, ``G(a) = G(a') 2**(log(U) log2(e) / a)`` and
``log G(a) = log G(a') + log(U) / a``. Float32 draws are computed in float32
and float64 draws in float64 on both backends, except the twin's normals,
which it computes in float64 and rounds once. Where the float32 kernel trades
exactness for speed, the twin keeps the exact formula: the kernel's
``c = rsqrt(9 d)`` (the hardware approximation, as ``rsqrtf``) is within
2 ulp of the twin's ``1 / sqrt(9 d)``, its logarithm (``log_pos``, a
polynomial for positive normal arguments) is within 1 ulp as ``logf`` is,
and its normals take the angle from ``__sincosf`` (absolute error below
6e-7 r).
Both sides accept the same trial but for rounding right at the acceptance
boundary.

Beta element ``i`` uses gamma elements ``2i`` (``a``) and ``2i + 1`` (``b``),
one pair; Dirichlet row ``r`` of ``K`` uses gamma elements ``r K + k``, so a
Dirichlet draw equals ``gamma(alpha, log=True)`` normalised by the
log-sum-exp of its row, which is how the GPU computes it too.
Exponential element ``i`` comes from Philox block ``i // P`` at index ``i // P``
(the fills' layout; ``P`` = 4 for float32, 2 for float64): float32
``-log(u01_f64_from32(w[i % 4]))`` computed in float64 and rounded once,
float64 ``-log(u01_f64(w0, w1))`` and ``-log(u01_f64(w2, w3))``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import _kernel_args, _loader, _status
from .._config import config, forward, memo
from .. import _validate as _v
from ._params import _as, _flat, _on_this_gpu, out_shape, resolve_dtype
from .. import backend as _backend
from .._nvtx import annotate
from . import _fill
from ._philox import Words, box_muller, box_muller_into, philox32, u01_f32, u01_f32_into, u01_f64, u01_f64_into

FILE = "gamma.cu"
_NAMES = tuple(
    name
    for t in ("float", "double")
    for name in (f"gamma_draw<{t}, false>", f"gamma_draw<{t}, true>", f"beta_draw<{t}>", f"lse_rows<{t}>",
                 f"dirichlet_draw<{t}>", f"gamma_counts_draw<{t}, false>", f"gamma_counts_draw<{t}, true>",
                 f"dirichlet_counts_draw<{t}>")
)
_CTYPE = _loader.CTYPE

MAX_ATTEMPTS = 1 << 22  # GPUMCMC_GAMMA_MAX_ATTEMPTS: never reached for valid shapes
INDEX_LIMIT = 1 << 40  # element indices must stay below 2**40 (the counter holds 2**40 j + i)
# Elements per chunk of the twin (even), config.gamma_twin_chunk: keeps its temporaries in cache.
forward(__name__, {"_CHUNK": "gamma_twin_chunk"})
# Block size (the kernels' GPUMCMC_GAMMA_BLOCK).
_BLOCK = 256

NULL = _loader.NULL
_MASK = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


# ---------------------------------------------------------------------------
# NumPy twin of gamma.cuh
# ---------------------------------------------------------------------------
def _consts(dtype):
    t = np.dtype(dtype).type
    one = t(1)
    return {
        "zero": t(0),
        "one": one,
        "two": t(2),
        "three": t(3),
        "nine": t(9),
        "half": t(0.5),
        "third": t(1.0 / 3.0),
        "twelfth": t(1.0 / 12.0),
        "quarter": t(0.25),
        # (1/3, 1/5, ...) as the kernels' constant-folded 1.0f / k (1.0 / k).
        "series": [one / t(k) for k in ((3, 5, 7, 9, 11) if t is np.float32 else range(3, 23, 2))],
    }


def mt_log_term(cx, y):
    """``log(v**3) - v**3 + 1`` from ``cx = v - 1`` and ``y = v**3 - 1``, as in ``gamma.cuh``.

    Below ``|y| = 1/4`` it sums ``-y s + 2 s**3 (1/3 + s**2/5 + ...)`` with
    ``s = y / (2 + y)``, which keeps full relative precision where
    ``log1p(y) - y`` would cancel; above, ``3 log1p(cx) - y``. NumPy or CuPy arrays.
    """
    xp = _backend.get_array_module(cx, y)
    k = _consts(y.dtype)
    small = xp.abs(y) < k["quarter"]
    ys = xp.where(small, y, k["zero"])
    s = ys / (k["two"] + ys)
    s2 = s * s
    series = k["series"]
    p = series[-1]
    for coef in reversed(series[:-1]):
        p = coef + s2 * p
    return xp.where(small, s * (k["two"] * s2 * p - ys), k["three"] * xp.log1p(cx) - y)


def mt_squeeze(x, u, c):
    """The squeeze of Marsaglia-Tsang trials (x, u), as ``mt_squeeze`` in ``gamma.cuh``:
    (accepted by it, v > 0, cx = c x, v = 1 + c x). NumPy or CuPy arrays."""
    xp = _backend.get_array_module(x, u, c)
    k = _consts(x.dtype)
    with _errstate(xp):
        cx = c * x
        v = k["one"] + cx
        m = xp.minimum(v, k["one"])
        q = cx * x
        pos = v > 0
        return pos & (u * m < m - k["twelfth"] * (q * q)), pos, cx, v


def mt_accept(x, u, d, c):
    """Marsaglia-Tsang trials (x, u) on arrays: (accepted, v = 1 + c x).

    The expressions are those of ``mt_accept`` in ``gamma.cuh``, in the dtype
    of the arrays; the kernels evaluate the squeeze's and the logarithmic
    test's multiply-adds as fused operations (rounded once), which can move a
    decision only right at its boundary. NumPy evaluates the logarithmic test
    only where the squeeze did not decide; CuPy evaluates it everywhere.
    """
    xp = _backend.get_array_module(x, u, d, c)
    k = _consts(x.dtype)
    acc, pos, cx, v = mt_squeeze(x, u, c)
    with _errstate(xp):
        if xp is not np:
            y = cx * (k["three"] + cx * (k["three"] + cx))
            slow = xp.log(u) < k["half"] * (x * x) + d * mt_log_term(cx, y)
            return acc | (pos & slow), v
        slow = pos & ~acc
        if slow.any():
            u, xs, d, cxs = (b[slow] for b in np.broadcast_arrays(u, x, d, cx))
            y = cxs * (k["three"] + cxs * (k["three"] + cxs))
            acc[slow] = np.log(u) < k["half"] * (xs * xs) + d * mt_log_term(cxs, y)
        return acc, v


def gamma_value(d, v):
    """``G = d v**3`` of an accepted trial (``v = 1 + c x``); never below ``d ulp(1)**3``."""
    return d * (v * v * v)


_LOG2E = 1.4426950408889634


def boosted(g, ub, a, log):
    """``G(a) = G(a + 1) U**(1/a)`` from ``g = G(a + 1)`` and ``ub = U``, or
    its log: ``log(g) + log(U) / a``, or ``g 2**(log(U) log2(e) / a)`` as
    ``boost_apply`` in ``gamma.cuh`` computes it (arrays of one dtype)."""
    xp = _backend.get_array_module(g, ub, a)
    lu = xp.log(ub)
    if log:
        return xp.log(g) + lu / a
    return g * xp.exp2(lu * g.dtype.type(_LOG2E) / a)



def _errstate(xp):
    import contextlib

    if xp is np:
        return np.errstate(invalid="ignore", over="ignore", divide="ignore", under="ignore")
    return contextlib.nullcontext()


def _blocks(i, j, key, offset):
    """Philox words (uint64) of blocks ``j`` (int) of indices ``i`` (ascending uint64 array)."""
    n = i.size
    hi = i >> _S32
    # A shared high word (every i < 2**32) keeps the first rounds on scalars.
    c1 = (j << 8) | int(hi[0]) if n and hi[0] == hi[-1] else (hi | np.uint64(j << 8)).astype(np.uint32)
    words = philox32((i & _MASK).astype(np.uint32), c1, offset & 0xFFFFFFFF, (offset >> 32) & 0xFFFFFFFF,
                     key[0], key[1], Words(n), n)
    return tuple(w.astype(np.uint64) for w in words)


def _uniform_pair(w0, w1, dtype):
    """The Box-Muller uniforms ``u1, u2`` of words ``w0, w1`` (pairs of words in float64), as float64."""
    if dtype == np.float32:
        return u01_f32(w0).astype(np.float64), u01_f32(w1).astype(np.float64)
    return u01_f64(*w0), u01_f64(*w1)


def _normals(u1, u2, dtype):
    """The Box-Muller pair ``r cos(2 pi u2)``, ``r sin(2 pi u2)`` of float64
    ``u1, u2``, in ``dtype``: :func:`box_muller` of the fills, whose angle is
    reduced as CUDA's ``sincospi`` reduces it (the float64 kernel's), so that
    the two sides differ by a few float64 ulp at most. Float32 normals come
    from float32 uniforms and are rounded once to float32.
    """
    return tuple(z.astype(dtype, copy=False) for z in box_muller(u1, u2))


def _trial0(i, key, offset, dtype):
    """Trial 0 ``(x, u)`` of elements ``i`` (ascending uint64): the half of their pair's block."""
    p = i >> np.uint64(1)
    odd = i & np.uint64(1)
    # Each pair once: the elements' pairs are an ascending run.
    first = np.ones(p.size, dtype=bool)
    first[1:] = p[1:] != p[:-1]
    pairs = p[first] << np.uint64(1)
    at = np.cumsum(first) - 1
    w0, w1, w2, w3 = _blocks(pairs, 0, key, offset)
    if dtype == np.float32:
        u1, u2 = _uniform_pair(w0, w1, dtype)
        w2, w3 = w2[at], w3[at]
        u = u01_f32(np.where(odd, w3, w2))
    else:
        u1, u2 = _uniform_pair((w0, w1), (w2, w3), dtype)
        v0, v1, v2, v3 = (w[at] for w in _blocks(pairs | np.uint64(1), 0, key, offset))
        u = u01_f64(np.where(odd, v2, v0), np.where(odd, v3, v1))
    z0, z1 = _normals(u1[at], u2[at], dtype)
    return np.where(odd.astype(bool), z1, z0), u


def _attempt(i, t, key, offset, dtype):
    """The two trials ``(x, u)`` of attempt ``t >= 1`` of elements ``i``: trials ``2t - 1`` and ``2t``."""
    if dtype == np.float32:
        w0, w1, w2, w3 = _blocks(i, 1 + t, key, offset)
        u1, u2 = _uniform_pair(w0, w1, dtype)
        ua, ub = u01_f32(w2), u01_f32(w3)
    else:
        w0, w1, w2, w3 = _blocks(i, 2 * t, key, offset)
        v0, v1, v2, v3 = _blocks(i, 2 * t + 1, key, offset)
        u1, u2 = _uniform_pair((w0, w1), (w2, w3), dtype)
        ua, ub = u01_f64(v0, v1), u01_f64(v2, v3)
    z0, z1 = _normals(u1, u2, dtype)
    return (z0, ua), (z1, ub)


def _boost_uniforms(i, key, offset, dtype):
    """The boost uniforms of elements ``i`` (ascending uint64): their half of block 1 of the pair."""
    odd = i & np.uint64(1)
    w0, w1, w2, w3 = _blocks((i >> np.uint64(1)) << np.uint64(1), 1, key, offset)
    if dtype == np.float32:
        return u01_f32(np.where(odd, w1, w0))
    return u01_f64(np.where(odd, w2, w0), np.where(odd, w3, w1))


def _setup(a, k):
    """``d = a' - 1/3`` and ``c = 1 / sqrt(9 d)`` (``a' = a + 1`` below 1)."""
    d = np.where(a < k["one"], a + k["one"], a) - k["third"]
    return d, k["one"] / np.sqrt(k["nine"] * d)


def _finish(e, a, d, v, start, key, offset, log, out):
    """G(a) (or log G) into ``out[e]`` for elements ``e`` with accepted ``v``."""
    g = gamma_value(d, v)
    val = np.log(g) if log else g
    b = np.flatnonzero(a < _consts(a.dtype)["one"])
    if b.size:
        ub = _boost_uniforms((e[b] + start).astype(np.uint64), key, offset, a.dtype)
        val[b] = boosted(g[b], ub, a[b], log)
    out[e] = val


class _Trial0:
    """Trial 0 of a run of consecutive elements, a chunk at a time, with one
    set of scratch arrays: :func:`_trial0` for ``i = lo .. hi - 1``, the same
    values, for runs of whole pairs that do not straddle a multiple of 2**32."""

    def __init__(self, dtype, key, offset, size):
        self.dtype = np.dtype(dtype)
        self.key, self.off = key, (offset & 0xFFFFFFFF, (offset >> 32) & 0xFFFFFFFF)
        self.f64 = self.dtype == np.float64
        m = size // 2  # pairs; each takes block 2p (and 2p + 1 in float64), one Philox call for each
        self.work = Words(m)
        self.idx = np.arange(m, dtype=np.uint32) * np.uint32(2)
        self.u01, self.u23 = np.empty(m), np.empty(m)
        self.f32 = np.empty(m, dtype=np.float32)
        self.ang = np.empty(size // 2)
        self.z = np.empty(size // 2, dtype=np.complex128)
        self.x = np.empty(size, dtype=self.dtype)
        self.u = np.empty(size, dtype=self.dtype)

    def __call__(self, lo: int, hi: int):
        """(x, u) of elements ``lo .. hi - 1`` (``lo``, ``hi`` even): views of the scratch."""
        n = hi - lo
        m = n // 2
        c0 = np.add(self.idx[:m], np.uint32(lo & 0xFFFFFFFF))  # the pairs' blocks 2p
        ctr = (lo >> 32, *self.off, *self.key, self.work, m)
        x, u = self.x[:n], self.u[:n]
        u1, u2 = self.u01[:m], self.u23[:m]  # contiguous: NumPy's log is slower on strided arrays
        if self.f64:
            philox32(c0, *ctr, u01=(u1, u2))
            c0 += np.uint32(1)  # blocks 2p + 1: the halves' uniforms
            philox32(c0, *ctr, u01=(u[0::2], u[1::2]))
        else:
            w0, w1, w2, w3 = philox32(c0, *ctr)
            u01_f32_into(w2, u[0::2])
            u01_f32_into(w3, u[1::2])
            u1[...] = u01_f32_into(w0, self.f32[:m])
            u2[...] = u01_f32_into(w1, self.f32[:m])
        r, z = box_muller_into(u1, u2, self.z[:m], self.ang[:m])
        np.multiply(r, z.real, out=x[0::2], casting="same_kind")
        np.multiply(r, z.imag, out=x[1::2], casting="same_kind")
        return x, u


def _boost_some(gi, key, offset, dtype, work):
    """The boost uniforms of global elements ``gi`` (uint64, under one value
    of ``gi >> 32``): :func:`_boost_uniforms`, the same values. ``work``: a
    :class:`Words` of ``gi.size``."""
    n = gi.size
    c0 = (gi & np.uint64(0xFFFFFFFE)).astype(np.uint32)
    w0, w1, w2, w3 = philox32(c0, (1 << 8) | int(gi[0] >> np.uint64(32)), offset & 0xFFFFFFFF,
                             (offset >> 32) & 0xFFFFFFFF, key[0], key[1], work, n)
    # The odd half's words: a ^ ((a ^ b) & mask) is b where mask is all ones, else a.
    mask = np.negative((gi & np.uint64(1)).astype(np.uint32))

    def pick(a, b):
        return np.bitwise_xor(a, np.bitwise_and(np.bitwise_xor(a, b), mask), out=mask.copy())

    if dtype == np.float32:
        return u01_f32_into(pick(w0, w1), np.empty(n, dtype=np.float32))
    a0 = pick(w0, w2)
    return u01_f64_into(a0, pick(w1, w3), np.empty(n))


def _first_trials(a, start, key, offset, log, out, trials):
    """Trial 0 of every element of ``a`` (gamma elements ``start ..``), chunk
    by chunk in cache: values and trial numbers of the accepted ones into
    ``out`` and ``trials``. Returns the indices of the valid elements that
    trial 0 rejected, for :func:`gamma_numpy`'s later attempts.

    The arithmetic is that of :func:`_setup`, :func:`mt_accept`,
    :func:`gamma_value` and :func:`boosted`, operation for operation, written
    into scratch arrays (IEEE products and sums commute, so operands may swap).
    """
    dtype = a.dtype
    k = _consts(dtype)
    n = a.size
    gen = _Trial0(dtype, key, offset, min(n, config.gamma_twin_chunk) + 2)
    size = min(n, config.gamma_twin_chunk)
    scratch = [np.empty(size, dtype=dtype) for _ in range(6)]
    small, acc, notacc = (np.empty(size, dtype=bool) for _ in range(3))
    rest, boost = [], []
    s = 0
    while s < n:
        g0 = start + s
        # Whole pairs from an even element, never past a multiple of 2**32 (the counter's high word).
        lo = g0 & ~1
        hi = min(lo + config.gamma_twin_chunk, start + n, ((g0 >> 32) + 1) << 32)
        e = hi - g0
        hi += hi & 1
        x, u = gen(lo, hi)
        x, u = x[g0 - lo:g0 - lo + e], u[g0 - lo:g0 - lo + e]
        ac = a[s:s + e]
        sm, ok, ps = small[:e], acc[:e], notacc[:e]
        dc, vc, slow = _trial0_accepts(ac, x, u, k, sm, ok, ps, [z[:e] for z in scratch])
        valid = ac.min() > 0 and ac.max() < np.inf  # else (NaN, <= 0, inf) refuse them below
        if valid:
            no = slow[~ok[slow]]
        else:
            ok &= (ac > 0) & (ac < np.inf)
            no = np.flatnonzero(~ok)
        # G = d v**3, its log, and G(a) from G(a + 1) below shape 1.
        val = out[s:s + e]
        np.multiply(vc, vc, out=val)
        val *= vc
        val *= dc
        sm &= ok
        b = np.flatnonzero(sm)
        if b.size:  # boosted below, all at once
            boost.append((b + s, val[b]))
        if log:
            np.log(val, out=val)
        t = trials[s:s + e]
        t[...] = 0
        if no.size:
            val[no] = np.nan
            t[no] = -1
            if not valid:
                no = no[(ac[no] > 0) & (ac[no] < np.inf)]
            rest.append(no + s)
        s += e
    if boost:
        _boost_into(out, a, *(np.concatenate(z) for z in zip(*boost)), start, key, offset, log)
    return np.concatenate(rest) if rest else np.empty(0, np.int64)


def _trial0_accepts(ac, x, u, k, sm, ok, ps, scratch):
    """:func:`_first_trials`' test of one chunk: into ``sm`` whether a shape is below 1, into ``ok`` whether
    trial 0 (normal ``x``, uniform ``u``) is accepted; returns ``d``, ``v`` (in ``scratch``) and the
    elements the squeeze did not accept (``ps`` is scratch)."""
    d, c, cx, v, m, q = scratch
    one = k["one"]
    # d = a' - 1/3, c = 1 / sqrt(9 d); a + 0 is a, so a + (a < 1) is a'.
    np.less(ac, one, out=sm)
    dc = np.add(ac, sm, out=d, dtype=ac.dtype)
    dc -= k["third"]
    cc = np.multiply(dc, k["nine"], out=c)
    np.sqrt(cc, out=cc)
    np.divide(one, cc, out=cc)
    # The squeeze: v = 1 + c x > 0 and u m < m - (c x**2)**2 / 12, m = min(v, 1).
    cxc = np.multiply(cc, x, out=cx)
    vc = np.add(cxc, one, out=v)
    mc = np.minimum(vc, one, out=m)
    qc = np.multiply(cxc, x, out=q)
    np.multiply(qc, qc, out=qc)
    qc *= k["twelfth"]
    np.subtract(mc, qc, out=qc)
    mc *= u
    # (Where v <= 0, m = v and u m >= m >= m - (...): the squeeze refuses.)
    np.less(mc, qc, out=ok)
    # The logarithmic test (with v > 0) where the squeeze did not accept.
    slow = np.flatnonzero(np.logical_not(ok, out=ps))
    if slow.size:
        cxs, xs = cxc[slow], x[slow]
        y = cxs * (k["three"] + cxs * (k["three"] + cxs))
        ok[slow] = (vc[slow] > 0) & (np.log(u[slow]) < k["half"] * (xs * xs) + dc[slow] * mt_log_term(cxs, y))
    return dc, vc, slow


def _boost_into(out, a, e, g, start, key, offset, log):
    """``out[e] = boosted(g, U, a[e], log)`` with the boost uniforms ``U`` of
    elements ``e`` (ascending), a chunk of them at a time."""
    work = Words(min(e.size, config.gamma_twin_chunk))
    gi = e.astype(np.uint64) + np.uint64(start)
    s = 0
    while s < e.size:
        hi = int(gi[s] >> np.uint64(32))
        stop = min(s + config.gamma_twin_chunk, int(np.searchsorted(gi, np.uint64((hi + 1) << 32))))
        ub = _boost_some(gi[s:stop], key, offset, a.dtype, work)
        out[e[s:stop]] = boosted(g[s:stop], ub, a[e[s:stop]], log)
        s = stop


def gamma_numpy(shape, key, offset, *, log=False, start=0):
    """NumPy twin of ``gamma_draw``: G (or log G) of unit scale for a flat ``shape``.

    ``shape`` is a 1-D float32 or float64 array whose element ``e`` is gamma
    element ``start + e``. Returns ``(values, trials)``: ``trials[e]`` is the
    accepted trial (0, then ``2t - 1`` or ``2t`` for attempt ``t``), -1 where
    the value is NaN (shape not a positive finite number).
    """
    a = np.asarray(shape)
    dtype = a.dtype
    k = _consts(dtype)
    n = a.size
    out = np.empty(n, dtype=dtype)
    trials = np.empty(n, dtype=np.int32)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore", under="ignore"):
        # Trial 0 chunk by chunk (in cache), then attempts 1, 2, ... for the few left.
        rest = _first_trials(a, start, key, offset, log, out, trials)
        t = 1
        while rest.size and t < MAX_ATTEMPTS:
            still = []
            for s in range(0, rest.size, config.gamma_twin_chunk):
                e = rest[s:s + config.gamma_twin_chunk]
                ae = a[e]
                d, c = _setup(ae, k)
                (x0, u0), (x1, u1) = _attempt((e + start).astype(np.uint64), t, key, offset, dtype)
                acc0, v0 = mt_accept(x0, u0, d, c)
                acc1, v1 = mt_accept(x1, u1, d, c)
                acc1 &= ~acc0
                done = acc0 | acc1
                trials[e[acc0]] = 2 * t - 1
                trials[e[acc1]] = 2 * t
                v = np.where(acc0, v0, v1)
                _finish(e[done], ae[done], d[done], v[done], start, key, offset, log, out)
                still.append(e[~done])
            rest = np.concatenate(still)
            t += 1
    return out, trials


def _lse_rows(lg, log):
    """Normalise rows of log-gammas (last axis, a C-contiguous array of 2 axes)
    by their log-sum-exp, in place.

    Relative to the row maximum, as the kernels do: subtracting a rounded
    log-sum-exp would scale a float32 row by up to ~3e-5 at |log G| ~ 1e3.
    Rows of up to ``_LSE_COLUMNS`` are normalised a chunk of rows at a time,
    transposed, so that the maxima and sums run across rows (NumPy reduces a
    short row at a time slowly): their sums add left to right, where longer
    rows add pairwise (NumPy's sum); the two orders differ by at most K
    rounding steps, as the GPU's does from either.
    """
    n, K = lg.shape
    with np.errstate(invalid="ignore", over="ignore", under="ignore", divide="ignore"):
        if K > _LSE_COLUMNS:
            m = np.max(lg, axis=-1, keepdims=True)
            np.subtract(lg, m, out=lg)
            _normalise(lg, np.exp(lg) if log else np.exp(lg, out=lg), -1, log)
            return lg
        step = max(1, config.gamma_lse_chunk // K)
        t = np.empty((K, min(n, step)), dtype=lg.dtype)
        for s in range(0, n, step):
            rows = lg[s:s + step]
            tc = t[:, :rows.shape[0]]
            np.copyto(tc, rows.T)
            tc -= np.max(tc, axis=0)
            _normalise(tc, np.exp(tc) if log else np.exp(tc, out=tc), 0, log)
            np.copyto(rows, tc.T)
    return lg


def _normalise(d, e, axis, log):
    """``d - log(sum(e))`` with ``log``, else ``e / sum(e)``, in place, the sums along ``axis``."""
    tot = np.sum(e, axis=axis, keepdims=True)
    if log:
        d -= np.log(tot)
    else:
        e /= tot


# Rows of at most _LSE_COLUMNS categories are normalised transposed (see _lse_rows),
# config.gamma_lse_chunk elements at a time.
_LSE_COLUMNS = 32
forward(__name__, {"_LSE_CHUNK": "gamma_lse_chunk"})


def dirichlet_numpy(alpha, key, offset, *, log=False, start_row=0):
    """NumPy twin of ``dirichlet_cupy`` (log-gammas, then each row normalised by
    its log-sum-exp): ``alpha`` (n_rows, K) contiguous -> draws (n_rows, K).
    Row ``r`` draws as row ``start_row + r`` of a larger batch does (gamma
    elements ``(start_row + r) K + k``)."""
    lg, _ = gamma_numpy(alpha.reshape(-1), key, offset, log=True, start=int(start_row) * alpha.shape[-1])
    return _lse_rows(lg.reshape(alpha.shape), log)


def beta_numpy(a, b, key, offset):
    """NumPy twin of ``beta_draw`` for flat ``a``, ``b`` of one dtype."""
    ab = np.stack([a, b], axis=-1).reshape(-1)
    lg, _ = gamma_numpy(ab, key, offset, log=True)
    la, lb = lg[0::2], lg[1::2]
    one = a.dtype.type(1)
    with np.errstate(over="ignore", invalid="ignore"):
        return one / (one + np.exp(lb - la))


def _fn(kind: str, dtype, dyn: bool | None = None):
    """The kernel ``kind`` for ``dtype``; gamma_draw takes ``dyn``: whether
    warps take their rounds from a counter (see WorkChunks in gamma.cu) or
    by a fixed grid stride."""
    d = "" if dyn is None else (", true" if dyn else ", false")
    return _loader.get_function(FILE, f"{kind}<{_CTYPE[np.dtype(dtype)]}{d}>", _NAMES)


# gamma_draw takes its rounds from a counter where each warp of the grid has
# at least config.gamma_dyn_min_rounds to do: below, a fixed share leaves little to balance.
# Rounds per request: about 1/gamma_dyn_share of a warp's share, at most gamma_dyn_chunk:
# larger requests mean fewer of them, with little gain beyond 16 rounds
# (benchmarks/NOTES.md, "gpumcmc.random._gamma").
forward(__name__, {"_DYN_MIN_ROUNDS": "gamma_dyn_min_rounds", "_DYN_SHARE": "gamma_dyn_share",
                   "_DYN_CHUNK": "gamma_dyn_chunk"})


_plans = memo.table("gamma.plans")
# Not in the memo: a captured CUDA graph may hold a counter's address, so the counters stay as long
# as the process.
_counters: dict = {}

# gamma_draw's parameters as PackedLaunch packs them (see gamma.cu): shape,
# shape_step, scale, scale_step, scale_value, out, n, k0, k1, off_lo, off_hi,
# off_dev, log_out, trials, chunk, next, status, tag.
_GAMMA_ARGS = {np.dtype(np.float32): "<QqQqf4xQqIIIIQi4xQqQQQ", np.dtype(np.float64): "<QqQqdQqIIIIQi4xQqQQQ"}


class ParamMessage:
    """The message of a bad parameter noted by the gamma kernels in the status word (see _status).

    ``names``: the parameter behind code PARAM and the one behind PARAM_B;
    ``shape``: the shape of the draws, to name the element.
    """

    __slots__ = ("names", "shape")

    def __init__(self, names, shape):
        self.names, self.shape = names, shape

    def __call__(self, code: int, index: int) -> str:
        name = self.names[0] if code == _status.PARAM else self.names[1]
        return (f"{name} must be positive and finite (not 0, negative, inf or NaN); the draw at index "
                f"{_status.at(index, self.shape)} (flat index {index}) has one that is not.")


def _gamma_plan(device: int, dtype, kind: str = "gamma_draw"):
    """(grid-stride launcher, its blocks on the device, counter launcher, its
    blocks on the device, the counter kernel's resident warps) for ``dtype``
    on ``device`` (the current one): one wave of resident blocks, each warp
    looping over many rounds, so that its queues are rarely flushed part-full.
    ``kind``: ``gamma_draw``, or ``gamma_counts_draw`` (its format read from the source)."""
    key = (device, dtype, kind)
    plan = _plans.get(key)
    if plan is None:
        fs, fd = _fn(kind, dtype, False), _fn(kind, dtype, True)
        sms = _loader.sm_count()
        bs, bd = _loader.resident_blocks(fs, _BLOCK) * sms, _loader.resident_blocks(fd, _BLOCK) * sms
        t = _CTYPE[np.dtype(dtype)]
        if kind == "gamma_draw":
            fmt = _GAMMA_ARGS[np.dtype(dtype)]
            expected = _loader.packed_format(FILE, "gamma_draw", t)
            if fmt != expected:  # a launch with this format would pass wrong arguments
                raise RuntimeError(f"gamma_draw's parameters in {FILE} changed: they pack as {expected}, "
                                   f"but _GAMMA_ARGS says {fmt}; update _GAMMA_ARGS.")
            ls, ld = _loader.PackedLaunch(fs, fmt), _loader.PackedLaunch(fd, fmt)
        else:
            ls, ld = _loader.packed_launcher(fs, FILE, kind, t), _loader.packed_launcher(fd, FILE, kind, t)
        plan = _plans[key] = (ls, bs, ld, bd, bd * (_BLOCK // 32))
    return plan


def _counter(device: int, stream_ptr: int) -> int:
    """The address of the work counter of ``device`` (the current one) and the
    stream: two zeroed words, made once and kept. gamma_draw<T, true> zeroes
    them again before it ends (see WorkChunks in gamma.cu), and calls on one
    stream run in order, so no call needs a memset."""
    c = _counters.get((device, stream_ptr))
    if c is None:
        import cupy

        c = _counters[device, stream_ptr] = cupy.zeros(2, dtype=cupy.uint64)
    return c.data.ptr


def _work_args(dtype, rounds: int, device: int, stream_ptr: int, kind: str = "gamma_draw"):
    """(launcher, blocks, rounds per request, counter address) for ``rounds``
    rounds of gamma_draw (or ``kind``) on ``device`` (the current one) and the stream ``stream_ptr``."""
    fs, bs, fd, bd, warps = _gamma_plan(device, dtype, kind)
    if rounds < config.gamma_dyn_min_rounds * warps:
        return fs, bs, 1, 0
    chunk = max(1, min(config.gamma_dyn_chunk, rounds // (config.gamma_dyn_share * warps)))
    return fd, bd, chunk, _counter(device, stream_ptr)


def _param_arg(p, dtype):
    """A parameter as (contiguous device array, step): step 0 for one shared value."""
    import cupy

    if p.dtype == dtype and p.flags.c_contiguous:  # the usual case: as it is (the kernel reads it flat)
        return p, (0 if p.size == 1 else 1)
    p = cupy.asarray(p, dtype=dtype)
    if p.size == 1:
        return cupy.ascontiguousarray(p.reshape(1)), 0
    return cupy.ascontiguousarray(p.reshape(-1)), 1


def _launch_gamma(sh, sh_step, sc, sc_step, out, key, offset, log, trials=None, scale_value=None, describe=None):
    """``gamma_draw`` into the contiguous ``out``, from parameters as
    :func:`_param_arg` gives them: ``sh`` of ``out``'s size (step 1) or of
    size 1 (step 0); ``sc`` likewise (log(scale) when ``log``), or None for
    one scale for every element, ``scale_value`` (its log when ``log``; None:
    a unit scale), passed by value. ``describe``: the message maker when the
    kernel is to note bad parameters in the status word (None: no checks)."""
    import cupy

    n = out.size
    if n <= 0:
        return
    if scale_value is None:
        scale_value = 0.0 if log else 1.0
    stream = cupy.cuda.get_current_stream()
    device = cupy.cuda.runtime.getDevice()
    pairs = (n + 1) // 2
    launch, blocks, chunk, counter = _work_args(out.dtype, (pairs + 31) // 32, device, stream.ptr)  # rounds of 32 pairs
    word, tag = _v.fused(describe, device, stream)
    launch(min(-(-pairs // _BLOCK), blocks), _BLOCK, stream.ptr,
           *_kernel_args.packed(FILE, "gamma_draw", shape=sh.data.ptr, shape_step=sh_step,
                                scale=0 if sc is None else sc.data.ptr, scale_step=sc_step, scale_value=scale_value,
                                out=out.data.ptr, n=n, k0=key[0], k1=key[1], off_lo=offset & 0xFFFFFFFF,
                                off_hi=offset >> 32, off_dev=_loader.device_offset(), log_out=1 if log else 0,
                                trials=0 if trials is None else trials.data.ptr, chunk=chunk, next=counter,
                                status=word, tag=tag))


def gamma_cupy(shape, scale, key, offset, *, log=False, return_trials=False, scale_value=None, describe=None,
               n=None):
    """Launch ``gamma_draw``: ``shape`` and ``scale`` are CuPy arrays of the output's
    size (flat, contiguous) or of size 1, or ``scale`` is None and every element
    has the scale ``scale_value`` (None: 1); with ``log`` the caller passes
    log(scale). ``n``: the output's size (None: the larger of the parameters'; give it
    where both are of size 1 and more draws are asked for). ``describe``: see :func:`_launch_gamma`."""
    import cupy

    dtype = shape.dtype
    if n is None:
        n = max(shape.size, 1 if scale is None else scale.size)
    out = cupy.empty(n, dtype=dtype)
    trials = cupy.empty(n, dtype=cupy.int32) if return_trials else None
    if n:
        sh, sh_step = _param_arg(shape, dtype)
        sc, sc_step = (None, 0) if scale is None else _param_arg(scale, dtype)
        _launch_gamma(sh, sh_step, sc, sc_step, out, key, offset, log, trials, scale_value, describe)
    return (out, trials) if return_trials else out


def gamma_counts_cupy(counts, prior, key, offset, *, log=False):
    """``gamma_counts_draw``: gamma variates of the shapes ``counts + prior`` (unit scale), for a
    C-contiguous int32 CuPy ``counts`` and a NumPy ``prior`` (float32 or float64, its dtype the output's),
    without the array of shapes: the values, bit for bit, of :func:`gamma_cupy` given
    ``cupy.add(counts, prior, dtype=prior.dtype)`` (each shape rounded once, as that add rounds it).
    No value checks: a positive prior makes every shape valid."""
    import cupy

    dtype = np.dtype(prior.dtype)
    out = cupy.empty(counts.shape, dtype=dtype)
    n = out.size
    if n == 0:
        return out
    _check_index(n, "gamma")
    stream = cupy.cuda.get_current_stream()
    pairs = (n + 1) // 2
    launch, blocks, chunk, counter = _work_args(dtype, (pairs + 31) // 32, cupy.cuda.runtime.getDevice(), stream.ptr,
                                                "gamma_counts_draw")
    launch(min(-(-pairs // _BLOCK), blocks), _BLOCK, stream.ptr,
           *_kernel_args.packed(FILE, "gamma_counts_draw", counts=counts.data.ptr, prior=prior, out=out.data.ptr,
                                n=n, k0=key[0], k1=key[1], off_lo=offset & 0xFFFFFFFF, off_hi=offset >> 32,
                                off_dev=_loader.device_offset(), log_out=1 if log else 0, chunk=chunk, next=counter,
                                status=0, tag=0))
    return out


def log_gamma_counts(rng, counts, prior):
    """Log-gammas (unit scale) of the shapes ``counts + prior``, for int ``counts`` and a NumPy scalar
    ``prior`` (its dtype the output's), the next draw of ``rng``: ``Generator.gamma`` of that sum, which the
    GPU forms as it reads the counts (:func:`gamma_counts_cupy`, no array of shapes), the same values."""
    if _backend.is_cupy_array(counts):
        return gamma_counts_cupy(_loader.contiguous(counts), prior, rng.key, rng.advance(), log=True)
    return rng.gamma(np.add(counts, prior, dtype=prior.dtype), dtype=prior.dtype, log=True)


def dirichlet_counts_cupy(counts, prior, key, offset):
    """Dirichlet rows of the concentrations ``counts + prior``, for a C-contiguous (n_rows, K) int32 CuPy
    ``counts`` and a NumPy ``prior`` (its dtype the output's), without the array of concentrations: the
    values, bit for bit, of :func:`dirichlet_cupy` given ``cupy.add(counts, prior, dtype=prior.dtype)``, by
    ``dirichlet_counts_draw`` or, where :func:`_dirichlet_plan` takes the pair, ``gamma_counts_draw`` and
    ``lse_rows``. No value checks: a positive prior makes every concentration valid."""
    import cupy

    dtype = np.dtype(prior.dtype)
    n_rows, K = counts.shape
    if counts.size == 0:
        return cupy.empty((n_rows, K), dtype=dtype)
    _check_index(counts.size, "dirichlet")
    fn = _fn("dirichlet_counts_draw", dtype)
    blocks = _loader.resident_blocks(fn, _BLOCK)
    R = _dirichlet_plan(n_rows, K, blocks * _loader.sm_count() * (_BLOCK // 32), dtype)
    if not R:
        return _lse_rows_cupy(gamma_counts_cupy(counts, prior, key, offset, log=True), False)
    out = cupy.empty((n_rows, K), dtype=dtype)
    launch = _loader.packed_launcher(fn, FILE, "dirichlet_counts_draw", _CTYPE[dtype])
    launch(_loader.grid_size(-(-n_rows // R) * 32, _BLOCK, blocks), _BLOCK, cupy.cuda.get_current_stream().ptr,
           *_kernel_args.packed(FILE, "dirichlet_counts_draw", counts=counts.data.ptr, prior=prior, out=out.data.ptr,
                                n_rows=n_rows, K=K, R=R, G=_row_lanes(K), k0=key[0], k1=key[1],
                                off_lo=offset & 0xFFFFFFFF, off_hi=offset >> 32, off_dev=_loader.device_offset(),
                                log_out=0, status=0, tag=0))
    return out


def beta_cupy(a, b, n, key, offset, describe=None):
    import cupy

    dtype = a.dtype
    out = cupy.empty(n, dtype=dtype)
    if n:
        pa, sa = _param_arg(a, dtype)
        pb, sb = _param_arg(b, dtype)
        word, tag = _v.fused(describe)
        _loader.launch(_fn("beta_draw", dtype), n,
                       _kernel_args.args(FILE, "beta_draw", a=pa, a_step=sa, b=pb, b_step=sb, out=out,
                                         n=_loader.i64(n), **_kernel_args.philox_dev(key, offset),
                                         status=_loader.u64(word), tag=_loader.u64(tag)), block=_BLOCK)
    return out


# Rows per dirichlet_draw chunk: about config.dirichlet_chunk elements, so that a warp
# normalises rows it has just written (still in cache) and its queues are
# served part-full only once per chunk. The throughput is flat from 1024 to
# 4096 elements (benchmarks/NOTES.md, "gpumcmc.random._gamma").
forward(__name__, {"_DIRICHLET_CHUNK": "dirichlet_chunk"})


def _dirichlet_plan(n_rows: int, K: int, warps: int, dtype=np.float32) -> int:
    """Rows per warp chunk for ``dirichlet_draw``, or 0 for ``gamma_draw`` and
    ``lse_rows``: where the rows are too few to keep ``warps`` warps busy (the
    pair spreads every element over the GPU), and in float64, where the pair
    is the faster: the fused kernel's normalisation there is compute-bound,
    two passes with an exp each, where lse_rows' is hidden behind its memory
    traffic (benchmarks/NOTES.md, "gpumcmc.random._gamma")."""
    if np.dtype(dtype) == np.float64:
        return 0
    R = max(1, min(config.dirichlet_chunk // K, -(-n_rows // warps)))
    R += R & K & 1  # an even number of rows when K is odd: chunks start on a whole pair
    if -(-n_rows // R) < warps // 2 and n_rows * K > config.dirichlet_chunk * 32:
        return 0
    return R


def _row_lanes(K: int) -> int:
    """Lanes per row in the normalisation: the power of two >= K, at most 32."""
    g = 1
    while g < min(K, 32):
        g *= 2
    return g


def _dirichlet_launcher(fn, blocks: int, n_rows: int, K: int, R: int, dtype) -> tuple:
    """(launcher, blocks in the grid, lanes per row) of ``dirichlet_draw`` (``fn``, ``blocks`` resident on the
    device) for ``n_rows`` rows of ``K`` in chunks of ``R`` rows a warp."""
    return (_loader.packed_launcher(fn, FILE, "dirichlet_draw", _CTYPE[np.dtype(dtype)]),
            _loader.grid_size(-(-n_rows // R) * 32, _BLOCK, blocks), _row_lanes(K))


def _launch_dirichlet(launcher, stream_ptr: int, alpha_ptr: int, out_ptr: int, rows: int, start_row: int, K: int,
                      R: int, key, offset: int, log: bool, word: int, tag: int) -> None:
    """Launch ``dirichlet_draw`` as :func:`_dirichlet_launcher` planned it. Its parameters: alpha, out (both
    indexed from row 0, the kernel starting at ``start_row``), rows in all, first row, K, rows per chunk,
    lanes per row, Philox key and offset, off_dev, log, status word, tag."""
    launch, grid, g = launcher
    launch(grid, _BLOCK, stream_ptr,
           *_kernel_args.packed(FILE, "dirichlet_draw", alpha=alpha_ptr, out=out_ptr, n_rows=rows, row0=start_row,
                                K=K, R=R, G=g, k0=key[0], k1=key[1], off_lo=offset & 0xFFFFFFFF, off_hi=offset >> 32,
                                off_dev=_loader.device_offset(), log_out=1 if log else 0, status=word, tag=tag))


def dirichlet_cupy(alpha, key, offset, *, log=False, rows_per_chunk=None, describe=None, start_row=0):
    """Dirichlet rows of a contiguous (n_rows, K) CuPy ``alpha``: log-gammas
    normalised by their row's log-sum-exp, by ``dirichlet_draw`` (a warp per
    chunk of rows, one launch) or, as :func:`_dirichlet_plan` chooses, by
    ``gamma_draw`` and ``lse_rows``; both give the same values.
    ``rows_per_chunk`` forces the first with that many rows per chunk (0
    forces the second). ``describe``: see :func:`_launch_gamma`.

    ``start_row``: row ``r`` draws as row ``start_row + r`` of a larger batch
    does (the NumPy twin takes the same argument); such a call always takes
    ``dirichlet_draw``, from row ``start_row`` (with one throw-away row in
    front where ``start_row K`` is odd, so that its pairs of gamma elements
    are those of the whole batch)."""
    n_rows, K = alpha.shape
    if rows_per_chunk is not None and (rows_per_chunk < 0 or rows_per_chunk & K & 1):
        raise ValueError(f"rows_per_chunk must be >= 0, and even for odd K; got {rows_per_chunk} for K = {K}.")
    import cupy

    start_row = int(start_row)
    if start_row and (start_row * K) & 1:
        pad = cupy.ones((n_rows + 1, K), dtype=alpha.dtype)
        pad[1:] = alpha
        return dirichlet_cupy(pad, key, offset, log=log, rows_per_chunk=rows_per_chunk,
                              describe=None if describe is None else _Shifted(describe, K),
                              start_row=start_row - 1)[1:]
    out = cupy.empty((n_rows * K,), dtype=alpha.dtype)
    if out.size == 0:
        return out.reshape(n_rows, K)
    fn = _fn("dirichlet_draw", alpha.dtype)
    blocks = _loader.resident_blocks(fn, _BLOCK)
    if rows_per_chunk is None:
        R = _dirichlet_plan(n_rows, K, blocks * _loader.sm_count() * (_BLOCK // 32), alpha.dtype)
        if start_row and not R:  # the pair of kernels takes no start row: one kernel, the same values
            R = max(1, min(config.dirichlet_chunk // K, n_rows))
            R += R & K & 1
    else:  # at most one chunk of all the rows (rounded up to even for odd K)
        R = min(rows_per_chunk, n_rows + (n_rows & K & 1))
    if R:
        word, tag = _v.fused(describe if not start_row or describe is None else _Shifted(describe, start_row * K))
        shift = start_row * K * alpha.dtype.itemsize   # the kernel indexes rows from 0, and starts at start_row
        _launch_dirichlet(_dirichlet_launcher(fn, blocks, n_rows, K, R, alpha.dtype),
                          cupy.cuda.get_current_stream().ptr, alpha.data.ptr - shift, out.data.ptr - shift,
                          start_row + n_rows, start_row, K, R, key, offset, log, word, tag)
        return out.reshape(n_rows, K)
    _launch_gamma(alpha, 1, None, 0, out, key, offset, True, describe=describe)
    return _lse_rows_cupy(out.reshape(n_rows, K), log)


def _lse_rows_cupy(lg, log: bool):
    """:func:`_lse_rows` on the GPU: the ``lse_rows`` kernel over the (n_rows, K) log-gammas ``lg``, in place
    (each row normalised, its log with ``log``); returns ``lg``."""
    n_rows, K = lg.shape
    g = _row_lanes(K)
    _loader.launch(_fn("lse_rows", lg.dtype), n_rows * g,
                   _kernel_args.args(FILE, "lse_rows", x=lg, n_rows=_loader.i64(n_rows), K=_loader.i32(K),
                                     G=_loader.i32(g), log_out=_loader.i32(1 if log else 0)), block=_BLOCK)
    return lg


class _Shifted:
    """A status message maker whose flat indices are counted from ``shift`` elements later."""

    __slots__ = ("describe", "shift")

    def __init__(self, describe, shift: int):
        self.describe, self.shift = describe, shift

    def __call__(self, code: int, index: int) -> str:
        return self.describe(code, index - self.shift)


# ---------------------------------------------------------------------------
# Public entry points (called by Generator's methods)
# ---------------------------------------------------------------------------
def _check_index(n: int, what: str) -> None:
    if n >= INDEX_LIMIT:
        raise ValueError(f"{what} has {n} gamma elements; at most 2**40 fit the counter layout. "
                         "Split the request into smaller calls.")


_FMAX = {np.dtype(np.float32): float(np.finfo(np.float32).max), np.dtype(np.float64): float(np.finfo(np.float64).max)}


def _scale_number(scale, dtype, log):
    """A scale given as a number: checked (on the host, so always) once
    rounded to ``dtype``, and as the kernel takes it by value (its log with
    ``log``)."""
    if type(scale) is float and 0.0 < scale <= _FMAX[dtype]:  # the usual call: no errstate needed
        v = dtype.type(scale)
        if v > 0:
            return np.log(v) if log else v
    v = np.nan
    if isinstance(scale, numbers.Real):
        try:
            with np.errstate(over="ignore"):  # too large for dtype: inf, refused below
                v = dtype.type(scale)
        except OverflowError:  # a Python int beyond any float
            v = np.inf
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"scale must be a positive finite number in {dtype.name}; got {scale!r}.")
    return np.log(v) if log else v


def _same_dtype(dtype, dt) -> bool:
    """Whether the ``dtype`` argument asks for ``dt`` (None does); False for anything else, which the
    general path checks and refuses with its own message."""
    if dtype is None:
        return True
    try:
        return np.dtype(dtype) == dt
    except TypeError:
        return False


def _gamma_device(rng, shape, scale, dtype, log):
    """:func:`gamma` for the usual calls on the GPU, with less host time per
    call: ``shape`` a C-contiguous CuPy array of float32 or float64 and
    ``scale`` a Python number, or a C-contiguous CuPy array of ``shape``'s
    shape and dtype (``size=None``), drawn in ``shape``'s dtype, on the
    current GPU. Returns None for any other call, which the general path
    takes; the draws and checks are the general path's."""
    dt = shape.dtype
    number = type(scale) in (float, int)
    if dt not in _CTYPE or not _same_dtype(dtype, dt) or not shape.flags.c_contiguous or not (
            number or (scale.dtype == dt and scale.shape == shape.shape and scale.flags.c_contiguous)):
        return None
    if not (_on_this_gpu(shape) if number else _on_this_gpu(shape, scale)):
        return None     # the general path copies an array from another GPU
    n = shape.size
    if n == 0:
        return None
    _check_index(n, "gamma")
    sv = _scale_number(scale, dt, log) if number else None
    import cupy

    key, off = rng.key, rng.advance()
    step = 0 if n == 1 else 1
    with annotate("gpumcmc.random.gamma", cupy):
        sc = None if number else (cupy.log(scale) if log else scale)
        out = cupy.empty(shape.shape, dtype=dt)
        # The kernel checks the shapes (and scales) as it reads them (see _status).
        _launch_gamma(shape, step, sc, 0 if number else step, out, key, off, log, None, sv,
                      ParamMessage(("shape", "scale"), shape.shape))
    return out



def gamma(rng, shape, scale=1.0, size=None, dtype=None, log=False, *, return_trials=False):
    """Implementation of :meth:`Generator.gamma` (``return_trials`` is for tests)."""
    if size is None and not return_trials and _backend.is_cupy_array(shape) and (
            type(scale) in (float, int) or _backend.is_cupy_array(scale)):
        out = _gamma_device(rng, shape, scale, dtype, log)
        if out is not None:
            return out
    _v.check_real(shape, "shape")
    _v.check_real(scale, "scale")
    xp = rng.xp(shape, scale)
    dtype = resolve_dtype(dtype, shape, scale)
    oshape = out_shape(size, shape, scale)
    n = math.prod(oshape)
    _check_index(n, "gamma")
    if n == 0:
        empty = xp.empty(oshape, dtype=dtype)
        return (empty, xp.empty(oshape, dtype=np.int32)) if return_trials else empty
    a = _as(shape, xp, dtype)
    # A scale given as a number is checked always (it costs no
    # synchronisation); on the GPU it goes to the kernel by value: no device
    # array to fill, and no read per element.
    sv = _scale_number(scale, dtype, log) if np.isscalar(scale) else None
    if xp is np:
        sv = None
    s = None if sv is not None else _as(scale, xp, dtype)
    if xp is np:  # on the GPU the kernel checks both as it reads them (see _status)
        _v.check_positive(a, "shape")
        if s is not None:
            _v.check_positive(s, "scale")
    if s is not None:
        s = _flat(s, oshape, xp)
        if log:
            s = xp.log(s)
    a = _flat(a, oshape, xp)
    key, off = rng.key, rng.advance()
    with annotate("gpumcmc.random.gamma", xp):
        if xp is np:
            vals, trials = gamma_numpy(np.broadcast_to(a, (n,)), key, off, log=log)
            vals = vals + s if log else vals * s
        else:
            msg = ParamMessage(("shape", "scale"), oshape)
            # n: a number as shape with a number as scale (gamma(0.5, size=1000)) gives size-1 parameters
            vals, trials = gamma_cupy(a, s, key, off, log=log, return_trials=True, scale_value=sv, describe=msg, n=n) \
                if return_trials else (gamma_cupy(a, s, key, off, log=log, scale_value=sv, describe=msg, n=n), None)
    vals = vals.reshape(oshape)
    if return_trials:
        return vals, trials.reshape(oshape)
    return vals


def _beta_device(rng, a, b, dtype):
    """:func:`beta` for the usual call on the GPU, with less host time per call: ``a`` and ``b``
    C-contiguous CuPy arrays of one shape and of float32 or float64 (``size=None``) on the current GPU.
    Returns None for any other call, which the general path takes; the draws and checks are the general
    path's."""
    dt = a.dtype
    if dt not in _CTYPE or b.dtype != dt or a.shape != b.shape or not _same_dtype(dtype, dt) \
            or not (a.flags.c_contiguous and b.flags.c_contiguous) or not _on_this_gpu(a, b):
        return None     # (the general path copies an array from another GPU)
    n = a.size
    if n == 0:
        return None
    _check_index(2 * n, "beta")
    import cupy

    key, off = rng.key, rng.advance()
    with annotate("gpumcmc.random.beta", cupy):
        out = beta_cupy(a.reshape(-1), b.reshape(-1), n, key, off, describe=ParamMessage(("a", "b"), a.shape))
    return out.reshape(a.shape)


def beta(rng, a, b, size=None, dtype=None):
    """Implementation of :meth:`Generator.beta`."""
    if size is None and _backend.is_cupy_array(a) and _backend.is_cupy_array(b):
        out = _beta_device(rng, a, b, dtype)
        if out is not None:
            return out
    _v.check_real(a, "a")
    _v.check_real(b, "b")
    xp = rng.xp(a, b)
    dtype = resolve_dtype(dtype, a, b)
    oshape = out_shape(size, a, b)
    pa, pb = _as(a, xp, dtype), _as(b, xp, dtype)
    n = math.prod(oshape)
    _check_index(2 * n, "beta")
    if n == 0:
        return xp.empty(oshape, dtype=dtype)
    if xp is np:  # on the GPU the kernel checks both as it reads them (see _status)
        _v.check_positive(pa, "a")
        _v.check_positive(pb, "b")
    key, off = rng.key, rng.advance()
    with annotate("gpumcmc.random.beta", xp):
        if xp is np:
            full = lambda p: np.broadcast_to(p, oshape).reshape(-1)  # noqa: E731
            out = beta_numpy(full(pa), full(pb), key, off)
        else:
            out = beta_cupy(_flat(pa, oshape, xp), _flat(pb, oshape, xp), n, key, off,
                            describe=ParamMessage(("a", "b"), oshape))
    return out.reshape(oshape)


_dirichlet_plans = memo.table("gamma.dirichlet_plans")


def _dirichlet_device(rng, alpha, dtype, log):
    """:func:`dirichlet` for the usual call on the GPU, with less host time per
    call: ``alpha`` a C-contiguous 2-d CuPy array of float32 or float64
    (``size=None``), drawn in its dtype, where :func:`_dirichlet_plan` takes
    the one-launch kernel. The launch is planned once per device, dtype and
    shape; the values are those of :func:`dirichlet_cupy`. Returns None for
    any other call, which the general path takes."""
    dt = alpha.dtype
    if dt not in _CTYPE or (dtype is not None and np.dtype(dtype) != dt) or alpha.ndim != 2 \
            or not alpha.flags.c_contiguous or not _on_this_gpu(alpha):  # one on another GPU: the general path
        return None
    import cupy

    n_rows, K = alpha.shape
    device = cupy.cuda.runtime.getDevice()
    pkey = (device, dt, n_rows, K, config.dirichlet_chunk)
    plan = _dirichlet_plans.get(pkey)
    if plan is None:
        plan = False
        if 0 < n_rows * K < INDEX_LIMIT:
            fn = _fn("dirichlet_draw", dt)
            blocks = _loader.resident_blocks(fn, _BLOCK)
            R = _dirichlet_plan(n_rows, K, blocks * _loader.sm_count() * (_BLOCK // 32), dt)
            if R:
                plan = (_dirichlet_launcher(fn, blocks, n_rows, K, R, dt), R, ParamMessage(("alpha", "alpha"),
                                                                                          (n_rows, K)))
        if len(_dirichlet_plans) >= 256:  # many shapes: keep the cache small
            _dirichlet_plans.clear()
        _dirichlet_plans[pkey] = plan
    if not plan:
        return None
    launcher, R, message = plan
    key, off = rng.key, rng.advance()
    with annotate("gpumcmc.random.dirichlet", cupy):
        out = cupy.empty((n_rows, K), dtype=dt)
        stream = cupy.cuda.get_current_stream()
        # The kernel checks alpha as it reads it (see _status).
        word, tag = _v.fused(message, device, stream)
        _launch_dirichlet(launcher, stream.ptr, alpha.data.ptr, out.data.ptr, n_rows, 0, K, R, key, off, log, word,
                          tag)
    return out


def dirichlet(rng, alpha, size=None, dtype=None, log=False):
    """Implementation of :meth:`Generator.dirichlet`."""
    if size is None and _backend.is_cupy_array(alpha):
        out = _dirichlet_device(rng, alpha, dtype, log)
        if out is not None:
            return out
    _v.check_real(alpha, "alpha")
    xp = rng.xp(alpha)
    dtype = resolve_dtype(dtype, alpha)
    al = _as(alpha, xp, dtype)
    if al.ndim < 1:
        raise ValueError("alpha must have at least one axis (the K categories, last).")
    K = al.shape[-1]
    batch = al.shape[:-1] if size is None else out_shape(size, shapes=[al.shape[:-1]])
    oshape = batch + (K,)
    n = math.prod(oshape)
    _check_index(n, "dirichlet")
    if n == 0:
        return xp.empty(oshape, dtype=dtype)
    if xp is np:  # on the GPU the kernel checks alpha as it reads it (see _status)
        _v.check_positive(al, "alpha")
    if tuple(al.shape) != oshape:
        al = xp.broadcast_to(al, oshape)
    if al.ndim != 2 or not al.flags.c_contiguous:
        al = xp.ascontiguousarray(al).reshape(-1, K)
    key, off = rng.key, rng.advance()
    with annotate("gpumcmc.random.dirichlet", xp):
        if xp is np:
            out = dirichlet_numpy(al, key, off, log=log)
        else:
            out = dirichlet_cupy(al, key, off, log=log, describe=ParamMessage(("alpha", "alpha"), oshape))
    return out.reshape(oshape)


def standard_exponential(rng, size=None, dtype=np.float64, *params):
    """Implementation of :meth:`Generator.standard_exponential` (``params`` only choose the backend)."""
    dtype = _v.check_float_dtype(dtype)
    xp = rng.xp(*params)
    oshape = out_shape(size, *params)
    n = math.prod(oshape)
    key, off = rng.key, rng.advance()
    with annotate("gpumcmc.random.exponential", xp):
        flat = _fill.fill(xp, "exponential", n, dtype, key, off)
    return flat.reshape(oshape)
