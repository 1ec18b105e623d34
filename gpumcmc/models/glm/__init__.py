"""Bayesian GLMs by slice-within-Gibbs with the differential update (Mahani & Sharabiani, §3-4).

:mod:`.algorithm` is the sampler (its states, ``init``, ``step`` and the conjugate draw of the
hierarchy's hyperparameters), :mod:`.ops` the launchers of ``kernels_cu/glm.cu`` and their NumPy
twins, :mod:`.sharded` the sweep with the rows or the groups split over devices (for
:func:`gpumcmc.sampling.sharded`) and :mod:`.estimator` :class:`BayesianGLM` and :class:`HierarchicalGLM`.

>>> import numpy as np
>>> from gpumcmc.models import BayesianGLM
>>> rs = np.random.default_rng(0)
>>> X = rs.normal(size=(200, 2)); y = (rs.random(200) < 1 / (1 + np.exp(-X @ [1.0, -1.0]))).astype(float)
>>> m = BayesianGLM("bernoulli", n_chains=2, n_samples=50, n_warmup=50, random_state=1,
...                 progress=False, backend="numpy").fit(X, y)
>>> m.coef_.shape
(2,)
"""
from __future__ import annotations

from gpumcmc._config import forward

from .algorithm import HyperPrior, SliceState, _draw_hyper, init, step
from .estimator import BayesianGLM, HierarchicalGLM
from .ops import _PMAX, _chunk_plan, _slice_pass_sweep
from .sharded import (GroupPart, ShardedGroupState, ShardedSliceState, allreduce_bytes, group_bounds, group_parts,
                      groups_allreduce_bytes, init_groups_sharded, init_sharded, make_groups_sharded_step,
                      make_sharded_step, over_groups, over_rows, row_parts, shard_passes)

# The private names are read from here by the tests and benchmarks; the old sharded names raise, naming
# gpumcmc.sampling.sharded over rows or groups.
_NOT_IN_ALL = (_PMAX, _chunk_plan, _draw_hyper, _slice_pass_sweep, init_groups_sharded, init_sharded,
               make_groups_sharded_step, make_sharded_step)
__all__ = ["BayesianGLM", "GroupPart", "HierarchicalGLM", "HyperPrior", "ShardedGroupState", "ShardedSliceState",
           "SliceState", "allreduce_bytes", "group_bounds", "group_parts", "groups_allreduce_bytes", "init",
           "over_groups", "over_rows", "row_parts", "shard_passes", "step"]

# The knobs' old names here (_CHUNK_ROWS and the like) read and set gpumcmc._config.config's.
forward(__name__, {"_SPEC_SHRINK": "glm_spec_shrink", "_CHUNK_ROWS": "glm_chunk_rows", "_BLOCK": "glm_block"})
