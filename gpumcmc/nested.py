"""Nested sampling on the GPU: batched likelihoods, multiple replacement, combined runs.

Skilling's nested sampling with the three parallel schemes of Henderson's
tutorial, shaped for a GPU:

* **parallel model evaluation** sets the design: every live point of every run
  lives in one array, and every step of the constrained sampler evaluates all
  walkers in *one* call of the batched ``loglike``;
* **multiple replacement** (``n_replace=R``): the R lowest live points are
  replaced at each iteration, giving R walkers per run;
* **combined runs** (``n_runs=M``): M independent runs advance together as one
  batch and are merged into a single run with M*N live points.

Choosing N, R and M
-------------------
Removing the R lowest of N live points shrinks the enclosed prior mass by the
R-th order statistic: ``E[log X]`` falls by ``sum_{i<R} 1/(N - i)``, and each
removed point is recorded with the number of live points ``N - i`` it was the
lowest of (M N across merged runs). ``logzerr`` is ``sqrt(sum 1/n_k**2)`` down
to the posterior bulk (``log X = -H``), Skilling's ``sqrt(H/N)`` for a constant
N, so it accounts for R and M exactly. Henderson et al. (2014) found that
``sqrt(R N)`` live points keep the precision of a run with N live points and
R = 1; with the exact order-statistic shrinkage used here the loss is smaller
(at R = N/2 the error grows by about 1.2x). What to choose: the total number
of live points M N sets the precision (``logzerr ~ sqrt(H / (M N))``); M R is
the number of walkers per batched ``loglike`` call, so make it as large as your
likelihood needs to fill the GPU (hundreds to thousands), with ``R <= N / 2``
and ``N >= 2 ndim``.

Few live points per run can lose modes, and neither ``logzerr`` nor
``logzerr_runs`` says so: losing a mode of weight w moves log Z by at most
``-log(1 - w)`` over the number of runs. On a 4-D mixture of two Gaussians
(weights 0.7 / 0.3, 10 sd apart, the lighter one half as wide) in runs of 50
live points, runs lost the lighter mode in most seeds and its merged weight
came out 0.04 to 0.22 over 6 seeds; at 200 live points per run, 0.19 to 0.29
over 4. With equal widths (0.7 / 0.3, 30 sd apart) a mode is lost less
often, but once the modes part each run's share of the lighter one drifts
either way: its merged weight came out 0.18 to 0.60 over 8 seeds at 50 live
points per run, 0.21 to 0.41 at 100 and 0.26 to 0.37 at 500. So after
merged runs the sampler checks each run's posterior mass in each mode
(:func:`mode_check`, ``results.mode_mass_runs``) and warns, naming the runs
that lost one, or, where none did, when the runs disagree on a mode's mass
by more than ``MODE_ERR_MAX`` (0.05; ``results.mode_mass_err``, each mode's
between-run error, as ``logzerr_runs`` is for log Z); and it warns at
construction when ``n_runs > 1`` and ``nlive`` is under ``NLIVE_MODES``
(100) per run. The default, 500, keeps such modes.

The code lives in the package :mod:`gpumcmc.models.nested` (``algorithm``: the
iteration; ``ops``: the kernels of ``kernels_cu/nested.cu`` and their NumPy
twins; ``results``: evidence, combined runs and the mode check;
``likelihoods``: the fused-step protocol and the test problems;
``estimator``: :class:`NestedSampler`); this module re-exports its public names.

Example
-------
>>> import numpy as np
>>> from gpumcmc.nested import NestedSampler
>>> def loglike(x):                      # (n, 2) -> (n,)
...     return -0.5 * (x ** 2).sum(axis=1) / 0.1 ** 2
>>> def prior_transform(u):              # unit cube -> [-1, 1]^2
...     return 2.0 * u - 1.0
>>> s = NestedSampler(loglike, prior_transform, 2, nlive=50, random_state=0,
...                   progress=False, backend="numpy")
>>> res = s.run().results
>>> bool(abs(res.logz - np.log(2 * np.pi * 0.01 / 4)) < 4 * res.logzerr)
True
"""

from .models.nested import (CLUSTER_MIN_MASS, LOST_FRACTION, MODE_ERR_MAX, MODE_MIN_MASS, NLIVE_MODES,
                            FewLivePointsWarning, NestedResults, NestedSampler, SinusoidModel, combine_runs,
                            correlated_gaussian, eggbox, gaussian_shells, merge_points, mode_check, plot_run)

__all__ = ["NestedSampler", "NestedResults", "SinusoidModel", "combine_runs", "plot_run", "merge_points", "mode_check",
           "FewLivePointsWarning", "gaussian_shells", "eggbox", "correlated_gaussian"]
