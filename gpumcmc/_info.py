"""What gpumcmc sees on this machine: ``gpumcmc.info()`` (a dict), ``gpumcmc.show_versions()`` and
``python -m gpumcmc info`` (printed)."""

from __future__ import annotations

import platform

import numpy as np

from . import backend
from ._version import __version__


def _backend_name() -> str:
    """The backend in use, or why none can be (GPUMCMC_BACKEND=cupy without CuPy), rather than an error: the
    report is what a user runs to find out."""
    try:
        return backend.backend_name()
    except backend.BackendError as e:
        return f"unavailable ({e})"


def info() -> dict:
    """Version, backend, device, and NumPy/SciPy/CuPy/CUDA versions, as a dict."""
    import scipy

    out = {
        "gpumcmc": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "backend": _backend_name(),
        "cupy": None,
        "cuda_runtime": None,
        "cuda_driver": None,
        "nvrtc": None,
        "device": None,
    }
    if backend.cupy_available():
        cp = backend.get_backend("cupy")
        rt = cp.cuda.runtime
        out["cupy"] = cp.__version__
        out["cuda_runtime"] = rt.runtimeGetVersion()
        out["cuda_driver"] = rt.driverGetVersion()
        out["nvrtc"] = ".".join(map(str, cp.cuda.nvrtc.getVersion()))
        props = rt.getDeviceProperties(rt.getDevice())
        name = props["name"]
        out["device"] = name.decode() if isinstance(name, bytes) else name
        out["compute_capability"] = f"{props['major']}.{props['minor']}"
    else:
        out["cupy"] = _why_no_cupy()
        out["device"] = "none (NumPy on the CPU)"
    return out


def _why_no_cupy() -> str:
    """Why CuPy cannot run here, in CuPy's or CUDA's own words where it says (a driver too old, none found)."""
    try:
        import cupy
    except ImportError:
        return 'not installed (pip install "gpumcmc[cuda12]" or "gpumcmc[cuda13]")'
    except Exception as e:  # a broken CUDA install raising at import
        return f"installed, but it fails to import: {type(e).__name__}: {e}"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # no driver, a driver too old for this CuPy
        return f"installed, but CUDA reports: {type(e).__name__}: {e}"
    return "installed, but no CUDA device is visible" if n < 1 else "installed"


def show_versions() -> None:
    """Print :func:`info`, one "name  value" line each: what to paste into a bug report.

    >>> import gpumcmc
    >>> gpumcmc.show_versions()  # doctest: +SKIP
    """
    print(format_info(info()))


def format_info(d: dict) -> str:
    width = max(map(len, d))
    return "\n".join(f"{k:<{width}}  {v}" for k, v in d.items() if v is not None or k == "device")
