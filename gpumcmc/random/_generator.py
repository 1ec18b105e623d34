"""The counter-based :class:`Generator` and :func:`default_rng`."""

from __future__ import annotations

import math

import numpy as np

from .. import _validate
from .._nvtx import annotate
from . import _fill, _gamma, _wishart
from ._params import _as, _param, size_tuple
from ._stream import PhiloxStream, seed_sequence

__all__ = ["Generator", "default_rng"]


class Generator(PhiloxStream):
    """A Philox4x32-10 stream in the style of :class:`numpy.random.Generator`.

    Every call takes a fresh 64-bit call offset, and element ``i`` of the call
    is drawn from a counter that holds ``i`` (see ``gpumcmc/random/_philox.py``),
    so the same seed gives the same draws on NumPy and on CuPy, whatever the
    launch shape or GPU. Create one with :func:`default_rng`.

    Parameters
    ----------
    seed_seq : numpy.random.SeedSequence
        Source of the 64-bit Philox key, and of children for :meth:`spawn`.
    backend : {"numpy", "cupy", None}
        Where draws are made when no parameter array says otherwise. ``None``
        uses the active backend (``gpumcmc.backend.backend_name()``), resolved
        at the first draw, not at construction.
    """

    def __repr__(self) -> str:
        return f"Generator(Philox4x32-10, key={self._key[0]:08x}{self._key[1]:08x}, offset={self._offset})"

    def spawn(self, n_children: int) -> list[Generator]:
        """``n_children`` independent generators (for chains), as ``SeedSequence.spawn`` does."""
        n_children = _validate.check_int(n_children, "n_children", 0)  # SeedSequence.spawn(-1): OverflowError
        return [Generator(s, backend=self._backend) for s in self._seed_seq.spawn(n_children)]

    def _standard(self, kind: str, size, dtype, *params):
        dtype = _validate.check_float_dtype(dtype)
        xp = self.xp(*params)
        shape = np.broadcast_shapes(*(np.shape(p) for p in params)) if size is None else size_tuple(size)
        n = math.prod(shape)  # (ints: np.prod's array conversion costs host time on every draw)
        with annotate(f"gpumcmc.random.{kind}", xp):
            flat = _fill.fill(xp, kind, n, dtype, self._key, self.advance())
        return xp, flat.reshape(shape)

    def random(self, size=None, dtype=np.float64):
        """Uniform floats strictly inside (0, 1).

        float32: ``((w >> 9) + 0.5) * 2**-23`` for one 32-bit Philox word ``w``;
        float64: 52 bits from two words, ``(m + 0.5) * 2**-52``. Both are exact,
        so NumPy and CuPy give the same bits.
        """
        return _scalar(self._standard("uniform", size, dtype)[1], size)

    @_validate.checked
    def uniform(self, low=0.0, high=1.0, size=None, dtype=np.float64):
        """Uniforms on (low, high), with per-element ``low``/``high`` broadcast to ``size``.

        ``low + (high - low) u`` for ``u`` of :meth:`random`: where ``high - low`` is large beside ``low``
        the rounding can return ``low`` or ``high`` themselves (as NumPy's may return ``high``).
        Raises ValueError where ``high < low`` or the bounds or their difference are not finite (for arrays, a
        check that synchronises the GPU; see :func:`gpumcmc.set_validation`)."""
        _validate.check_real(low, "low")
        _validate.check_real(high, "high")
        if type(low) in (int, float) and type(high) in (int, float):
            big = float(np.finfo(_validate.check_float_dtype(dtype)).max)  # finite in the draws' dtype too
            if not (abs(low) <= big and abs(high) <= big and high >= low and high - low <= big):
                raise ValueError(f"uniform needs finite bounds with high >= low and a finite high - low, got "
                                 f"low={low!r}, high={high!r}.")
        xp, u = self._standard("uniform", size, dtype, low, high)
        low, high = _param(low, xp, u.dtype), _param(high, xp, u.dtype)
        if type(low) not in (int, float) or type(high) not in (int, float):
            _validate.check_positive(high - low, "high - low", strict=False)  # synchronize! (deferred)
        return low + (high - low) * u

    @_validate.checked
    def normal(self, loc=0.0, scale=1.0, size=None, dtype=np.float64):
        """Normals with per-element ``loc`` and ``scale`` (Box-Muller on Philox uniforms).

        float32 draws are computed in float64 and rounded once, on both
        backends, so they agree to within one float32 ulp.

        Raises ValueError for a ``scale`` below 0, NaN or infinite (a scale
        given as a number is checked on the host; for arrays, a check that
        synchronises the GPU, see :func:`gpumcmc.set_validation`), and
        TypeError for parameters that are not real numbers.
        """
        _validate.check_real(loc, "loc")
        _validate.check_real(scale, "scale")
        if type(scale) in (int, float):
            if not 0.0 <= scale < float("inf"):
                raise ValueError(f"scale must be a finite number >= 0, got {scale!r}; a normal's scale is its "
                                 "standard deviation.")
        xp, z = self._standard("normal", size, dtype, loc, scale)
        loc, scale = _param(loc, xp, z.dtype), _param(scale, xp, z.dtype)
        if type(scale) not in (int, float):
            _validate.check_positive(scale, "scale", strict=False)  # synchronize! (deferred under @checked)
        return loc + scale * z

    def standard_normal(self, size=None, dtype=np.float64):
        """Standard normals; see :meth:`normal`."""
        return _scalar(self._standard("normal", size, dtype)[1], size)

    def categorical(self, weights, axis: int = -1, method: str = "auto", out=None):
        """One index per row of unnormalised ``weights``: :func:`gpumcmc.categorical` with this generator.

        ``rng.categorical(w)`` and ``gpumcmc.categorical(w, rng)`` are the same
        call and give the same draws.

        Examples
        --------
        >>> import numpy as np
        >>> from gpumcmc.random import default_rng
        >>> default_rng(0).categorical(np.array([[0.0, 1.0], [1.0, 0.0]])).tolist()
        [1, 0]
        """
        from ..discrete import categorical

        return _scalar(categorical(weights, self, axis=axis, method=method, out=out), None)

    def categorical_logits(self, logits, axis: int = -1, method: str = "auto", out=None):
        """One index per row of unnormalised log-weights: :func:`gpumcmc.categorical_logits` with this generator."""
        from ..discrete import categorical_logits

        return _scalar(categorical_logits(logits, self, axis=axis, method=method, out=out), None)

    def categorical_products(self, theta, phi, rows, cols, method: str = "auto", out=None):
        """One index per token ``t``, with weights ``theta[rows[t]] * phi[cols[t]]``:
        :func:`gpumcmc.categorical_products` with this generator."""
        from ..discrete import categorical_products

        return categorical_products(theta, phi, rows, cols, self, method=method, out=out)

    # The gamma family is implemented in _gamma.py (kernels_cu/gamma.cu), Wishart in _wishart.py.
    @_validate.checked
    def gamma(self, shape, scale=1.0, size=None, dtype=None, log=False):
        """Gamma variates with per-element ``shape`` and ``scale`` (broadcast to ``size``).

        Marsaglia and Tsang's method for shape >= 1; below 1, the boost
        ``G(a) = G(a + 1) U**(1/a)`` in log space. ``log=True`` returns
        ``log G`` (plus ``log scale``), exact for shapes down to 1e-6 and below,
        where ``G`` itself underflows to 0 (float32 below shape ~0.01 already
        returns zeros for many draws). ``dtype=None`` takes float32 when the
        array parameters are float32, else float64. Each rejection attempt is
        keyed by (element, attempt), so draws do not depend on the launch, and
        NumPy and CuPy accept the same attempt for one seed; the counter layout
        is documented in ``gpumcmc/random/_gamma.py``.

        Raises ValueError for a shape or scale that is not positive and finite
        (for arrays, a check that synchronises the GPU; see
        :func:`gpumcmc.set_validation`; a scale given as a number is always
        checked, on the host, and goes to the kernel by value), and TypeError
        for parameters that are not real numbers (a string, a complex value).
        """
        return _scalar(_gamma.gamma(self, shape, scale, size, dtype, log), size)

    @_validate.checked
    def beta(self, a, b, size=None, dtype=None):
        """Beta(a, b) variates, per element, as ``Ga / (Ga + Gb)`` computed from log-gammas.

        Element ``i`` uses gamma elements ``2i`` and ``2i + 1`` of the call, so
        it equals ``dirichlet(stack([a, b], -1))[..., 0]`` for the same seed.
        """
        return _scalar(_gamma.beta(self, a, b, size, dtype), size)

    @_validate.checked
    def dirichlet(self, alpha, size=None, dtype=None, log=False):
        """Dirichlet rows: ``alpha`` has shape (..., K), one concentration vector per row.

        The result has shape ``alpha.shape`` (or ``size + (K,)``, with the
        batch axes of ``alpha`` broadcast to ``size``). Each row is
        ``exp(log G - logsumexp(log G))`` for log-gammas ``log G``, so small
        concentrations (1e-3 in float32) give nearly one-hot rows, never NaN
        or the all-equal rows of normalising underflowed gammas. ``log=True``
        returns the log-probabilities.
        """
        return _gamma.dirichlet(self, alpha, size, dtype, log)

    def standard_exponential(self, size=None, dtype=np.float64):
        """Standard exponential variates, ``-log(u)`` of Philox uniforms.

        float32 draws use a 32-bit uniform and float64 arithmetic, rounded
        once (so they reach 22.2); float64 draws use a 52-bit uniform.
        """
        return _scalar(_gamma.standard_exponential(self, size, dtype), size)

    def exponential(self, scale=1.0, size=None, dtype=np.float64):
        """Exponential variates with per-element ``scale`` (broadcast to ``size``)."""
        _validate.check_real(scale, "scale")
        scale = _as(scale, self.xp(scale), _validate.check_float_dtype(dtype))
        _validate.check_positive(scale, "scale")  # synchronize!
        return scale * _gamma.standard_exponential(self, size, dtype, scale)

    @_validate.checked
    def wishart(self, df, scale, size=None, dtype=None):
        """Wishart(df, scale) matrices by the Bartlett decomposition, batched.

        ``scale`` is (p, p) or (..., p, p) and ``df`` a scalar or an array of
        the batch shape; the result has shape ``batch + (p, p)`` with ``batch``
        the broadcast of ``df.shape`` and ``scale.shape[:-2]`` (or ``size``).
        Raises ValueError when ``df <= p - 1`` or a scale matrix is not
        symmetric positive definite (checks that synchronise the GPU; see
        :func:`gpumcmc.set_validation`).
        """
        return _wishart.wishart(self, df, scale, size, dtype, inverse=False)

    @_validate.checked
    def invwishart(self, df, scale, size=None, dtype=None):
        """Inverse-Wishart(df, scale) matrices (the inverse of Wishart(df, scale**-1)); see :meth:`wishart`."""
        return _wishart.wishart(self, df, scale, size, dtype, inverse=True)


def _scalar(x, size):
    """A NumPy scalar (as NumPy's ``Generator`` gives a float) for a draw of ``size=None`` with scalar
    parameters; arrays, and CuPy's 0-d arrays (a host scalar would wait for the GPU), as they are."""
    return x[()] if size is None and type(x) is np.ndarray and x.ndim == 0 else x


def default_rng(seed=None, *, backend: str | None = None) -> Generator:
    """A :class:`Generator` from an int, a ``SeedSequence``, a ``Generator`` or ``None``.

    A gpumcmc ``Generator`` is returned unaltered, as
    :func:`numpy.random.default_rng` does; a ``numpy.random.Generator`` gives
    up 256 bits to seed a new one. ``None`` seeds from the operating system's
    entropy.

    Examples
    --------
    >>> import gpumcmc
    >>> rng = gpumcmc.random.default_rng(42, backend="numpy")
    >>> rng.random(3).shape
    (3,)
    >>> chains = rng.spawn(4)
    """
    if isinstance(seed, Generator):
        return seed
    return Generator(seed_sequence(seed), backend=backend)
