"""The tuning knobs (``gpumcmc._config.config``) and the memo registry (``gpumcmc._config.memo``): knobs
are set and restored in one place, their old module names still read and set them, and one ``clear``
empties every memoised table (per device where the table is keyed by device). No test here is
statistical; none needs a GPU."""

from __future__ import annotations

import ast
import functools
import pathlib
import sys
import types

import numpy as np
import pytest

import gpumcmc
from gpumcmc import _config, _loader, discrete
from gpumcmc._config import Config, Memo, config, memo
from gpumcmc.models import bayesnet, mixture
from gpumcmc.models import lda, rbm
from gpumcmc import glm as glm_fg
from gpumcmc.models import glm as glm_model
from gpumcmc.random import _fill, _gamma

ROOT = pathlib.Path(__file__).resolve().parents[1] / "gpumcmc"

OLD_NAMES = [
    (_fill, "_CHUNK", "fill_twin_chunk"),
    (_fill, "_AT_CHUNK", "fill_at_chunk"),
    (_gamma, "_CHUNK", "gamma_twin_chunk"),
    (_gamma, "_LSE_CHUNK", "gamma_lse_chunk"),
    (_gamma, "_DYN_MIN_ROUNDS", "gamma_dyn_min_rounds"),
    (_gamma, "_DYN_SHARE", "gamma_dyn_share"),
    (_gamma, "_DYN_CHUNK", "gamma_dyn_chunk"),
    (_gamma, "_DIRICHLET_CHUNK", "dirichlet_chunk"),
    (discrete, "_TWIN_CHUNK", "categorical_twin_chunk"),
    (discrete, "_BUTTERFLY_CHUNK", "butterfly_twin_chunk"),
    (bayesnet, "_IMPUTE_CELLS", "bayesnet_impute_cells"),
    (bayesnet, "_SHARED_CELLS", "bayesnet_shared_cells"),
    (bayesnet, "_DEFINES", "bayesnet_defines"),
    (mixture, "_GEMM_ROWS", "mixture_gemm_rows"),
    (mixture, "_GEMM_MIN_BLOCKS", "mixture_gemm_min_blocks"),
    (mixture, "_STATS_ROWS", "mixture_stats_rows"),
    (mixture, "_MEAN_BLOCK", "mixture_mean_block"),
    (mixture, "_MEAN_MIN_BLOCKS", "mixture_mean_min_blocks"),
    (mixture, "_KMEANS_ROWS", "mixture_kmeans_rows"),
    (mixture, "_KMEANS_LLOYD", "mixture_kmeans_lloyd"),
    (mixture, "_TUNE", "mixture_defines"),
    (rbm, "PROGRESS_ROWS", "rbm_progress_rows"),
    (glm_fg, "_THREADS", "glm_threads"),
    (glm_fg, "_TILE_BYTES", "glm_tile_bytes"),
    (glm_fg, "_SB", "glm_sb"),
    (glm_fg, "_MAX_ROWS", "glm_max_rows"),
    (glm_fg, "_ROWS_MAX_R", "glm_rows_max_r"),
    (glm_fg, "_SHARED_LIMIT", "glm_shared_limit"),
    (glm_fg, "_PART_BYTES", "glm_part_bytes"),
    (glm_fg, "_DEFINES", "glm_defines"),
    (glm_model, "_CHUNK_ROWS", "glm_chunk_rows"),
    (glm_model, "_BLOCK", "glm_block"),
    (glm_model, "_SPEC_SHRINK", "glm_spec_shrink"),
    (lda, "FUSED_MIN_K", "lda_fused_min_k"),
    (lda, "FUSED_MAX_FILL", "lda_fused_max_fill"),
    (lda, "SPARSE_MIN_K", "lda_sparse_min_k"),
    (lda, "ZWARPS", "lda_zwarps"),
    (lda, "ZWAVES", "lda_zwaves"),
    (lda, "GRAPH_MAX_TOKENS", "lda_graph_max_tokens"),
    (lda, "SEED_EXACT_WORK", "lda_seed_exact_work"),
    (lda, "SEED_SKETCH", "lda_seed_sketch"),
    (lda, "SEED_GRAM_MAX", "lda_seed_gram_max"),
]
# Knobs that never had a module-level name (a test or benchmark patched a function before).
NEW_KNOBS = {"glm_niw_kernel", "bayesnet_specialise", "bayesnet_specialise_chars", "bayesnet_graph",
             "bayesnet_register_cells", "ising_defines", "nested_capture",
             "compile_notice_s", "compile_kernels_alone"}

# Module-level caches that are not yet in the memo, each with its reason. A new module-level dict or
# set of memoised values must take its table from gpumcmc._config.memo instead.
OUTSIDE_MEMO = {
    ("gpumcmc.random._gamma", "_counters"): "device memory that a captured CUDA graph may point at",
    ("gpumcmc.sampling._estimator", "_EMPTY_MIXINS"): "classes made once per name, not values of a device",
    ("gpumcmc.shards", "_WORKER_COMMS"): "communicators a worker process keeps, not memoised values",
    ("gpumcmc.shards", "_COMMS"): "NCCL communicators kept until free_communicators() destroys them: a clear "
                                  "of the memo would drop them undestroyed",
    ("gpumcmc.shards", "_PEERS"): "peer access enabled in this process: a fact about the process, not a value",
    ("gpumcmc._kernel_args", "_files"): "parsed kernel signatures of the named-argument layer, added beside this",
    ("gpumcmc._kernel_args", "_binders"): "parsed kernel signatures of the named-argument layer, added beside this",
}


@functools.lru_cache(maxsize=1)
def _module_caches():
    """(module, name) of every module-level ``name = {}`` / ``dict()`` / ``set()`` in gpumcmc/ whose name
    is private and not upper-case-only constant data (a literal with items is data, not a cache)."""
    found = set()
    for p in ROOT.rglob("*.py"):
        parts = p.relative_to(ROOT.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.parse(p.read_text()).body:
            target, value = None, None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            elif isinstance(node, ast.AnnAssign):
                target, value = node.target, node.value
            if not isinstance(target, ast.Name) or value is None:
                continue
            empty = (isinstance(value, ast.Dict) and not value.keys) or (
                isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                and value.func.id in ("dict", "set") and not value.args)
            if empty:
                found.add((module, target.id))
    return frozenset(found)


def test_every_module_cache_is_in_the_memo_or_listed():
    assert sorted(_module_caches() - set(OUTSIDE_MEMO)) == []


def test_the_cache_finder_finds_a_cache():
    caches = _module_caches()
    assert ("gpumcmc.random._gamma", "_counters") in caches
    assert ("gpumcmc.random._gamma", "_plans") not in caches  # in the memo


@pytest.mark.parametrize("module, old, knob", OLD_NAMES, ids=[f"{m.__name__}.{o}" for m, o, _ in OLD_NAMES])
def test_old_names_read_and_set_the_knob(module, old, knob, monkeypatch):
    assert getattr(module, old) == getattr(config, knob) == Config._DEFAULTS[knob]
    monkeypatch.setattr(module, old, "changed")
    assert getattr(config, knob) == "changed"
    monkeypatch.undo()
    assert getattr(config, knob) == Config._DEFAULTS[knob]
    with config.override(**{knob: "other"}):
        assert getattr(module, old) == "other"
    assert getattr(module, old) == Config._DEFAULTS[knob]


def test_every_knob_has_an_old_name_or_is_new():
    assert {k for _, _, k in OLD_NAMES} | NEW_KNOBS == set(Config._DEFAULTS)
    assert not NEW_KNOBS & {k for _, _, k in OLD_NAMES}


def test_an_unknown_knob_is_refused():
    with pytest.raises(AttributeError, match="no tuning knob 'gamma_chunk'.*gamma_twin_chunk"):
        config.gamma_chunk = 4
    with pytest.raises(AttributeError, match="no tuning knob"):
        config.gamma_chunk
    with pytest.raises(AttributeError, match="no tuning knob"):
        with config.override(gamma_chunk=4):
            pass
    assert repr(config) == "Config()"


def test_override_restores_after_an_exception():
    with pytest.raises(RuntimeError):
        with config.override(gamma_twin_chunk=64, dirichlet_chunk=512) as c:
            assert c is config and repr(c) == "Config(gamma_twin_chunk=64, dirichlet_chunk=512)"
            raise RuntimeError
    assert config.gamma_twin_chunk == 1 << 16 and config.dirichlet_chunk == 2048


def test_a_knob_changes_the_twin_path_not_the_draws():
    """The knobs reach the code that reads them: the NumPy gamma twin in chunks of 64 elements (many
    chunks) gives the same draws as in one chunk; categorical's twin likewise, in chunks of 64 rows of 40
    (300 rows: 4 chunks of 64 and one of 44, where the default knob takes them in one)."""
    rng = np.random.default_rng(0)
    a = rng.uniform(0.1, 5.0, 1000)
    w = rng.random((300, 40))
    calls, rows = [], []
    real, draws = _gamma._Trial0, {f: getattr(discrete, f) for f in ("prefix_draw", "butterfly_draw")}

    def counting(*args):
        calls.append(args[-1])
        return real(*args)

    def chunk_counting(f):
        def draw(weights, *args):
            rows.append(len(weights))
            return draws[f](weights, *args)
        return draw

    with pytest.MonkeyPatch.context() as mp:
        for f in draws:
            mp.setattr(discrete, f, chunk_counting(f))
        ref = gpumcmc.random.default_rng(1, backend="numpy").gamma(a), gpumcmc.categorical(w, rng=2)
        assert rows == [300]
        rows.clear()
        with config.override(gamma_twin_chunk=64, categorical_twin_chunk=64 * 40):
            mp.setattr(_gamma, "_Trial0", counting)
            got = gpumcmc.random.default_rng(1, backend="numpy").gamma(a), gpumcmc.categorical(w, rng=2)
    assert calls and max(calls) == 64 + 2  # the twin's buffers were sized by the knob
    assert rows == [64, 64, 64, 64, 44]  # the categorical twin's chunks of rows, sized by its knob
    assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1])


def test_memo_clear_per_device():
    m = Memo()
    by_device = m.table("a")
    at_two = m.table("b", device_at=2)
    plain = m.table("c", device_at=None)
    assert m.table("a") is by_device and m.names() == ["a", "b", "c"]
    by_device.update({0: "x", 1: "y", (0, "k"): "z"})
    at_two.update({("k", 5, 0): 1, ("k", 5, 1): 2})
    plain.update({"p": 1})
    m.clear(0)
    assert by_device == {1: "y"} and at_two == {("k", 5, 1): 2} and plain == {}
    m.clear()
    assert by_device == at_two == {}
    with pytest.raises(ValueError, match="keyed by device at 0, not 2"):
        m.table("a", device_at=2)


def test_loader_clear_cache_clears_every_table():
    """_loader.clear_cache() used to forget compiled kernels but keep the launch plans made from them
    (gamma's and the categorical draws'); now it empties every table of the memo."""
    names = memo.names()
    assert {"loader.modules", "loader.functions", "gamma.plans", "gamma.dirichlet_plans",
            "discrete.plans"} <= set(names)
    tables = {n: memo._tables[n][0] for n in names}
    saved = {n: dict(t) for n, t in tables.items()}
    try:
        for t in tables.values():
            t["sentinel"] = 1
        _loader.clear_cache()
        assert all("sentinel" not in t for t in tables.values())
    finally:
        for n, t in tables.items():
            t.clear()
            t.update(saved[n])


def test_forward_keeps_other_attributes_and_refuses_a_missing_knob():
    mod = types.ModuleType("gpumcmc_test_forward")
    mod.other = 1
    sys.modules[mod.__name__] = mod
    try:
        _config.forward(mod.__name__, {"_A": "gamma_dyn_share"})
        _config.forward(mod.__name__, {"_B": "gamma_dyn_chunk"})
        assert (mod._A, mod._B, mod.other) == (8, 16, 1)
        mod.other = 2
        assert mod.other == 2 and config.gamma_dyn_share == 8
        with pytest.raises(AttributeError, match="no tuning knob"):
            _config.forward(mod.__name__, {"_C": "no_such_knob"})
    finally:
        del sys.modules[mod.__name__]
