"""Bayesian GLMs by slice-within-Gibbs with the differential update (Mahani & Sharabiani, §3-4).

The package: :mod:`.algorithm` (the sampler: its states, ``init`` and
``step``, and the sweeps with the rows or the groups split over devices),
:mod:`.ops` (the launchers of ``kernels_cu/glm.cu`` and their NumPy twins)
and :mod:`.estimator` (:class:`BayesianGLM` and :class:`HierarchicalGLM`,
the scikit-learn face).
"""
from __future__ import annotations

from gpumcmc._config import forward

from .algorithm import *  # noqa: F401,F403
from .algorithm import (_PMAX, __all__, _chunk_plan, _draw_hyper, _niw_fits, _niw_kernel,  # noqa: F401
                        _slice_kernel_coordinate, _slice_pass_sweep)

# The private names above are imported from here by tests and benchmarks. A test that changes a
# module-level value must set it in the submodule that reads it.

# The knobs' old names here (gpumcmc.models.glm._CHUNK_ROWS and the like) read and set
# gpumcmc._config.config's; the submodules read config itself, so setting either changes the sweep.
forward(__name__, {"_SPEC_SHRINK": "glm_spec_shrink", "_CHUNK_ROWS": "glm_chunk_rows", "_BLOCK": "glm_block",
                   "_SHARD_ELEMENTS": "glm_shard_elements"})
