"""Parameters of the variates: dtypes, sizes, broadcasting, and arrays on the right backend.

Shared by the gamma family (``_gamma.py``), the generator's own variates
(``_generator.py``) and Wishart (``_wishart.py``).
"""

from __future__ import annotations

import operator

import numpy as np

from .. import _validate as _v
from .. import backend as _backend


def _param(p, xp, dtype):
    """A parameter ready to combine with draws of ``dtype`` on ``xp``.

    Python scalars stay scalars (NumPy and CuPy treat them as weak, keeping
    ``dtype``), so a scalar ``loc`` costs no host-to-device copy on CuPy.
    """
    if type(p) in (int, float):  # not numpy.float64, a float subclass that is not weak
        return p
    return _backend.asarray(p, xp, dtype=dtype)


def resolve_dtype(dtype, *params) -> np.dtype:
    """``dtype``, or when None the floating dtype of the array parameters (float64 if none)."""
    if dtype is not None:
        return _v.check_float_dtype(dtype)
    kinds = [np.dtype(p.dtype) for p in params if hasattr(p, "dtype") and np.dtype(p.dtype).kind == "f"]
    if not kinds:
        return np.dtype(np.float64)
    dt = np.result_type(*kinds)
    return np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)


def size_tuple(size) -> tuple:
    """``size`` (None, an int or a sequence of ints: a list, tuple or integer array) as a tuple of
    non-negative ints, checked as NumPy checks it: TypeError for a float or a string, ValueError below 0,
    each naming ``size``."""
    if size is None:
        return ()
    t = type(size)
    if (t is int and size >= 0) or (t is tuple and all(type(d) is int and d >= 0 for d in size)):
        return (size,) if t is int else size  # the usual sizes, without the exceptions below
    try:
        dims = (operator.index(size),)
    except TypeError:
        try:
            dims = None if isinstance(size, (str, bytes)) else tuple(operator.index(s) for s in size)
        except TypeError:
            dims = None
    if dims is None:
        raise TypeError(f"size must be None, an integer or a sequence of integers (the shape of the draws), got "
                        f"{size!r} ({type(size).__name__}); pass e.g. size=3 or size=(2, 3) (int(n) for a whole number "
                        "held as a float), as numpy.random does.")
    if any(d < 0 for d in dims):
        raise ValueError(f"size must hold non-negative integers, got {size!r}.")
    return dims


def out_shape(size, *params, shapes=()) -> tuple:
    """The broadcast shape of the parameters (and of ``shapes``), or ``size``
    after checking that they broadcast to it."""
    # Python numbers are () without np.shape's array conversion (host time per call).
    shapes = [() if isinstance(p, (int, float)) else tuple(np.shape(p)) for p in params] + [tuple(s) for s in shapes]
    distinct = {s for s in shapes if s}
    if len(distinct) <= 1:  # the usual case: one array shape, scalars beside it
        bshape = distinct.pop() if distinct else ()
    else:
        try:
            bshape = np.broadcast_shapes(*shapes)
        except ValueError:
            raise ValueError(f"Parameter shapes {shapes} do not broadcast together.") from None
    if size is None:
        return bshape
    size = size_tuple(size)
    if np.broadcast_shapes(size, bshape) != size:
        raise ValueError(f"Parameters of shape {bshape} do not broadcast to size {size}; "
                         "pass a size they broadcast to, or size=None.")
    return size


def _on_this_gpu(*arrays) -> bool:
    """Whether every CuPy array of ``arrays`` lies on the current GPU: the fast paths that pass an array
    as it is need that, where ``cupy.asarray`` would copy one from another GPU."""
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    return all(a.data.device_id == dev for a in arrays)


def _as(p, xp, dtype):
    """``p`` as an array of ``xp``; a scalar for CuPy is filled on the device (no host copy)."""
    if xp is not np and np.isscalar(p):
        return xp.full((), p, dtype=dtype)
    return _backend.asarray(p, xp, dtype=dtype)


def _flat(p, shape, xp):
    """``p`` as a flat per-element array when it varies, else as a size-1 array."""
    if p.size == 1:
        return p.reshape(1)
    if tuple(p.shape) != tuple(shape):
        p = xp.broadcast_to(p, shape)
    # An array of the right shape goes as it is (when contiguous): a broadcast
    # view of it may lose its contiguity flags and cost a copy.
    return xp.ascontiguousarray(p).reshape(-1)
