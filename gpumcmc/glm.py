"""Generalised linear model likelihoods: log-likelihood and gradient in one pass over X.

:func:`loglik_and_grad` evaluates ``f(beta) = sum_i w_i log p(y_i | eta_i)``
with ``eta = X beta + offset`` and its gradient ``g = X^T (w * dlogp/deta)``
for one coefficient vector or a batch of chains, reading ``X`` once (the
cache fusion of Mahani & Sharabiani, §3). On CuPy input the work is one CUDA
kernel (``kernels_cu/glm.cu``); on NumPy a vectorised twin computes the same
sums.

Families and links: ``"bernoulli"`` (logit), ``"poisson"`` (log),
``"gaussian"`` (identity, known ``sigma``). The Bernoulli form uses
``softplus(eta) = max(eta, 0) + log1p(exp(-|eta|))``, so large ``|X beta|``
neither overflows nor loses the log-likelihood.

>>> import numpy as np
>>> X = np.array([[1.0, 0.5], [1.0, -1.0], [1.0, 2.0]])
>>> y = np.array([1.0, 0.0, 1.0])
>>> f, g = loglik_and_grad(X, y, np.zeros(2))
>>> round(float(f), 4), g.shape
(-2.0794, (2,))
"""

from __future__ import annotations

import math

import numpy as np

from . import backend as _backend

__all__ = ["FAMILIES", "check_family", "check_y", "loglik_and_grad", "pointwise_loglik", "mean_function"]

FAMILIES = ("bernoulli", "poisson", "gaussian")
_CODE = {"bernoulli": 0, "poisson": 1, "gaussian": 2}
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def check_family(family: str) -> str:
    if not isinstance(family, str) or family.lower() not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}.")
    return family.lower()


def check_y(y, family: str, xp) -> None:
    """Raise ValueError when ``y`` holds NaN/inf or values outside the family's support (one sync)."""
    if y.size == 0:
        return
    if not bool(xp.isfinite(y).all()):  # synchronize! (once, at fit or call time)
        raise ValueError("y contains NaN or inf; remove those rows first.")
    if family == "bernoulli":
        if not bool(((y == 0) | (y == 1)).all()):
            raise ValueError("y must hold only 0 and 1 for family='bernoulli'; encode the classes as 0/1.")
    elif family == "poisson":
        if not bool(((y >= 0) & (y == xp.floor(y))).all()):
            raise ValueError("y must hold non-negative integer counts for family='poisson'.")


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
        return y * eta - xp.exp(eta) - lgy
    z = (y - eta) / sigma
    return -0.5 * z * z - (math.log(sigma) + _LOG_SQRT_2PI)


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


_BLOCK = 128
_GRAD_SHARED = 24 * 1024  # bytes of shared memory for the block's running gradient
_NAMES = ("glm_fg<float>", "glm_fg<double>")


def _kernel_fg(X, y, beta2, family, w, off, sigma):
    import cupy

    from . import _loader

    dtype = X.dtype
    name = "glm_fg<float>" if dtype == np.float32 else "glm_fg<double>"
    fn = _loader.get_function("glm.cu", name, _NAMES)
    N, K = X.shape
    B = beta2.shape[0]
    f = cupy.zeros(B, dtype=np.float64)
    g = cupy.zeros((B, K), dtype=np.float64)
    bc = min(8, _GRAD_SHARED // (8 * K)) if K else 8
    if N and B and bc == 0:  # too many columns for the block's shared gradient: two GEMMs instead
        eta = beta2 @ X.T + (0 if off is None else off)
        ll = pointwise_loglik(eta, y, family, sigma, cupy)
        r = _dlogp(eta, y, family, sigma, cupy)
        if w is not None:
            ll, r = ll * w, r * w
        return ll.sum(axis=1, dtype=np.float64), (r @ X).astype(np.float64)
    if N and B:
        null = _loader.NULL
        X = _loader.contiguous(X, dtype)
        n_tiles = -(-N // 128)
        grid = max(1, min(n_tiles, _loader.sm_count() * 8))
        fn((grid,), (_BLOCK,), (X, _loader.contiguous(y, dtype),
                                 null if w is None else _loader.contiguous(w, dtype),
                                 null if off is None else _loader.contiguous(off, dtype),
                                 _loader.contiguous(beta2, dtype), _loader.i64(N), _loader.i32(K),
                                 _loader.i32(B), _loader.i32(bc), _loader.i32(_CODE[family]), np.float64(sigma),
                                 f, g), shared_mem=8 * bc * K)
    return f, g


def loglik_and_grad(X, y, beta, family: str = "bernoulli", weights=None, offset=None, sigma=1.0,
                    check: bool = True):
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
        Observation weights multiplying each row's log-likelihood; an offset
        added to ``X beta``.
    sigma : float
        The known noise standard deviation of the gaussian family.
    check : bool
        Validate ``y`` and finiteness (synchronises the GPU once); pass False
        inside a sampler loop after checking once.

    Returns
    -------
    f : scalar array () or (B,); g : (K,) or (B, K), in ``X``'s dtype.
    """
    family = check_family(family)
    xp = _backend.get_array_module(X, y, beta)
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
    if not (float(sigma) > 0 and math.isfinite(float(sigma))):
        raise ValueError(f"sigma must be a positive finite number, got {sigma!r}.")
    if check:
        if X.size and not bool(xp.isfinite(X).all()):  # synchronize! (once per checked call)
            raise ValueError("X contains NaN or inf; remove or impute those values first.")
        check_y(y, family, xp)
    if xp is np:
        f, g = _twin(X, y, beta2, family, w, off, float(sigma))
    else:
        f, g = _kernel_fg(X, y, beta2, family, w, off, float(sigma))
    f = f.astype(dtype)
    g = g.astype(dtype)
    return (f[0], g[0]) if single else (f, g)
