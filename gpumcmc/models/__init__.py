"""Whole models, each a scikit-learn-style estimator over the sampler core.

Each lives in its own module or package (``gpumcmc/models/<name>``) beside
its CUDA kernels in ``kernels_cu/``; names resolve lazily, so importing this package
imports no model (and never CuPy).

=====================  ==========================================================
``LDA``                latent Dirichlet allocation, uncollapsed Gibbs
``DPGaussianMixture``  truncated Dirichlet-process Gaussian mixture, Gibbs and Bayesian EM
``BayesianNetwork``    discrete Bayesian networks, SAME chromatic Gibbs with missing data
``BayesianGLM``        Bayesian GLM, slice-within-Gibbs with the differential update
``HierarchicalGLM``    hierarchical GLM, all groups sampled at once
``Ising``              Ising model, checkerboard heat-bath Gibbs
``RBM``                restricted Boltzmann machine, block Gibbs and PCD training
=====================  ==========================================================
"""

from __future__ import annotations

import importlib

# Public name -> module under gpumcmc.models that defines it.
_MODELS = {
    "LDA": "lda",
    "DPGaussianMixture": "mixture",
    "BayesianNetwork": "bayesnet",
    "BayesianGLM": "glm",
    "HierarchicalGLM": "glm",
    "Ising": "ising",
    "RBM": "rbm",
}

__all__ = sorted(_MODELS)


def __getattr__(name: str):
    module = _MODELS.get(name)
    if module is None:
        raise AttributeError(f"module 'gpumcmc.models' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_MODELS))
