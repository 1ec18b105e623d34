"""gpumcmc: GPU-first parallel MCMC with CUDA kernels and a NumPy twin.

Importing gpumcmc never imports CuPy and never touches a GPU; the backend is
chosen at the first call that needs one (see :mod:`gpumcmc.backend`).
"""

from . import backend, random
from ._validate import set_validation, validation
from ._version import __version__
from .backend import backend_name, get_array_module, to_device, to_host

__all__ = [
    "__version__",
    "backend",
    "backend_name",
    "get_array_module",
    "random",
    "set_validation",
    "validation",
    "to_device",
    "to_host",
]
