"""How a nested sampler takes a likelihood (a batch, or one point in a loop; the fused-step protocol), and
the test problems, :class:`SinusoidModel` among them.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ... import backend as _backend
from . import ops as _ops

__all__ = ["SinusoidModel", "gaussian_shells", "eggbox", "correlated_gaussian"]


def _batchify(fn, ndim, xp, name, out_dim):
    """``fn`` on a batch, (n, ndim) -> (n,) or (n, out_dim): itself, or a Python loop over one-point calls
    (with a warning). Probed on a (2, ndim) array of 0.5: where ``fn`` raises on the batch and on one point
    alike, its own exception comes out (a bug inside it, not a shape); a ``fn`` that changes its input in
    place is refused (the sampler keeps the arrays it passes)."""
    probe = xp.full((2, ndim), 0.5)
    want = (2,) if out_dim is None else (2, out_dim)
    err = None
    try:
        out = fn(probe)
        got = getattr(out, "shape", type(out).__name__)
    except Exception as e:  # a scalar function indexing a 2-D array may raise anything
        err, got = e, None
    if got == want:
        return _unchanged(fn, probe, name, out_dim)
    one_err = None
    try:
        one = fn(probe[0])
        one_shape = np.shape(one) if not _backend.is_cupy_array(one) else one.shape
    except Exception as e:
        one_shape, one_err = None, e
    single = () if out_dim is None else (out_dim,)
    if one_shape == single:
        warnings.warn(f"{name} works on one point at a time; it is wrapped in a Python loop and will be slow. "
                      f"Write it for an (n, ndim) array to evaluate whole batches at once.", stacklevel=3)

        def looped(x):
            rows = [xp.asarray(fn(x[i]), dtype=xp.float64) for i in range(x.shape[0])]
            return xp.stack(rows) if rows else xp.zeros((0,) + single)
        return _unchanged(looped, probe, name, out_dim)
    if err is not None and one_err is not None:
        if hasattr(err, "add_note"):  # Python 3.11 and later
            err.add_note(f"Raised by {name} on the probe NestedSampler passes it at construction, a (2, {ndim}) "
                         f"array of 0.5 (on one point of shape ({ndim},) it raised {one_err!r}): the error is "
                         f"inside {name}, not in the shape of its input.")
        raise err
    if err is not None:
        raise TypeError(f"{name} failed on an (n, {ndim}) array and on a single point ({err!r}); it must map an "
                        f"(n, {ndim}) array to {'(n,)' if out_dim is None else f'(n, {out_dim})'}.") from err
    raise ValueError(f"{name} returned shape {got} for an input of shape (2, {ndim}); it must return "
                     f"{want if out_dim is None else '(n, %d)' % out_dim} for n points.")


def _unchanged(fn, probe, name, out_dim):
    """``fn``, refused (ValueError) where its probe calls changed ``probe`` (all 0.5) in place."""
    if bool((probe == 0.5).all()):  # a wait for the GPU, once, at construction
        return fn
    if out_dim is None:
        raise ValueError(f"{name} changed its input x in place; compute on new arrays, e.g. `d = x - mu` "
                         f"rather than `x -= mu`, or copy x first (the sampler keeps x as the points' "
                         f"coordinates: writing to it corrupts the samples).")
    raise ValueError(f"{name} changed its input u in place; return a new array, e.g. `x = 10 * u - 5`, or "
                     f"copy u first (the sampler keeps u as the points in the unit cube: writing to it biases "
                     f"log Z).")


def _fusable_model(loglike, prior_transform):
    """The object both callables are bound to, where its class defines them and ``nested_fused_slice`` (as
    :meth:`SinusoidModel.nested_fused_slice`; a subclass's overrides do not count), and optionally
    ``nested_fused_available(xp)``; else None."""
    model = getattr(loglike, "__self__", None)
    if (model is None or getattr(prior_transform, "__self__", None) is not model
            or not callable(getattr(model, "nested_fused_slice", None))):
        return None
    owner = next((c for c in type(model).__mro__ if "nested_fused_slice" in vars(c)), None)
    mine = list(vars(owner).values()) if owner is not None else []
    ours = all(any(getattr(fn, "__func__", None) is f for f in mine) for fn in (loglike, prior_transform))
    return model if ours else None


def gaussian_shells(ndim=2, xp=np):
    """Two Gaussian shells (Feroz & Hobson) in the box [-6, 6]^ndim: ``(loglike, prior_transform)``; log Z is
    -1.75 in 2-D, -5.67 in 5-D, -14.59 in 10-D."""
    r, w = 2.0, 0.1
    c = np.zeros((2, ndim)); c[0, 0], c[1, 0] = -3.5, 3.5
    const = math.log(1.0 / math.sqrt(2 * math.pi * w * w))
    cc = xp.asarray(c)  # once, not at every call

    @np.errstate(under="ignore")  # a point far from one shell: that term is zero
    def loglike(x):
        a, b = (-0.5 * (xp.sqrt(((x - cc[i]) ** 2).sum(axis=-1)) - r) ** 2 / w ** 2 for i in (0, 1))
        return xp.logaddexp(a, b) + const

    def prior_transform(u):
        return 12.0 * u - 6.0
    return loglike, prior_transform


def eggbox(xp=np):
    """The eggbox, ``(2 + cos(x/2) cos(y/2))**5`` on [0, 10 pi]^2; log Z = 235.856."""
    def loglike(x):
        return (2.0 + xp.cos(x[:, 0] / 2.0) * xp.cos(x[:, 1] / 2.0)) ** 5

    def prior_transform(u):
        return 10.0 * math.pi * u
    return loglike, prior_transform


def correlated_gaussian(ndim=3, rho=0.9, half_width=10.0, xp=np):
    """A normalised Gaussian (unit variances, correlation ``rho``) well inside the box [-w, w]^ndim:
    ``(loglike, prior_transform, logz)``, ``logz = -ndim * log(2 w)``."""
    cov = np.full((ndim, ndim), rho) + (1 - rho) * np.eye(ndim)
    p = xp.asarray(np.linalg.inv(cov))
    const = -0.5 * (ndim * math.log(2 * math.pi) + np.linalg.slogdet(cov)[1])

    def loglike(x):
        return const - 0.5 * xp.einsum("ni,ij,nj->n", x, p, x)

    def prior_transform(u):
        return half_width * (2.0 * u - 1.0)
    return loglike, prior_transform, -ndim * math.log(2 * half_width)


class SinusoidModel:
    """A sum of J sinusoid atoms fitted to a signal (Henderson's tutorial model).

    ``y(t) = sum_j A_j cos(2 pi f_j t) + B_j sin(2 pi f_j t) + noise``, Gaussian noise of known ``sigma``,
    ``A_j, B_j ~ U(amin, amax)`` and frequencies uniform on ``(fmin, fmax)``, drawn sorted with ``ordered=True``
    (the order statistics of J uniforms: no J! label-switching modes, the same evidence). Parameters are laid
    out ``(A_1, B_1, f_1, A_2, ...)``. The likelihood of an ``(n, 3 J)`` batch is one CUDA kernel on the GPU
    (``kernel=True``), else an array expression over tiles of ``tile`` data points (memory ``n * tile``). The
    data are stored in ``dtype``; sums of squares are float64. Given to :class:`NestedSampler` as
    ``(m.loglike, m.prior_transform)`` on CuPy, each iteration's slice step is one fused kernel, a block of
    ``slice_block`` threads per walker (default 1024 where the walkers are no more than the SMs, else 512).

    Examples
    --------
    >>> from gpumcmc.nested import SinusoidModel
    >>> t, y = SinusoidModel.synthetic(n_data=1000, amplitudes=[(1.0, 0.5, 3.0)], sigma=0.5, random_state=0)
    >>> m = SinusoidModel(t, y, n_atoms=1, sigma=0.5, backend="numpy")
    >>> m.ndim
    3
    """

    def __init__(self, t, y, n_atoms=1, sigma=0.5, amin=-2.0, amax=2.0, fmin=0.0, fmax=10.0, ordered=True,
                 backend=None, dtype=np.float64, tile=8192, kernel=True, slice_block=None):
        self.xp = xp = _backend.get_backend(backend)
        t, y = xp.asarray(t, dtype=dtype), xp.asarray(y, dtype=dtype)
        if t.shape != y.shape or t.ndim != 1:
            raise ValueError("t and y must be 1-D arrays of the same length.")
        # contiguous: the kernels read t and y by their addresses (columns of one table would interleave)
        self.t, self.y = xp.ascontiguousarray(t), xp.ascontiguousarray(y)
        self.n_atoms, self.sigma = int(n_atoms), float(sigma)
        self.amin, self.amax, self.fmin, self.fmax = float(amin), float(amax), float(fmin), float(fmax)
        self.ordered, self.dtype, self.tile, self.kernel = ordered, np.dtype(dtype), int(tile), bool(kernel)
        if slice_block is not None and (int(slice_block) % 32 or not 32 <= int(slice_block) <= 1024):
            raise ValueError(f"slice_block must be a multiple of 32 between 32 and 1024, got {slice_block}.")
        self.slice_block = None if slice_block is None else int(slice_block)
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {self.dtype}.")
        if not 1 <= self.n_atoms <= 32:
            raise ValueError(f"n_atoms must be between 1 and 32, got {n_atoms}.")
        self.ndim = 3 * self.n_atoms
        self._const = -0.5 * self.t.shape[0] * math.log(2 * math.pi * self.sigma ** 2)

    def __getstate__(self):
        """Pickled with its array module by name (a module does not pickle)."""
        state = dict(self.__dict__)
        state["xp"] = state["xp"].__name__
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.xp = _backend.get_backend("numpy" if self.xp == "numpy" else "cupy")

    @staticmethod
    def synthetic(n_data=100_000, amplitudes=((1.0, 0.5, 3.0),), sigma=0.5, duration=1.0, random_state=None):
        """``(t, y)`` on the host: atoms ``(A, B, f)`` sampled at ``n_data`` even times plus noise."""
        from gpumcmc.random._stream import host_rng

        rng = host_rng(random_state)
        t = np.linspace(0.0, duration, n_data, endpoint=False)
        y = np.zeros(n_data)
        for a, b, f in amplitudes:
            y += a * np.cos(2 * np.pi * f * t) + b * np.sin(2 * np.pi * f * t)
        return t, y + sigma * rng.standard_normal(n_data)

    def prior_transform(self, u):
        xp, J = self.xp, self.n_atoms
        u3 = u.reshape(u.shape[0], J, 3)
        a, b = (self.amin + (self.amax - self.amin) * u3[..., i] for i in (0, 1))
        uf = u3[..., 2]
        if self.ordered and J > 1:
            # order statistics of J uniforms: s_J = u_J^(1/J), s_k = s_{k+1} u_k^(1/k)
            cols = [uf[:, J - 1] ** (1.0 / J)]
            for k in range(J - 1, 0, -1):
                cols.append(cols[-1] * uf[:, k - 1] ** (1.0 / k))
            uf = xp.stack(cols[::-1], axis=1)
        f = self.fmin + (self.fmax - self.fmin) * uf
        return xp.stack([a, b, f], axis=2).reshape(u.shape[0], 3 * J)

    def model(self, theta, t=None):
        """The noiseless signal for each row of ``theta``: (n, len(t))."""
        xp = self.xp
        t = self.t if t is None else xp.asarray(t, dtype=self.dtype)
        p = xp.asarray(theta, dtype=self.dtype).reshape(-1, self.n_atoms, 3)
        ph = 2 * np.pi * p[..., 2][..., None] * t
        return (p[..., 0][..., None] * xp.cos(ph) + p[..., 1][..., None] * xp.sin(ph)).sum(axis=1)

    def loglike(self, theta):
        """Gaussian log-likelihood of each row of ``theta`` (n, 3 J): one kernel on CuPy; on NumPy, or with
        ``kernel=False``, its twin, an array expression over tiles of the data."""
        if self.xp is not np and self.kernel:
            return _ops.sinusoid_loglike(self, theta)
        return self._loglike_expr(theta)

    _loglike_expr = _ops.sinusoid_loglike_tiles  # the array expression, bound to the model

    def nested_fused_available(self, xp) -> bool:
        """Whether :meth:`nested_fused_slice` runs for a sampler on ``xp``: this model's kernel on CuPy."""
        return self.kernel and self.xp is xp and xp is not np

    def nested_fused_slice(self, u, v, logl, lstar, dirs, unif, max_shrink):
        """All slices of all walkers in one launch (``sinusoid_slice``): the fused-step protocol of
        :class:`NestedSampler`, which any object whose ``loglike`` and ``prior_transform`` it is given may offer.

        ``u``, ``v`` (W, ndim), ``logl`` (W,): the starts (not modified); ``lstar`` (W,): the thresholds;
        ``dirs`` (n_steps, W, ndim): the directions in the unit cube; ``unif`` (n_steps, max_shrink + 1, W):
        the interval placements and shrinkage uniforms. Returns the new ``u, v, logl`` and per walker the
        misses and evaluations, as the generic slice path with :meth:`loglike`.
        """
        return _ops.sinusoid_fused_slice(self, u, v, logl, lstar, dirs, unif, max_shrink)

    _fused_slice = nested_fused_slice  # the former name
