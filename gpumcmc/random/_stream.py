"""The Philox key and call counter that every draw is keyed by, and the coercion of a seed into one.

:class:`gpumcmc.random.Generator` is a :class:`PhiloxStream` with the distribution methods on top. The
samplers of :mod:`gpumcmc.discrete` need only the key, the call counter and the array module, so they take
their stream from :func:`as_stream` here; ``Generator.categorical*`` call them in turn, and this module,
below both, keeps that a one-way dependency.
"""

from __future__ import annotations

import numpy as np

from .. import backend as _backend

__all__ = ["PhiloxStream", "as_stream", "seed_sequence"]


class PhiloxStream:
    """A Philox4x32-10 key and the next call offset: what a draw needs to find its counters.

    Parameters
    ----------
    seed_seq : numpy.random.SeedSequence
        Source of the 64-bit Philox key.
    backend : {"numpy", "cupy", None}
        Where draws are made when no parameter array says otherwise. ``None``
        uses the active backend (``gpumcmc.backend.backend_name()``), resolved
        at the first draw, not at construction.
    """

    def __init__(self, seed_seq: np.random.SeedSequence, *, backend: str | None = None):
        if not isinstance(seed_seq, np.random.SeedSequence):
            raise TypeError(f"{type(self).__name__} takes a numpy.random.SeedSequence; use "
                            "gpumcmc.random.default_rng(seed).")
        if backend not in (None, "numpy", "cupy"):
            raise ValueError(f"backend must be 'numpy', 'cupy' or None, got {backend!r}.")
        self._seed_seq = seed_seq
        k = seed_seq.generate_state(2, np.uint32)
        self._key = (int(k[0]), int(k[1]))
        self._offset = 0
        self._backend = backend

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

    def xp(self, *params):
        """The array module draws go to: CuPy if a parameter is a CuPy array, else the generator's backend."""
        for p in params:
            if _backend.is_cupy_array(p):
                return _backend.get_backend("cupy")
        return _backend.get_backend(self._backend)


RANDOM_STATES = ("None, an int >= 0, a numpy SeedSequence, Generator or RandomState, or a gpumcmc Generator "
                 "(gpumcmc.random.default_rng)")


def seed_sequence(seed) -> np.random.SeedSequence:
    """The ``SeedSequence`` for an int, a ``SeedSequence``, a ``numpy.random.Generator`` or ``RandomState``,
    or ``None``.

    A numpy ``Generator`` or ``RandomState`` gives up 256 bits (so it moves on); ``None`` seeds from the
    operating system's entropy. Anything else raises a TypeError (a negative int a ValueError) naming what
    ``random_state`` may be.
    """
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence(seed.integers(0, 2**32, size=8, dtype=np.uint64))
    if isinstance(seed, np.random.RandomState):
        return np.random.SeedSequence(seed.randint(0, 2**32, size=8, dtype=np.uint64))
    bad = f"random_state must be {RANDOM_STATES}; got {type(seed).__name__} {repr(seed)[:60]}."
    if isinstance(seed, (bool, np.bool_, float, np.floating, str, bytes)):
        raise TypeError(bad)
    try:
        return np.random.SeedSequence(seed)  # an int >= 0 or a sequence of them, or None
    except TypeError:
        raise TypeError(bad) from None
    except ValueError:
        raise ValueError(bad) from None


def host_rng(seed) -> np.random.Generator:
    """A ``numpy.random.Generator`` for host-side draws from any ``random_state`` :func:`seed_sequence` takes,
    a numpy BitGenerator, or a gpumcmc Generator (which spawns a child for it: its next ``spawn`` gives other
    children, as a numpy Generator moves on when it seeds another). A numpy ``Generator`` is returned as it
    is; an int, a sequence of ints, None or a BitGenerator give what ``numpy.random.default_rng`` gives."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, np.random.BitGenerator):
        return np.random.Generator(seed)
    if isinstance(seed, PhiloxStream):
        return np.random.default_rng(seed._seed_seq.spawn(1)[0])
    return np.random.default_rng(seed_sequence(seed))


def host_random_state(seed) -> np.random.RandomState:
    """A ``numpy.random.RandomState`` (scikit-learn's ``check_random_state``: an int or None seeds one, one is
    returned as it is) from any ``random_state`` :func:`host_rng` takes."""
    if isinstance(seed, np.random.RandomState):
        return seed
    if not isinstance(seed, (bool, np.bool_, np.random.SeedSequence, np.random.Generator, PhiloxStream)):
        try:  # what RandomState itself takes (None, ints, arrays of them, a BitGenerator): its own stream
            return np.random.RandomState(seed)
        except (TypeError, ValueError):
            pass
    # a seed from host_rng, which refuses what random_state may not be (and takes ints past 2**32)
    return np.random.RandomState(int(host_rng(seed).integers(0, 2**32)))


def as_stream(seed, *, backend: str | None = None) -> PhiloxStream:
    """``seed`` itself when it is a stream (a gpumcmc ``Generator``), else a new stream from it.

    The key and the offsets are the ones :func:`gpumcmc.random.default_rng`
    gives for the same seed, so a sampler that takes its stream from here
    draws what it would draw from ``default_rng(seed)``.
    """
    if isinstance(seed, PhiloxStream):
        return seed
    return PhiloxStream(seed_sequence(seed), backend=backend)
