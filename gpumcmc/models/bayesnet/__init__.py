"""Discrete Bayesian networks learnt from incomplete cases by SAME-replicated chromatic Gibbs.

The package re-exports its public names and the private ones that tests and benchmarks use.
"""
from __future__ import annotations

from gpumcmc._config import forward

from .algorithm import (FILE, _KMAX, BayesianNetwork, _Batch, _block_cuts, _block_rows, _GpuOps, _layout,
                        _NumpyOps, _Plan, _uniforms, allreduce_bytes)

__all__ = ["BayesianNetwork", "allreduce_bytes"]

# The knobs' old names here read and set gpumcmc._config.config's
forward(__name__, {"_IMPUTE_CELLS": "bayesnet_impute_cells", "_DEFINES": "bayesnet_defines",
                   "_SHARED_CELLS": "bayesnet_shared_cells"})
