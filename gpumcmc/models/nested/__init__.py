"""Nested sampling on the GPU: batched likelihoods, multiple replacement, combined runs.

The user-facing names are documented in :mod:`gpumcmc.nested`, which
re-exports them. This package re-exports the module's public names, and the
helpers the tests use.
"""

from .algorithm import (CLUSTER_MIN_MASS, LOST_FRACTION, MODE_ERR_MAX, MODE_MIN_MASS, NLIVE_MODES,
                        FewLivePointsWarning, NestedResults, NestedSampler, SinusoidModel, _argsort_rows,
                        _evidence, _fusable_model, _Progress, _warn_lost, combine_runs, correlated_gaussian,
                        eggbox, gaussian_shells, merge_points, mode_check, plot_run)

__all__ = ["NestedSampler", "NestedResults", "SinusoidModel", "combine_runs", "plot_run", "merge_points", "mode_check",
           "FewLivePointsWarning", "gaussian_shells", "eggbox", "correlated_gaussian"]
