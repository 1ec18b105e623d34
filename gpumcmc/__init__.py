"""gpumcmc: GPU-first parallel MCMC with CUDA kernels and a NumPy twin.

Importing gpumcmc never imports CuPy and never touches a GPU; the backend is
chosen at the first call that needs one (see :mod:`gpumcmc.backend`).
"""

from . import backend, random
from .discrete import categorical, categorical_logits, categorical_products, token_order
from ._validate import check, deferred as deferred_validation, set_validation, validation
from ._version import __version__
from .backend import backend_name, get_array_module, to_device, to_host

__all__ = [
    "__version__",
    "backend",
    "backend_name",
    "categorical",
    "categorical_logits",
    "categorical_products",
    "get_array_module",
    "random",
    "set_validation",
    "validation",
    "to_device",
    "to_host",
    "token_order",
]
