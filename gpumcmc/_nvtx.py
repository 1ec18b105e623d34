"""NVTX ranges around public GPU operations, when the ``nvtx`` package is installed.

Without ``nvtx``, or on the NumPy backend, :func:`annotate` is a no-op, so
profiles of CPU runs and machines without the package cost nothing.
"""

from __future__ import annotations

import contextlib
import functools

import numpy as np


@functools.lru_cache(maxsize=1)
def _nvtx():
    try:
        import nvtx
    except ImportError:
        return None
    return nvtx


def annotate(name: str, xp=None):
    """A context manager marking ``name`` in Nsight timelines (domain ``gpumcmc``).

    ``xp`` is the array module of the operation; NumPy work is not annotated.
    """
    mod = _nvtx()
    if mod is None or xp is np:
        return _NOTHING
    return mod.annotate(name, domain="gpumcmc")


_NOTHING = contextlib.nullcontext()  # reusable: it holds no state
