"""The tuning knobs and the memoised values, each in one place.

``config`` holds the knobs: chunk sizes of the NumPy twins and thresholds of
the GPU launch plans, which tests and benchmarks change to reach a path or to
tune one. Every knob is an attribute with its default written below; set one
with ``config.override(name=value)`` (a context manager) or, in a test,
``monkeypatch.setattr(config, "name", value)``. An unknown name raises
AttributeError, so a misspelt knob cannot be set silently.

``memo`` holds what is worked out once and kept: compiled modules and
kernels, occupancy, launch plans. Each module takes its table
from it once, at import (``_plans = memo.table("gamma.plans")``), and reads
and fills that dict as before, so a lookup costs what it did. The entries of
a table keyed by device (its position in the key given to :meth:`Memo.table`)
belong to that device. ``memo.clear()`` empties every table;
``memo.clear(device)`` drops that device's entries and every table not keyed
by device. A plan that depends on a knob has the knob's value in its key, so
changing a knob needs no clear. What a captured CUDA graph may still point
at (gamma's work counters) stays out of the memo.

The knobs' old module names (``gpumcmc.random._gamma._DYN_SHARE`` and the
like) still read and set the knob: see :func:`forward`.

This module imports nothing from gpumcmc, so every layer may use it.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import types

__all__ = ["Config", "Memo", "config", "forward", "memo"]


class Memo:
    """Named tables of memoised values, scoped per device, with one :meth:`clear`."""

    def __init__(self):
        self._tables: dict[str, tuple[dict, int | None]] = {}
        self._lock = threading.Lock()

    def table(self, name: str, *, device_at: int | None = 0) -> dict:
        """The dict registered as ``name``, made on the first call.

        ``device_at``: where the device ordinal sits in the table's keys (a
        tuple key's index, or 0 for a key that is the ordinal itself); None
        for a table whose keys name no device.
        """
        with self._lock:
            entry = self._tables.get(name)
            if entry is None:
                entry = self._tables[name] = ({}, device_at)
            elif entry[1] != device_at:
                raise ValueError(f"memo table {name!r} is keyed by device at {entry[1]}, not {device_at}; "
                                 "give each table one name.")
            return entry[0]

    def names(self) -> list[str]:
        """The registered tables' names."""
        return sorted(self._tables)

    def clear(self, device: int | None = None) -> None:
        """Empty every table; with ``device``, drop only that device's entries, and every table whose keys
        name no device (what they hold may still depend on one)."""
        with self._lock:
            for table, at in self._tables.values():
                if device is None or at is None:
                    table.clear()
                    continue
                for key in list(table):
                    if (key[at] if isinstance(key, tuple) else key) == device:
                        table.pop(key, None)


class Config:
    """The tuning knobs, as ``gpumcmc.config``: each changes how work is split or launched, not what is
    computed. ``repr(gpumcmc.config)`` shows the knobs set away from their defaults, and an unknown name's
    AttributeError lists every knob; ``with gpumcmc.config.override(name=value):``
    sets some for a block, ``gpumcmc.config.name = value`` for the process, ``gpumcmc.config.reset()`` restores
    the defaults. Most are chunk sizes and launch thresholds that the
    tests and benchmarks move. Where a test holds the draws equal across a knob's values, the comment beside
    the knob in ``gpumcmc/_config.py`` names it; ``bayesnet_impute_cells`` does change the draws (each
    chunk's chains take their own seed). One a user may want: ``bayesnet_specialise=False``, the Bayesian
    network's kernels compiled once for every network rather than for each structure (see
    :class:`gpumcmc.models.BayesianNetwork`)."""

    _DEFAULTS = {
        # gpumcmc._loader: seconds a kernel compilation may take before a one-line notice (once a process) says
        # what the wait is (NVRTC compiling for this GPU, cached on disk afterwards); None: no notice.
        "compile_notice_s": 2.0,
        # ... and compile_kernels_alone: each template instantiation a kernel file is asked for is compiled by
        # itself, not with every instantiation its caller lists, and an extern "C" kernel with none (the same
        # kernels; a first use compiles fewer of them, though each module repeats the file's extern "C" ones).
        # On an H200 it cut a model's first call with an empty kernel cache from 27-48 s to 7-20 s; False
        # compiles each file's listed instantiations together, in fewer, longer compilations.
        "compile_kernels_alone": True,
        # gpumcmc.random._fill: blocks per chunk of the NumPy fill twin (a power of two), and elements per
        # chunk of its per-element form.
        "fill_twin_chunk": 1 << 15,
        "fill_at_chunk": 1 << 22,
        # gpumcmc.random._gamma: elements per chunk of the NumPy gamma twin (even: keeps its temporaries in
        # cache; test_twins), and elements at a time of the twin's transposed normalisation of short rows.
        "gamma_twin_chunk": 1 << 16,
        "gamma_lse_chunk": 1 << 16,
        # gamma_draw takes its rounds from a counter where each warp of the grid has at least
        # gamma_dyn_min_rounds to do; a request takes about 1/gamma_dyn_share of a warp's share, at most
        # gamma_dyn_chunk rounds (test_gamma's dynamic-schedule test).
        "gamma_dyn_min_rounds": 16,
        "gamma_dyn_share": 8,
        "gamma_dyn_chunk": 16,
        # Elements per dirichlet_draw chunk: a warp normalises rows it has just written.
        "dirichlet_chunk": 2048,
        # gpumcmc.discrete: elements per chunk of rows of the NumPy twin (bounds its temporaries;
        # test_categorical), and per chunk of butterfly_draw (test_twins).
        "categorical_twin_chunk": 1 << 22,
        "butterfly_twin_chunk": 1 << 16,
        # gpumcmc.models.bayesnet: cells (replicas x cases x nodes) of one chunk of impute's Gibbs
        # imputation (test_bayesnet); counts go to shared memory when every CPT together has at most
        # bayesnet_shared_cells cells; bayesnet_defines: tunable macros of bayesnet.cu, e.g.
        # (("BN_AGG", 0),), the same draws in every variant (benchmarks/bayesnet.py compares them).
        "bayesnet_impute_cells": 1 << 24,
        "bayesnet_shared_cells": 12 * 1024,
        "bayesnet_defines": (),
        # bayesnet_specialise: compile the sweep with the network's structure written in (bn_products_net;
        # the same draws), for networks whose generated code has at most bayesnet_specialise_chars characters
        # (about 80 nodes of a few states: the compile grows with the code, and is paid once per structure,
        # then cached on disk). On by default (benchmarks/NOTES.md has the timings).
        "bayesnet_specialise": True,
        "bayesnet_specialise_chars": 1 << 16,
        # ... and a specialised network of at most bayesnet_register_cells CPT cells in all is counted in
        # registers (BN_NET_REG_COUNT), not by atomics (the same counts).
        "bayesnet_register_cells": 32,
        # bayesnet_graph: on one GPU with one batch and one m, fit replays each iteration from a CUDA graph
        # (the same draws).
        "bayesnet_graph": False,
        # gpumcmc.nested: NestedSampler's slice rounds on CuPy replay prior_transform and loglike from a CUDA
        # graph captured once a run, where that capture works and a replay repeats a direct call bit for bit
        # (the same draws; test_nested's capture tests). False: every round calls them from Python.
        "nested_capture": True,
        # gpumcmc.glm, the f+g kernels: glm_fg_tiles and glm_fg_rows take glm_threads threads a block and
        # tiles of at most glm_tile_bytes (GLM_THREADS and GLM_THREADS * GLM_VPT * 16 in glm.cu: change them
        # with glm_defines, the macros the kernels are compiled with, e.g. (("GLM_THREADS", 512),)); glm_sb
        # chains a pass over a tile (GLM_SB); glm_max_rows rows a glm_fg_tiles tile (8 warps of 32),
        # glm_rows_max_r a glm_fg_rows tile; glm_shared_limit bytes of dynamic shared memory a block (no
        # opt-in); glm_part_bytes caps the blocks' partial sums of one launch (more chains take more
        # launches: test_glm's test of chains split over launches holds f and g equal).
        "glm_threads": 256,
        "glm_tile_bytes": 256 * 8 * 16,
        "glm_sb": 8,
        "glm_max_rows": 256,
        "glm_rows_max_r": 1024,
        "glm_shared_limit": 48 * 1024,
        "glm_part_bytes": 1 << 26,
        "glm_defines": (),
        # gpumcmc.models.glm, the GPU slice sweep: rows a chunk (glm_chunk_rows) and threads a block
        # (glm_block), None: chosen from the data and the GPU (test_glm's slice-kernel tests hold the draws
        # to the twin's at other values); glm_spec_shrink shrinkage proposals evaluated with the first pass;
        # glm_niw_kernel False draws mu, Sigma by the array code on the GPU too (test_glm's NIW test).
        "glm_chunk_rows": None,
        "glm_block": None,
        "glm_spec_shrink": 8,
        "glm_niw_kernel": True,
        # gpumcmc.models.mixture: rows per block of the Bayesian-EM statistics GEMM on float32 data (None or
        # 0: one GEMM per chunk), and the blocks a chunk needs to take the batched GEMM; sorted rows per
        # block of the Gibbs statistics kernel (MIX_STATS_ROWS); values per partial sum of the two-pass
        # row means and the blocks a row needs to take them; the rows and Lloyd iterations of a BEM
        # start's k-means++ (these two change the starts); mixture_defines: overrides of mixture.cu's
        # macros, e.g. (("MIX_ROWS", 2),) (test_mixture holds the draws equal across the GEMM blocks).
        "mixture_gemm_rows": 4096,
        "mixture_gemm_min_blocks": 16,
        "mixture_stats_rows": 2048,
        "mixture_mean_block": 4096,
        "mixture_mean_min_blocks": 32,
        "mixture_kmeans_rows": 8192,
        "mixture_kmeans_lloyd": 10,
        "mixture_defines": (),
        # gpumcmc.models.ising: overrides of ising.cu's macros, for tuning runs: ISING_MIN_BLOCKS and
        # ISING_MIN_BLOCKS_OBS (e.g. (("ISING_MIN_BLOCKS", 3),)) give the same states; ISING_BLOCK must stay 256,
        # the block the launcher uses.
        "ising_defines": (),
        # gpumcmc.models.rbm: rows of X (evenly spaced) that RBM.fit's progress bar scores after each epoch;
        # scoring a row costs about a third of an epoch's work on it (test_rbm's progress test).
        "rbm_progress_rows": 256,
        # gpumcmc.models.lda: init's default z-draw is the fused kernel from lda_fused_min_k topics where at
        # most lda_fused_max_fill of theta's entries without a count are expected non-zero, and that kernel
        # reads theta rows as compacted lists from lda_sparse_min_k topics (either choice moves a draw only
        # where a prefix sum lies within rounding of its target); lda_zdraw takes lda_zwarps warps a block (at
        # most 4, its launch bound) and a grid of lda_zwaves times the resident blocks (the same draws; each
        # warp takes a contiguous range of tokens, and shorter ranges finish more evenly: benchmarks/NOTES.md);
        # LDA(graph=None) replays its sweeps from a CUDA graph below lda_graph_max_tokens tokens (times
        # chains); seeded_topics' work bounds: exact cosines up to lda_seed_exact_work (K times the
        # candidates' tokens), else those of an lda_seed_sketch-wide count sketch, whose Gram matrix is formed
        # once for at most lda_seed_gram_max candidates (test_lda_quality reaches the sketch through it).
        "lda_fused_min_k": 512,
        "lda_fused_max_fill": 0.2,
        "lda_sparse_min_k": 256,
        "lda_zwarps": 4,
        "lda_zwaves": 16,
        "lda_graph_max_tokens": 2_000_000,
        "lda_seed_exact_work": 2**26,
        "lda_seed_sketch": 256,
        "lda_seed_gram_max": 4096,
    }

    def __init__(self):
        for name, value in self._DEFAULTS.items():  # plain attributes: a read costs what a global's does
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str):  # called only for a name that is not a knob
        raise AttributeError(f"gpumcmc has no tuning knob {name!r}; the knobs are "
                             f"{', '.join(sorted(self._DEFAULTS))}.")

    def __setattr__(self, name: str, value) -> None:
        if name not in self._DEFAULTS:
            raise AttributeError(f"gpumcmc has no tuning knob {name!r}; the knobs are "
                                 f"{', '.join(sorted(self._DEFAULTS))}.")
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        changed = {k: getattr(self, k) for k, v in self._DEFAULTS.items() if getattr(self, k) != v}
        return f"Config({', '.join(f'{k}={v!r}' for k, v in changed.items())})"

    @contextlib.contextmanager
    def override(self, **knobs):
        """Set ``knobs`` for the ``with`` block, and restore them after it."""
        old = {name: getattr(self, name) for name in knobs}
        try:
            for name, value in knobs.items():
                setattr(self, name, value)
            yield self
        finally:
            for name, value in old.items():
                setattr(self, name, value)

    def reset(self) -> None:
        """Every knob back to its default."""
        for name, value in self._DEFAULTS.items():
            setattr(self, name, value)


memo = Memo()
config = Config()


def _knob_property(knob: str) -> property:
    return property(lambda module: getattr(config, knob), lambda module, value: setattr(config, knob, value),
                    doc=f"gpumcmc._config.config.{knob}")


def forward(module_name: str, names: dict[str, str]) -> None:
    """Keep the module-level names of knobs that moved into :data:`config` working: reading or setting
    ``module.OLD`` reads or sets ``config.NEW``, for each ``OLD: NEW`` in ``names``.

    The names become properties of the module's own subclass of ``ModuleType``, so that every other
    attribute of the module is read as before, and a test's ``monkeypatch.setattr(module, OLD, value)``
    restores the knob afterwards."""
    module = sys.modules[module_name]
    if type(module) is types.ModuleType:
        module.__class__ = type(f"{module_name}:knobs", (types.ModuleType,), {"__module__": __name__})
    for old, knob in names.items():
        getattr(config, knob)  # AttributeError for a knob that does not exist
        module.__dict__.pop(old, None)
        setattr(type(module), old, _knob_property(knob))
