"""Discrete Bayesian networks learnt from incomplete cases by SAME-replicated chromatic Gibbs
(Seita, Chen & Canny): :mod:`.algorithm` (the sampler, and how ``devices=`` splits the cases),
:mod:`.ops` (the launchers of ``kernels_cu/bayesnet.cu`` and their NumPy twin) and :mod:`.estimator`
(:class:`BayesianNetwork`, the scikit-learn face).

Examples
--------
>>> from gpumcmc.models.bayesnet import BayesianNetwork
>>> net = BayesianNetwork.koller()
>>> X = net.sample(200, random_state=0)
>>> X[::3, 2] = -1
>>> fit = BayesianNetwork(net.parents, net.states, n_iter=5, same=2, random_state=0, progress=False,
...                       backend="numpy").fit(X)
>>> fit.kl_avg(net) >= 0
True
>>> from gpumcmc.shards import Shards
>>> two = BayesianNetwork(net.parents, net.states, n_iter=5, same=2, random_state=0, progress=False,
...                       devices=Shards(n_virtual=2)).fit(X)
>>> all((two.cpts_[v] == fit.cpts_[v]).all() for v in net.nodes)
True
"""
from __future__ import annotations

from gpumcmc._config import forward

from .algorithm import _block_cuts, _block_rows, _Plan, _uniforms, allreduce_bytes  # private names: for the tests
from .estimator import BayesianNetwork
from .ops import _GpuOps, _NumpyOps

__all__ = ["BayesianNetwork", "allreduce_bytes"]

# the knobs' old names read and set gpumcmc._config.config's
forward(__name__, {"_IMPUTE_CELLS": "bayesnet_impute_cells", "_DEFINES": "bayesnet_defines",
                   "_SHARED_CELLS": "bayesnet_shared_cells"})
