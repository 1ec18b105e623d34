"""Generalised linear model likelihoods: log-likelihood and gradient in one pass over X.

:func:`loglik_and_grad` evaluates ``f(beta) = sum_i w_i log p(y_i | eta_i)`` with ``eta = X beta + offset``
and its gradient ``g = X^T (w * dlogp/deta)`` for one coefficient vector or a batch of chains, reading ``X``
once (the cache fusion of Mahani & Sharabiani, §3). On CuPy input one CUDA kernel streams ``X`` in row
tiles for every chain at once and a second sums the blocks' partials (``kernels_cu/glm.cu``); on NumPy a
vectorised twin computes the same sums.

Families and links: ``"bernoulli"`` (logit), ``"poisson"`` (log), ``"gaussian"`` (identity, known
``sigma``). The Bernoulli form uses ``softplus(eta) = max(eta, 0) + log1p(exp(-|eta|))``, so large
``|X beta|`` neither overflows nor loses the log-likelihood.

>>> import numpy as np
>>> X = np.array([[1.0, 0.5], [1.0, -1.0], [1.0, 2.0]])
>>> y = np.array([1.0, 0.0, 1.0])
>>> f, g = loglik_and_grad(X, y, np.zeros(2))
>>> round(float(f), 4), g.shape
(-2.0794, (2,))
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from . import _kernel_args
from ._config import config, forward, memo
from . import _validate as _v
from . import backend as _backend

__all__ = ["FAMILIES", "KERNELS", "check_family", "check_y", "loglik_and_grad", "pointwise_loglik", "mean_function"]

FAMILIES = ("bernoulli", "poisson", "gaussian")
_CODE = {"bernoulli": 0, "poisson": 1, "gaussian": 2}
FILE = "glm.cu"
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def check_family(family: str) -> str:
    if not isinstance(family, str) or family.lower() not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}.")
    return family.lower()


# What the f+g kernels note in the status word (GlmBad in kernels_cu/glm.cu), and _first_bad finds on the host.
_BAD_X, _BAD_Y, _BAD_SUPPORT, _BAD_BETA, _BAD_OFFSET, _BAD_WEIGHT = range(1, 7)
_MESSAGES = {_BAD_X: "X contains NaN or inf; remove or impute those values first.",
             _BAD_Y: "y contains NaN or inf; remove those rows first.",
             _BAD_OFFSET: "offset contains NaN or inf; every value must be finite.",
             _BAD_WEIGHT: "weights contains NaN or inf; every weight must be finite."}
_SUPPORT = {"bernoulli": "y must hold only 0 and 1 for family='bernoulli'; encode the classes as 0/1.",
            "poisson": "y must hold non-negative integer counts for family='poisson'."}


def _outside(xp, y, family: str):
    """Where a finite ``y`` lies outside the family's support."""
    if family == "bernoulli":
        return (y != 0) & (y != 1)
    if family == "poisson":
        return (y < 0) | (y != xp.floor(y))
    return xp.zeros(y.shape, dtype=bool)


def check_y(y, family: str, xp) -> None:
    """Raise ValueError when ``y`` holds NaN/inf or values outside the family's support (one sync)."""
    if y.size == 0:
        return
    if not bool(xp.isfinite(y).all()):  # synchronize! (once, at fit or call time)
        raise ValueError(_MESSAGES[_BAD_Y])
    if family in _SUPPORT and bool(_outside(xp, y, family).any()):
        raise ValueError(_SUPPORT[family])


class _BadInput:
    """The message for bad input of :func:`loglik_and_grad` at ``(code, index)``, as the kernels note it in
    the status word (see :mod:`gpumcmc._status`) or :func:`_first_bad` finds it."""

    __slots__ = ("family", "batched")

    def __init__(self, family: str, batched: bool):
        self.family, self.batched = family, batched

    def __call__(self, code: int, index: int) -> str:
        if code in _MESSAGES:
            return _MESSAGES[code] + f" The first such row is {index}."
        if code == _BAD_SUPPORT:
            what = _SUPPORT["bernoulli" if self.family == "bernoulli" else "poisson"]
            return what + f" The first row that does not is {index}."
        if code == _BAD_BETA:
            return ("beta contains NaN or inf; every coefficient must be finite."
                    + (f" The first such chain (row of beta) is {index}." if self.batched else ""))
        return f"loglik_and_grad met bad input (code {code} at index {index})."


def _first_bad(xp, X, y, beta2, w, off, family: str):
    """``(code, index)`` of the bad input the kernels' status word would name for this call, or None.

    As the kernels note it: each bad row with its lowest code (X, then y not finite, then y outside the
    family's support, then offset, then weights) and, where there are rows, each chain of ``beta2`` with
    a coefficient that is not finite (code ``_BAD_BETA``, indexed by the chain); the word keeps the least
    ``index * 16 + code``. On CuPy this synchronises (the paths without fused checks use it)."""
    N = y.shape[0]
    if N == 0:
        return None
    fin = xp.isfinite
    ynan = ~fin(y)
    code = xp.where(~ynan & _outside(xp, y, family), _BAD_SUPPORT, 0)
    if off is not None:
        code = xp.where((code == 0) & ~fin(off), _BAD_OFFSET, code)
    if w is not None:
        code = xp.where((code == 0) & ~fin(w), _BAD_WEIGHT, code)
    code = xp.where(ynan, _BAD_Y, code)
    if X.shape[1]:
        code = xp.where(~fin(X).all(axis=1), _BAD_X, code)
    keys = xp.where(code > 0, xp.arange(N, dtype=np.int64) * 16 + code, np.iinfo(np.int64).max)
    best = keys.min()
    if beta2.shape[0] and beta2.shape[1]:
        bad_b = ~fin(beta2).all(axis=1)
        kb = xp.where(bad_b, xp.arange(beta2.shape[0], dtype=np.int64) * 16 + _BAD_BETA, np.iinfo(np.int64).max)
        best = xp.minimum(best, kb.min())
    best = int(best)  # synchronize! (on CuPy: the paths without fused checks)
    if best == np.iinfo(np.int64).max:
        return None
    return best & 15, best >> 4


_calls = itertools.count(1)  # numbers of checked calls (glm_fg_rows writes the number of one that met bad input)
_flags = memo.table("glm.flags")  # (device, stream) -> the word glm_fg_rows writes a call's number to


def _flag(device: int, stream_ptr: int):
    """The 64-bit device word glm_fg_rows writes a call's number to (one per device and stream, made once:
    a number is never reused, so no call resets it)."""
    f = _flags.get((device, stream_ptr))
    if f is None:
        import cupy

        f = _flags[device, stream_ptr] = cupy.zeros(1, dtype=np.uint64)
    return f


def _flag_args(describe, device: int, stream_ptr: int):
    """(flag address, call number) for glm_fg_rows when the call checks its input (``describe`` given:
    the call then runs inside :func:`gpumcmc._validate.checked`, so it gets a status word), else (0, 0):
    integers, as a packed launch takes them. ``device`` and ``stream_ptr``: the launch's, which the caller
    has at hand (a direct call is timed from an idle GPU, so the host's work before its first launch counts)."""
    if describe is None:
        return 0, 0
    return _flag(device, stream_ptr).data.ptr, next(_calls)


def _word_args(describe, device=None, stream=None):
    """(status word, tag) for the launch that notes bad input, or (0, 0) (see :func:`gpumcmc._validate.fused`)."""
    return (0, 0) if describe is None else _v.fused(describe, device, stream)


def _softplus(xp, eta):
    return xp.maximum(eta, 0) + xp.log1p(xp.exp(-xp.abs(eta)))


def _sigmoid(xp, eta):
    e = xp.exp(-xp.abs(eta))
    return xp.where(eta >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _lgamma1p(xp, y):
    if xp is np:
        from scipy.special import gammaln
        return gammaln(y + 1.0)
    import cupyx.scipy.special as cs
    return cs.gammaln(y + 1.0)


def pointwise_loglik(eta, y, family: str, sigma=1.0, xp=None, lgy=None):
    """``log p(y | eta)`` elementwise (broadcasting ``y`` against ``eta``); ``lgy`` = lgamma(y+1) if known."""
    xp = xp or _backend.get_array_module(eta)
    if family == "bernoulli":
        return y * eta - _softplus(xp, eta)
    if family == "poisson":
        if lgy is None:
            lgy = _lgamma1p(xp, y)
        with np.errstate(over="ignore"):  # exp(eta) = inf: the log density is -inf, as it should be
            return y * eta - xp.exp(eta) - lgy
    z = (y - eta) / sigma
    return -0.5 * z * z - (math.log(sigma) + _LOG_SQRT_2PI)


@np.errstate(under="ignore")  # a probability below the smallest float is 0
def mean_function(eta, family: str, xp=None):
    """The inverse link: E[y | eta]."""
    xp = xp or _backend.get_array_module(eta)
    if family == "bernoulli":
        return _sigmoid(xp, eta)
    if family == "poisson":
        return xp.exp(eta)
    return eta


def _dlogp(eta, y, family, sigma, xp):
    if family == "bernoulli":
        return y - _sigmoid(xp, eta)
    if family == "poisson":
        return y - xp.exp(eta)
    return (y - eta) / (sigma * sigma)


def _twin(X, y, beta2, family, w, off, sigma):
    """The NumPy twin: the same sums as the kernel, accumulated in float64."""
    eta = beta2.astype(np.float64) @ X.T.astype(np.float64)  # (B, N)
    if off is not None:
        eta += off
    yd = y.astype(np.float64)
    ll = pointwise_loglik(eta, yd, family, sigma, np)
    r = _dlogp(eta, yd, family, sigma, np)
    if w is not None:
        ll = ll * w
        r = r * w
    return ll.sum(axis=1), r @ X.astype(np.float64)


KERNELS = ("auto", "rows", "tiled", "gemm")

# The launch shapes of the f+g kernels are tuning knobs of gpumcmc._config.config (glm_threads,
# glm_tile_bytes, glm_sb, glm_max_rows, glm_shared_limit, glm_part_bytes, glm_rows_max_r, glm_defines);
# the old module names still read and set them.
forward(__name__, {"_THREADS": "glm_threads", "_TILE_BYTES": "glm_tile_bytes", "_SB": "glm_sb",
                   "_MAX_ROWS": "glm_max_rows", "_SHARED_LIMIT": "glm_shared_limit", "_PART_BYTES": "glm_part_bytes",
                   "_ROWS_MAX_R": "glm_rows_max_r", "_DEFINES": "glm_defines"})
_KPL = {np.dtype(np.float32): (1, 2, 4, 8), np.dtype(np.float64): (1, 2, 4)}  # columns per lane, instantiated


def _tiled_fits(K: int, dtype) -> bool:
    """Whether ``glm_fg_tiles`` takes K columns: a tile must hold 32 rows and a warp's lanes each <= 8 columns."""
    return 0 < K <= 32 * _KPL[np.dtype(dtype)][-1] and 32 * K * np.dtype(dtype).itemsize <= config.glm_tile_bytes


def _ctype(dtype) -> str:
    return "float" if dtype == np.float32 else "double"


def _tiled_fg(X, y, beta2, family, w, off, sigma, describe=None):
    """f, g by ``glm_fg_tiles`` (X read once, in 128-bit loads) and ``glm_fg_reduce``; see kernels_cu/glm.cu.
    ``describe``: the message maker when the call is to check its input (then ``glm_fg_check`` ends it)."""
    import cupy

    from . import _loader

    dtype = X.dtype
    N, K = X.shape
    B = beta2.shape[0]
    if N == 0 or B == 0:
        return cupy.zeros(B, dtype=dtype), cupy.zeros((B, K), dtype=dtype)
    ct = _ctype(dtype)
    s = dtype.itemsize
    kpl = next(p for p in _KPL[dtype] if 32 * p >= K)
    R = min(config.glm_max_rows, config.glm_tile_bytes // (K * s) // 32 * 32)   # >= 32 by _tiled_fits
    G = R // 32
    # One module per instantiation: a call compiles only the one it needs (benchmarks/NOTES.md).
    names = (f"glm_fg_tiles<{ct}, {kpl}>", f"glm_fg_reduce<{ct}>", f"glm_fg_check<{ct}>")
    fn = _loader.get_function("glm.cu", names[0], names, config.glm_defines)
    sms = _loader.sm_count()
    X = _loader.contiguous(X, dtype)
    ins = _kernel_args.part(FILE, "glm_fg_tiles", X=X, y=_loader.contiguous(y, dtype),
                            w=_loader.NULL if w is None else _loader.contiguous(w, dtype),
                            off=_loader.NULL if off is None else _loader.contiguous(off, dtype))
    vec = _loader.i32(X.data.ptr % 16 == 0)
    fam = _loader.i32(_CODE[family])
    beta2 = _loader.contiguous(beta2, dtype)
    no_check = _kernel_args.part(FILE, "glm_fg_reduce", flag=_loader.NULL, call=_loader.u64(0), status=_loader.NULL,
                                 tag=_loader.u64(0), family=_loader.i32(0), beta=beta2, N=_loader.i64(N),
                                 B_all=_loader.i32(B))
    f = g = None
    # Chains per launch: the blocks' partial sums (grid x chains x (K + 1) doubles) stay under
    # config.glm_part_bytes; X is read once per launch, so once in all unless B runs into the hundreds.
    step = max(1, config.glm_part_bytes // (8 * (K + 1) * sms * 4))
    for c0 in range(0, B, step):
        Bc = min(step, B - c0)
        sbe = min(Bc, config.glm_sb)
        smem = R * K * s + 8 * sbe * G + s * sbe * G * K   # <= 40.5 KB, the layout in glm.cu
        acc_shared = smem + 8 * Bc * (K + 1) <= config.glm_shared_limit
        if acc_shared:
            smem += 8 * Bc * (K + 1)
        threads = config.glm_threads
        grid = max(1, min(-(-N // R), sms * _loader.resident_blocks(fn, threads, smem)))
        part = cupy.empty((grid, Bc, K + 1), dtype=np.float64)
        fn((grid,), (threads,),
           _kernel_args.args(FILE, "glm_fg_tiles", **ins, beta=beta2[c0:c0 + Bc], N=_loader.i64(N), K=_loader.i32(K),
                             B=_loader.i32(Bc), R=_loader.i32(R), vec=vec, acc_shared=_loader.i32(acc_shared),
                             family=fam, sigma=np.float64(sigma), part=part),
           shared_mem=smem)
        # Host work from here on overlaps the kernel above.
        if f is None:
            f = cupy.empty(B, dtype=dtype)
            g = cupy.empty((B, K), dtype=dtype)
        red = _loader.get_function("glm.cu", names[1], names, config.glm_defines)
        n_out = Bc * (K + 1)
        red((-(-n_out * 32 // 256),), (256,),
            _kernel_args.args(FILE, "glm_fg_reduce", part=part, n_part=_loader.i32(grid), B=_loader.i32(Bc),
                              K=_loader.i32(K), f=f[c0:c0 + Bc], g=g[c0:c0 + Bc], **ins, **no_check))
    word, tag = _word_args(describe)
    if word:
        chk = _loader.get_function("glm.cu", names[2], names, config.glm_defines)
        chk((max(1, min(-(-N // 256), 2 * sms)),), (256,),
            _kernel_args.args(FILE, "glm_fg_check", f=f, B=_loader.i32(B), status=_loader.u64(word),
                              tag=_loader.u64(tag), family=fam, **ins, beta=beta2, N=_loader.i64(N),
                              K=_loader.i32(K)))
    return f, g


_ROWS_NB = (1, 2, 4, 8)           # glm_fg_rows instantiations: chains each thread accumulates
_rows_plans = memo.table("glm.rows_plans")  # (device, the problem, the knobs) -> glm_fg_rows's launch shape


_ROWS_MAX_SUB = 64  # GLM_ROWS_MAX_SUB in glm.cu


def _rows_nsub(K: int) -> int:
    """Phase 2's row subsets in ``glm_fg_rows`` (as the kernel computes them)."""
    return min(config.glm_threads // ((K + 1) // 2), _ROWS_MAX_SUB)


def _rows_smem(K: int, B: int, R: int, itemsize: int) -> tuple:
    """``glm_fg_rows``' dynamic shared memory at R rows a tile: ``(bytes, x_s elements)``: the tile with the rows'
    stride Kp, or the end's sums over the row subsets and warps where larger; r; the coefficients."""
    Kp = K + (2 - K) % 4
    xs = max(R * Kp * itemsize, 8 * (_rows_nsub(K) * B * (K + 1) + config.glm_threads // 32 * B))
    xs = -(-xs // 16) * 16
    return xs + itemsize * B * R + itemsize * B * K, xs // itemsize


def _rows_fits(K: int, B: int, dtype) -> bool:
    """Whether ``glm_fg_rows`` takes the problem: up to 8 chains, a thread per column, a 32-row tile, and the
    shared memory of one within the limit."""
    s = np.dtype(dtype).itemsize
    return (0 < K < config.glm_threads and 0 < B <= _ROWS_NB[-1] and 32 * K * s <= config.glm_tile_bytes
            and _rows_smem(K, B, 32, s)[0] <= config.glm_shared_limit)


def _rows_plan(N, K, B, dtype):
    """Launch shape of ``glm_fg_rows`` (cached): its packed launcher and ``glm_fg_reduce``'s, rows a tile,
    stride, shared memory, grid."""
    from . import _loader

    import cupy

    c = config
    key = (cupy.cuda.runtime.getDevice(), N, K, B, np.dtype(dtype), c.glm_defines, c.glm_threads, c.glm_tile_bytes,
           c.glm_rows_max_r, c.glm_shared_limit)
    plan = _rows_plans.get(key)
    if plan is not None:
        return plan
    s = np.dtype(dtype).itemsize
    nb = next(p for p in _ROWS_NB if p >= B)
    ct = _ctype(dtype)
    names = tuple(f"glm_fg_rows<{ct}, {p}>" for p in _ROWS_NB) + (f"glm_fg_reduce<{ct}>",)
    fn = _loader.get_function("glm.cu", f"glm_fg_rows<{ct}, {nb}>", names, config.glm_defines)
    red = _loader.get_function("glm.cu", names[-1], names, config.glm_defines)
    Kp = K + (2 - K) % 4   # the rows' stride in shared memory: even, and 2 mod 4 (see glm_fg_rows)
    R = min(c.glm_rows_max_r, c.glm_tile_bytes // (K * s)) // 32 * 32
    while R > 32 and _rows_smem(K, B, R, s)[0] > c.glm_shared_limit:
        R -= 32
    smem, xs_len = _rows_smem(K, B, R, s)
    grid_max = _loader.sm_count() * _loader.resident_blocks(fn, c.glm_threads, smem)
    # Both kernels go through the driver with their arguments packed in one buffer: a direct call of
    # loglik_and_grad is timed from an idle GPU, so the host's time to the first launch counts in full.
    plan = (_loader.packed_launcher(fn, "glm.cu", "glm_fg_rows", ct),
            _loader.packed_launcher(red, "glm.cu", "glm_fg_reduce", ct), R, Kp, xs_len, smem,
            max(1, min(-(-N // R), grid_max)))
    _rows_plans[key] = plan
    return plan


def _rows_fg(X, y, beta2, family, w, off, sigma, describe=None):
    """f, g by ``glm_fg_rows`` (a thread per row, X read once, up to 8 chains) and ``glm_fg_reduce``.
    ``describe``: the message maker when the call is to check its input (see kernels_cu/glm.cu)."""
    import cupy

    from . import _loader

    dtype = X.dtype
    N, K = X.shape
    B = beta2.shape[0]
    if N == 0:
        return cupy.zeros(B, dtype=dtype), cupy.zeros((B, K), dtype=dtype)
    rows, red, R, Kp, xs_len, smem, grid = _rows_plan(N, K, B, dtype)
    # The arrays stay referenced until both launches are queued: the kernels get bare addresses.
    X, y, beta2 = (_loader.contiguous(a, dtype) for a in (X, y, beta2))
    w = None if w is None else _loader.contiguous(w, dtype)
    off = None if off is None else _loader.contiguous(off, dtype)
    ins = _kernel_args.part(FILE, "glm_fg_rows", X=X.data.ptr, y=y.data.ptr, w=0 if w is None else w.data.ptr,
                            off=0 if off is None else off.data.ptr, beta=beta2.data.ptr)
    cuda = cupy.cuda
    device, current = cuda.runtime.getDevice(), cuda.get_current_stream()
    stream = current.ptr
    flag, call = _flag_args(describe, device, stream)
    part = cupy.empty((grid, B, K + 1), dtype=np.float64)
    fam = _CODE[family]
    rows(grid, config.glm_threads, stream,
         *_kernel_args.packed(FILE, "glm_fg_rows", **ins, N=N, K=K, Kp=Kp, B=B, R=R, xs_len=xs_len,
                              vec=int(X.data.ptr % 16 == 0), family=fam, sigma=float(sigma), part=part.data.ptr,
                              flag=flag, call=call),
         shared_mem=smem)
    # Host work from here on overlaps the kernel above.
    word, tag = _word_args(describe, device, current)
    if word == 0:  # no word to note in (not expected: a call that checks runs where it gets one)
        flag = 0
    f = cupy.empty(B, dtype=dtype)
    g = cupy.empty((B, K), dtype=dtype)
    n_out = B * (K + 1)
    red(-(-n_out * 32 // 256), 256, stream,
        *_kernel_args.packed(FILE, "glm_fg_reduce", part=part.data.ptr, n_part=grid, B=B, K=K, f=f.data.ptr,
                             g=g.data.ptr, flag=flag, call=call, status=int(word), tag=int(tag), family=fam, **ins,
                             N=N, B_all=B))
    return f, g


def _gemm_fg(X, y, beta2, family, w, off, sigma):
    """f, g by two matrix products (cuBLAS; X read twice) and elementwise work: f summed in float64, g's
    product in X's dtype (cuBLAS's order and precision), then cast to float64."""
    import cupy

    eta = beta2 @ X.T + (0 if off is None else off)
    ll = pointwise_loglik(eta, y, family, sigma, cupy)
    r = _dlogp(eta, y, family, sigma, cupy)
    if w is not None:
        ll, r = ll * w, r * w
    return ll.sum(axis=1, dtype=np.float64), (r @ X).astype(np.float64)


def _kernel_fg(X, y, beta2, family, w, off, sigma, kernel="auto", describe=None):
    """f, g on CuPy by the implementation ``kernel`` names (see :func:`loglik_and_grad`). ``describe``: the
    message maker when the input is to be checked: noted by the kernels (``"rows"``, ``"tiled"``), read by
    the caller (:func:`gpumcmc._validate.checked`); checked here, with a synchronisation, on the others."""
    if kernel == "auto":
        K, B = X.shape[1], beta2.shape[0]
        kernel = "rows" if _rows_fits(K, B, X.dtype) else "tiled" if _tiled_fits(K, X.dtype) else "gemm"
    if kernel == "rows":
        if not _rows_fits(X.shape[1], beta2.shape[0], X.dtype):
            raise ValueError(f"kernel='rows' takes up to {_ROWS_NB[-1]} chains, fewer than {config.glm_threads} "
                             f"columns, and 32 rows of them in at most {config.glm_tile_bytes} bytes (here "
                             f"{beta2.shape[0]} chains of {X.shape[1]} {X.dtype.name} columns); use kernel='auto'.")
        return _rows_fg(X, y, beta2, family, w, off, sigma, describe)
    if kernel == "tiled":
        if not _tiled_fits(X.shape[1], X.dtype):
            raise ValueError(f"kernel='tiled' takes at most {32 * _KPL[X.dtype][-1]} columns in {X.dtype.name} "
                             f"(X has {X.shape[1]}); use kernel='auto' or 'gemm'.")
        if beta2.shape[0]:
            return _tiled_fg(X, y, beta2, family, w, off, sigma, describe)
    if describe is not None:  # no kernel of ours reads the input (or no chain): a separate pass
        import cupy

        _raise_bad(cupy, describe, X, y, beta2, w, off, family)
    if kernel == "tiled":
        return _tiled_fg(X, y, beta2, family, w, off, sigma)
    return _gemm_fg(X, y, beta2, family, w, off, sigma)


def _raise_bad(xp, describe, X, y, beta2, w, off, family):
    bad = _first_bad(xp, X, y, beta2, w, off, family)  # synchronize! (on CuPy; the paths without fused checks)
    if bad is not None:
        raise ValueError(describe(*bad))


def _kernel_fg_out(X, y, beta2, family, w, off, sigma, kernel, describe, single):
    """:func:`_kernel_fg` and the results in ``X``'s dtype, shaped as :func:`loglik_and_grad` returns them:
    every launch is queued before :func:`gpumcmc._validate.checked` waits, so the call returns as soon as
    the GPU is done."""
    return _shaped(*_kernel_fg(X, y, beta2, family, w, off, sigma, kernel, describe), X.dtype, single)


def _shaped(f, g, dtype, single):
    """``f, g`` in ``dtype``, shaped as :func:`loglik_and_grad` returns them."""
    f, g = f.astype(dtype, copy=False), g.astype(dtype, copy=False)
    return (f[0], g[0]) if single else (f, g)


_device_fg = _v.checked(_kernel_fg_out)  # one synchronisation per direct call, to read the kernels' notes


def _arrays(xp, X, y, beta, weights, offset):
    """:func:`loglik_and_grad`'s arrays on ``xp`` in ``X``'s float dtype, their shapes checked:
    ``(X, y, beta2, w, off, single)`` with ``beta2`` (B, K) and ``single`` whether ``beta`` was (K,)."""
    X = xp.asarray(X)
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    dtype = X.dtype
    if X.ndim != 2:
        raise ValueError(f"X must be 2-d (N, K), got shape {X.shape}.")
    N, K = X.shape
    y = xp.asarray(y, dtype=dtype)
    beta = xp.asarray(beta, dtype=dtype)
    if y.shape != (N,):
        raise ValueError(f"y must have shape ({N},) to match X's {N} rows, got {y.shape}.")
    single = beta.ndim == 1
    beta2 = beta[None, :] if single else beta
    if beta2.ndim != 2 or beta2.shape[1] != K:
        raise ValueError(f"beta must have shape ({K},) or (B, {K}) to match X's {K} columns, got {beta.shape}.")
    w = None if weights is None else xp.asarray(weights, dtype=dtype)
    off = None if offset is None else xp.asarray(offset, dtype=dtype)
    for name, a in (("weights", w), ("offset", off)):
        if a is not None and a.shape != (N,):
            raise ValueError(f"{name} must have shape ({N},) to match X's rows, got {a.shape}.")
    return X, y, beta2, w, off, single


def loglik_and_grad(X, y, beta, family: str = "bernoulli", weights=None, offset=None, sigma=1.0,
                    check: bool = True, kernel: str = "auto"):
    """Log-likelihood ``f`` and gradient ``g`` of a GLM, in one pass over ``X``.

    Parameters
    ----------
    X : array (N, K), float32 or float64, NumPy or CuPy
    y : array (N,)
        0/1 for bernoulli, counts for poisson, reals for gaussian.
    beta : array (K,) or (B, K)
        One coefficient vector or a batch of B chains.
    family : {"bernoulli", "poisson", "gaussian"}
    weights, offset : array (N,), optional
        Observation weights multiplying each row's log-likelihood; an offset added to ``X beta``.
    sigma : float
        The known noise standard deviation of the gaussian family.
    check : bool
        Check the input: ``X``, ``y``, ``beta``, ``weights`` and ``offset`` finite, ``y`` in the family's
        support (0/1, counts); a ValueError names the first bad row (or chain of ``beta``). On the GPU the
        ``"rows"`` kernel checks as it reads the input, and ``"tiled"`` with a short pass over ``y`` after
        it, noting bad values in the status word (:mod:`gpumcmc._status`): a direct call waits for its
        kernels once, and inside :func:`gpumcmc.deferred_validation` the error is raised at the next
        :func:`gpumcmc.check`; ``"gemm"`` checks in a pass of its own (one synchronisation). Off while value
        checks are off (:func:`gpumcmc.set_validation`). ``check=False`` skips it.
    kernel : {"auto", "rows", "tiled", "gemm"}
        The CuPy implementation (NumPy input ignores it). ``"rows"`` and ``"tiled"`` read ``X`` once, in
        row tiles of coalesced 128-bit loads, for every chain of the batch: ``"rows"`` gives each row of a
        tile its own thread and takes up to 8 chains and K < 256 (K <= 128 in float64); ``"tiled"`` gives 32
        rows to a warp and takes any number of chains with K <= 256 (float32) or K <= 128 (float64).
        ``"gemm"`` takes two matrix products (cuBLAS) and reads ``X`` twice. ``"auto"`` takes ``"rows"``,
        else ``"tiled"``, where they apply, else ``"gemm"``. Both tiled kernels sum in an order fixed by the
        launch shape, so repeated calls on one GPU give identical results. ``"rowwise"``, a removed kernel,
        raises a ValueError that names them.

    Returns
    -------
    f : scalar array () or (B,); g : (K,) or (B, K), in ``X``'s dtype.
    """
    family = check_family(family)
    if kernel == "rowwise":
        raise ValueError("kernel='rowwise' (the earliest one-thread-per-row kernel) was removed; use kernel='rows' "
                         "(up to 8 chains) or 'tiled' (any number of chains), or 'auto', which picks between them.")
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}.")
    xp = _backend.get_array_module(X, y, beta, weights, offset)
    X, y, beta2, w, off, single = _arrays(xp, X, y, beta, weights, offset)
    if not (float(sigma) > 0 and math.isfinite(float(sigma))):
        raise ValueError(f"sigma must be a positive finite number, got {sigma!r}.")
    describe = _BadInput(family, not single) if check and _v.validating() else None
    if xp is not np:
        return _device_fg(X, y, beta2, family, w, off, float(sigma), kernel, describe, single)
    if describe is not None:
        _raise_bad(np, describe, X, y, beta2, w, off, family)
    return _shaped(*_twin(X, y, beta2, family, w, off, float(sigma)), X.dtype, single)
