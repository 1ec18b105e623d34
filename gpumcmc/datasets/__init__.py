"""Loaders for the data the models and the demo use, all offline.

Names resolve lazily to ``gpumcmc/datasets/<module>.py``. Nothing here
downloads: each loader reads a file the user gives, or data that an installed
package ships (the ``lda`` package's Reuters subset, the FCS files in
fcsparser's wheel, scikit-learn's bundled data sets: the ``data`` extra), and
says which package to install when it is missing. ``bif_example_files`` lists
pgmpy's BIF networks where pgmpy is installed (the ``test`` extra brings it);
gpumcmc reads BIF files itself.
"""

from __future__ import annotations

import importlib

# Public name -> module under gpumcmc.datasets that defines it.
_LOADERS = {
    "load_reuters": "text",
    "load_uci_bow": "text",
    "synthetic_lda_corpus": "text",
    "load_fcs": "fcs",
    "fcs_example_files": "fcs",
    "bif_example_files": "bif",
    "load_breast_cancer": "tabular",
}

__all__ = sorted(_LOADERS)


def __getattr__(name: str):
    module = _LOADERS.get(name)
    if module is None:
        raise AttributeError(f"module 'gpumcmc.datasets' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LOADERS))
