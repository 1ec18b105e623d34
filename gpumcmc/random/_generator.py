"""The counter-based :class:`Generator` and :func:`default_rng`."""

from __future__ import annotations

import numpy as np

from .. import backend as _backend
from .._nvtx import annotate
from . import _fill

__all__ = ["Generator", "default_rng"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _float_dtype(dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in _FLOATS:
        raise TypeError(f"dtype must be float32 or float64, got {dt}.")
    return dt


def _size_tuple(size) -> tuple:
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)):
        size = (int(size),)
    size = tuple(int(s) for s in size)
    if any(s < 0 for s in size):
        raise ValueError(f"size must hold non-negative integers, got {size}.")
    return size


class Generator:
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

    def __init__(self, seed_seq: np.random.SeedSequence, *, backend: str | None = None):
        if not isinstance(seed_seq, np.random.SeedSequence):
            raise TypeError("Generator takes a numpy.random.SeedSequence; use gpumcmc.random.default_rng(seed).")
        if backend not in (None, "numpy", "cupy"):
            raise ValueError(f"backend must be 'numpy', 'cupy' or None, got {backend!r}.")
        self._seed_seq = seed_seq
        k = seed_seq.generate_state(2, np.uint32)
        self._key = (int(k[0]), int(k[1]))
        self._offset = 0
        self._backend = backend

    def __repr__(self) -> str:
        return f"Generator(Philox4x32-10, key={self._key[0]:08x}{self._key[1]:08x}, offset={self._offset})"

    @property
    def key(self) -> tuple[int, int]:
        """The two 32-bit key words."""
        return self._key

    @property
    def offset(self) -> int:
        """The next call offset (the number of calls made so far)."""
        return self._offset

    def advance(self, calls: int = 1) -> int:
        """Reserve ``calls`` call offsets and return the first.

        Samplers built on this generator take their counters from here, so a
        counter is never used by two calls.
        """
        off = self._offset
        if off + calls >= 2**64:
            raise OverflowError("This generator's 2**64 call offsets are spent; spawn a new one.")
        self._offset = off + calls
        return off

    def spawn(self, n_children: int) -> list[Generator]:
        """``n_children`` independent generators (for chains), as ``SeedSequence.spawn`` does."""
        return [Generator(s, backend=self._backend) for s in self._seed_seq.spawn(n_children)]

    def xp(self, *params):
        """The array module draws go to: CuPy if a parameter is a CuPy array, else the generator's backend."""
        for p in params:
            if _backend.is_cupy_array(p):
                return _backend.get_backend("cupy")
        return _backend.get_backend(self._backend)

    def _standard(self, kind: str, size, dtype, *params):
        dtype = _float_dtype(dtype)
        xp = self.xp(*params)
        shape = np.broadcast_shapes(*(np.shape(p) for p in params)) if size is None else _size_tuple(size)
        n = int(np.prod(shape, dtype=np.int64))
        with annotate(f"gpumcmc.random.{kind}", xp):
            flat = _fill.fill(xp, kind, n, dtype, self._key, self.advance())
        return xp, flat.reshape(shape)

    def random(self, size=None, dtype=np.float64):
        """Uniform floats strictly inside (0, 1).

        float32: ``((w >> 9) + 0.5) * 2**-23`` for one 32-bit Philox word ``w``;
        float64: 52 bits from two words, ``(m + 0.5) * 2**-52``. Both are exact,
        so NumPy and CuPy give the same bits.
        """
        return self._standard("uniform", size, dtype)[1]

    def uniform(self, low=0.0, high=1.0, size=None, dtype=np.float64):
        """Uniforms on (low, high), with per-element ``low``/``high`` broadcast to ``size``."""
        xp, u = self._standard("uniform", size, dtype, low, high)
        low = _backend.asarray(low, xp, dtype=u.dtype)
        high = _backend.asarray(high, xp, dtype=u.dtype)
        return low + (high - low) * u

    def normal(self, loc=0.0, scale=1.0, size=None, dtype=np.float64):
        """Normals with per-element ``loc`` and ``scale`` (Box-Muller on Philox uniforms).

        float32 draws are computed in float64 and rounded once, on both
        backends, so they agree to within one float32 ulp.
        """
        xp, z = self._standard("normal", size, dtype, loc, scale)
        loc = _backend.asarray(loc, xp, dtype=z.dtype)
        scale = _backend.asarray(scale, xp, dtype=z.dtype)
        return loc + scale * z

    def standard_normal(self, size=None, dtype=np.float64):
        """Standard normals; see :meth:`normal`."""
        return self._standard("normal", size, dtype)[1]


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
    if isinstance(seed, np.random.SeedSequence):
        return Generator(seed, backend=backend)
    if isinstance(seed, np.random.Generator):
        # Draw a fresh 256-bit seed from it, so that the NumPy generator moves on.
        seed = np.random.SeedSequence(seed.integers(0, 2**32, size=8, dtype=np.uint64))
        return Generator(seed, backend=backend)
    return Generator(np.random.SeedSequence(seed), backend=backend)
