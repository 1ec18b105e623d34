"""Latent Dirichlet allocation by uncollapsed Gibbs sampling (Zhao, Canny et al.; the fused theta-phi z-draw).

The package: :mod:`.algorithm` (the sweep, read top-down: the data, the state, ``init`` and ``step``),
:mod:`.ops` (the launchers of ``kernels_cu/lda.cu`` and their NumPy twins), :mod:`.corpus` (token streams
and the seeded start), :mod:`.sharded` (the documents split over devices) and :mod:`.estimator`
(:class:`LDA`, the scikit-learn face).
"""

from __future__ import annotations

from gpumcmc._config import forward

from .algorithm import (GibbsStats, LDAData, LDAInfo, LDAState, _fused_default, gibbs_local, gibbs_update, init,
                        log_likelihood, step)
from .corpus import completion_split, seeded_topics, tokens_from
from .estimator import LDA
from .ops import (_accumulate_mean, _phi_store, _token_counters, counts, counts_twin, dirichlet_columns, fused_counts,
                  zdraw_counts)
from .sharded import (CorpusPart, LDAShardedState, ShardPlace, allreduce_bytes, document_bounds, gibbs, init_sharded,
                      make_sharded_step, shard_corpus, shard_data, sharded_gibbs, sharded_log_likelihood,
                      sharded_loglik)

# The names not in __all__ are imported from here by the tests and benchmarks. A test that replaces a function
# must replace it in the submodule that calls it (categorical_products in .ops; zdraw_counts, _theta_draw and
# dirichlet_columns in .algorithm). init_sharded and make_sharded_step raise, naming their replacements.
_NOT_IN_ALL = (_fused_default, _accumulate_mean, _phi_store, _token_counters, counts, counts_twin, fused_counts,
               zdraw_counts)

__all__ = ["LDA", "LDAState", "LDAInfo", "LDAData", "init", "step", "tokens_from", "completion_split",
           "log_likelihood", "dirichlet_columns", "LDAShardedState", "CorpusPart", "ShardPlace", "document_bounds",
           "shard_corpus", "shard_data", "gibbs", "gibbs_local", "gibbs_update", "GibbsStats", "sharded_gibbs",
           "init_sharded", "seeded_topics", "make_sharded_step", "sharded_log_likelihood", "sharded_loglik",
           "allreduce_bytes"]

# The knobs' old names (gpumcmc.models.lda.SEED_EXACT_WORK and the like) read and set gpumcmc._config.config's.
forward(__name__, {"FUSED_MIN_K": "lda_fused_min_k", "FUSED_MAX_FILL": "lda_fused_max_fill",
                   "SPARSE_MIN_K": "lda_sparse_min_k", "ZWARPS": "lda_zwarps", "ZWAVES": "lda_zwaves",
                   "GRAPH_MAX_TOKENS": "lda_graph_max_tokens", "SEED_EXACT_WORK": "lda_seed_exact_work",
                   "SEED_SKETCH": "lda_seed_sketch", "SEED_GRAM_MAX": "lda_seed_gram_max"})
