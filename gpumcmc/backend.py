"""Choice of array backend (NumPy or CuPy) and moves between host and device.

The backend is resolved lazily, on the first call that needs it, never at
import: ``import gpumcmc`` neither imports CuPy nor touches a GPU.

``GPUMCMC_BACKEND`` chooses it:

``auto`` (default)
    CuPy when it imports and sees a CUDA device, otherwise NumPy.
``cupy``
    CuPy; an error says how to install it when it is missing.
``numpy``
    NumPy, even on a GPU machine.
"""

from __future__ import annotations

import functools
import os
import types

import numpy as np

__all__ = [
    "BackendError",
    "backend_name",
    "cupy_available",
    "get_array_module",
    "get_backend",
    "is_cupy_array",
    "to_device",
    "to_host",
]

_ENV = "GPUMCMC_BACKEND"
_CHOICES = ("auto", "numpy", "cupy")
_INSTALL_HINT = (
    "Install CuPy for your CUDA version with `pip install \"gpumcmc[cuda12]\"` "
    "or `pip install \"gpumcmc[cuda13]\"`, or set GPUMCMC_BACKEND=numpy."
)


class BackendError(RuntimeError):
    """The requested backend cannot be used on this machine."""


@functools.lru_cache(maxsize=1)
def _import_cupy():
    """Return the ``cupy`` module if it imports and sees a device, else None."""
    try:
        import cupy
    except Exception:  # ImportError, or a broken CUDA install raising at import
        return None
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
    except Exception:  # no driver, or no device
        return None
    return cupy


def cupy_available() -> bool:
    """True when CuPy imports and at least one CUDA device is visible."""
    return _import_cupy() is not None


def backend_name() -> str:
    """``"cupy"`` or ``"numpy"``: the backend new arrays are created on."""
    choice = os.environ.get(_ENV, "auto").strip().lower() or "auto"
    if choice not in _CHOICES:
        raise BackendError(
            f"{_ENV}={choice!r} is not understood; use one of {', '.join(_CHOICES)}."
        )
    if choice == "numpy":
        return "numpy"
    if cupy_available():
        return "cupy"
    if choice == "cupy":
        raise BackendError(
            f"{_ENV}=cupy was asked for, but CuPy is not importable or sees no "
            f"CUDA device. {_INSTALL_HINT}"
        )
    return "numpy"


def get_backend(name: str | None = None) -> types.ModuleType:
    """The array module (``numpy`` or ``cupy``) for ``name``, or for the active backend."""
    name = backend_name() if name is None else name
    if name == "numpy":
        return np
    if name == "cupy":
        cp = _import_cupy()
        if cp is None:
            raise BackendError(f"The cupy backend is not available. {_INSTALL_HINT}")
        return cp
    raise BackendError(f"Unknown backend {name!r}; use 'numpy' or 'cupy'.")


def is_cupy_array(a) -> bool:
    """True for a ``cupy.ndarray``; never imports CuPy to find out."""
    return type(a).__module__.split(".")[0] == "cupy"


def get_array_module(*arrays) -> types.ModuleType:
    """``cupy`` if any argument is a CuPy array, else ``numpy`` (like ``cupy.get_array_module``)."""
    for a in arrays:
        if is_cupy_array(a):
            return get_backend("cupy")
    return np


def to_host(a):
    """A NumPy copy of a CuPy array; NumPy input and scalars pass through as arrays."""
    if is_cupy_array(a):
        return a.get()
    return np.asarray(a)


def to_host_later(arrays: dict):
    """Start copying the values of ``arrays`` (name -> array) to the host; returns a function that waits for
    the copies and gives them as name -> NumPy array, as :func:`to_host` would.

    CuPy arrays are made contiguous on their device's current stream, then copied by a worker thread on a
    stream of its own that waits for that work, so that the copies overlap what the caller queues next (a
    relabelling, summaries). The arrays must not be written until the function has returned. NumPy values
    are returned as they are."""
    if not any(is_cupy_array(a) for a in arrays.values()):
        return lambda: {name: to_host(a) for name, a in arrays.items()}
    import threading

    cp = get_backend("cupy")
    src, ready = {}, {}
    for name, a in arrays.items():
        if not is_cupy_array(a):
            src[name] = a
            continue
        with a.device:  # the contiguous copy and the event on the array's own device and current stream
            src[name] = cp.ascontiguousarray(a)
            ready[a.device.id] = cp.cuda.Event(disable_timing=True)
    for dev, event in ready.items():  # after every array of that device is made
        with cp.cuda.Device(dev):
            event.record()
    out, failed = {}, []

    def copy():
        try:
            streams = {}
            for name, a in src.items():
                if not is_cupy_array(a):
                    out[name] = np.asarray(a)
                    continue
                with a.device:
                    s = streams.get(a.device.id)
                    if s is None:
                        s = streams[a.device.id] = cp.cuda.Stream(non_blocking=True)
                        s.wait_event(ready[a.device.id])
                    out[name] = a.get(stream=s)  # contiguous: no allocation on the device
        except BaseException as exc:  # raised in the caller's thread
            failed.append(exc)

    worker = threading.Thread(target=copy, name="gpumcmc-to-host", daemon=True)
    worker.start()

    def wait() -> dict:
        worker.join()
        if failed:
            raise failed[0]
        return {name: out[name] for name in arrays}
    return wait


def to_device(a, dtype=None):
    """A CuPy array holding ``a`` (on the current device); needs the cupy backend."""
    cp = get_backend("cupy")
    return cp.asarray(a, dtype=dtype)


def asarray(a, xp, dtype=None):
    """``a`` as an array of module ``xp``, copying between host and device as needed."""
    if xp is np:
        return np.asarray(to_host(a), dtype=dtype)
    return xp.asarray(a, dtype=dtype)
