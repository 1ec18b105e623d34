"""Input checks shared by every public function.

Checks on values (NaN, sign, positive definiteness) read the data; on CuPy
arrays each such check forces a device synchronisation (marked
``# synchronize!``). Samplers call public functions inside their sweeps, so
these value checks can be switched off, globally or for a block::

    gpumcmc.set_validation(False)          # globally
    with gpumcmc.validation(False): ...    # for a block

Cheap checks on metadata (dtype, shape, empty input) always run.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

__all__ = [
    "check_finite",
    "check_float_dtype",
    "check_positive",
    "set_validation",
    "validating",
    "validation",
]

_state = threading.local()
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def validating() -> bool:
    """True when value checks (which may synchronise the GPU) are on."""
    return getattr(_state, "on", True)


def set_validation(on: bool) -> None:
    """Turn value checks on or off for this thread (on by default)."""
    _state.on = bool(on)


@contextlib.contextmanager
def validation(on: bool):
    """A block with value checks on or off, restoring the previous setting after."""
    old = validating()
    set_validation(on)
    try:
        yield
    finally:
        set_validation(old)


def check_float_dtype(dtype, name: str = "dtype") -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in _FLOATS:
        raise TypeError(f"{name} must be float32 or float64, got {dt}; cast with .astype(numpy.float32) or float64.")
    return dt


def _xp(a):
    from .backend import get_array_module

    return get_array_module(a)


def check_finite(a, name: str) -> None:
    """Raise ValueError if ``a`` holds NaN or inf. Synchronises on CuPy."""
    if not validating():
        return
    xp = _xp(a)
    if not bool(xp.all(xp.isfinite(a))):  # synchronize!
        raise ValueError(f"{name} contains NaN or inf; every value must be finite.")


def check_positive(a, name: str, *, strict: bool = True) -> None:
    """Raise ValueError unless every value of ``a`` is finite and > 0 (>= 0 if not strict).

    Synchronises on CuPy.
    """
    if not validating():
        return
    check_finite(a, name)
    xp = _xp(a)
    bad = (a <= 0) if strict else (a < 0)
    if bool(xp.any(bad)):  # synchronize!
        what = "positive" if strict else "non-negative"
        raise ValueError(f"{name} must be {what}; found values {'<= 0' if strict else '< 0'}.")
