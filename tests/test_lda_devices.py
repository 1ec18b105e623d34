"""LDA with the documents split over devices (``LDA(devices=...)``, ``sharded_gibbs``).

On the CPU the shards are ``Shards(n_virtual=k)``; on a GPU, ``one_device(k)``
runs the multi-GPU code path on one device.

What is exact and what is statistical. Every shard draws its tokens and
documents with the generator offsets and Philox counters that one device gives
them, with the fused z-draw (``fused=True``) and with ``categorical_products``
(``fused=False``, which takes ``counter_base`` / ``counter_index`` and puts each
token in one device's lane of a warp), so any number of shards gives one
device's draws, bit for bit: the tests compare them exactly, on NumPy (2 and 3
shards, with tiles of documents small enough that shards share tiles, and with
every method of ``categorical_products`` forced) and on the GPU
(``one_device(2)``, for each method that "auto" picks and each one forced).
They also compare two devices' phi draws with each other and the GPU with
NumPy for the same number of shards; and, statistically, the distribution
after a few sweeps of many independent chains, sharded and not, from different
seeds (two-sample KS tests at ALPHA each, 4 checks, so a false failure has
probability below 4e-4 for seeds chosen before looking).
"""

import contextlib
import functools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats
from scipy.optimize import linear_sum_assignment

from gpumcmc import backend as B
from gpumcmc.datasets import synthetic_lda_corpus
from gpumcmc.models import LDA
from gpumcmc.models import lda as L
from gpumcmc.random import _gamma, default_rng
from gpumcmc.shards import Shards

from conftest import ALPHA


def _corpus(M=300, V=200, K=5, length=100, seed=1):
    r, c, theta, phi = synthetic_lda_corpus(M, V, doc_length=length, n_components=K, topic_concentration=0.05,
                                            random_state=seed, backend="numpy")
    X = sp.csr_matrix((np.ones(r.size), (r, c)), shape=(M, V))
    return X, phi


def _tv_matched(a, b):
    tv = 0.5 * np.abs(a[:, None, :] - b[None]).sum(-1)
    i, j = linear_sum_assignment(tv)
    return tv[i, j]


def _sweeps(backend, shards, X, K, C, n, seed=3, dtype="float32", **kw):
    """State after ``n`` sweeps: ``devices=None`` when ``shards`` is None, else the sharded sampler."""
    xp = B.get_backend(backend)
    rng = default_rng(seed, backend=backend)
    if shards is None:
        rows, cols, M, V = L.tokens_from(X, xp)
        data, state = L.init(rng, rows, cols, M, V, K, 0.3, 0.2, dtype, burn_in=1, n_chains=C, **kw)
        for _ in range(n):
            state, _ = L.step(rng, state, data)
        return state, rng
    rows, cols, M, V = L.tokens_from(X, np)
    _, parts = L.shard_corpus(rows, cols, M, shards)
    with shards.on(0):
        alg, state = _init_sharded(rng, parts, shards, V, K, dtype, burn_in=1, n_chains=C, **kw)
        for _ in range(n):
            state, _ = alg.step(rng, state)
    return L.LDAShardedState.of(state), rng


def _init_sharded(rng, parts, shards, V, K, dtype="float32", burn_in=0, n_chains=1, **kw):
    """``(algorithm, state)``: :func:`sharded_gibbs` started on ``parts`` (alpha = 0.3, beta = 0.2)."""
    alg = L.sharded_gibbs(shards)
    datas = L.shard_data(parts, shards, V, K, 0.3, 0.2, dtype, burn_in=burn_in, **kw)
    return alg, alg.init(rng, datas, K, dtype, n_chains=n_chains)


class _TwoHosts(Shards):
    """Two NumPy shards that count as two devices: each draws its own phi (as two GPUs do)."""

    def __init__(self):
        super().__init__(n_virtual=2)
        self.devices = ["host0", "host1"]

    def on(self, i):
        return contextlib.nullcontext()


@pytest.mark.parametrize("C", [1, 2])
def test_one_shard_is_one_device(C):
    X, _ = _corpus(M=40, V=30, K=3, length=25, seed=2)
    a, ra = _sweeps("numpy", None, X, 3, C, 4)
    b, rb = _sweeps("numpy", Shards(n_virtual=1), X, 3, C, 4)
    np.testing.assert_array_equal(a.theta, b.theta[0])
    np.testing.assert_array_equal(a.theta_sum, b.theta_sum[0])
    np.testing.assert_array_equal(L._phi_store(a.phi), b.phi[0])
    np.testing.assert_array_equal(L._phi_store(a.phi_sum), b.phi_sum[0])
    assert ra.offset == rb.offset and b.it == 4


def test_estimator_one_shard_is_one_device():
    X, _ = _corpus(M=40, V=30, K=3, length=25, seed=2)
    kw = dict(n_iter=6, burn_in=4, monitor_every=3, random_state=1, progress=False, n_chains=2)
    a = LDA(3, backend="numpy", **kw).fit(X)
    b = LDA(3, devices=Shards(n_virtual=1), **kw).fit(X)
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.doc_topic_, b.doc_topic_)
    np.testing.assert_allclose(a.loglik_traces_, b.loglik_traces_, rtol=1e-12)
    assert b.n_shards_ == 1 and b.best_chain_ == a.best_chain_


def _assert_one_device(a, ra, b, rb, to_host=np.asarray):
    """The sharded state ``b`` holds one device's ``a``, bit for bit, and the generators stand alike."""
    np.testing.assert_array_equal(to_host(a.theta), np.concatenate([to_host(t) for t in b.theta], axis=1))
    np.testing.assert_array_equal(to_host(a.theta_sum), np.concatenate([to_host(t) for t in b.theta_sum], axis=1))
    for p in b.phi:
        np.testing.assert_array_equal(to_host(L._phi_store(a.phi)), to_host(p))
    np.testing.assert_array_equal(to_host(L._phi_store(a.phi_sum)), to_host(b.phi_sum[0]))
    assert ra.offset == rb.offset


def _force_method(monkeypatch, method):
    """Make the two-kernel z-draw of the LDA ops call categorical_products with ``method``; returns the list
    of methods the patched function was called with, which a test checks is not empty (the patch reached the
    module that draws)."""
    from gpumcmc.models.lda import ops    # the module that calls it (a patch of the package is not seen)

    calls = []
    monkeypatch.setattr(ops, "categorical_products", functools.partial(_with_method, ops.categorical_products, method,
                                                                       calls))
    return calls


def _with_method(_fn, _method, _calls, *args, **kw):
    kw["method"] = _method
    _calls.append(_method)
    return _fn(*args, **kw)


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("W", [2, 3])
@pytest.mark.parametrize("C, dtype, K, tile", [(1, "float32", 3, None), (2, "float32", 4, 3), (2, "float64", 3, 7),
                                               (1, "float64", 4, 1)])
def test_shards_are_one_device(W, C, dtype, K, tile, fused):
    """2 and 3 shards draw what one device draws (theta, phi, their sums), bit for bit, with either z-draw.

    ``tile`` documents per tile of token_order (None: the default cache, one tile for this corpus), so
    that shards share tiles with their neighbours and their tokens interleave in one device's stream."""
    X, _ = _corpus(M=41, V=30, K=3, length=25, seed=2)
    kw = dict(fused=fused)
    if tile:
        kw["cache_bytes"] = 2 * K * np.dtype(dtype).itemsize * tile
    a, ra = _sweeps("numpy", None, X, K, C, 3, dtype=dtype, **kw)
    b, rb = _sweeps("numpy", Shards(n_virtual=W), X, K, C, 3, dtype=dtype, **kw)
    _assert_one_device(a, ra, b, rb)


@pytest.mark.parametrize("K", [512, 5])
def test_estimator_shards_are_one_device(K):
    """LDA(devices=...) at K = 512, alpha = 1/K (the fused z-draw by default) and K = 5 (the two-kernel
    one): one device's fit."""
    X, _ = _corpus(M=30, V=40, K=3, length=20, seed=6)
    kw = dict(n_iter=2, burn_in=1, monitor_every=1, random_state=4, progress=False, n_chains=2)
    a = LDA(K, backend="numpy", **kw).fit(X)
    b = LDA(K, devices=Shards(n_virtual=3), **kw).fit(X)
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.doc_topic_, b.doc_topic_)
    np.testing.assert_allclose(a.loglik_traces_, b.loglik_traces_, rtol=1e-12)   # summed over shards


@pytest.mark.parametrize("method", ["transpose", "butterfly", "warp"])
def test_shards_are_one_device_each_method(monkeypatch, method):
    """The two-kernel z-draw with each method of categorical_products forced (NumPy's own is "prefix"):
    3 shards sharing tiles draw what one device draws (the butterfly's twin puts each token in one
    device's lane)."""
    calls = _force_method(monkeypatch, method)
    X, _ = _corpus(M=41, V=30, K=3, length=25, seed=2)
    kw = dict(fused=False, cache_bytes=2 * 40 * 4 * 4)
    a, ra = _sweeps("numpy", None, X, 40, 2, 2, **kw)
    b, rb = _sweeps("numpy", Shards(n_virtual=3), X, 40, 2, 2, **kw)
    _assert_one_device(a, ra, b, rb)
    assert calls


@pytest.mark.parametrize("corpus_on_device", [False, True])
def test_tile_tokens_sort_as_lexsort(xp, corpus_on_device):
    """A tile's tokens of documents [b, e), sorted on the shard's device, are where numpy.lexsort puts
    them (by word, then document): the indices one device's stream gives them, with the corpus on the
    host or on the device."""
    rs = np.random.default_rng(5)
    docs = np.sort(rs.integers(0, 60, 5000))
    words = rs.integers(0, 40, 5000)
    starts = np.concatenate([[0], np.cumsum(np.bincount(docs, minlength=60))])
    R, W = (xp.asarray(docs), xp.asarray(words)) if corpus_on_device else (docs, words)
    for lo, hi, b, e in [(0, 20, 5, 60), (20, 40, 20, 33), (40, 60, 0, 52), (0, 60, 0, 60)]:
        a, z = starts[lo], starts[hi]
        r = docs[a:z][np.lexsort((docs[a:z], words[a:z]))]
        want = a + np.flatnonzero((r >= b) & (r < e))
        got = L.sharded._tile_tokens(R, W, starts, lo, hi, b, e, xp)
        assert isinstance(got, np.ndarray) and got.dtype == np.int64
        np.testing.assert_array_equal(got, want)


def test_which_shards_are_placed():
    """Every shard of several is placed in one device's stream, with either z-draw; one shard is not."""
    X, _ = _corpus(M=40, V=30, K=3, length=25, seed=2)
    rows, cols, M, V = L.tokens_from(X, np)
    _, parts = L.shard_corpus(rows, cols, M, Shards(n_virtual=3))
    for fused in (False, True):
        datas = L.shard_data(parts, Shards(n_virtual=3), V, 3, 0.3, 0.2, fused=fused, cache_bytes=2 * 3 * 4 * 3)
        assert all(d.place is not None for d in datas)
        # Every token has one place in the whole stream.
        g = np.concatenate([L._token_counters(d, 1) for d in datas])
        np.testing.assert_array_equal(np.sort(g), np.arange(rows.size))
        assert any(d.place.n_head for d in datas) and any(d.place.n_tail for d in datas)
    _, one = L.shard_corpus(rows, cols, M, Shards(n_virtual=1))
    datas = L.shard_data(one, Shards(n_virtual=1), V, 3, 0.3, 0.2)
    assert datas[0].place is None
    # Parts without the corpus' layout (hand-made triples) cannot be placed.
    triples = [tuple(p[:3]) for p in parts]
    with pytest.raises(TypeError, match="shard_corpus"):
        L.shard_data(triples, Shards(n_virtual=3), V, 3, 0.3, 0.2)


@pytest.mark.parametrize("K", [3, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dirichlet_start_row(K, dtype):
    """dirichlet_numpy(alpha[s:], start_row=s) is rows s.. of the whole batch's draw (odd s K included)."""
    a = (np.random.default_rng(0).gamma(0.5, size=(37, K)) + 0.01).astype(dtype)
    full = _gamma.dirichlet_numpy(a, (1, 2), 7)
    for s in (1, 2, 5, 36):
        np.testing.assert_array_equal(_gamma.dirichlet_numpy(np.ascontiguousarray(a[s:]), (1, 2), 7, start_row=s),
                                      full[s:])


@pytest.mark.parametrize("W", [2, 3])
def test_shards_draw_one_phi_and_are_deterministic(W):
    X, _ = _corpus(M=40, V=30, K=3, length=25, seed=2)
    a, ra = _sweeps("numpy", Shards(n_virtual=W), X, 3, 2, 3)
    b, rb = _sweeps("numpy", Shards(n_virtual=W), X, 3, 2, 3)
    for x, y in zip(a.theta + a.phi + a.phi_sum, b.theta + b.phi + b.phi_sum):
        np.testing.assert_array_equal(x, y)
    assert ra.offset == rb.offset
    assert sum(t.shape[1] for t in a.theta) == 40
    # The shards draw one phi, one device's (from the counts of every shard), and the generator moves as
    # one device's does, whatever the number of shards.
    one, r1 = _sweeps("numpy", Shards(n_virtual=1), X, 3, 2, 3)
    for p, p_sum in zip(a.phi, a.phi_sum):
        np.testing.assert_array_equal(p, one.phi[0])
        np.testing.assert_array_equal(p_sum, one.phi_sum[0])
    np.testing.assert_array_equal(np.concatenate(a.theta, axis=1), one.theta[0])
    assert ra.offset == r1.offset


def test_two_devices_draw_the_same_phi():
    """Where shards sit on different devices each draws phi itself, with one key: the same values."""
    X, _ = _corpus(M=40, V=30, K=3, length=25, seed=2)
    a, ra = _sweeps("numpy", Shards(n_virtual=2), X, 3, 2, 3)
    b, rb = _sweeps("numpy", _TwoHosts(), X, 3, 2, 3)
    assert b.phi[0] is not b.phi[1]
    for p in (b.phi[0], b.phi[1]):
        np.testing.assert_array_equal(p, a.phi[0])
    np.testing.assert_array_equal(b.phi_sum[1], a.phi_sum[0])
    for x, y in zip(a.theta, b.theta):
        np.testing.assert_array_equal(x, y)
    assert ra.offset == rb.offset


def test_counts_summed_over_shards_are_the_corpus_counts():
    """Every token is counted once: the all-reduced n_wk sums to the corpus' word frequencies."""
    X, _ = _corpus(M=30, V=20, K=3, length=20, seed=5)
    sh = Shards(n_virtual=3)
    rows, cols, M, V = L.tokens_from(X, np)
    _, parts = L.shard_corpus(rows, cols, M, sh)
    rng = default_rng(0, backend="numpy")
    datas = L.shard_data(parts, sh, V, 3, 0.3, 0.2)
    state = L.LDAShardedState.of(L.sharded_gibbs(sh).init(rng, datas, 3, n_chains=2))
    nwks = []
    for i, d in enumerate(datas):
        _, nwk = L.zdraw_counts(default_rng(i, backend="numpy"), state.theta[i], state.phi[i], d)
        nwks.append(np.ascontiguousarray(nwk))
    total = sh.allreduce(nwks)[0].reshape(V, 2, 3)
    np.testing.assert_array_equal(total.sum(axis=2), np.repeat(np.bincount(cols, minlength=V)[:, None], 2, 1))


@pytest.mark.slow  # several seconds on 2 CPU cores
def test_sharded_chains_have_one_devices_distribution():
    """Many independent chains, 3 sweeps from the start: one device and 3 shards give one distribution
    (from different seeds, so this holds apart from the shards' counters)."""
    docs = [np.array([0, 0, 1, 2]), np.array([1, 1, 2]), np.array([0, 2, 2, 2, 1]), np.array([2, 0])]
    C = 400
    out = []
    for shards in (None, Shards(n_virtual=3)):
        s, _ = _sweeps("numpy", shards, docs, 2, C, 3, seed=8 if shards is None else 9, dtype="float64")
        theta = s.theta if shards is None else np.concatenate(s.theta, axis=1)
        phi = s.phi if shards is None else s.phi[0].transpose(1, 0, 2)
        out.append((theta[:, 0, 0], theta[:, 3, 1], phi[:, 0, 0], phi[:, 2, 1]))
    for a, b in zip(*out):
        assert stats.ks_2samp(a, b).pvalue > ALPHA


@pytest.mark.slow  # several seconds on 2 CPU cores
def test_planted_topics_recovered_on_shards():
    X, phi = _corpus()
    m = LDA(5, n_iter=30, burn_in=60, monitor_every=10, random_state=0, progress=False,
            devices=Shards(n_virtual=2)).fit(X)
    tv = _tv_matched(m.components_, phi)
    assert tv.max() < 0.1, tv          # as the one-device test: recovered topics lie within ~0.03
    assert m.doc_topic_.shape == (300, 5) and np.allclose(m.doc_topic_.sum(1), 1, atol=1e-4)
    it, ll = m.loglik_trace_
    one = LDA(5, n_iter=30, burn_in=60, monitor_every=10, random_state=0, progress=False, backend="numpy").fit(X)
    # The shards' fit is one device's: its averages bit for bit, so the methods that read them give one
    # device's values, and the log-likelihood trace (summed over the shards) equals one device's to rounding.
    np.testing.assert_array_equal(m.components_, one.components_)
    np.testing.assert_array_equal(m.doc_topic_, one.doc_topic_)
    np.testing.assert_allclose(ll, one.loglik_trace_[1], rtol=1e-6)
    np.testing.assert_array_equal(m.transform(X[:5]), one.transform(X[:5]))
    assert m.perplexity(X) == one.perplexity(X)


def test_document_bounds():
    rows = np.repeat(np.arange(6), [5, 0, 1, 9, 0, 5])
    b = L.document_bounds(rows, 6, 2)
    assert b.tolist()[0] == 0 and b.tolist()[-1] == 6
    per = [np.isin(rows, np.arange(b[r], b[r + 1])).sum() for r in range(2)]
    assert sum(per) == rows.size and min(per) > 0
    b3 = L.document_bounds(rows, 6, 3)
    assert np.all(np.diff(b3) > 0)
    assert all(np.isin(rows, np.arange(b3[r], b3[r + 1])).sum() > 0 for r in range(3))
    # Balanced by tokens, not by documents: one long document gets a shard of its own.
    rows = np.repeat(np.arange(5), [100, 1, 1, 1, 1])
    assert L.document_bounds(rows, 5, 2).tolist() == [0, 1, 5]
    with pytest.raises(ValueError, match="cannot be split over 4"):
        L.document_bounds(np.array([0, 0, 2]), 3, 4)


def test_shard_corpus_unsorted_tokens():
    rows = np.array([3, 0, 1, 3, 0, 2, 1])
    cols = np.array([0, 1, 2, 3, 4, 5, 6])
    b, parts = L.shard_corpus(rows, cols, 4, Shards(n_virtual=2))
    got = sorted((int(r) + int(b[i]), int(c)) for i, p in enumerate(parts) for r, c in zip(p.rows, p.cols))
    assert got == sorted(zip(rows.tolist(), cols.tolist()))
    assert sum(p.n_docs for p in parts) == 4
    assert [p.first_doc for p in parts] == b[:-1].tolist()


def test_allreduce_bytes():
    assert L.allreduce_bytes(1000, 64, 2) == 4 * 1000 * 64 * 2


def test_the_old_sharded_names_say_where_they_went():
    for name in ("init_sharded", "make_sharded_step"):
        with pytest.raises(AttributeError, match="sharded_gibbs"):
            getattr(L, name)()


def test_sharded_loglik_sums_per_shard_values():
    """sharded_loglik, kept for per-shard sums of the caller's own, adds them over the shards; the sweep's
    info.loglik needs no such sum (the step all-reduces it with the counts)."""
    sh = Shards(n_virtual=3)
    got = L.sharded_loglik([np.array([1.0, 2.0]), np.array([0.5, 0.25]), np.array([-1.0, 4.0])], sh)
    np.testing.assert_array_equal(got, [0.5, 6.25])


@pytest.mark.parametrize("devices, err, match", [
    ("gpus", ValueError, "'all'"),
    (True, TypeError, "devices must be"),
    ([], ValueError, "empty"),
    ([0, 0], ValueError, "twice"),
    (-1, ValueError, ">= 0"),
    ([0, -2], ValueError, ">= 0"),
    (1.5, TypeError, "devices must be"),
    ([0, 1.5], TypeError, "integer GPU ids"),
    ({"a": 1}, TypeError, "integer GPU ids"),
])
def test_bad_devices(devices, err, match):
    X = np.ones((4, 5), np.int64)
    with pytest.raises(err, match=match):
        LDA(2, n_iter=1, burn_in=0, progress=False, devices=devices).fit(X)


def test_devices_conflicts():
    X = np.ones((4, 5), np.int64)
    kw = dict(n_iter=1, burn_in=0, progress=False)
    with pytest.raises(ValueError, match="backend='numpy'"):
        LDA(2, backend="numpy", devices=[0], **kw).fit(X)
    with pytest.raises(ValueError, match="disagrees"):
        LDA(2, backend="cupy", devices=Shards(n_virtual=2), **kw).fit(X)
    with pytest.raises(ValueError, match="cannot be split over 5"):
        LDA(2, devices=Shards(n_virtual=5), **kw).fit(X)
    with pytest.raises(ValueError, match="checkpoint"):
        LDA(2, devices=Shards(n_virtual=2), checkpoint="x.npz", **kw).fit(X)
    with pytest.raises(ValueError, match="graph=True"):
        LDA(2, devices=Shards(n_virtual=2), graph=True, **kw).fit(X)


# --------------------------------------------------------------------------- GPU


def test_gpu_one_shard_is_one_device(cp):
    from gpumcmc.shards import one_device

    X, _ = _corpus(M=60, V=50, K=4, length=30, seed=4)
    for kw in ({}, {"fused": True, "sparse": True}):
        a, ra = _sweeps("cupy", None, X, 8, 2, 3, **kw)
        b, rb = _sweeps("cupy", one_device(1), X, 8, 2, 3, **kw)
        np.testing.assert_array_equal(cp.asnumpy(a.theta), cp.asnumpy(b.theta[0]))
        np.testing.assert_array_equal(cp.asnumpy(L._phi_store(a.phi_sum)), cp.asnumpy(b.phi_sum[0]))
        assert ra.offset == rb.offset


@pytest.mark.parametrize("fused, K, dtype, tile", [
    (True, 8, "float32", None), (True, 3, "float32", 3), (True, 4, "float64", 5),
    (False, 8, "float32", None), (False, 3, "float32", 3), (False, 4, "float64", 5),     # "auto": prefix
    (False, 40, "float32", 2), (False, 40, "float32", None),                               # butterfly
    (False, 130, "float32", 3), (False, 40, "float64", 4),                                 # warp
])
def test_gpu_shards_are_one_device(cp, fused, K, dtype, tile):
    """``one_device(2)``: one device's draws on the GPU, bit for bit, with the fused z-draw and with
    categorical_products at each method "auto" picks (K = 3 and 51 documents put odd start rows in the
    Dirichlet of theta; small tiles give the shards heads and tails)."""
    from gpumcmc.shards import one_device

    X, _ = _corpus(M=51, V=50, K=4, length=30, seed=4)
    kw = dict(fused=fused, sparse=fused)
    if tile:
        kw["cache_bytes"] = 2 * K * np.dtype(dtype).itemsize * tile
    a, ra = _sweeps("cupy", None, X, K, 2, 3, dtype=dtype, **kw)
    b, rb = _sweeps("cupy", one_device(2), X, K, 2, 3, dtype=dtype, **kw)
    _assert_one_device(a, ra, b, rb, cp.asnumpy)


@pytest.mark.parametrize("method", ["prefix", "transpose", "butterfly", "warp"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gpu_shards_are_one_device_each_method(cp, monkeypatch, method, dtype):
    """fused=False with each method of categorical_products forced, 3 shards sharing tiles (their heads and
    tails drawn through counter_index) and one sharing none: one device's draws, bit for bit."""
    from gpumcmc.shards import one_device

    calls = _force_method(monkeypatch, method)
    X, _ = _corpus(M=51, V=50, K=4, length=30, seed=4)
    for tile in (2, None):
        kw = dict(fused=False, sparse=False)
        if tile:
            kw["cache_bytes"] = 2 * 40 * np.dtype(dtype).itemsize * tile
        a, ra = _sweeps("cupy", None, X, 40, 2, 2, dtype=dtype, **kw)
        b, rb = _sweeps("cupy", one_device(3), X, 40, 2, 2, dtype=dtype, **kw)
        _assert_one_device(a, ra, b, rb, cp.asnumpy)
    assert calls


@pytest.mark.parametrize("K", [3, 4, 256])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_dirichlet_start_row(cp, K, dtype):
    """dirichlet_cupy(alpha[s:], start_row=s): rows s.. of the whole batch's draw, bit for bit, whichever
    kernel the whole batch took (the twin shifts alike: test_dirichlet_start_row; GPU against twin at
    start_row 0: test_dirichlet_beta.py)."""
    a = cp.asarray((np.random.default_rng(1).gamma(0.3, size=(301, K)) + 0.01).astype(dtype))
    full = _gamma.dirichlet_cupy(a, (3, 4), 9)
    for s in (1, 2, 37, 300):
        part = _gamma.dirichlet_cupy(cp.ascontiguousarray(a[s:]), (3, 4), 9, start_row=s)
        np.testing.assert_array_equal(cp.asnumpy(part), cp.asnumpy(full[s:]))
        logp = _gamma.dirichlet_cupy(cp.ascontiguousarray(a[s:]), (3, 4), 9, log=True, start_row=s)
        np.testing.assert_array_equal(cp.asnumpy(logp), cp.asnumpy(_gamma.dirichlet_cupy(a, (3, 4), 9, log=True)[s:]))


@pytest.mark.parametrize("fused", [False, True])
def test_gpu_shards_match_numpy_shards(cp, fused):
    """``one_device(2)`` on the GPU and ``Shards(n_virtual=2)`` on NumPy: the same draws (float64, as the
    one-device CPU/GPU test: the prefix sums add in another order, which moves a draw only near a tie)."""
    from gpumcmc.shards import one_device

    X, _ = _corpus(M=50, V=60, K=4, length=40, seed=4)
    kw = dict(fused=fused, sparse=fused)
    g, _ = _sweeps("cupy", one_device(2), X, 4, 2, 2, dtype="float64", **kw)
    c, _ = _sweeps("numpy", Shards(n_virtual=2), X, 4, 2, 2, dtype="float64", **kw)
    for x, y in zip(g.theta + g.phi_sum, c.theta + c.phi_sum):
        np.testing.assert_allclose(cp.asnumpy(x), y, rtol=1e-6, atol=1e-12)


def test_gpu_fit_one_device_two_shards(cp):
    from gpumcmc.shards import one_device

    X, phi = _corpus()
    m = LDA(5, n_iter=30, burn_in=60, monitor_every=10, random_state=0, progress=False,
            devices=one_device(2)).fit(X)
    assert _tv_matched(m.components_, phi).max() < 0.1
    assert m.n_shards_ == 2 and m.doc_topic_.shape == (300, 5)
    assert B.is_cupy_array(m.phi_)
    assert m.transform(X[:4]).shape == (4, 5)


def test_gpu_bad_device_id(cp):
    with pytest.raises(ValueError, match="no GPU with id"):
        LDA(2, n_iter=1, burn_in=0, progress=False, devices=[0, 999]).fit(np.ones((4, 5), np.int64))


# -- the log-likelihood summed by the z-draw, over shards -------------------------------------------------

def _sharded_lls(backend, shards, X, K, C, n, dtype="float32", **kw):
    """``(state, rng, lls)``: :func:`_sweeps` with ``loglik=True``; ``lls[i]`` is sweep i's (C,) sum over
    every shard."""
    rng = default_rng(3, backend=backend)
    rows, cols, M, V = L.tokens_from(X, np)
    _, parts = L.shard_corpus(rows, cols, M, shards)
    lls = []
    with shards.on(0):
        alg, state = _init_sharded(rng, parts, shards, V, K, dtype, burn_in=1, n_chains=C, **kw)
        for _ in range(n):
            state, info = alg.step(rng, state, loglik=True)
            lls.append(B.to_host(info.loglik))     # summed over the shards by the sweep
    return L.LDAShardedState.of(state), rng, lls


def _one_device_lls(backend, X, K, C, n, dtype="float32", **kw):
    xp = B.get_backend(backend)
    rng = default_rng(3, backend=backend)
    rows, cols, M, V = L.tokens_from(X, xp)
    data, state = L.init(rng, rows, cols, M, V, K, 0.3, 0.2, dtype, burn_in=1, n_chains=C, **kw)
    lls = []
    for _ in range(n):
        th, ph = B.to_host(state.theta).astype(np.float64), B.to_host(L._phi_store(state.phi)).astype(np.float64)
        lls.append([float(L.log_likelihood(th[c], ph[:, c], B.to_host(data.rows), B.to_host(data.cols)))
                    for c in range(C)])
        state, _ = L.step(rng, state, data)
    return state, rng, np.array(lls)


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("W, C", [(2, 1), (3, 2)])
def test_sharded_loglik_is_one_devices_log_likelihood(W, C, fused):
    """Shards with loglik=True: one device's draws, bit for bit, and the shards' sums add up to
    log_likelihood of the state each sweep started from (tiles shared between shards)."""
    X, _ = _corpus(M=41, V=30, K=3, length=25, seed=2)
    kw = dict(fused=fused, cache_bytes=2 * 4 * 4 * 3)
    a, ra, ref = _one_device_lls("numpy", X, 4, C, 3, **kw)
    b, rb, lls = _sharded_lls("numpy", Shards(n_virtual=W), X, 4, C, 3, **kw)
    _assert_one_device(a, ra, b, rb)
    np.testing.assert_allclose(np.array(lls), ref, rtol=2e-6)


@pytest.mark.parametrize("fused, K, dtype, tile", [
    (True, 8, "float32", 3), (True, 4, "float64", 5),
    (False, 8, "float32", 3),                        # "auto": prefix
    (False, 40, "float32", 2),                       # butterfly (heads and tails through counter_index)
    (False, 130, "float32", 3), (False, 40, "float64", 4),   # warp
])
def test_gpu_sharded_loglik_is_one_devices_log_likelihood(cp, fused, K, dtype, tile):
    """``one_device(2)`` with loglik=True: one device's draws, bit for bit, and the shards' sums equal
    log_likelihood of the state each sweep started from, with each z-draw."""
    from gpumcmc.shards import one_device

    X, _ = _corpus(M=51, V=50, K=4, length=30, seed=4)
    kw = dict(fused=fused, sparse=fused, cache_bytes=2 * K * np.dtype(dtype).itemsize * tile)
    a, ra, ref = _one_device_lls("cupy", X, K, 2, 3, dtype=dtype, **kw)
    b, rb, lls = _sharded_lls("cupy", one_device(2), X, K, 2, 3, dtype=dtype, **kw)
    _assert_one_device(a, ra, b, rb, cp.asnumpy)
    np.testing.assert_allclose(np.array(lls), ref, rtol=2e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("W, C", [(2, 2), (3, 1)])
def test_sharded_log_likelihood_is_one_devices(xp, W, C):
    """sharded_log_likelihood of a sharded state (and of its per-field view) is, for each chain, one
    device's log_likelihood of the whole corpus under its equal state: a (C,) float64 host array, the
    shards' float64 sums added in another order (rtol 1e-12). On the GPU the shards are one_device(W)."""
    from gpumcmc.shards import one_device

    backend = "numpy" if xp is np else "cupy"
    shards = Shards(n_virtual=W) if xp is np else one_device(W)
    X, _ = _corpus(M=41, V=30, K=3, length=25, seed=2)
    a, _ = _sweeps(backend, None, X, 4, C, 2)
    rows, cols, M, V = L.tokens_from(X, xp)
    ref = [float(L.log_likelihood(a.theta[c], a.phi[c], rows, cols)) for c in range(C)]
    rng = default_rng(3, backend=backend)
    _, parts = L.shard_corpus(*L.tokens_from(X, np)[:2], M, shards)
    with shards.on(0):
        alg = L.sharded_gibbs(shards)
        datas = L.shard_data(parts, shards, V, 4, 0.3, 0.2, "float32", burn_in=1)
        state = alg.init(rng, datas, 4, "float32", n_chains=C)
        for _ in range(2):
            state, _ = alg.step(rng, state)
        got = L.sharded_log_likelihood(state, datas, shards)
        view = L.sharded_log_likelihood(L.LDAShardedState.of(state), datas, shards)
    assert isinstance(got, np.ndarray) and got.dtype == np.float64 and got.shape == (C,)
    np.testing.assert_array_equal(view, got)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
