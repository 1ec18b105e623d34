"""Counter-based random numbers: the same draws on NumPy and CuPy for one seed.

``default_rng(seed)`` returns a :class:`Generator` over Philox4x32-10 streams;
``philox4x32(counter, key)`` exposes the raw block function, and
``gamma_from_buffers`` runs the Generator's gamma method on deviates the
caller supplies.
"""

from ._buffered import gamma_from_buffers
from ._generator import Generator, default_rng
from ._fill import philox4x32

__all__ = ["Generator", "default_rng", "gamma_from_buffers", "philox4x32"]
