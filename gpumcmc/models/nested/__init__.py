"""Nested sampling on the GPU: batched likelihoods, multiple replacement, combined runs.

``algorithm``: the iteration; ``ops``: the launches of ``kernels_cu/nested.cu`` and their NumPy twins;
``results``: evidence, combined runs, mode check; ``likelihoods``: the fused-step protocol and test problems;
``estimator``: :class:`NestedSampler`. The public names are documented in :mod:`gpumcmc.nested`.
"""

from .algorithm import LiveState, StepInfo
from .estimator import NestedSampler
from .likelihoods import SinusoidModel, _fusable_model, correlated_gaussian, eggbox, gaussian_shells
from .ops import _GpuOps, _GpuProgress, _NumpyOps, _NumpyProgress, _ops_for
from .results import (CLUSTER_MIN_MASS, LOST_FRACTION, MODE_ERR_MAX, MODE_MIN_MASS, NLIVE_MODES,
                      FewLivePointsWarning, NestedResults, _evidence, _warn_lost, combine_runs, merge_points,
                      mode_check, plot_run)

# The names not in __all__ are imported from here by the tests and by gpumcmc.nested.
_NOT_IN_ALL = (LiveState, StepInfo, _fusable_model, _GpuOps, _GpuProgress, _NumpyOps, _NumpyProgress, _ops_for,
               CLUSTER_MIN_MASS, LOST_FRACTION, MODE_ERR_MAX, MODE_MIN_MASS, NLIVE_MODES, _evidence, _warn_lost)

__all__ = ["NestedSampler", "NestedResults", "SinusoidModel", "combine_runs", "plot_run", "merge_points", "mode_check",
           "FewLivePointsWarning", "gaussian_shells", "eggbox", "correlated_gaussian"]
