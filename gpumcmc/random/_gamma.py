"""Gamma, beta, Dirichlet and exponential variates: CUDA launchers and their NumPy twin.

The kernels are in ``kernels_cu/gamma.cu`` and ``kernels_cu/gamma.cuh``; the
twin below follows them counter for counter and expression for expression.

Gamma (Marsaglia and Tsang, 2000). Element ``i`` of a call at offset ``off``
(``i`` the flat index of the output, ``i < 2**40``) draws from Philox blocks
``j = 0, 1, ...`` at index ``idx = i + 2**40 * j``:

=======  ======================================  ==========================================
dtype    attempt ``t``                           boost uniform ``U`` (shape < 1)
=======  ======================================  ==========================================
float32  block ``t``: ``z0, z1`` = Box-Muller     ``u01_f32(b << 9)``, ``b`` = the 23 low bits
         of ``u01_f32(w0), u01_f32(w1)``;         ``w0 & 0x1ff | (w1 & 0x1ff) << 9 |
         trials ``(z0, u01_f32(w2))`` then        (w2 & 0x1f) << 18`` of the accepted block
         ``(z1, u01_f32(w3))``                    (bits no trial reads)
float64  block ``1 + 2t``: Box-Muller of          block 0: ``u01_f64(w0, w1)``
         ``u01_f64(w0, w1), u01_f64(w2, w3)``;
         block ``2 + 2t``: the trials' uniforms
         ``u01_f64(w0, w1)``, ``u01_f64(w2, w3)``
=======  ======================================  ==========================================

Trial ``k = 2t`` or ``2t + 1`` is ``(x, u)``; with ``a' = a`` (or ``a + 1``
below 1), ``d = a' - 1/3`` and ``c = 1 / sqrt(9 d)``: ``v = 1 + c x`` must be
positive, and the trial is accepted if ``u < 1 - 0.0331 x**4`` or
``log u < x**2 / 2 + d (log(v**3) - v**3 + 1)`` (see :func:`mt_log_term`).
Then ``G(a') = d v**3``; below shape 1, ``G(a) = G(a') exp(log(U) / a)`` and
``log G(a) = log G(a') + log(U) / a``. Float32 draws are computed in float32
and float64 draws in float64 on both backends, except the twin's normals,
which it computes in float64 and rounds once. Where the float32 kernel trades
exactness for speed, the twin keeps the exact formula: the kernel's
``c = rsqrtf(9 d)`` is within 2 ulp of the twin's ``1 / sqrt(9 d)``, and its
normals take the angle from ``__sincosf`` (absolute error below 6e-7 r).
Both sides accept the same trial but for rounding right at the acceptance
boundary (none in 2e6 elements in a simulation of those errors).

Beta element ``i`` uses gamma elements ``2i`` (``a``) and ``2i + 1`` (``b``);
Dirichlet row ``r`` of ``K`` uses gamma elements ``r K + k``, so a Dirichlet
draw equals ``gamma(alpha, log=True)`` normalised by the log-sum-exp of its row.
Exponential element ``i`` comes from Philox block ``i // P`` at index ``i // P``
(the fills' layout; ``P`` = 4 for float32, 2 for float64): float32
``-log(u01_f64_from32(w[i % 4]))`` computed in float64 and rounded once,
float64 ``-log(u01_f64(w0, w1))`` and ``-log(u01_f64(w2, w3))``.
"""

from __future__ import annotations

import numpy as np

from .. import _loader
from .. import _validate as _v
from .. import backend as _backend
from .._nvtx import annotate
from . import _fill
from ._philox import philox_rounds, u01_f32, u01_f64

FILE = "gamma.cu"
_NAMES = tuple(
    f"{k}<{t}>"
    for t in ("float", "double")
    for k in ("gamma_draw", "beta_draw", "dirichlet_rows", "dirichlet_rows_big")
)
_CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}

MAX_ATTEMPTS = 1 << 22  # GPUMCMC_GAMMA_MAX_ATTEMPTS: never reached for valid shapes
INDEX_LIMIT = 1 << 40  # element indices must stay below 2**40 (the counter holds 2**40 j + i)
# Elements per chunk of the twin's first attempt: keeps its temporaries in cache.
_CHUNK = 1 << 15
# Dynamic shared memory a Dirichlet block may use (more needs an opt-in), and the block size.
_SMEM_LIMIT = 48 * 1024
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
        "squeeze": t(0.0331),
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


def mt_accept(x, u, d, c):
    """Marsaglia-Tsang trials (x, u) on arrays: (accepted, cx = c x).

    The expressions are those of ``mt_accept`` in ``gamma.cuh``, in the dtype
    of the arrays. NumPy evaluates the logarithmic test only where the squeeze
    did not decide; CuPy evaluates it everywhere.
    """
    xp = _backend.get_array_module(x, u, d, c)
    k = _consts(x.dtype)
    with _errstate(xp):
        cx = c * x
        v = k["one"] + cx
        x2 = x * x
        pos = v > 0
        acc = pos & (u < k["one"] - k["squeeze"] * (x2 * x2))
        if xp is not np:
            y = cx * (k["three"] + cx * (k["three"] + cx))
            slow = xp.log(u) < k["half"] * x2 + d * mt_log_term(cx, y)
            return acc | (pos & slow), cx
        slow = pos & ~acc
        if slow.any():
            u, x2, d, cxs = (b[slow] for b in np.broadcast_arrays(u, x2, d, cx))
            y = cxs * (k["three"] + cxs * (k["three"] + cxs))
            acc[slow] = np.log(u) < k["half"] * x2 + d * mt_log_term(cxs, y)
        return acc, cx


def gamma_value(d, cx):
    """``G = d v**3`` (``v = 1 + cx``) of an accepted trial; never below ``d ulp(1)**3``."""
    v = _consts(d.dtype)["one"] + cx
    return d * (v * v * v)


def boosted(g, lu, log):
    """``G(a) = G(a + 1) U**(1/a)`` from ``g = G(a + 1)`` and ``lu = log(U) / a``, or its log."""
    xp = _backend.get_array_module(g, lu)
    return xp.log(g) + lu if log else g * xp.exp(lu)


def _errstate(xp):
    import contextlib

    if xp is np:
        return np.errstate(invalid="ignore", over="ignore", divide="ignore", under="ignore")
    return contextlib.nullcontext()


def _blocks(i, j, key, offset):
    """Philox words of blocks ``j`` (int) of elements ``i`` (ascending uint64 array)."""
    hi = i >> _S32
    # A shared high word (every i < 2**32) keeps the first rounds on scalars.
    c1 = np.uint64(j << 8) | (hi[0] if hi.size and hi[0] == hi[-1] else hi)
    return philox_rounds(i & _MASK, c1, np.uint64(offset & 0xFFFFFFFF),
                         np.uint64((offset >> 32) & 0xFFFFFFFF), key[0], key[1])


def _attempt(i, t, d, c, key, offset, dtype):
    """Attempt ``t`` for elements ``i``: (trial, cx, boost uniform) with trial -1 where both failed.

    The normals are ``box_muller``'s ``r cos(2 pi u2)`` and ``r sin(2 pi u2)``,
    evaluated in float64 with ``cos``/``sin`` of ``2 pi u2`` rather than through
    ``sincospi``: the two agree to an absolute 1e-16, far below what moves an
    accepted trial or a gamma value (G depends on x through 1 + c x), and the
    sine is computed only where the first trial fails. Float32 normals are
    rounded once to float32, as the kernel's float32 Box-Muller is.
    """
    if dtype == np.float32:
        w0, w1, w2, w3 = _blocks(i, t, key, offset)
        u1, u2 = u01_f32(w0).astype(np.float64), u01_f32(w1).astype(np.float64)
        ua = u01_f32(w2)
    else:
        w0, w1, w2, w3 = _blocks(i, 1 + 2 * t, key, offset)
        u1, u2 = u01_f64(w0, w1), u01_f64(w2, w3)
        v0, v1, v2, v3 = _blocks(i, 2 + 2 * t, key, offset)
        ua = u01_f64(v0, v1)
    r = np.sqrt(-2.0 * np.log(u1))
    angle = (2.0 * np.pi) * u2
    z0 = (r * np.cos(angle)).astype(dtype, copy=False)
    trial = np.full(i.size, -1, dtype=np.int32)
    acc, cx = mt_accept(z0, ua, d, c)
    trial[acc] = 2 * t
    rest = np.flatnonzero(~acc)
    if rest.size:
        zb = (r[rest] * np.sin(angle[rest])).astype(dtype, copy=False)
        ub = u01_f32(w3[rest]) if dtype == np.float32 else u01_f64(v2[rest], v3[rest])
        acc_b, cx_b = mt_accept(zb, ub, d[rest], c[rest])
        cx[rest] = cx_b
        trial[rest[acc_b]] = 2 * t + 1
    boost_u = None
    if dtype == np.float32:
        mask9 = np.uint64(0x1FF)
        bits = (w0 & mask9) | ((w1 & mask9) << np.uint64(9)) | ((w2 & np.uint64(0x1F)) << np.uint64(18))
        boost_u = u01_f32(bits << np.uint64(9))
    return trial, cx, boost_u


def _solve(a, e, t, start, key, offset, log, out, trials, k):
    """Attempt ``t`` for elements ``e`` (int64 indices into ``a``); finishes the
    accepted ones into ``out``/``trials`` and returns the rest."""
    ae = a[e]
    boost = ae < k["one"]
    d = np.where(boost, ae + k["one"], ae) - k["third"]
    c = k["one"] / np.sqrt(k["nine"] * d)
    tr, cx, ub = _attempt((e + start).astype(np.uint64), t, d, c, key, offset, a.dtype)
    ok = tr >= 0
    acc = e[ok]
    trials[acc] = tr[ok]
    d, cx, boost = d[ok], cx[ok], boost[ok]
    g = gamma_value(d, cx)
    val = np.log(g) if log else g
    b = np.flatnonzero(boost)
    if b.size:
        if ub is not None:
            u = ub[ok][b]
        else:
            w0, w1, _, _ = _blocks((acc[b] + start).astype(np.uint64), 0, key, offset)
            u = u01_f64(w0, w1)
        val[b] = boosted(g[b], np.log(u) / ae[ok][b], log)
    out[acc] = val
    return e[~ok]


def gamma_numpy(shape, key, offset, *, log=False, start=0):
    """NumPy twin of ``gamma_variate``: G (or log G) of unit scale for a flat ``shape``.

    ``shape`` is a 1-D float32 or float64 array whose element ``e`` is gamma
    element ``start + e``. Returns ``(values, trials)``: ``trials[e]`` is the
    accepted trial (``2t`` or ``2t + 1`` for attempt ``t``), -1 where the value
    is NaN (shape not a positive finite number).
    """
    a = np.asarray(shape)
    k = _consts(a.dtype)
    n = a.size
    out = np.full(n, np.nan, dtype=a.dtype)
    trials = np.full(n, -1, dtype=np.int32)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore", under="ignore"):
        # Attempt 0 chunk by chunk (in cache), then the few rejected elements together.
        left = []
        for s in range(0, n, _CHUNK):
            ac = a[s:s + _CHUNK]
            e = s + np.flatnonzero((ac > 0) & np.isfinite(ac))
            left.append(_solve(a, e, 0, start, key, offset, log, out, trials, k))
        rest = np.concatenate(left) if left else np.empty(0, np.int64)
        t = 1
        while rest.size and t < MAX_ATTEMPTS:
            rest = np.concatenate([_solve(a, rest[s:s + _CHUNK], t, start, key, offset, log, out, trials, k)
                                   for s in range(0, rest.size, _CHUNK)])
            t += 1
    return out, trials


def _lse_rows(lg, log):
    """Normalise rows of log-gammas (last axis) by their log-sum-exp."""
    with np.errstate(invalid="ignore", over="ignore", under="ignore", divide="ignore"):
        # Relative to the row maximum, as the kernels do: subtracting a rounded
        # log-sum-exp would scale a float32 row by up to ~3e-5 at |log G| ~ 1e3.
        m = np.max(lg, axis=-1, keepdims=True)
        e = np.exp(lg - m)
        tot = np.sum(e, axis=-1, keepdims=True)
        return (lg - m) - np.log(tot) if log else e / tot


def dirichlet_numpy(alpha, key, offset, *, log=False):
    """NumPy twin of ``dirichlet_rows``: ``alpha`` (n_rows, K) contiguous -> draws (n_rows, K)."""
    lg, _ = gamma_numpy(alpha.reshape(-1), key, offset, log=True)
    return _lse_rows(lg.reshape(alpha.shape), log)


def beta_numpy(a, b, key, offset):
    """NumPy twin of ``beta_draw`` for flat ``a``, ``b`` of one dtype."""
    ab = np.stack([a, b], axis=-1).reshape(-1)
    lg, _ = gamma_numpy(ab, key, offset, log=True)
    la, lb = lg[0::2], lg[1::2]
    one = a.dtype.type(1)
    with np.errstate(over="ignore", invalid="ignore"):
        return one / (one + np.exp(lb - la))


def _fn(kind: str, dtype):
    return _loader.get_function(FILE, f"{kind}<{_CTYPE[np.dtype(dtype)]}>", _NAMES)




def _param_arg(p, dtype):
    """A parameter as (contiguous device array, step): step 0 for one shared value."""
    import cupy

    p = cupy.asarray(p, dtype=dtype)
    if p.size == 1:
        return cupy.ascontiguousarray(p.reshape(1)), _loader.i64(0)
    return cupy.ascontiguousarray(p.reshape(-1)), _loader.i64(1)


def gamma_cupy(shape, scale, key, offset, *, log=False, return_trials=False):
    """Launch ``gamma_draw``: ``shape`` and ``scale`` are CuPy arrays of the output's
    size (flat, contiguous) or of size 1; with ``log`` the caller passes log(scale)."""
    import cupy

    dtype = shape.dtype
    n = max(shape.size, scale.size)
    out = cupy.empty(n, dtype=dtype)
    trials = cupy.empty(n, dtype=cupy.int32) if return_trials else None
    if n:
        sh, sh_step = _param_arg(shape, dtype)
        sc, sc_step = _param_arg(scale, dtype)
        _loader.launch(_fn("gamma_draw", dtype), n,
                       (sh, sh_step, sc, sc_step, out, _loader.i64(n), *_loader.philox_args(key, offset),
                        _loader.i32(1 if log else 0), trials if return_trials else NULL), block=_BLOCK)
    return (out, trials) if return_trials else out


def beta_cupy(a, b, n, key, offset):
    import cupy

    dtype = a.dtype
    out = cupy.empty(n, dtype=dtype)
    if n:
        pa, sa = _param_arg(a, dtype)
        pb, sb = _param_arg(b, dtype)
        _loader.launch(_fn("beta_draw", dtype), n,
                       (pa, sa, pb, sb, out, _loader.i64(n), *_loader.philox_args(key, offset)), block=_BLOCK)
    return out


def dirichlet_layout(K: int, itemsize: int):
    """(lanes per row G, block size, shared bytes) for rows of K, or None for the two-pass kernel."""
    g = 1
    while g < min(K, 32):
        g *= 2
    r = -(-K // g)
    block = _BLOCK
    while block > 32 and block * r * itemsize > _SMEM_LIMIT:
        block //= 2
    if block * r * itemsize > _SMEM_LIMIT:
        return None
    return g, block, block * r * itemsize


def dirichlet_cupy(alpha, key, offset, *, log=False):
    """Launch the Dirichlet row kernel on a contiguous (n_rows, K) CuPy ``alpha``."""
    import cupy

    n_rows, K = alpha.shape
    out = cupy.empty_like(alpha)
    if out.size == 0:
        return out
    dtype = alpha.dtype
    layout = dirichlet_layout(K, dtype.itemsize)
    tail = (*_loader.philox_args(key, offset), _loader.i32(1 if log else 0))
    if layout is None:
        _loader.launch(_fn("dirichlet_rows_big", dtype), n_rows * 32,
                       (alpha, out, _loader.i64(n_rows), _loader.i32(K), *tail), block=_BLOCK)
    else:
        g, block, smem = layout
        _loader.launch(_fn("dirichlet_rows", dtype), n_rows * g,
                       (alpha, out, _loader.i64(n_rows), _loader.i32(K), _loader.i32(g), *tail),
                       block=block, shared_mem=smem)
    return out


# ---------------------------------------------------------------------------
# Public entry points (called by Generator's methods)
# ---------------------------------------------------------------------------
def resolve_dtype(dtype, *params) -> np.dtype:
    """``dtype``, or when None the floating dtype of the array parameters (float64 if none)."""
    if dtype is not None:
        return _v.check_float_dtype(dtype)
    kinds = [np.dtype(p.dtype) for p in params if hasattr(p, "dtype") and np.dtype(p.dtype).kind == "f"]
    if not kinds:
        return np.dtype(np.float64)
    dt = np.result_type(*kinds)
    return np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)


def out_shape(size, *params, shapes=()) -> tuple:
    """The broadcast shape of the parameters (and of ``shapes``), or ``size``
    after checking that they broadcast to it."""
    shapes = [np.shape(p) for p in params] + [tuple(s) for s in shapes]
    try:
        bshape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(f"Parameter shapes {shapes} do not broadcast together.") from None
    if size is None:
        return bshape
    size = (int(size),) if isinstance(size, (int, np.integer)) else tuple(int(s) for s in size)
    if any(s < 0 for s in size):
        raise ValueError(f"size must hold non-negative integers, got {size}.")
    if np.broadcast_shapes(size, bshape) != size:
        raise ValueError(f"Parameters of shape {bshape} do not broadcast to size {size}; "
                         "pass a size they broadcast to, or size=None.")
    return size


def _as(p, xp, dtype):
    """``p`` as an array of ``xp``; a scalar for CuPy is filled on the device (no host copy)."""
    if xp is not np and np.isscalar(p):
        return xp.full((), p, dtype=dtype)
    return _backend.asarray(p, xp, dtype=dtype)


def _flat(p, shape, xp):
    """``p`` as a flat per-element array when it varies, else as a size-1 array."""
    if p.size == 1:
        return p.reshape(1)
    if tuple(p.shape) != tuple(shape):
        p = xp.broadcast_to(p, shape)
    # An array of the right shape goes as it is (when contiguous): a broadcast
    # view of it may lose its contiguity flags and cost a copy.
    return xp.ascontiguousarray(p).reshape(-1)


def _check_index(n: int, what: str) -> None:
    if n >= INDEX_LIMIT:
        raise ValueError(f"{what} has {n} gamma elements; at most 2**40 fit the counter layout. "
                         "Split the request into smaller calls.")


def gamma(rng, shape, scale=1.0, size=None, dtype=None, log=False, *, return_trials=False):
    """Implementation of :meth:`Generator.gamma` (``return_trials`` is for tests)."""
    xp = rng.xp(shape, scale)
    dtype = resolve_dtype(dtype, shape, scale)
    oshape = out_shape(size, shape, scale)
    a = _as(shape, xp, dtype)
    s = _as(scale, xp, dtype)
    n = int(np.prod(oshape, dtype=np.int64))
    _check_index(n, "gamma")
    empty = xp.empty(oshape, dtype=dtype)
    if n == 0:
        return (empty, xp.empty(oshape, dtype=np.int32)) if return_trials else empty
    _v.check_positive(a, "shape")  # synchronize! (both checks, on CuPy)
    _v.check_positive(s, "scale")
    a = _flat(a, oshape, xp)
    s = _flat(s, oshape, xp)
    if log:
        s = xp.log(s)
    key, off = rng.key, rng.advance()
    with annotate("gpumcmc.random.gamma", xp):
        if xp is np:
            vals, trials = gamma_numpy(np.broadcast_to(a, (n,)), key, off, log=log)
            vals = vals + s if log else vals * s
        else:
            vals, trials = gamma_cupy(a, s, key, off, log=log, return_trials=True) if return_trials else \
                (gamma_cupy(a, s, key, off, log=log), None)
    vals = vals.reshape(oshape)
    if return_trials:
        return vals, trials.reshape(oshape)
    return vals


def beta(rng, a, b, size=None, dtype=None):
    """Implementation of :meth:`Generator.beta`."""
    xp = rng.xp(a, b)
    dtype = resolve_dtype(dtype, a, b)
    oshape = out_shape(size, a, b)
    pa, pb = _as(a, xp, dtype), _as(b, xp, dtype)
    n = int(np.prod(oshape, dtype=np.int64))
    _check_index(2 * n, "beta")
    if n == 0:
        return xp.empty(oshape, dtype=dtype)
    _v.check_positive(pa, "a")  # synchronize! (both checks, on CuPy)
    _v.check_positive(pb, "b")
    key, off = rng.key, rng.advance()
    with annotate("gpumcmc.random.beta", xp):
        if xp is np:
            full = lambda p: np.broadcast_to(p, oshape).reshape(-1)  # noqa: E731
            out = beta_numpy(full(pa), full(pb), key, off)
        else:
            out = beta_cupy(_flat(pa, oshape, xp), _flat(pb, oshape, xp), n, key, off)
    return out.reshape(oshape)


def dirichlet(rng, alpha, size=None, dtype=None, log=False):
    """Implementation of :meth:`Generator.dirichlet`."""
    xp = rng.xp(alpha)
    dtype = resolve_dtype(dtype, alpha)
    al = _as(alpha, xp, dtype)
    if al.ndim < 1:
        raise ValueError("alpha must have at least one axis (the K categories, last).")
    K = al.shape[-1]
    batch = out_shape(size, shapes=[al.shape[:-1]])
    oshape = batch + (K,)
    n = int(np.prod(oshape, dtype=np.int64))
    _check_index(n, "dirichlet")
    if n == 0:
        return xp.empty(oshape, dtype=dtype)
    _v.check_positive(al, "alpha")  # synchronize!
    if tuple(al.shape) != oshape:
        al = xp.broadcast_to(al, oshape)
    al = xp.ascontiguousarray(al).reshape(-1, K)
    key, off = rng.key, rng.advance()
    with annotate("gpumcmc.random.dirichlet", xp):
        if xp is np:
            out = dirichlet_numpy(al, key, off, log=log)
        else:
            out = dirichlet_cupy(al, key, off, log=log)
    return out.reshape(oshape)


def standard_exponential(rng, size=None, dtype=np.float64, *params):
    """Implementation of :meth:`Generator.standard_exponential` (``params`` only choose the backend)."""
    dtype = _v.check_float_dtype(dtype)
    xp = rng.xp(*params)
    oshape = out_shape(size, *params)
    n = int(np.prod(oshape, dtype=np.int64))
    key, off = rng.key, rng.advance()
    with annotate("gpumcmc.random.exponential", xp):
        flat = _fill.fill(xp, "exponential", n, dtype, key, off)
    return flat.reshape(oshape)
