"""Truncated Dirichlet-process Gaussian mixtures: blocked Gibbs and Bayesian EM (Suchard et al. 2010).

The package: :mod:`.algorithm` (the model, its state, and the Gibbs sweep and Bayesian-EM iterate over
them), :mod:`.ops` (the launchers of ``kernels_cu/mixture.cu`` and their array-code twins), :mod:`.sharded`
(the data split over devices), :mod:`.relabel` (aligning the draws' components) and :mod:`.estimator`
(:class:`DPGaussianMixture`, the scikit-learn face).
"""

from __future__ import annotations

from gpumcmc._config import forward

from .algorithm import (BemPart, BemStats, GibbsStats, Info, Model, Part, State, _bem_kl, _make_global_draws, bem_local,
                        bem_step, gibbs_local, init, init_bem, make_bem_step, make_bem_update, make_gibbs_update,
                        make_model, make_step, step)
from .estimator import DPGaussianMixture, _check_finite_fit
from .ops import (FILE, MODE_ARGMAX, MODE_RESP, MODE_SAMPLE, _assign_twin, _defines, _gemm_weights, _gibbs_acc,
                  _gibbs_params_kernel, _gibbs_params_twin, _kernel, _logits_gemm, _logits_twin, _mean_rows,
                  _packed_prior, _posterior_kernel, _resp_blocks, _sum_rows, _unpack_stats, _y_block, assign,
                  gibbs_stats, kernel_params, niw_posterior)
from .relabel import _take, align_draws, relabel, relabel_costs
from .sharded import (allreduce_bytes, bem, bem_parts, gibbs, gibbs_parts, init_bem_sharded, init_sharded,
                      make_sharded_bem_step, make_sharded_models, make_sharded_step, sharded_bem, sharded_gibbs)

# The names not in __all__ are imported from here by the tests and benchmarks; init_sharded,
# make_sharded_step, init_bem_sharded and make_sharded_bem_step raise, naming their replacements.
_NOT_IN_ALL = (_bem_kl, _make_global_draws, make_step, _check_finite_fit, FILE, MODE_ARGMAX, MODE_RESP, MODE_SAMPLE,
               _assign_twin, _defines, _gemm_weights, _gibbs_acc, _gibbs_params_kernel, _gibbs_params_twin, _kernel,
               _logits_gemm, _logits_twin, _mean_rows, _packed_prior, _posterior_kernel, _resp_blocks, _sum_rows,
               _unpack_stats, _y_block, assign, gibbs_stats, kernel_params, niw_posterior, _take, init_bem_sharded,
               init_sharded, make_sharded_bem_step, make_sharded_step)

__all__ = ["DPGaussianMixture", "Model", "State", "Info", "init", "init_bem", "step", "bem_step", "make_bem_step",
           "make_model", "relabel", "relabel_costs", "align_draws", "make_sharded_models", "Part", "GibbsStats",
           "gibbs_local", "make_gibbs_update", "gibbs", "gibbs_parts", "sharded_gibbs", "BemPart", "BemStats",
           "bem_local", "make_bem_update", "bem", "bem_parts", "sharded_bem", "allreduce_bytes"]

# The knobs' old names here (gpumcmc.models.mixture._GEMM_ROWS and the like) read and set gpumcmc._config.config's;
# the submodules read config itself, so setting either changes the fit.
forward(__name__, {"_GEMM_ROWS": "mixture_gemm_rows", "_GEMM_MIN_BLOCKS": "mixture_gemm_min_blocks",
                   "_STATS_ROWS": "mixture_stats_rows", "_MEAN_BLOCK": "mixture_mean_block",
                   "_MEAN_MIN_BLOCKS": "mixture_mean_min_blocks", "_KMEANS_ROWS": "mixture_kmeans_rows",
                   "_KMEANS_LLOYD": "mixture_kmeans_lloyd", "_TUNE": "mixture_defines"})
