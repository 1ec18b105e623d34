"""Nested sampling: the public names of :mod:`gpumcmc.models.nested`, importable from here as before."""

from .models.nested import (CLUSTER_MIN_MASS, LOST_FRACTION, MODE_ERR_MAX, MODE_MIN_MASS, NLIVE_MODES,
                            FewLivePointsWarning, NestedResults, NestedSampler, SinusoidModel, combine_runs,
                            correlated_gaussian, eggbox, gaussian_shells, merge_points, mode_check, plot_run)

__all__ = ["NestedSampler", "NestedResults", "SinusoidModel", "combine_runs", "plot_run", "merge_points", "mode_check",
           "FewLivePointsWarning", "gaussian_shells", "eggbox", "correlated_gaussian"]
