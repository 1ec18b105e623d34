"""Gamma variates from caller-supplied buffers of uniforms and normals.

:func:`gamma_from_buffers` runs the Marsaglia-Tsang method of
:meth:`Generator.gamma` on deviates the caller drew (from any generator):
the same trial, the same squeeze and logarithmic tests and the same boost for
shapes below 1, with a fixed rule for which deviates each element consumes.
It works on NumPy and on CuPy arrays (with array operations, not a custom
kernel), and evaluates every trial the buffers hold at once, so its cost
grows with the number of buffer rows; two to four rows cover almost every
element (see below).
"""

from __future__ import annotations

import numpy as np

from .. import _validate as _v
from .. import backend as _backend
from ._gamma import _consts, _errstate, boosted, gamma_value, mt_accept

__all__ = ["gamma_from_buffers"]


def gamma_from_buffers(shape, uniforms, normals, log=False, *, return_trials=False):
    """Gamma(shape) variates from buffers of uniforms and standard normals.

    Parameters
    ----------
    shape : array, shape ``S``
        Per-element shapes, positive and finite.
    uniforms : array, shape ``(m_u,) + S``
        Uniforms strictly inside (0, 1); row ``r`` holds each element's ``r``-th uniform.
    normals : array, shape ``(m_n,) + S``
        Standard normals; row ``r`` holds each element's ``r``-th normal.
    log : bool
        Return ``log G`` instead of ``G`` (exact for tiny shapes, where ``G`` underflows).
    return_trials : bool
        Also return, per element, the index ``t`` of the accepted trial.

    Notes
    -----
    The consumption rule. Element ``e`` with shape ``a >= 1`` makes trials ``t = 0, 1, ...`` with
    ``x = normals[t, e]`` and ``u = uniforms[t, e]`` and stops at the first
    accepted one. An element with ``a < 1`` first takes ``U = uniforms[0, e]``
    for the boost ``G(a) = G(a + 1) U**(1/a)``, then makes its trials with
    ``x = normals[t, e]`` and ``u = uniforms[t + 1, e]``. Rows after the
    accepted trial are left unused. A trial fails with probability at most
    0.049 (at shape 1, or ``a + 1`` near 1), so ``R`` trials all fail with
    probability at most ``0.049**R``: 5.8e-6 for ``R = 4``, 3.3e-11 for
    ``R = 8`` (a shape below 1 gets ``R = min(m_n, m_u - 1)`` trials, others
    ``min(m_n, m_u)``).

    Raises
    ------
    ValueError
        If an element's buffers run out before a trial is accepted (a check
        that synchronises the GPU; with validation off such elements are NaN),
        if the buffer shapes do not follow ``(rows,) + shape.shape``, or if a
        shape is not positive and finite.

    Examples
    --------
    >>> import numpy as np
    >>> from gpumcmc.random import gamma_from_buffers
    >>> g = np.random.default_rng(0)
    >>> a = np.array([0.5, 2.0, 30.0])
    >>> x = gamma_from_buffers(a, g.random((4, 3)), g.standard_normal((4, 3)))
    >>> x.shape, bool(np.all(x > 0))
    ((3,), True)
    """
    xp, a, u, z = _buffers(shape, uniforms, normals)
    if a.size == 0:
        return (a.copy(), xp.zeros(a.shape, np.int32)) if return_trials else a.copy()
    _v.check_positive(a, "shape")  # synchronize!
    if _v.validating():
        _v.report(xp.any((u <= 0) | (u >= 1)),
                  "uniforms must lie strictly inside (0, 1); log(0) would break the boost.")
    ok, first, out = _first_accepted(xp, a, u, z, log)
    out = xp.where(ok, out, np.nan).astype(a.dtype, copy=False)
    if return_trials:
        return out, xp.where(ok, first, -1).astype(np.int32)
    return out


def _buffers(shape, uniforms, normals):
    """The array module, the shapes (float32 or float64) and the buffers in their dtype, shapes checked."""
    xp = _backend.get_array_module(shape, uniforms, normals)
    a = xp.asarray(shape)
    if a.dtype not in (np.float32, np.float64):
        a = a.astype(np.float64)
    dtype = a.dtype
    u = xp.asarray(uniforms, dtype=dtype)
    z = xp.asarray(normals, dtype=dtype)
    for name, buf in (("uniforms", u), ("normals", z)):
        if buf.ndim != a.ndim + 1 or buf.shape[1:] != a.shape or buf.shape[0] < 1:
            raise ValueError(f"{name} must have shape (rows,) + shape.shape = (rows,) + {a.shape} with "
                             f"rows >= 1, got {buf.shape}; row r holds every element's r-th deviate.")
    return xp, a, u, z


def _first_accepted(xp, a, u, z, log):
    """Every trial the buffers hold, at once: whether an element accepted one, the first it accepted, and
    the variate that trial gives (boosted below shape 1; meaningless where none was accepted)."""
    dtype = a.dtype
    k = _consts(dtype)
    boost = a < k["one"]
    d = xp.where(boost, a + k["one"], a) - k["third"]
    c = k["one"] / xp.sqrt(k["nine"] * d)
    # Trial t of a boosted element reads uniforms[t + 1]; past the last row it has none (NaN: rejected).
    n_trials = min(z.shape[0], u.shape[0])
    shifted = xp.concatenate([u[1:], xp.full((1,) + a.shape, np.nan, dtype=dtype)])
    ut = xp.where(boost, shifted[:n_trials], u[:n_trials])
    acc, v = mt_accept(z[:n_trials], ut, d, c)
    ok = xp.any(acc, axis=0)
    if _v.validating():
        _v.report(~xp.all(ok), f"The buffers ran out: some elements had no accepted trial among their "
                               f"{n_trials} rows (one more uniform is needed below shape 1); pass more rows.")
    first = xp.argmax(acc, axis=0)
    v = xp.take_along_axis(v, first[None], axis=0)[0]
    with _errstate(xp):
        g = gamma_value(d, v)
        out = xp.where(boost, boosted(g, u[0], a, log), xp.log(g) if log else g)
    return ok, first, out
