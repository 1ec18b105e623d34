"""Truncated Dirichlet-process Gaussian mixtures: blocked Gibbs and Bayesian EM (Suchard et al. 2010)."""

from __future__ import annotations

from gpumcmc._config import forward

from .algorithm import (  # noqa: F401  (the private names: tests and benchmarks import them from here)
    FILE, MODE_ARGMAX, MODE_RESP, MODE_SAMPLE, DPGaussianMixture, Info, Model, State, _assign_twin, _bem_kl,
    _check_finite_fit, _defines, _gemm_weights, _gibbs_acc, _gibbs_params_kernel, _gibbs_params_twin, _kernel,
    _logits_gemm, _logits_twin, _make_global_draws, _mean_rows, _packed_prior, _posterior_kernel, _resp_blocks,
    _sum_rows, _take, _unpack_stats, _y_block, align_draws, allreduce_bytes, assign, bem_step, gibbs_stats, init,
    init_bem, init_bem_sharded, init_sharded, kernel_params, make_bem_step, make_model, make_sharded_bem_step, make_sharded_models,
    make_sharded_step, make_step, niw_posterior, relabel, relabel_costs, step)

__all__ = ["DPGaussianMixture", "Model", "State", "Info", "init", "init_bem", "step", "bem_step", "make_bem_step",
           "make_model", "relabel", "relabel_costs", "align_draws", "make_sharded_models", "init_sharded",
           "make_sharded_step", "make_sharded_bem_step", "init_bem_sharded", "allreduce_bytes"]

# The knobs' old names here (gpumcmc.models.mixture._GEMM_ROWS and the like) read and set gpumcmc._config.config's;
# the submodules read config itself, so setting either changes the fit.
forward(__name__, {"_GEMM_ROWS": "mixture_gemm_rows", "_GEMM_MIN_BLOCKS": "mixture_gemm_min_blocks",
                   "_STATS_ROWS": "mixture_stats_rows", "_MEAN_BLOCK": "mixture_mean_block",
                   "_MEAN_MIN_BLOCKS": "mixture_mean_min_blocks", "_KMEANS_ROWS": "mixture_kmeans_rows",
                   "_KMEANS_LLOYD": "mixture_kmeans_lloyd", "_TUNE": "mixture_defines"})
