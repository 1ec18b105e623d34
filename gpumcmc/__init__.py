"""gpumcmc: GPU-first parallel MCMC with CUDA kernels and a NumPy twin.

Importing gpumcmc never imports CuPy and never touches a GPU; the backend is
chosen at the first call that needs one (see :mod:`gpumcmc.backend`).
"""

from . import backend, random
from .discrete import categorical, categorical_logits, categorical_products, token_order
from ._config import config
from ._info import info, show_versions
from ._validate import check, deferred as deferred_validation, set_validation, validation
from ._version import __version__
from .backend import backend_name, get_array_module, to_device, to_host

# Submodules loaded on first use, so that ``import gpumcmc`` stays light.
_LAZY = ("datasets", "demo", "distributed", "glm", "models", "nested", "sampling")


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'gpumcmc' has no attribute {name!r}")

__all__ = [
    "__version__",
    "backend",
    "backend_name",
    "categorical",
    "categorical_logits",
    "categorical_products",
    "check",
    "config",
    "datasets",
    "deferred_validation",
    "get_array_module",
    "info",
    "models",
    "random",
    "sampling",
    "set_validation",
    "show_versions",
    "validation",
    "to_device",
    "to_host",
    "token_order",
]
