"""Nested sampling on the GPU: batched likelihoods, multiple replacement, combined runs.

``algorithm`` holds the iteration (the R lowest live points of every run
replaced by constrained moves), ``ops`` the launches of
``kernels_cu/nested.cu`` beside their NumPy twins, ``results`` the evidence,
combined runs and the mode check, ``likelihoods`` the fused-step protocol and
the test problems, ``estimator`` :class:`NestedSampler`. The user-facing names
are documented in :mod:`gpumcmc.nested`, which re-exports them; this package
re-exports them too, and the helpers the tests use.
"""

from .algorithm import LiveState, StepInfo
from .estimator import NestedSampler
from .likelihoods import SinusoidModel, _fusable_model, correlated_gaussian, eggbox, gaussian_shells
from .ops import _GpuOps, _GpuProgress, _NumpyOps, _NumpyProgress, _ops_for
from .results import (CLUSTER_MIN_MASS, LOST_FRACTION, MODE_ERR_MAX, MODE_MIN_MASS, NLIVE_MODES,
                      FewLivePointsWarning, NestedResults, _evidence, _warn_lost, combine_runs, merge_points,
                      mode_check, plot_run)

__all__ = ["NestedSampler", "NestedResults", "SinusoidModel", "combine_runs", "plot_run", "merge_points", "mode_check",
           "FewLivePointsWarning", "gaussian_shells", "eggbox", "correlated_gaussian"]
