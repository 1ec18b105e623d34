"""Many discrete distributions at once: one index drawn from each row of weights.

Every row of unnormalised, non-negative weights ``a[0..K-1]`` gives one index

    ``index = the smallest k with prefix[k] > u * total``

where ``prefix`` are the row's partial sums as the method accumulates them
(in the weights' dtype), ``total`` is the last of them and ``u`` is the row's
uniform. A zero weight leaves the prefix unchanged, so it is never drawn.

The uniform. Row ``r`` (in C order over the batch axes) of a call at
generator offset ``off`` uses the Philox4x32-10 block with counter
``(r, off)`` (``idx = r``): ``u = u01_f32(w0)`` for float32, ``u01_f64(w0,
w1)`` for float64. Every method, on the GPU and in NumPy, uses this ``u``.
:func:`categorical_products` can draw its tokens as part of a larger call
(``counter_base``, ``counter_index``): token ``t`` then takes the counter, and
for ``"butterfly"`` the lane of a warp, that the larger call gives it, so it
draws what that call draws.

Methods (Steele & Tristan, "Using butterfly-patterned partial sums to draw
from discrete distributions", PPoPP 2017; the kernels are in
``kernels_cu/discrete.cu``):

``"prefix"``
    One GPU thread per row: a pass that sums the row, a pass that rescans it
    until the prefix exceeds ``u * total``. Each thread reads its own row, so a
    warp's loads hit 32 unrelated addresses.
``"transpose"``
    A warp owns 32 rows and loads each 32-column block of all of them with
    coalesced loads, transposes the block in registers, and each lane adds its
    own row left to right. Same prefix values as ``"prefix"``, hence the same
    draws, always.
``"butterfly"``
    The same coalesced loads; 31 ``__shfl_xor`` steps build the
    butterfly-patterned table of partial sums (see ``tests/butterfly_reference.py``)
    instead of transposing, and the search rebuilds the prefix values it needs
    from a low and a high value. Within a block it adds in pairs rather than
    left to right, so where a prefix value lies within rounding of ``u * total``
    it may return a neighbouring (never a zero-weight) index; elsewhere it
    returns the same index as ``"prefix"``.
``"warp"``
    One warp per row, the row held in registers: every lane loads vectors of
    consecutive weights (coalesced), a reduce-scatter of shuffles gives the
    totals of each 32-vector chunk, and the search goes chunk, lane, element.
    One pass over memory, no shared memory; for products, a ``theta`` or
    ``phi`` row equal to the previous token's is not reloaded. Rows longer
    than 1,024 (float32) or 512 (float64) categories are summed segment by
    segment and then re-read up to the chosen segment. Adds in another order
    than left to right, so near ties it may return a neighbouring (never a
    zero-weight) index. Not one of the paper's methods.
``"auto"``
    :func:`choose_method` picks one from ``K`` and the dtype.

The NumPy twin computes the same indices: ``cumsum`` for ``"prefix"``,
``"transpose"`` and ``"warp"`` (which agrees but near ties), an emulation of the warp's table and search for
``"butterfly"``. For logits, the exponentials of CUDA and NumPy can differ in
the last bit, so GPU and NumPy draws agree except where a prefix lies within
that rounding of ``u * total``.

Invalid rows. A row whose weights are all zero, or hold NaN or inf, or whose
sum overflows the dtype, has no index; nor does a row of logits that holds
NaN or +inf or is all -inf. With validation on (the default) such rows, and
negative weights, raise ValueError; with ``gpumcmc.set_validation(False)``
nothing is checked (no device synchronisation), rows without a positive
total get -1, and negative weights give an unspecified index.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from . import _kernel_args, _loader, _status, _validate
from ._config import config, forward, memo
from ._nvtx import annotate
from ._validate import check_float_dtype, validating
from .backend import asarray, get_array_module, is_cupy_array
from .random._stream import PhiloxStream, as_stream
from .random._params import _on_this_gpu
from .random._philox import philox_rounds, u01_f32, u01_f64

__all__ = ["METHODS", "CounterIndex", "categorical", "categorical_logits", "categorical_products", "choose_method",
           "token_order"]

METHODS = ("prefix", "transpose", "butterfly", "warp")

# "auto": for (form, dtype), the first entry whose bound is >= K (None: any K).
# Each bound is the crossover measured by the categorical suite (materialised
# weights, 2**20 rows) and Figure 7 (the fused theta*phi form, 2**20 tokens
# sorted by word); benchmarks/NOTES.md ("gpumcmc.discrete") has the times.
# Materialised weights: one thread per row is fastest at K = 16 in float32,
# the butterfly up to K = 256 and "warp" at K = 1024; in float64 the
# butterfly wins at every K. The fused form: in float32 one thread per token
# up to K = 24, the butterfly from 28 to 96, "warp" from 128; in float64 one
# thread per token up to K = 28 and "warp" from 64 (32 to 60 are within
# timing noise of one another). At K = 1024 in float64 Figure 7 has the
# transpose slightly ahead, but on the LDA-shaped tokens of the categorical
# suite (in either order) "warp" is well ahead, so "warp" it is. Larger K
# were not measured; "warp" reads them in segments.
_AUTO_RULE = {
    ("rows", "float32"): ((16, "prefix"), (256, "butterfly"), (None, "warp")),
    ("rows", "float64"): ((None, "butterfly"),),
    ("products", "float32"): ((24, "prefix"), (96, "butterfly"), (None, "warp")),
    ("products", "float64"): ((28, "prefix"), (None, "warp")),
}

FILE = "discrete.cu"
W = 32  # warp width of the kernels
THREADS = 128  # threads per block of every kernel (GPUMCMC_CAT_THREADS)
MIN_BLOCKS = 0  # blocks per SM asked of ptxas for the warp kernels, 0: none (GPUMCMC_CAT_MIN_BLOCKS)
_HDR_BYTES = 2 * W * 8  # per-warp header (kernel's HDR_BYTES)
_TBL_WORDS = (W - 1) * (W + 1)  # butterfly table, padded rows (kernel's TBL_STRIDE)
_SMEM_BUDGET = 48 * 1024  # block prefixes go to global scratch beyond this
_SRC = {"weights": 0, "logits": 1, "products": 2}
_METHOD_ID = {"transpose": 1, "butterfly": 2}
_CTYPE = _loader.CTYPE
# The last template argument, LL: products that also sum the log of each token's total (log_total).
_NAMES = tuple(
    f"cat_prefix<{t}, {s}, false>" for t in ("float", "double") for s in (0, 1, 2)
) + tuple(
    f"cat_warp<{t}, {s}, {m}, false>" for t in ("float", "double") for s in (0, 1, 2) for m in (1, 2)
) + tuple(
    f"cat_prefix<{t}, 2, true>" for t in ("float", "double")
) + tuple(
    f"cat_warp<{t}, 2, {m}, true>" for t in ("float", "double") for m in (1, 2)
)
# The "warp" kernels of discrete_warp.cu: (vector width V, chunks per lane NJ)
# per dtype; a row of up to 32 * NJ * V categories is held in registers.
# Keep in step with the instantiations at the end of that file.
FILE_WARP = "discrete_warp.cu"
_WARP_SHAPES = {
    "float": ((4, 2), (4, 8), (2, 16), (1, 32)),
    "double": ((2, 2), (2, 8), (1, 16)),
}
_WARP_NAMES = tuple(
    f"cat_row_warp<{t}, {s}, {v}, {nj}, false>" for t, shapes in _WARP_SHAPES.items() for s in (0, 1, 2)
    for v, nj in shapes
) + tuple(f"cat_row_warp<{t}, 2, {v}, {nj}, true>" for t, shapes in _WARP_SHAPES.items() for v, nj in shapes)
# Elements per chunk of rows in the NumPy twin, config.categorical_twin_chunk: bounds its temporaries.
forward(__name__, {"_TWIN_CHUNK": "categorical_twin_chunk"})


@functools.lru_cache(maxsize=4096)
def choose_method(K: int, dtype, *, products: bool = False) -> str:
    """The method ``method="auto"`` uses for ``K`` categories of ``dtype``."""
    rule = _AUTO_RULE[("products" if products else "rows", np.dtype(dtype).name)]
    for bound, method in rule:
        if bound is None or K <= bound:
            return method
    raise AssertionError("the last rule of each _AUTO_RULE entry must have bound None")


def _method(method: str, K: int, dtype, products: bool) -> str:
    if method == "auto":
        return choose_method(K, dtype, products=products)
    if method not in METHODS:
        raise ValueError(f"method must be 'auto' or one of {', '.join(map(repr, METHODS))}, got {method!r}.")
    return method


# -- NumPy twin -----------------------------------------------------------------

def counter_uniforms(counters, dtype, key, offset: int) -> np.ndarray:
    """The uniforms of the rows whose Philox counters are ``counters`` (non-negative integers)."""
    idx = np.asarray(counters).astype(np.uint64)
    lo, hi = np.uint64(offset & 0xFFFFFFFF), np.uint64((offset >> 32) & 0xFFFFFFFF)
    w0, w1, _, _ = philox_rounds(idx & np.uint64(0xFFFFFFFF), idx >> np.uint64(32), lo, hi, key[0], key[1])
    return u01_f32(w0) if np.dtype(dtype) == np.float32 else u01_f64(w0, w1)


def row_uniforms(start: int, count: int, dtype, key, offset: int) -> np.ndarray:
    """The uniforms of rows ``start .. start+count-1`` (see the module docstring)."""
    return counter_uniforms(np.arange(start, start + count, dtype=np.uint64), dtype, key, offset)


def prefix_draw(w: np.ndarray, u: np.ndarray, totals: np.ndarray | None = None) -> np.ndarray:
    """``"prefix"`` / ``"transpose"`` on NumPy: left-to-right prefix sums in the dtype.

    ``totals`` (n,), optional, receives each row's total as the prefix sums formed it."""
    p = np.cumsum(w, axis=1, dtype=w.dtype)
    total = p[:, -1]
    if totals is not None:
        totals[...] = total
    target = u * total
    idx = np.argmax(p > target[:, None], axis=1)
    return np.where(total > target, idx, -1)


def butterfly_draw(w: np.ndarray, u: np.ndarray, lanes=None, totals: np.ndarray | None = None) -> np.ndarray:
    """``"butterfly"`` on NumPy: ``draw`` in ``tests/butterfly_reference.py`` for warps of
    ``W`` lanes, the same indices, computed per row rather than per warp.

    The table entry that row ``r`` (lane ``r % W``) reads at a node whose
    children span ``m`` columns is the pairwise sum of the child that bit
    ``m`` of its lane selects, and the kernel's mask tests ask whether a child
    holds a positive weight; both are read here from the chosen block's
    pairwise sums at every level, which are also the steps of its block total.
    ``w`` (n, K) and ``u`` (n,) of one dtype; row ``r`` sits in lane ``lanes[r]`` (default ``r % W``: the
    rows start at a whole warp). ``totals`` (n,), optional, receives each row's total as the warp forms it.
    """
    n, K = w.shape
    nb = -(-K // W)
    step = max(W, (config.butterfly_twin_chunk // (nb * W)) // W * W)  # rows at a time: the scratch stays in cache
    xb = np.zeros((min(n, step), nb * W), dtype=w.dtype)
    out = np.empty(n, dtype=np.int64)
    for s in range(0, n, step):
        e = min(n, s + step)
        out[s:e] = _butterfly_rows(w[s:e], u[s:e], xb[:e - s], None if lanes is None else lanes[s:e],
                                   None if totals is None else totals[s:e])
    return out


# Elements per chunk of butterfly_draw: config.butterfly_twin_chunk.
forward(__name__, {"_BUTTERFLY_CHUNK": "butterfly_twin_chunk"})


def _butterfly_rows(w, u, xb, lanes=None, totals=None):
    """:func:`butterfly_draw` of rows that fit the scratch ``xb`` (zeros in front of each row's weights)."""
    n, K = w.shape
    dt = w.dtype
    nb = xb.shape[1] // W
    pad = nb * W - K
    xb[:, pad:] = w

    def pairwise(v):  # v[r, ..., c] -> the sums over 1, 2, 4, ... W columns
        out = [v]
        while out[-1].shape[-1] > 1:
            v = out[-1]
            out.append(v[..., 0::2] + v[..., 1::2])
        return out

    rows = np.arange(n)
    if nb == 1:
        levels = pairwise(xb)
        total = levels[-1][:, 0]
        target = u * total
        b = np.zeros(n, dtype=np.int64)
        low, high = np.zeros(n, dtype=dt), total
    else:
        S = np.cumsum(pairwise(xb.reshape(n, nb, W))[-1][..., 0], axis=-1, dtype=dt)  # the block prefixes
        total = S[:, -1]
        target = u * total
        b = np.argmax(S > target[:, None], axis=-1)
        flat = S.reshape(-1)
        high = flat[rows * nb + b]
        low = np.where(b > 0, flat[rows * nb + np.maximum(b - 1, 0)], dt.type(0))
        chosen = xb.reshape(-1)[(rows * (nb * W) + b * W)[:, None] + np.arange(W)]
        levels = pairwise(chosen)  # the chosen block's sums, as its total added them
    if totals is not None:
        totals[...] = total
    found = total > target
    positive = [levels[0] > 0]
    while positive[-1].shape[-1] > 1:
        z = positive[-1]
        positive.append(z[:, 0::2] | z[:, 1::2])
    lane = rows % W if lanes is None else np.asarray(lanes, dtype=np.int64) % W
    q = np.zeros(n, dtype=np.int64)
    m, j = W // 2, len(levels) - 2  # children of m columns: levels[j]
    while m >= 1:
        width = W // m
        base = rows * width + 2 * q  # the left child's entry
        bit = (lane & m) != 0
        e = levels[j].reshape(-1)[base + bit]
        mid = np.where(bit, high - e, low + e)
        pos = positive[j].reshape(-1)
        right = ~pos[base] | (pos[base + 1] & ~(target < mid))
        low = np.where(right, mid, low)
        high = np.where(right, high, mid)
        q = 2 * q + right
        m //= 2
        j -= 1
    return np.where(found, b * W + q - pad, -1)


def _chunk_rows(K: int) -> int:
    return max(W, (config.categorical_twin_chunk // max(K, 1)) // W * W)


def _draw_numpy(weights_of, n: int, K: int, dtype, method: str, key, offset: int, out: np.ndarray,
                cbase: int = 0, cidx=None, log_total=None, zero=None) -> None:
    """Rows ``0 .. n-1`` into ``out``; row ``r`` takes the Philox counter ``cbase + r``, or ``cbase +
    cidx[r]``, which also gives it its lane for the butterfly. ``log_total`` (G,) float64: row ``r`` adds
    the log of its total (:func:`_log_totals`) to entry ``r // (n // G)``; a row outside the table
    (``zero[r]``) adds ``log(1e-300)``, as the kernels do for a total of 0."""
    flat = out.reshape(-1)
    step = _chunk_rows(K)
    totals = None
    with np.errstate(invalid="ignore", over="ignore"):
        for start in range(0, n, step):
            stop = min(n, start + step)
            w = weights_of(start, stop)
            c = (np.arange(start, stop, dtype=np.int64) if cidx is None else cidx[start:stop]) + cbase
            u = counter_uniforms(c, dtype, key, offset)
            if log_total is not None:
                totals = np.empty(stop - start, dtype=w.dtype)
            flat[start:stop] = (butterfly_draw(w, u, c % W, totals) if method == "butterfly"
                                else prefix_draw(w, u, totals))
            if log_total is not None:
                lt = _log_totals(totals)
                if zero is not None:
                    lt[zero[start:stop]] = np.log(1e-300)
                groups = np.arange(start, stop, dtype=np.int64) // (n // log_total.size)
                log_total += np.bincount(groups, weights=lt, minlength=log_total.size)


def _log_totals(totals) -> np.ndarray:
    """``log(max(total, 1e-300))`` in float64: what a draw adds to ``log_total`` (``LogSum`` in
    kernels_cu/discrete.cuh)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(np.maximum(np.asarray(totals, dtype=np.float64), 1e-300))


def warp_shape(K: int, dtype, *arrays) -> tuple[int, int]:
    """(V, NJ) of the "warp" kernel for rows of ``K``: the widest vector that
    divides ``K`` and to which every array is aligned, then the fewest chunks
    per lane that hold a row (the most, for longer rows: they go in segments)."""
    ctype = _CTYPE[np.dtype(dtype)]
    itemsize = np.dtype(dtype).itemsize
    widths = sorted({v for v, _ in _WARP_SHAPES[ctype]}, reverse=True)
    V = next(v for v in widths if K % v == 0 and all(a.data.ptr % (v * itemsize) == 0 for a in arrays))
    shapes = [nj for v, nj in _WARP_SHAPES[ctype] if v == V]
    return V, next((nj for nj in shapes if W * nj * V >= K), shapes[-1])


# -- CUDA launcher ----------------------------------------------------------------

_plans = memo.table("discrete.plans")


def _plan(kind: str, method: str, a, b, n: int, K: int, shift: int, ll: bool = False) -> tuple:
    """How to launch ``method`` on ``n`` rows of ``K`` (see :func:`_launch`), worked out once per device,
    form, method, dtype, shape, butterfly shift and alignment of ``a`` and ``b``: (launcher, blocks,
    dynamic shared bytes, scratch elements to allocate (0: none), s_in_smem, region words); the last
    three are None for "warp", whose kernel takes no scratch. ``ll``: the instantiation that sums the log
    totals (products)."""
    dt = a.dtype
    src = _SRC[kind]
    if method == "warp":
        V, NJ = warp_shape(K, dt, a, b)
        fn = _loader.get_function(FILE_WARP, f"cat_row_warp<{_CTYPE[dt]}, {src}, {V}, {NJ}, {'true' if ll else 'false'}>",
                                  _WARP_NAMES,
                                  defines=(("GPUMCMC_CAT_THREADS", THREADS),))
        launcher = _loader.packed_launcher(fn, FILE_WARP, "cat_row_warp", _CTYPE[dt])
        return launcher, _loader.grid_size(n * W, THREADS), 0, None, None, None
    if method == "prefix":
        name = f"cat_prefix<{_CTYPE[dt]}, {src}, {'true' if ll else 'false'}>"
    else:
        name = f"cat_warp<{_CTYPE[dt]}, {src}, {_METHOD_ID[method]}, {'true' if ll else 'false'}>"
    defines = (("GPUMCMC_CAT_THREADS", THREADS), ("GPUMCMC_CAT_MIN_BLOCKS", MIN_BLOCKS))
    fn = _loader.get_function(FILE, name, _NAMES, defines=defines)
    launcher = _loader.packed_launcher(fn, FILE, "cat_prefix" if method == "prefix" else "cat_warp", _CTYPE[dt])
    scratch, s_in_smem, region, shared = 0, 0, 0, 0
    n_items = n
    if method != "prefix":
        groups = -(-(n + shift) // W)
        words = -(-K // W) * W
        warps = THREADS // W
        region = max(words, _TBL_WORDS)
        region += -region % 4  # keeps every warp's header 16-byte aligned
        s_in_smem = int(warps * (_HDR_BYTES + region * dt.itemsize) <= _SMEM_BUDGET)
        if not s_in_smem:
            region = _TBL_WORDS + (-_TBL_WORDS % 4)
            scratch = groups * words
        shared = warps * (_HDR_BYTES + region * dt.itemsize)
        n_items = groups * W
    return launcher, _loader.grid_size(n_items, THREADS), shared, scratch, s_in_smem, region


def _launch(kind: str, method: str, a, b, rows, cols, n: int, K: int, key, offset: int, out, describe,
            n_a: int = 0, n_b: int = 0, cbase: int = 0, cidx=None, ll=None, ll_group: int = 1) -> None:
    """Run ``cat_prefix`` / ``cat_warp`` / ``cat_row_warp`` for ``n`` rows of ``K`` categories into ``out``.

    ``n_a``, ``n_b``: rows of ``a`` and ``b`` (products). ``describe``: the
    message maker for the status word (see :func:`gpumcmc._validate.fused`).
    ``cbase``, ``cidx`` (products): row ``r`` draws with counter ``cbase + r``,
    or ``cbase + cidx[r]`` (int64 on the device); the butterfly puts row ``r``
    in lane ``(cbase + r) % W`` (with ``cidx`` the caller lays the rows out so
    that ``r % W`` is their lane: :func:`_lane_layout`). ``ll`` (float64, products): row ``r`` adds the
    log of its total to ``ll[r // ll_group]``. The launch is planned
    once (:func:`_plan`); a call packs only the pointers, counters and status word, named as the
    kernels' parameters (:mod:`gpumcmc._kernel_args`).
    """
    import cupy

    if n <= 0:
        return
    shift = cbase % W if method == "butterfly" and kind == "products" and cidx is None else 0   # as the kernel
    ap, bp = a.data.ptr, b.data.ptr
    device = cupy.cuda.runtime.getDevice()
    pkey = (device, kind, method, a.dtype, n, K, shift,
            (ap | bp) & 15 if method == "warp" else 0,  # the vector width of "warp" follows the alignment
            ll is not None)
    plan = _plans.get(pkey)
    if plan is None:
        if len(_plans) >= 256:  # many shapes: keep the cache small
            _plans.clear()
        plan = _plans[pkey] = _plan(kind, method, a, b, n, K, shift, ll is not None)
    launcher, grid, shared, scratch, s_in_smem, region = plan
    stream = cupy.cuda.get_current_stream()
    word, tag = _validate.fused(describe, device, stream)
    off_dev = _loader.device_offset()
    stream = stream.ptr
    rows_p, cols_p, out_p = rows.data.ptr, cols.data.ptr, out.data.ptr
    out64, lo, hi = int(out.dtype == np.int64), offset & 0xFFFFFFFF, offset >> 32
    cidx_p, ll_p = 0 if cidx is None else cidx.data.ptr, 0 if ll is None else ll.data.ptr
    # the same arguments, and the scratch for cat_prefix and cat_warp (written out in full: one keyword
    # call is the cheapest on the host, and the static check sees every name)
    if s_in_smem is None:  # "warp"
        launcher(grid, THREADS, stream,
                 *_kernel_args.packed(FILE_WARP, "cat_row_warp", a=ap, b=bp, rows=rows_p, cols=cols_p, n=n, K=K,
                                      out=out_p, out64=out64, k0=key[0], k1=key[1], off_lo=lo, off_hi=hi,
                                      off_dev=off_dev, n_a=n_a, n_b=n_b, status=word, tag=tag, cbase=cbase,
                                      cidx=cidx_p, ll=ll_p, ll_group=int(ll_group)))
        return
    # the scratch array stays referenced until the launch is queued: freed before it (CuPy's asynchronous pool
    # queues the free on the stream), the kernel would write memory it no longer owns
    scratch_arr = cupy.empty(scratch, dtype=a.dtype) if scratch else None
    scratch_ptr = scratch_arr.data.ptr if scratch else ap
    launcher(grid, THREADS, stream,
             *_kernel_args.packed(FILE, "cat_prefix" if method == "prefix" else "cat_warp", a=ap, b=bp, rows=rows_p,
                                  cols=cols_p, n=n, K=K, scratch=scratch_ptr, s_in_smem=s_in_smem, region_words=region,
                                  out=out_p, out64=out64, k0=key[0], k1=key[1], off_lo=lo, off_hi=hi, off_dev=off_dev,
                                  n_a=n_a, n_b=n_b, status=word, tag=tag, cbase=cbase, cidx=cidx_p, ll=ll_p,
                                  ll_group=int(ll_group)),
             shared_mem=shared)


# -- shared front end ---------------------------------------------------------------

def _output(out, xp, shape: tuple):
    if out is None:
        return xp.empty(shape, dtype=np.int64)
    if is_cupy_array(out) != (xp is not np):
        where = "a CuPy" if xp is not np else "a NumPy"
        raise TypeError(f"out must be {where} array, like the draws.")
    if out.dtype not in (np.int32, np.int64):
        raise TypeError(f"out must be int32 or int64, got {out.dtype}.")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"out must have shape {tuple(shape)}, got {tuple(out.shape)}.")
    if not out.flags.c_contiguous:
        raise ValueError("out must be C-contiguous; pass a fresh array, e.g. numpy.empty(shape, numpy.int64).")
    _same_gpu(out, xp, "out")
    return out


def _rows_view(x, xp, axis: int, name: str):
    """``x`` with the categories on the last axis, and the batch shape."""
    check_float_dtype(x.dtype, name)
    if x.ndim < 1:
        raise ValueError(f"{name} needs at least one axis, the categories; got a scalar.")
    axis = int(axis)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} is out of range for {name} of shape {x.shape}.")
    if axis not in (-1, x.ndim - 1):
        x = xp.moveaxis(x, axis, -1)
    return x, tuple(x.shape[:-1])


def _first_bad_row(out, xp, neg=None) -> int | None:
    """Index (flat) of the first row that got -1 (or, where ``neg`` is given, holds a negative weight), or
    None (NumPy; the kernels note theirs in the status word)."""
    bad = out.reshape(-1) < 0
    if neg is not None:
        bad = bad | neg
    if not bool(bad.any()):
        return None
    return int(xp.argmax(bad))


def _row_code(kind: str, values: np.ndarray) -> int:
    """The status code of a bad row on NumPy (one that got -1 or holds a negative weight): the twin of
    ``row_code`` in kernels_cu/discrete.cuh, which ranks NaN, then inf, then a negative weight."""
    if np.isnan(values).any():
        return _status.NAN
    if kind == "logits":
        return _status.INF if np.isposinf(values).any() else _status.ZERO
    if np.isposinf(values).any():
        return _status.INF
    if (values < 0).any():   # -inf among them, as the kernels count it
        return _status.NEG
    if not (values > 0).any():
        return _status.ZERO
    with np.errstate(over="ignore"):
        return _status.TINY if np.isfinite(values.sum(dtype=values.dtype)) else _status.OVERFLOW


_RULE = ("Every row needs a finite, positive total; with gpumcmc.set_validation(False) such rows give -1 "
         "instead.")


def _why_code(kind: str, code: int, dtype) -> str:
    """What a status code says about a row (see kernels_cu/status.cuh)."""
    name = np.dtype(dtype).name
    if code == _status.NAN:
        return "contains NaN"
    if code == _status.INF:
        return "contains +inf" if kind == "logits" else "contains inf"
    if code == _status.ZERO:
        return "is -inf everywhere, so every weight is zero" if kind == "logits" else "has no positive weight"
    if code == _status.OVERFLOW:
        return f"sums to more than the largest {name}; divide the row by its maximum or use float64"
    if code == _status.TINY:
        return f"has a positive total too small to draw from (near the smallest {name}); scale the row up"
    return f"is invalid (status code {code})"


class _RowsMessage:
    """The message of a bad row of categorical / categorical_logits, from the status word."""

    __slots__ = ("kind", "batch", "dtype")

    def __init__(self, kind, batch, dtype):
        self.kind, self.batch, self.dtype = kind, batch, dtype

    def __call__(self, code: int, index: int) -> str:
        name = "weights" if self.kind == "weights" else "logits"
        where = _status.at(index, self.batch)
        if code == _status.NEG:
            return (f"weights must be non-negative; row {where} holds a value < 0 (or -inf) (flat index {index}). "
                    "Clip or shift the weights, or pass logits to categorical_logits.")
        return (f"{name} row {where} {_why_code(self.kind, code, self.dtype)}: no index can be drawn from it "
                f"(flat index {index}). {_RULE}")


class _ProductsMessage:
    """The message of a bad token of categorical_products, from the status word."""

    __slots__ = ("shape", "dtype", "M", "V")

    def __init__(self, shape, dtype, M, V):
        self.shape, self.dtype, self.M, self.V = shape, dtype, M, V

    def __call__(self, code: int, index: int) -> str:
        where = _status.at(index, self.shape)
        if code == _status.ROWS:
            return f"rows must lie in [0, {self.M}); token {where} does not (flat index {index})."
        if code == _status.COLS:
            return f"cols must lie in [0, {self.V}); token {where} does not (flat index {index})."
        if code in (_status.NEG, _status.NEG_B):
            name = "theta" if code == _status.NEG else "phi"
            idx = "rows" if code == _status.NEG else "cols"
            return (f"{name} must be non-negative; found values < 0 (or -inf) in {name}[{idx}[t]] of token "
                    f"t = {where} (flat index {index}).")
        return (f"theta[rows[t]] * phi[cols[t]] of token t = {where} {_why_code('products', code, self.dtype)}: "
                f"no index can be drawn from it (flat index {index}). {_RULE}")


def _check_non_negative(xp, arrays) -> None:
    if not validating():
        return
    for a, name in arrays:
        if a.size:
            _validate.report(xp.any(a < 0), f"{name} must be non-negative; found values < 0 (or -inf).")


def _stream_for(rng, *arrays):
    """``rng`` as a stream: a gpumcmc Generator as it is; one made here (from an int, None, a SeedSequence, ...)
    draws on the array module of the arrays given (the inputs, ``out=``, ``log_total``), as the docstrings
    say, not on the default backend: NumPy weights give a NumPy result on a GPU machine too (the same draws
    either way)."""
    if isinstance(rng, PhiloxStream):
        return rng
    return as_stream(rng, backend="cupy" if any(is_cupy_array(a) for a in arrays) else "numpy")


def _rows_draw(kind: str, x, rng, axis: int, method: str, out):
    rng = _stream_for(rng, x, out)
    xp = rng.xp(x)
    name = "weights" if kind == "weights" else "logits"
    x, batch = _rows_view(asarray(x, xp), xp, axis, name)
    K = int(x.shape[-1])
    n = math.prod(batch)
    method = _method(method, K, x.dtype, products=False)
    offset = rng.advance()
    out = _output(out, xp, batch)
    if n == 0:
        return out
    if K == 0:
        raise ValueError(f"{name} have no categories (the last axis has length 0); nothing can be drawn.")
    with annotate("gpumcmc.categorical_logits" if kind == "logits" else "gpumcmc.categorical", xp):
        if xp is np:
            x2 = x.reshape(n, K)
            if kind == "weights":
                def weights_of(s, e):
                    return x2[s:e]
            else:
                def weights_of(s, e):
                    z = x2[s:e]
                    return np.exp(z - z.max(axis=1, keepdims=True))
            _draw_numpy(weights_of, n, K, x.dtype, method, rng.key, offset, out)
        else:
            a = x if x.flags.c_contiguous else _loader.contiguous(x)
            # The kernel checks the rows as it reads them (see _status).
            _launch(kind, method, a, a, a, a, n, K, rng.key, offset, out, _RowsMessage(kind, batch, x.dtype))
            return out
    if validating():  # as the kernels note it: the first row that drew -1 or holds a negative weight
        neg = (x.reshape(n, K) < 0).any(axis=1) if kind == "weights" else None
        r = _first_bad_row(out, xp, neg)
        if r is not None:
            raise ValueError(_RowsMessage(kind, batch, x.dtype)(_row_code(kind, x.reshape(n, K)[r]), r))
    return out


@_validate.checked
def categorical(weights, rng=None, axis: int = -1, method: str = "auto", out=None):
    """Draw one index from each row of unnormalised weights.

    Parameters
    ----------
    weights : array_like, float32 or float64, shape (..., K)
        Non-negative weights, categories along ``axis``; rows need not sum
        to one. Another ``axis`` than the last costs a copy on the GPU.
    rng : gpumcmc.random.Generator, int, SeedSequence or None
        The stream; anything :func:`gpumcmc.random.default_rng` takes.
        One call uses one generator offset.
    axis : int
        The axis of categories.
    method : {"auto", "prefix", "transpose", "butterfly", "warp"}
        See the module docstring; all give the same draws but for rounding
        near ties (``"prefix"`` and ``"transpose"`` always agree).
    out : int32 or int64 array, optional
        Written in place and returned; shape ``weights.shape`` without ``axis``.

    Returns
    -------
    int64 array (or ``out``) of shape ``weights.shape`` without ``axis``:
    index ``k`` with probability ``weights[..., k] / weights.sum(axis)``.
    On the array module of ``weights`` (CuPy arrays stay on the GPU).

    Raises
    ------
    ValueError
        With validation on: negative weights, or a row that is all zero,
        holds NaN or inf, or overflows when summed. K = 0 with rows to draw.

    Examples
    --------
    >>> import numpy as np, gpumcmc
    >>> rng = gpumcmc.random.default_rng(7, backend="numpy")
    >>> w = np.array([[0.0, 2.0, 0.0], [1.0, 0.0, 0.0]])
    >>> gpumcmc.categorical(w, rng=rng)
    array([1, 0])
    """
    return _rows_draw("weights", weights, rng, axis, method, out)


@_validate.checked
def categorical_logits(logits, rng=None, axis: int = -1, method: str = "auto", out=None):
    """Draw one index from each row of log-weights (unnormalised log-probabilities).

    The weights ``exp(logits - max(logits))`` are computed on the fly, inside
    the kernel: no array of weights is built. ``-inf`` is a zero weight and
    is never drawn. Parameters and result as :func:`categorical`.

    Raises
    ------
    ValueError
        With validation on: a row holding NaN or +inf, or all -inf.

    Examples
    --------
    >>> import numpy as np, gpumcmc
    >>> rng = gpumcmc.random.default_rng(7, backend="numpy")
    >>> z = np.array([[-np.inf, 0.5, -np.inf], [-3.0, -np.inf, -np.inf]])
    >>> gpumcmc.categorical_logits(z, rng=rng)
    array([1, 0])
    """
    return _rows_draw("logits", logits, rng, axis, method, out)


@_validate.checked
def categorical_products(theta, phi, rows, cols, rng=None, method: str = "auto", out=None, *,
                         counter_base: int = 0, counter_index=None, log_total=None):
    """For each token ``t``, draw ``k`` with weight ``theta[rows[t], k] * phi[cols[t], k]``.

    The z-draw of a latent Dirichlet allocation sampler (``rows`` = documents,
    ``cols`` = words). The products are formed on the fly and rounded once
    (no fused multiply-add), so no tokens x K array is built. On the GPU the
    warp methods load rows of ``theta`` and ``phi`` with coalesced loads, and a
    row shared by consecutive tokens is not loaded again (``"warp"`` keeps it
    in registers): tokens sorted by ``cols`` (or by ``rows``) reuse their
    ``phi`` (``theta``) rows; :func:`token_order` also keeps ``theta`` in cache.

    Parameters
    ----------
    theta : array_like, float32 or float64, shape (M, K)
        Non-negative.
    phi : array_like, same dtype, shape (V, K)
        Non-negative.
    rows, cols : array_like of int, one shape (any)
        Indices into ``theta`` and ``phi``; with validation off they are not
        checked, and an index out of range is undefined behaviour on the GPU.
    rng, method, out
        As :func:`categorical`; ``out`` has the shape of ``rows``.
    counter_base : int, optional
    counter_index : array_like of int, shape of ``rows``, optional
        Draw the tokens as part of a larger call: token ``t`` (flat) draws
        as token ``counter_base + t``, or ``counter_base + counter_index[t]``,
        of a call at the same generator offset over more tokens (pass a copy
        of that call's generator). Both its uniform (the Philox counter) and,
        for ``"butterfly"``, its place in a warp (its rounding near ties
        depends on it) are that token's, so for the same weights the draws
        are the larger call's, bit for bit, with every method: tokens
        ``[a, b)`` drawn with ``counter_base=a`` give that call's ``[a, b)``.
        Used where a corpus is split over devices. Defaults: the call's own
        counters. ``counter_index`` costs one more read per token, and with
        ``"butterfly"`` on the GPU a layout of the tokens in warps by their
        lanes (a sort of the counters and one wait). Calls that repeat one
        index can pass a :class:`CounterIndex`, which keeps that layout.
    log_total : float64 array of shape (G,), optional
        Adds, as the draw goes, ``log(max(total_t, 1e-300))`` of every token
        to ``log_total[t // (n / G)]`` (``n`` tokens in G equal consecutive
        groups, e.g. the chains of a sampler), ``total_t = sum_k theta[rows[t],
        k] phi[cols[t], k]`` as the method summed it: the log-likelihood of
        the tokens under ``theta`` and ``phi``, with no pass of its own. It is
        added to, not overwritten. The draws are the same with or without it.
        On the GPU the sum is formed in float64 with atomic additions, whose
        order (and so the last bits) varies from call to call. With
        ``counter_index`` and ``"butterfly"`` on the GPU, G must be 1.

    Returns
    -------
    int64 array (or ``out``) of the shape of ``rows``.

    Examples
    --------
    >>> import numpy as np, gpumcmc
    >>> rng = gpumcmc.random.default_rng(7, backend="numpy")
    >>> theta = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> phi = np.ones((3, 2))
    >>> gpumcmc.categorical_products(theta, phi, rows=[0, 1, 1], cols=[2, 0, 1], rng=rng)
    array([0, 1, 1])
    """
    rng = _stream_for(rng, theta, phi, rows, cols, out, log_total)
    xp = rng.xp(theta, phi, rows, cols)
    theta, phi, rows, cols = _products_inputs(xp, theta, phi, rows, cols)
    shape = tuple(rows.shape)
    n = int(rows.size)
    K = int(theta.shape[1])
    cbase, cidx, layout = _counters(xp, counter_base, counter_index, shape)
    method = _method(method, K, theta.dtype, products=True)
    _log_total_checked(log_total, xp, n)
    offset = rng.advance()
    out = _output(out, xp, shape)
    if n == 0:
        return out
    if K == 0:
        raise ValueError("theta and phi have no categories (K = 0); nothing can be drawn.")
    draw = _products_numpy if xp is np else _products_gpu
    return draw(xp, theta, phi, rows.reshape(-1), cols.reshape(-1), shape, method, rng.key, offset, out,
                cbase, cidx, layout, log_total)


def _products_inputs(xp, theta, phi, rows, cols):
    """categorical_products' arrays on ``xp``, their dtypes and shapes checked."""
    theta = asarray(theta, xp)
    phi = asarray(phi, xp)
    check_float_dtype(theta.dtype, "theta")
    if phi.dtype != theta.dtype:
        raise TypeError(f"theta and phi must share a dtype, got {theta.dtype} and {phi.dtype}; cast one.")
    if theta.ndim != 2 or phi.ndim != 2 or theta.shape[1] != phi.shape[1]:
        raise ValueError(f"theta (M, K) and phi (V, K) must be 2-d with the same K, got shapes "
                         f"{theta.shape} and {phi.shape}.")
    rows = asarray(rows, xp)
    cols = asarray(cols, xp)
    for a, name in ((rows, "rows"), (cols, "cols")):
        if a.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integers, got {a.dtype}.")
    if rows.shape != cols.shape:
        raise ValueError(f"rows and cols must have one shape, got {rows.shape} and {cols.shape}.")
    return theta, phi, rows, cols


def _products_gpu(xp, theta, phi, rows_f, cols_f, shape, method, key, offset, out, cbase, cidx, layout,
                  log_total):
    """categorical_products' launch on the GPU, for ``n > 0`` tokens (flat ``rows_f``, ``cols_f``)."""
    n = int(rows_f.size)
    M, K = (int(s) for s in theta.shape)
    V = int(phi.shape[0])
    if max(M, V) > np.iinfo(np.int32).max:
        raise ValueError("theta and phi may have at most 2**31 - 1 rows on the GPU.")
    # The kernel checks every token as it reads it (see _status): an index out of range reads row 0 and
    # gets -1, whatever the validation setting, and bad values are noted in the status word.
    message = _ProductsMessage(shape, theta.dtype, M, V)
    with annotate("gpumcmc.categorical_products", xp):
        th, ph = _loader.contiguous(theta), _loader.contiguous(phi)
        r32, c32 = _index32(xp, rows_f, M), _index32(xp, cols_f, V)
        if cidx is not None and method == "butterfly":
            # Each token in the lane its counter gives it (see _lane_layout).
            counters = cidx + cbase
            slot, tok = layout.lanes(cbase) if layout is not None else _lane_layout(counters, xp)
            flat = xp.empty(int(tok.size), dtype=np.int64)
            if log_total is not None and log_total.size != 1:
                raise ValueError("log_total must have one entry with counter_index and method='butterfly' "
                                 "on the GPU; pass a (1,) array, or draw each group in its own call.")
            _launch("products", method, th, ph, r32[tok], c32[tok], int(tok.size), K, key, offset, flat,
                    _SlotMessage(message, tok, slot, flat, th, ph, rows_f, cols_f), M, V, 0, counters[tok],
                    log_total, max(1, int(tok.size)))
            if log_total is not None and int(tok.size) > n:
                # The empty slots drew token 0 again: take its term out (summed here in another order).
                t0 = xp.sum(th[r32[0]] * ph[c32[0]], dtype=th.dtype).astype(np.float64)
                log_total -= (int(tok.size) - n) * xp.log(xp.maximum(t0, 1e-300))
            out.reshape(-1)[...] = flat[slot]
        else:
            _launch("products", method, th, ph, r32, c32, n, K, key, offset, out, message, M, V, cbase,
                    cidx, log_total, n // log_total.size if log_total is not None else 1)
    return out


def _products_numpy(xp, theta, phi, rows_f, cols_f, shape, method, key, offset, out, cbase, cidx, layout,
                    log_total):
    """categorical_products' NumPy twin, for ``n > 0`` tokens (flat ``rows_f``, ``cols_f``)."""
    n = int(rows_f.size)
    M, V = int(theta.shape[0]), int(phi.shape[0])
    K = int(theta.shape[1])
    # NumPy: a token with an index out of range gets -1, whatever the validation setting.
    outside = (rows_f < 0) | (rows_f >= M) | (cols_f < 0) | (cols_f >= V)
    if validating():
        for a, name, size in ((rows_f, "rows", M), (cols_f, "cols", V)):
            lo, hi = int(a.min()), int(a.max())
            if lo < 0 or hi >= size:
                raise ValueError(f"{name} must lie in [0, {size}); found values in [{lo}, {hi}].")
        _check_non_negative(xp, [(theta, "theta"), (phi, "phi")])
    rows_f = np.where(outside, 0, rows_f)
    cols_f = np.where(outside, 0, cols_f)
    with annotate("gpumcmc.categorical_products", xp):
        def weights_of(s, e):
            return theta[rows_f[s:e]] * phi[cols_f[s:e]]

        _draw_numpy(weights_of, n, K, theta.dtype, method, key, offset, out, cbase, cidx, log_total,
                    outside if log_total is not None and outside.any() else None)
        np.copyto(out.reshape(-1), -1, where=outside)
    if validating():
        r = _first_bad_row(out, xp)
        if r is not None:
            code = _row_code("products", theta[int(rows_f[r])] * phi[int(cols_f[r])])
            raise ValueError(_ProductsMessage(shape, theta.dtype, M, V)(code, r))
    return out


def _index32(xp, a, bound: int):
    """Token indices as the kernel's contiguous int32. 64-bit ones are clipped to [-1, bound] in the same pass
    as the cast, so that one out of range stays out of range (a plain cast wraps 2**32 + 1 to 1, a valid
    row); narrower ones cannot wrap and are cast as they are."""
    if a.dtype == np.int64:
        out = xp.empty(a.shape, np.int32)
        xp.clip(a, -1, bound, out=out)
        return out
    if a.dtype == np.uint64:
        a = xp.minimum(a, bound)
    return _loader.contiguous(a, np.int32)


def _same_gpu(a, xp, name: str) -> None:
    """A CuPy ``a`` must lie on the current GPU, where the kernel writes it by its address."""
    if xp is not np and not _on_this_gpu(a):
        dev = xp.cuda.runtime.getDevice()
        raise ValueError(f"{name} lies on GPU {a.device.id} but the draws run on GPU {dev}; allocate it there "
                         f"(inside `with cupy.cuda.Device({dev}):`).")


def _log_total_checked(log_total, xp, n: int) -> None:
    """categorical_products' ``log_total``: a C-contiguous float64 (G,) array of the draws' backend, G
    dividing the number of tokens."""
    if log_total is None:
        return
    if is_cupy_array(log_total) != (xp is not np):
        where = "a CuPy" if xp is not np else "a NumPy"
        raise TypeError(f"log_total must be {where} array, like the draws.")
    if log_total.dtype != np.float64 or log_total.ndim != 1 or not log_total.flags.c_contiguous:
        raise TypeError(f"log_total must be a C-contiguous 1-d float64 array, got {log_total.dtype} of shape "
                        f"{log_total.shape}; pass e.g. zeros(n_groups, float64).")
    _same_gpu(log_total, xp, "log_total")
    G = int(log_total.size)
    if G < 1 or (n and n % G):
        raise ValueError(f"log_total has {G} entries, which must divide the {n} tokens into equal groups.")


def _counters(xp, counter_base, counter_index, shape):
    """``(cbase, cidx, layout)``: categorical_products' counter base (int), index (flat int64 on ``xp``, or
    None) and the :class:`CounterIndex` it came in (or None)."""
    if isinstance(counter_base, bool) or not isinstance(counter_base, (int, np.integer)):
        raise TypeError(f"counter_base must be an integer, got {counter_base!r}.")
    cbase = int(counter_base)
    if cbase < 0:
        raise ValueError(f"counter_base must be >= 0, got {cbase}.")
    if counter_index is None:
        return cbase, None, None
    layout = counter_index if isinstance(counter_index, CounterIndex) else None
    if layout is not None:
        if get_array_module(layout.index) is not xp:
            raise TypeError("counter_index is a CounterIndex of another backend than theta and phi; make it from "
                            "an array of theirs.")
        cidx = layout.index
    else:
        cidx = asarray(counter_index, xp)
        if cidx.dtype.kind not in "iu":
            raise TypeError(f"counter_index must hold integers, got {cidx.dtype}.")
    if tuple(cidx.shape) != tuple(shape):
        raise ValueError(f"counter_index must have the shape of rows, {tuple(shape)}, got {tuple(cidx.shape)}.")
    if layout is None:
        cidx = xp.ascontiguousarray(cidx.reshape(-1), dtype=np.int64)
        if validating() and cidx.size:
            _validate.report(xp.any(cidx < 0), "counter_index must be non-negative (below 2**63); found values < 0.")
    return cbase, cidx.reshape(-1), layout


class CounterIndex:
    """A ``counter_index`` for :func:`categorical_products` that is given again and again (a sampler's
    sweeps): checked once, and on the GPU its layout of the tokens in warps for ``"butterfly"`` (a sort and
    a wait) made at its first use and kept.

    ``CounterIndex(index)``: ``index`` an array of non-negative integers, NumPy or CuPy, of the shape of
    the ``rows`` it will go with; pass the object as ``counter_index``.

    Examples
    --------
    >>> import numpy as np, gpumcmc
    >>> from gpumcmc.discrete import CounterIndex
    >>> theta, phi = np.ones((2, 3)), np.ones((4, 3))
    >>> idx = CounterIndex(np.array([5, 9, 2]))
    >>> a = gpumcmc.categorical_products(theta, phi, [0, 1, 1], [3, 0, 2], gpumcmc.random.default_rng(1, backend="numpy"),
    ...                                  counter_index=idx)
    >>> a.shape
    (3,)
    """

    __slots__ = ("index", "_lanes")

    def __init__(self, index):
        xp = get_array_module(index)
        index = asarray(index, xp)
        if index.dtype.kind not in "iu":
            raise TypeError(f"counter_index must hold integers, got {index.dtype}.")
        index = xp.ascontiguousarray(index, dtype=np.int64)
        if index.size and int(index.min()) < 0:  # synchronize! (once, when made)
            raise ValueError("counter_index must be non-negative (below 2**63); found values < 0.")
        self.index = index
        self._lanes = {}

    def lanes(self, base: int = 0):
        """:func:`_lane_layout` of ``index + base``, made once per base."""
        got = self._lanes.get(base)
        if got is None:
            xp = get_array_module(self.index)
            got = self._lanes[base] = _lane_layout(self.index.reshape(-1) + base, xp)
        return got


def _lane_layout(counters, xp):
    """``(slot, tok)``: token ``t`` goes to slot ``slot[t] = W rank_t + counters[t] % W``, where ``rank_t``
    is its place among the tokens of its lane, in their order; ``tok[s]`` is the token at slot ``s``.

    The butterfly's rounding depends on a row's lane and on nothing else of its warp, so any slots with the
    lanes of the counters give the same draws; this layout keeps a warp's tokens near each other in the
    given order and leaves a slot empty only where the lanes hold unequal numbers of tokens (an empty slot
    draws token 0 again, and the draw is dropped). One wait: the number of slots."""
    n = int(counters.size)
    lane = counters % W
    idx = xp.arange(n, dtype=np.int64)
    order = xp.argsort(lane * n + idx)                        # by lane, then by place: unique keys
    counts = xp.bincount(lane, minlength=W)
    starts = xp.cumsum(counts) - counts
    rank = xp.empty(n, dtype=np.int64)
    rank[order] = idx - starts[lane[order]]
    slot = rank * W + lane
    n_slots = int(counts.max()) * W  # synchronize! (the launch's size)
    tok = xp.zeros(n_slots, dtype=np.int64)
    tok[slot] = idx
    return slot, tok


class _SlotMessage:
    """A products message for a launch over slots (:func:`_lane_layout`).

    The kernel notes the first bad *slot*, and slots are ordered by lane, not by token; every bad token's
    draw is -1, so the message names the first token whose draw is -1, with what is wrong with that token
    (found again here, on the error path only). ``flat`` is the launch's own output, not the caller's.
    """

    __slots__ = ("message", "tok", "slot", "flat", "theta", "phi", "rows", "cols")

    def __init__(self, message, tok, slot, flat, theta, phi, rows, cols):
        self.message, self.tok, self.slot, self.flat = message, tok, slot, flat
        self.theta, self.phi, self.rows, self.cols = theta, phi, rows, cols

    def __call__(self, code: int, index: int) -> str:
        from .backend import to_host

        noted = int(self.tok[index])
        bad = to_host(self.flat[self.slot] < 0)
        t = int(np.argmax(bad)) if bad.any() else noted
        if t != noted:
            code = self._code(t)
        return self.message(code, t)

    def _code(self, t: int) -> int:
        """The status code of token ``t``, as the kernels find it (see kernels_cu/status.cuh)."""
        from .backend import to_host

        r, c = int(self.rows[t]), int(self.cols[t])
        if not 0 <= r < self.theta.shape[0]:
            return _status.ROWS
        if not 0 <= c < self.phi.shape[0]:
            return _status.COLS
        a, b = to_host(self.theta[r]), to_host(self.phi[c])
        if (a < 0).any():
            return _status.NEG
        if (b < 0).any():
            return _status.NEG_B
        with np.errstate(over="ignore", invalid="ignore"):
            return _row_code("products", a * b)


def token_order(rows, cols, K: int, dtype=np.float32, cache_bytes: int | None = None):
    """A permutation of tokens under which :func:`categorical_products` reuses rows from cache.

    Tokens are grouped into tiles of consecutive ``theta`` rows (documents)
    whose slice of ``theta`` takes half of ``cache_bytes``, and sorted by
    ``phi`` row (word), then by ``theta`` row, inside each tile. A word's
    tokens in one tile then run back to back, so its ``phi`` row is read once
    per tile, and the tile's ``theta`` rows stay in cache. Sorting by word
    alone reads a random ``theta`` row from memory for nearly every token
    (4 KB each at K = 1024 in float32).

    Use it once, before sampling: the z-draw of an uncollapsed LDA sweep may
    visit tokens in any order, since ``theta`` and ``phi`` are fixed during it.

    Parameters
    ----------
    rows, cols : integer arrays of shape (T,)
        The ``theta`` and ``phi`` row of each token.
    K, dtype
        The number of categories and the dtype of ``theta``.
    cache_bytes : int, optional
        The cache to plan for; default the current GPU's L2 size (32 MiB on NumPy).

    Returns
    -------
    order : int64 array of shape (T,), on the backend of ``rows``
        ``rows[order]``, ``cols[order]`` is the cache-friendly token stream.

    Examples
    --------
    >>> import numpy as np
    >>> rows = np.array([5, 0, 5, 0, 9]); cols = np.array([1, 1, 0, 1, 1])
    >>> token_order(rows, cols, K=4, cache_bytes=64).tolist()   # tiles of 2 documents
    [1, 3, 2, 0, 4]
    """
    xp = np if not (is_cupy_array(rows) or is_cupy_array(cols)) else __import__("cupy")
    rows = xp.asarray(rows)
    cols = xp.asarray(cols)
    if rows.shape != cols.shape or rows.ndim != 1:
        raise ValueError(f"rows and cols must be 1-d of one length, got shapes {rows.shape} and {cols.shape}.")
    K = _validate.check_int(K, "K", 1)  # K = 0 divided by zero
    for name, a in (("rows", rows), ("cols", cols)):
        if not a.size:
            continue
        if a.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integers (the theta and phi row of each token), got dtype {a.dtype}; "
                            f"convert indices with {name}.astype(np.int64).")
        if _validate.validating() and int(a.min()) < 0:  # synchronize! (once, at entry; not with checks off)
            raise ValueError(f"{name} must be non-negative row indices; found values < 0.")
    if cache_bytes is None:
        if xp is np:
            cache_bytes = 32 << 20
        else:
            cache_bytes = xp.cuda.Device().attributes["L2CacheSize"]
    row_bytes = int(K) * np.dtype(dtype).itemsize
    tile = max(1, int(cache_bytes) // 2 // row_bytes)
    return xp.lexsort(xp.stack([rows, cols, rows // tile]))
