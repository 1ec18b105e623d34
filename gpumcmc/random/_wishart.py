"""Batched Wishart and inverse-Wishart matrices by the Bartlett decomposition.

For ``W ~ Wishart(df, S)`` with ``S = L L^T`` (Cholesky), ``W = (L A)(L A)^T``
where ``A`` is lower triangular with ``A_ii = sqrt(chi2(df - i))``
(``i = 0 .. p-1``) and ``A_ij ~ N(0, 1)`` below the diagonal (Bartlett, 1933).
The inverse-Wishart uses the Bartlett factor of the inverse scale: with
``Psi = C C^T`` the factor ``M = C^-T`` satisfies ``M M^T = Psi^-1``, so
``X = (M A A^T M^T)^-1 = (C A^-T)(C A^-T)^T``, computed from one triangular
solve per matrix and never inverting ``Psi``.

Draws, for a batch of ``k`` matrices: one gamma call of shape ``(k, p)``
(shapes ``(df - i) / 2``, so ``A_ii = sqrt(2 G)``) and then one standard
normal call of shape ``(k, p, p)`` whose strictly lower triangle fills ``A``;
the same seed gives the same ``A`` on NumPy and CuPy (see ``_gamma.py`` and
``_fill.py``), and the matrices differ only by the rounding of the batched
Cholesky, products and solves (cuSOLVER/cuBLAS against LAPACK/BLAS).
"""

from __future__ import annotations

import math

import numpy as np

from .. import _validate as _v
from .._config import memo
from .._nvtx import annotate
from ._params import _as, _on_this_gpu, out_shape, resolve_dtype

__all__ = ["wishart"]


def _cholesky(s, xp):
    """Batched lower Cholesky factor; ValueError if a matrix is not positive definite."""
    msg = ("scale must be symmetric positive definite, but its Cholesky factorisation failed; "
           "check the matrix (or add a small multiple of the identity).")
    if xp is np:
        try:
            return np.linalg.cholesky(s)
        except np.linalg.LinAlgError:
            raise ValueError(msg) from None
    if not _v.validating():
        return xp.linalg.cholesky(s)
    if _v.deferring():
        factor = xp.linalg.cholesky(s)
        _v.report(~xp.all(xp.isfinite(factor)), msg)
        return factor
    import cupyx

    try:
        with cupyx.errstate(linalg="raise"):  # synchronize! (reads cuSOLVER's info)
            return xp.linalg.cholesky(s)
    except np.linalg.LinAlgError:
        raise ValueError(msg) from None


def _check_scale(s, xp, p):
    if not _v.validating():
        return
    _v.check_finite(s, "scale")  # synchronize!
    tol = 64 * np.finfo(s.dtype).eps
    asym = xp.abs(s - xp.swapaxes(s, -1, -2))
    _v.report(xp.any(asym > tol * xp.max(xp.abs(s))), "scale must be symmetric; symmetrise it with (S + S.T) / 2.")


def _check_df(df, xp, p):
    if not _v.validating():
        return
    _v.check_finite(df, "df")  # synchronize!
    _v.report(xp.any(df <= p - 1), f"df must be greater than p - 1 = {p - 1} for {p} x {p} matrices; "
                                   "raise the degrees of freedom.")


_CONSTS = memo.table("wishart.consts", device_at=0)  # (device, p, dtype) -> (arange(p), strict lower mask)


def _consts(xp, p, dtype):
    """``arange(p)`` of ``dtype`` and the (p, p) mask of the strictly lower triangle, made once per device
    on the GPU (two launches fewer a draw); never written to."""
    if xp is np:
        return np.arange(p, dtype=dtype), np.tri(p, p, -1, dtype=bool)
    key = (xp.cuda.runtime.getDevice(), p, dtype)
    c = _CONSTS.get(key)
    if c is None:
        c = _CONSTS[key] = (xp.arange(p, dtype=dtype), xp.tri(p, p, -1, dtype=bool))
    return c


def bartlett_factor(rng, df, batch, p, dtype, xp):
    """The Bartlett factors ``A`` (``batch + (p, p)``, lower triangular) for ``df`` of shape ``batch``."""
    i, lower = _consts(xp, p, dtype)
    if df.shape != batch:
        df = xp.broadcast_to(df, batch)
    shape = (df[..., None] - i) / 2
    diag = xp.sqrt(2 * rng.gamma(shape, dtype=dtype))
    z = rng._standard("normal", batch + (p, p), dtype, df)[1]  # on df's backend
    # tril(z, -1) is where(tri(p, p, -1), z, 0) on both backends; the diagonal is then written through a
    # strided view of the (new, contiguous) result, a copy with no index arrays
    a = xp.where(lower, z, z.dtype.type(0))
    a.reshape(batch + (p * p,))[..., ::p + 1] = diag
    return a


def _kept(a, xp, dtype) -> bool:
    """Whether ``a`` is already what ``_as(a, xp, dtype)`` returns: an array of ``xp`` in ``dtype`` (on the
    current GPU, for CuPy; _as copies one from another GPU)."""
    return type(a) is xp.ndarray and a.dtype == dtype and (xp is np or _on_this_gpu(a))


def wishart(rng, df, scale, size=None, dtype=None, *, inverse=False):
    """Implementation of :meth:`Generator.wishart` and :meth:`Generator.invwishart`."""
    _v.check_real(df, "df")
    _v.check_real(scale, "scale")
    xp = rng.xp(df, scale)
    dtype = resolve_dtype(dtype, df, scale)
    s = scale if _kept(scale, xp, dtype) else _as(scale, xp, dtype)  # (as _as gives)
    if s.ndim < 2 or s.shape[-1] != s.shape[-2] or s.shape[-1] == 0:
        raise ValueError(f"scale must have shape (..., p, p) with p >= 1, got {s.shape}.")
    p = s.shape[-1]
    d = df if _kept(df, xp, dtype) else _as(df, xp, dtype)
    batch = out_shape(size, d, shapes=[s.shape[:-2]])
    if math.prod(batch) == 0:
        return xp.empty(batch + (p, p), dtype=dtype)
    _check_df(d, xp, p)
    _check_scale(s, xp, p)
    name = "invwishart" if inverse else "wishart"
    with annotate(f"gpumcmc.random.{name}", xp):
        c = _cholesky(s, xp)
        a = bartlett_factor(rng, d, batch, p, dtype, xp)
        if c.shape[:-2] != batch:
            c = xp.broadcast_to(c, batch + (p, p))
        if inverse:
            # B = C A^-T, i.e. B^T = A^-1 C^T. The solvers copy the right-hand side into their own
            # (column-major) buffer whatever its layout, so C^T goes as a view.
            margin = "0.1" if np.dtype(dtype) == np.float64 else "0.7, or draw in float64"
            message = (f"an inverse Wishart draw with df this close to p - 1 = {p - 1} is too large for "
                       f"{np.dtype(dtype).name}: a chi-square draw of df - {p - 1} degrees of freedom underflowed "
                       f"(to 0, or near it), and the draw would be infinite. Use df >= p - 1 + {margin} (an "
                       f"underflow about once in 10^15 draws).")
            try:
                m = xp.swapaxes(xp.linalg.solve(a, xp.swapaxes(c, -1, -2)), -1, -2)
            except np.linalg.LinAlgError:  # NumPy: a Bartlett diagonal underflowed to 0
                raise ValueError(message) from None
        else:
            m = c @ a
        # the inverse's overflow is reported below, as a ValueError; the Wishart's warns as NumPy does
        with np.errstate(over="ignore" if inverse else "warn", invalid="ignore" if inverse else "warn"):
            w = m @ xp.swapaxes(m, -1, -2)
            w = 0.5 * (w + xp.swapaxes(w, -1, -2))
        if inverse and _v.validating():  # a tiny (not zero) diagonal gives inf or NaN entries, never a draw
            _v.report(~xp.isfinite(w).all(), message)  # synchronize! (deferred under @checked and in runs)
        return w
