"""Latent Dirichlet allocation by uncollapsed Gibbs sampling (the fused theta-phi z-draw).

The module moved whole into :mod:`.algorithm`; this package re-exports its public names and the private
ones that tests and benchmarks use.
"""

from __future__ import annotations

from gpumcmc._config import forward

from .algorithm import (LDA, CorpusPart, LDAData, LDAInfo, LDAShardedState, LDAState, ShardPlace, _accumulate,
                        _draw_phi, _fused_default, _phi_store, _theta_draw, _token_counters, allreduce_bytes,
                        completion_split, counts, counts_twin, dirichlet_columns, document_bounds, fused_counts, init,
                        init_sharded, log_likelihood, make_sharded_step, seeded_topics, shard_corpus,
                        sharded_log_likelihood, sharded_loglik, step, tokens_from, zdraw_counts)

__all__ = ["LDA", "LDAState", "LDAInfo", "LDAData", "init", "step", "tokens_from", "completion_split",
           "log_likelihood", "dirichlet_columns", "LDAShardedState", "CorpusPart", "ShardPlace", "document_bounds",
           "shard_corpus", "init_sharded", "seeded_topics", "make_sharded_step", "sharded_log_likelihood",
           "sharded_loglik", "allreduce_bytes"]

# The knobs' old names (gpumcmc.models.lda.SEED_EXACT_WORK and the like) read and set gpumcmc._config.config's;
# the submodules read config itself, so setting either changes the fit.
forward(__name__, {"FUSED_MIN_K": "lda_fused_min_k", "FUSED_MAX_FILL": "lda_fused_max_fill",
                   "SPARSE_MIN_K": "lda_sparse_min_k", "ZWARPS": "lda_zwarps", "ZWAVES": "lda_zwaves",
                   "GRAPH_MAX_TOKENS": "lda_graph_max_tokens", "SEED_EXACT_WORK": "lda_seed_exact_work",
                   "SEED_SKETCH": "lda_seed_sketch", "SEED_GRAM_MAX": "lda_seed_gram_max"})
