"""LDA by uncollapsed Gibbs: planted topics, inputs, CPU/GPU agreement, estimator conventions.

The statistical checks use fixed seeds; each bound is loose enough that a
correct sampler misses it with probability far below ALPHA (tests/conftest.py).
"""

import functools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats
from scipy.optimize import linear_sum_assignment

from conftest import ALPHA
from gpumcmc import _validate
from gpumcmc import backend as B
from gpumcmc.datasets import load_reuters, synthetic_lda_corpus
from gpumcmc.models import LDA
from gpumcmc.models import lda as lda_mod
from gpumcmc.random import default_rng


def _corpus(M=300, V=200, K=5, length=100, seed=1):
    r, c, theta, phi = synthetic_lda_corpus(M, V, doc_length=length, n_components=K, topic_concentration=0.05,
                                            random_state=seed, backend="numpy")
    X = sp.csr_matrix((np.ones(r.size), (r, c)), shape=(M, V))
    return X, theta, phi


def _tv_matched(a, b):
    tv = 0.5 * np.abs(a[:, None, :] - b[None]).sum(-1)
    i, j = linear_sum_assignment(tv)
    return tv[i, j]


def test_planted_topics_recovered():
    X, theta, phi = _corpus()
    m = LDA(5, n_iter=30, burn_in=60, monitor_every=10, random_state=0, progress=False, backend="numpy").fit(X)
    tv = _tv_matched(m.components_, phi)
    # Planted topics are 0.59..0.84 apart in total variation; recovered ones are within ~0.03.
    assert tv.max() < 0.1, tv
    assert np.allclose(m.components_.sum(1), 1, atol=1e-4)
    it, ll = m.loglik_trace_
    assert ll[-1] > ll[0] and np.all(np.isfinite(ll))


@pytest.mark.slow  # several seconds on 2 CPU cores
def test_transform_perplexity_score_top_words():
    X, theta, phi = _corpus(M=120, V=80, K=3, length=60, seed=2)
    m = LDA(3, n_iter=20, burn_in=30, transform_iter=20, monitor_every=25, random_state=0, progress=False,
            backend="numpy")
    doc = m.fit_transform(X)
    assert doc.shape == (120, 3) and np.allclose(doc.sum(1), 1, atol=1e-4)
    new = m.transform(X[:10])
    assert new.shape == (10, 3) and np.allclose(new.sum(1), 1, atol=1e-4)
    # New theta agrees with the fitted one for the same documents (topics matched already by phi).
    assert np.abs(new - doc[:10]).sum(1).mean() < 0.5
    p = m.perplexity(X)
    assert 1 < p < 80  # uniform over 80 words gives 80
    assert np.isclose(m.score(X), -np.log(p) * X.sum(), rtol=1e-12)  # the same figure, two spellings
    # score is sum_d,w x_dw log sum_k theta_dk phi_kw, theta from transform (seeded: the same theta again),
    # phi the fitted topics: written out here, apart from the estimator's own code
    phi = m.components_ / m.components_.sum(1, keepdims=True)
    counts = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
    want = (counts * np.log(m.transform(X) @ phi)).sum()
    assert np.isclose(m.score(X), want, rtol=1e-5), (m.score(X), want)
    vocab = [f"w{i}" for i in range(80)]
    tw = m.top_words(vocab, 4)
    assert len(tw) == 3 and all(len(t) == 4 and t[0] in vocab for t in tw)
    assert type(tw[0][0]) is str  # plain str, which prints as 'w3' (np.str_ printed as np.str_('w3'))
    assert m.to_arviz().posterior["loglik_per_token"].shape[0] == 1


# top_words once raised an IndexError for a vocabulary shorter than the fitted one and took n=-1 as "all but
# the last word": a vocab of the wrong length and an n below 1 (or not an int) are refused, naming them.
def test_top_words_checks_vocab_and_n():
    m = LDA(2, n_iter=2, burn_in=0, random_state=0, progress=False, backend="numpy").fit(np.ones((3, 5), np.int64))
    with pytest.raises(ValueError, match=r"vocab must hold one word per column .*n_features_in_ = 5.*\(3,\)"):
        m.top_words(["a", "b", "c"], 2)
    with pytest.raises(ValueError, match="vocab must hold one word per column"):
        m.top_words(list("abcdef"), 2)
    for n in (0, -1):
        with pytest.raises(ValueError, match="n must be at least 1"):
            m.top_words(n=n)
    with pytest.raises(TypeError, match="n must be an integer"):
        m.top_words(n=2.5)
    assert [len(t) for t in m.top_words(list("abcde"), np.int64(2))] == [2, 2]
    assert [len(t) for t in m.top_words(n=None)] == [5, 5]  # None: every word


def test_inputs_agree():
    X, _, _ = _corpus(M=30, V=40, K=2, length=20, seed=3)
    dense = X.toarray().astype(np.int64)
    dense[0, -1] += 1  # a list of token ids infers V from the largest id
    X = sp.csr_matrix(dense)
    docs = [np.repeat(np.arange(40), dense[d]) for d in range(30)]
    kw = dict(n_iter=3, burn_in=2, random_state=5, progress=False, backend="numpy")
    a = LDA(2, **kw).fit(X).components_
    b = LDA(2, **kw).fit(dense).components_
    c = LDA(2, **kw).fit(docs).components_
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)


def test_rare_words_keep_their_posterior_mean_with_a_small_prior():
    """With topic_word_prior = 1e-6 a word that never occurs has E[phi_wk] >= beta / (n_k + V beta) in every
    topic, but the mean of the phi draws put it at exactly 0 (most draws of a Dirichlet entry of shape 1e-6
    underflow), and score() of held-out documents with that word came out near -3,645 for about -294
    (perplexity 6e28). The running sums now add each sweep's E[phi | n_wk] and E[theta | n_dk]."""
    rng = np.random.default_rng(0)
    X = rng.poisson(1.0, size=(80, 50))
    X[:, -1] = 0
    Xt = np.zeros((5, 50), int)
    Xt[:, :10] = 1
    Xt[:, -1] = 1
    beta = 1e-6
    m = LDA(n_components=5, topic_word_prior=beta, n_iter=100, burn_in=100, random_state=0, progress=False,
            backend="numpy", dtype="float64").fit(X)
    assert np.all(m.components_[:, -1] >= beta / (X.sum() + 50 * beta))
    np.testing.assert_allclose(m.components_.sum(axis=1), 1, rtol=1e-9)
    np.testing.assert_allclose(m.doc_topic_.sum(axis=1), 1, rtol=1e-9)
    assert -400 < m.score(Xt) < -250 and m.perplexity(Xt) < 1000


def test_empty_documents_take_the_prior():
    """A document with no tokens draws its topic shares from the prior Dir(alpha): each empty document's theta
    is one such draw, so each share is Beta(alpha, (K - 1) alpha) over the 2,000 empty documents (KS, 3
    checks at ALPHA; finite rows summing to one passed with theta set to its conditional mean, 1/K). Their
    doc_topic_, the posterior mean given the counts, is the prior's mean 1/K."""
    X = np.zeros((2002, 6), np.int64)
    X[0, :3] = 2
    X[2001, 3:] = 1
    m = LDA(3, doc_topic_prior=0.5, n_iter=1, burn_in=0, random_state=0, progress=False, backend="numpy")
    doc = m.fit_transform(X)
    theta = np.asarray(m.trace_.state.theta[m.best_chain_])
    assert np.all(np.isfinite(theta)) and np.allclose(theta.sum(1), 1, atol=1e-5)
    for k in range(3):
        assert stats.kstest(theta[1:2001, k].astype(np.float64), stats.beta(0.5, 1.0).cdf).pvalue > ALPHA, k
    np.testing.assert_allclose(doc[1:2001], 1 / 3, rtol=1e-6)


@pytest.mark.parametrize("X, match", [
    (np.array([[1, -1], [0, 2]]), "negative"),
    (np.array([[1.0, np.nan], [0, 2]]), "NaN"),
    (np.array([[1.5, 1], [0, 2]]), "non-integer"),
    (np.zeros((3, 4)), "empty corpus"),
    ([], "empty corpus"),
])
def test_bad_input(X, match):
    with pytest.raises(ValueError, match=match):
        LDA(2, n_iter=1, burn_in=0, progress=False, backend="numpy").fit(X)


@pytest.mark.parametrize("settings, match", [
    ({"n_components": 2.7}, "n_components"),
    ({"n_components": 0}, "n_components"),
    ({"n_iter": 0}, "n_iter"),
    ({"n_iter": 2.5}, "n_iter"),
    ({"burn_in": -1}, "burn_in"),
    ({"n_chains": 0}, "n_chains"),
    ({"start": "kmeans"}, "start"),
])
def test_bad_settings(settings, match):
    """Settings LDA once took silently (n_components=2.7 became 2; n_iter=0 gave all-zero components_)."""
    kw = {"n_components": 2, "n_iter": 2, "burn_in": 0, "progress": False, "backend": "numpy", **settings}
    with pytest.raises(ValueError, match=match):
        LDA(**kw).fit(np.ones((3, 4), np.int64))


# A prior that underflows in the dtype's Dirichlet draws (log(U) / prior overflows below 4.9e-38 in float32,
# 2.0e-307 in float64) once gave NaN in doc_topic_, components_ and the log-likelihood trace with no error
# (doc_topic_prior=1e-50 rounds to 0 in float32; 1e-39 is a subnormal): refused at fit, naming the prior.
@pytest.mark.parametrize("settings, match", [
    ({"doc_topic_prior": 1e-50}, r"doc_topic_prior=1e-50 is too small for dtype float32.*dtype='float64'"),
    ({"doc_topic_prior": 1e-39}, r"doc_topic_prior=1e-39 .*at least 4.9e-38"),
    ({"topic_word_prior": 1e-39}, r"topic_word_prior=1e-39 is too small for dtype float32"),
    ({"topic_word_prior": 1e-308, "dtype": "float64"}, r"topic_word_prior=1e-308 .*at least 2e-307"),
])
def test_priors_too_small_for_the_dtype_raise(settings, match):
    X = np.ones((4, 5), np.int64)
    X[0] = 0                                 # a document without tokens, whose theta the small prior made NaN
    with pytest.raises(ValueError, match=match):
        LDA(3, n_iter=2, burn_in=0, random_state=0, progress=False, backend="numpy", **settings).fit(X)
    ok = {k: (5e-38 if k.endswith("prior") else v) for k, v in settings.items()}   # just above: finite
    m = LDA(3, n_iter=2, burn_in=0, random_state=0, progress=False, backend="numpy", **ok).fit(X)
    assert np.isfinite(m.doc_topic_).all() and np.isfinite(m.components_).all()


def test_dense_lists_are_counts():
    """A count matrix given as nested lists is read as counts, one row a document (not as token ids)."""
    m = LDA(2, n_iter=2, burn_in=0, progress=False, backend="numpy", random_state=0).fit([[1, 0, 2, 0], [0, 1, 1, 3]])
    assert m.n_features_in_ == 4 and m.n_tokens_ == 8


def test_transform_vocabulary_mismatch():
    m = LDA(2, n_iter=2, burn_in=0, progress=False, backend="numpy").fit(np.ones((3, 5), np.int64))
    with pytest.raises(ValueError, match="same vocabulary"):
        m.transform(np.ones((2, 6), np.int64))


def test_sklearn_clone():
    from sklearn.base import clone

    m = LDA(7, doc_topic_prior=0.3, n_iter=11, random_state=2)
    c = clone(m)
    assert c.get_params() == m.get_params() and c is not m


def test_reuters_loads():
    X, vocab, titles = load_reuters()
    assert X.shape == (395, 4258) and len(vocab) == 4258 and len(titles) == 395


def test_uci_bow(tmp_path):
    import gzip

    from gpumcmc.datasets import load_uci_bow

    with gzip.open(tmp_path / "docword.t.txt.gz", "wt") as f:
        f.write("2\n3\n3\n1 1 2\n1 3 1\n2 2 4\n")
    (tmp_path / "vocab.t.txt").write_text("a\nb\nc\n")
    X, vocab = load_uci_bow(tmp_path / "docword.t.txt.gz", tmp_path / "vocab.t.txt")
    assert vocab == ["a", "b", "c"]
    np.testing.assert_array_equal(X.toarray(), [[2, 0, 1], [0, 4, 0]])


def test_counts_twin():
    rng = np.random.default_rng(0)
    rows, z = rng.integers(0, 7, 500), rng.integers(0, 4, 500)
    n = lda_mod.counts(rows, z, 7, 4)
    ref = np.zeros((7, 4), np.int64)
    np.add.at(ref, (rows, z), 1)
    np.testing.assert_array_equal(n, ref)


def _one_sweep(xp_name):
    X, _, _ = _corpus(M=50, V=60, K=4, length=40, seed=4)
    from gpumcmc import backend as B

    xp = B.get_backend(xp_name)
    rng = default_rng(11, backend=xp_name)
    rows, cols, M, V = lda_mod.tokens_from(X, xp)
    data, state = lda_mod.init(rng, rows, cols, M, V, 4, 0.25, 0.25, "float64")
    state, _ = lda_mod.step(rng, state, data)
    return B.to_host(state.theta), B.to_host(state.phi)


def test_cpu_gpu_one_sweep(cp):
    t0, p0 = _one_sweep("numpy")
    t1, p1 = _one_sweep("cupy")
    np.testing.assert_allclose(t1, t0, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(p1, p0, rtol=1e-6, atol=1e-12)


def test_counts_gpu(cp):
    rng = np.random.default_rng(0)
    rows, z = rng.integers(0, 1000, 100_000), rng.integers(0, 256, 100_000)
    got = lda_mod.counts(cp.asarray(rows), cp.asarray(z), 1000, 256)
    np.testing.assert_array_equal(cp.asnumpy(got), lda_mod.counts(rows, z, 1000, 256))


def test_fit_gpu_planted(cp):
    X, theta, phi = _corpus()
    m = LDA(5, n_iter=30, burn_in=60, random_state=0, progress=False, backend="cupy").fit(X)
    assert _tv_matched(m.components_, phi).max() < 0.1


def test_fused_counts_twin():
    rng = np.random.default_rng(1)
    rows, cols, z = rng.integers(0, 7, 400), rng.integers(0, 9, 400), rng.integers(0, 3, 400)
    ndk, nwk = lda_mod.fused_counts(rows, cols, z, 7, 9, 3)
    np.testing.assert_array_equal(ndk, lda_mod.counts(rows, z, 7, 3))
    np.testing.assert_array_equal(nwk, lda_mod.counts(cols, z, 9, 3))


@pytest.mark.parametrize("idx_dtype,z_dtype", [(np.int64, np.int64), (np.int32, np.int64), (np.int64, np.int32)])
def test_fused_counts_gpu(cp, idx_dtype, z_dtype):
    rng = np.random.default_rng(2)
    T, M, V, K = 300_000, 1000, 3000, 64
    rows, cols = rng.integers(0, M, T).astype(idx_dtype), rng.integers(0, V, T).astype(idx_dtype)
    z = rng.integers(0, K, T).astype(z_dtype)
    got = lda_mod.fused_counts(cp.asarray(rows), cp.asarray(cols), cp.asarray(z), M, V, K)
    ref = lda_mod.counts_twin(rows.astype(np.int64), cols.astype(np.int64), z, M, V, K)
    np.testing.assert_array_equal(cp.asnumpy(got[0]), ref[0])
    np.testing.assert_array_equal(cp.asnumpy(got[1]), ref[1])


def test_checkpoint_resume_bit_for_bit(tmp_path):
    from gpumcmc.sampling import run

    X, _, _ = _corpus(M=40, V=50, K=3, length=30, seed=6)
    rows, cols, M, V = lda_mod.tokens_from(X, np)

    def fresh():
        rng = default_rng(3, backend="numpy")
        data, state = lda_mod.init(rng, rows, cols, M, V, 3, 0.3, 0.3, "float64")
        return rng, functools.partial(lda_mod.step, data=data), state

    rng, step, state = fresh()
    straight = run(step, state, rng, 6, progress=False).state
    path = tmp_path / "lda.ckpt"

    class Stop(Exception):
        pass

    def stop_at_4(i, s, info):
        if i >= 4:
            raise Stop

    rng, step, state = fresh()
    with pytest.raises(Stop):
        run(step, state, rng, 6, progress=False, checkpoint=path, checkpoint_every=2, callback=stop_at_4)
    assert any(tmp_path.iterdir()), "no checkpoint was written before the interruption"
    rng, step, state = fresh()
    ran = []     # the sweeps after the checkpoint of sweep 2 (a run that started afresh gives the same state)
    resumed = run(step, state, rng, 6, progress=False, checkpoint=path, checkpoint_every=2,
                  callback=lambda i, s, info: ran.append(i)).state
    assert ran == [3, 4, 5, 6]
    np.testing.assert_array_equal(resumed.phi, straight.phi)
    np.testing.assert_array_equal(resumed.theta, straight.theta)


def _stamp(path):
    """Set ``path``'s modification time to one second after the epoch, which no save gives."""
    import os

    os.utime(path, ns=(10**9, 10**9))


def _stamped(path):
    return path.stat().st_mtime_ns == 10**9


def test_estimator_checkpoint(tmp_path):
    X, _, _ = _corpus(M=40, V=50, K=3, length=30, seed=7)
    kw = dict(n_iter=4, burn_in=2, random_state=1, progress=False, backend="numpy")
    a = LDA(3, **kw).fit(X).components_
    b = LDA(3, checkpoint=tmp_path / "c.ckpt", checkpoint_every=2, **kw).fit(X).components_
    # A fit resumed from a finished run's checkpoint makes no sweep, so it saves none: the file keeps the time
    # stamp set here (a save writes a new file). A fit that started afresh would give the same components_.
    _stamp(tmp_path / "c.ckpt")
    c = LDA(3, checkpoint=tmp_path / "c.ckpt", checkpoint_every=2, **kw).fit(X).components_
    assert _stamped(tmp_path / "c.ckpt")
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)


def _sparse_prior_start(backend):
    # K = 1024 with alpha = beta = 1/K in float32: about 90% of the Dirichlet components drawn from the
    # prior underflow to zero, so a start drawn from the prior leaves tokens with no topic of positive
    # weight (the z-draw raised "has no positive weight"). The start from random topics must not.
    from gpumcmc import backend as B

    M, V, K = 50, 2000, 1024
    rows, cols, _, _ = synthetic_lda_corpus(M, V, n_tokens=20000, n_components=10, random_state=1,
                                            backend=backend)
    rng = default_rng(0, backend=backend)
    data, state = lda_mod.init(rng, rows, cols, M, V, K, 1 / K, 1 / K, "float32")
    t0 = B.to_host(state.theta)
    assert (t0 == 0).mean() > 0.3          # the regime that broke the prior start
    for _ in range(3):
        state, _ = lda_mod.step(rng, state, data)
    theta, phi = B.to_host(state.theta[0]), B.to_host(state.phi[0])
    np.testing.assert_allclose(theta.sum(1), 1, rtol=1e-4)
    np.testing.assert_allclose(phi.sum(0), 1, rtol=1e-4)
    return t0, theta, phi


@pytest.mark.slow  # several seconds on 2 CPU cores
def test_tiny_priors_large_k_start():
    _sparse_prior_start("numpy")


@pytest.mark.gpu
def test_tiny_priors_large_k_start_gpu(cp):
    t_np, _, _ = _sparse_prior_start("numpy")
    t_cp, _, _ = _sparse_prior_start("cupy")
    np.testing.assert_allclose(t_cp, t_np, rtol=1e-5, atol=1e-30)


def test_transform_tiny_priors():
    X, _, _ = _corpus(M=60, V=300, K=5, length=50)
    m = LDA(256, n_iter=2, burn_in=1, transform_iter=2, random_state=0, progress=False, dtype="float32",
            backend="numpy").fit(X)
    out = m.transform(X[:10])
    assert np.all(np.isfinite(out)) and np.allclose(out.sum(1), 1, rtol=1e-4)


def _columns_draw(backend, conc, seed=3):
    from gpumcmc import backend as B

    xp = B.get_backend(backend)
    return B.to_host(lda_mod.dirichlet_columns(default_rng(seed, backend=backend), xp.asarray(conc)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dirichlet_columns_marginals(dtype):
    # Column k ~ Dir(a): each entry is Beta(a_i, sum(a) - a_i). 4,000 columns, KS per row at
    # level 1e-4 each (5 rows x 2 dtypes: false-failure budget 1e-3). In float32 the smallest shape
    # is 0.1: at 0.01 most of Beta(0.01, 24)'s mass lies below float32's smallest subnormal.
    a = np.array([0.01 if dtype == np.float64 else 0.1, 0.5, 1.0, 3.0, 20.0])
    conc = np.repeat(a[:, None], 4000, axis=1).astype(dtype)
    d = _columns_draw("numpy", conc)
    assert d.dtype == dtype
    np.testing.assert_allclose(d.sum(0), 1, rtol=1e-5)
    for i, ai in enumerate(a):
        p = stats.kstest(d[i].astype(np.float64), stats.beta(ai, a.sum() - ai).cdf).pvalue
        assert p > 1e-4, (i, ai, p)


def test_dirichlet_columns_tiny_shapes_finite():
    conc = np.full((2000, 64), 1 / 1024, np.float32)
    d = _columns_draw("numpy", conc)
    assert np.all(np.isfinite(d)) and np.allclose(d.sum(0), 1, rtol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_draws_from_counts_equal_the_draws_of_counts_plus_prior(xp, dtype):
    # The sweep's Dirichlet draws take int32 counts and the prior (the GPU forms count + prior as it reads
    # them): the draws of dirichlet_columns and Generator.dirichlet given the array counts + prior, bit for
    # bit, on both backends; the running sum adds the columns' posterior means given the counts,
    # (counts + prior) / (n + V prior), as written here. Counts of 0 and large ones, a prior below 1.
    from gpumcmc.models.lda import ops

    rs = np.random.default_rng(11)
    counts = rs.integers(0, 50, (700, 96)).astype(np.int32)
    counts[rs.random(counts.shape) < 0.7] = 0
    counts[::37, ::5] = 2**25 + 1
    c = xp.asarray(counts)
    prior = np.dtype(dtype).type(1 / 96)
    conc = xp.add(c, prior, dtype=dtype)
    name = "numpy" if xp is np else "cupy"
    total, keep = xp.asarray(rs.random(counts.shape).astype(dtype)), xp.ones((), dtype)
    got = ops.dirichlet_columns_counts(default_rng(4, backend=name), c, prior, total, keep)
    ref = ops.dirichlet_columns(default_rng(4, backend=name), conc)
    assert got[0].dtype == dtype and np.array_equal(B.to_host(got[0]), B.to_host(ref))
    t = dtype.type if hasattr(dtype, "type") else np.dtype(dtype).type
    den = counts.sum(axis=0, dtype=np.int64).astype(dtype) + t(counts.shape[0]) * prior
    mean = B.to_host(total) + np.ones((), dtype) * ((counts.astype(dtype) + prior) / den)
    assert got[1].dtype == dtype and np.array_equal(B.to_host(got[1]), mean)
    got = ops.dirichlet_counts(default_rng(5, backend=name), c, prior)
    ref = default_rng(5, backend=name).dirichlet(conc, dtype=dtype)
    assert got.dtype == dtype and np.array_equal(B.to_host(got), B.to_host(ref))
    assert np.allclose(B.to_host(got).sum(axis=1), 1, rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_theta_posterior_mean_sums_match_the_formula(xp, dtype):
    # theta's running sum adds (n + alpha) / (N + K alpha) per row, N the row's count (the GPU's lda_row_means
    # forms N as it reads the row): bit for bit the formula below on both backends, for rows of zeros, large
    # counts and K not a multiple of 32; keep = 0 leaves the sum as it was.
    from gpumcmc.models.lda import ops

    rs = np.random.default_rng(3)
    counts = rs.integers(0, 40, (513, 70)).astype(np.int32)
    counts[rs.random(counts.shape) < 0.6] = 0
    counts[5] = 0
    counts[::41, ::9] = 2**25 + 3
    total = rs.random(counts.shape).astype(dtype)
    prior = np.dtype(dtype).type(1 / 70)
    t = np.dtype(dtype).type
    den = counts.sum(axis=1, keepdims=True, dtype=np.int64).astype(dtype) + t(70) * prior
    for k in (1, 0):
        keep = np.full((), k, dtype)
        got = ops._accumulate_mean(xp.asarray(total), xp.asarray(counts), prior, 1, xp.asarray(keep))
        want = total + keep * ((counts.astype(dtype) + prior) / den)
        assert got.dtype == dtype and np.array_equal(B.to_host(got), want), k


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(3000, 96), (500, 1000), (7, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dirichlet_columns_gpu_matches_numpy(cp, dtype, shape):
    rs = np.random.default_rng(5)
    conc = (rs.integers(0, 4, shape) + 0.01).astype(dtype)
    # float32: log-gammas of shape 0.01 reach |log G| ~ 1e3, where one rounding step of the exponent
    # (the GPU's and NumPy's exp and log differ by an ulp or two) is a relative change of ~6e-5.
    tol = dict(rtol=2e-4 if dtype == np.float32 else 1e-12, atol=1e-30)
    np.testing.assert_allclose(_columns_draw("cupy", conc), _columns_draw("numpy", conc), **tol)
    total = rs.random((1, *shape)).astype(dtype)
    outs = []
    for backend, xp in (("cupy", cp), ("numpy", np)):
        rng = default_rng(3, backend=backend)
        out, tot = lda_mod.dirichlet_columns(rng, xp.asarray(conc), xp.asarray(total), xp.ones(1, dtype))
        outs.append((cp.asnumpy(out) if xp is cp else out, cp.asnumpy(tot) if xp is cp else tot))
    np.testing.assert_allclose(outs[0][0], outs[1][0], **tol)
    np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=tol["rtol"])


# -- the fused z-draw and counts; chains ---------------------------------------------------------------

def _zdraw_case(backend, K, C, dtype, sparse, seed=0, M=40, V=70, T=6000):
    """z and counts of one zdraw_counts call on ``backend`` for a fixed theta (sparse rows) and phi."""
    from gpumcmc import backend as B

    xp = B.get_backend(backend)
    rs = np.random.default_rng(seed)
    theta = rs.dirichlet(np.full(K, 0.05), size=C * M)
    theta[::2][theta[::2] < 1e-6] = 0            # every other row mostly zero, as small priors give
    theta[np.arange(C * M), rs.integers(0, K, C * M)] += 0.1
    phi = rs.dirichlet(np.full(V, 0.5), size=C * K).reshape(C, K, V).transpose(2, 0, 1)   # (V, C, K)
    rows, cols = np.sort(rs.integers(0, M, T)), rs.integers(0, V, T)
    order = np.lexsort((rows, cols))
    rows, cols = rows[order], cols[order]
    idx = np.int32 if backend == "cupy" else np.int64
    data = lda_mod.LDAData(xp.asarray(rows.astype(idx)), xp.asarray(cols.astype(idx)), M, V, 0.1, 0.1, 0,
                           True, sparse)
    zout = xp.empty(C * T, np.int64)
    ndk, nwk = lda_mod.zdraw_counts(default_rng(seed, backend=backend),
                                    xp.asarray(theta.reshape(C, M, K).astype(dtype)),
                                    xp.asarray(np.ascontiguousarray(phi).astype(dtype)), data, zout=zout)
    return B.to_host(zout), B.to_host(ndk), B.to_host(nwk), rows, cols, theta, phi


def test_zdraw_counts_chains_twin():
    # Chain c's tokens draw from chain c's theta and phi and are counted in chain c's tables.
    K, C, M, V = 6, 3, 4, 5
    for sparse in (False, True):
        z, ndk, nwk, rows, cols, _, _ = _zdraw_case("numpy", K, C, np.float64, sparse, M=M, V=V, T=300)
        T = rows.size
        ref_d, ref_w = lda_mod.counts_twin(np.concatenate([rows + c * M for c in range(C)]),
                                           np.concatenate([cols * C + c for c in range(C)]), z, C * M, V * C, K)
        np.testing.assert_array_equal(ndk, ref_d)
        np.testing.assert_array_equal(nwk, ref_w)
        assert ndk.sum() == C * T and (z >= 0).all()


def test_zdraw_counts_chain_topics():
    # Chain c puts all of theta on topic c: every token of chain c must get topic c.
    K, C, M, V, T = 4, 3, 5, 6, 200
    rs = np.random.default_rng(0)
    theta = np.zeros((C, M, K))
    for c in range(C):
        theta[c, :, c] = 1
    phi = rs.random((V, C, K)) + 0.1
    rows, cols = rs.integers(0, M, T), rs.integers(0, V, T)
    data = lda_mod.LDAData(rows, cols, M, V, 0.1, 0.1, 0)
    ndk, nwk = lda_mod.zdraw_counts(default_rng(1, backend="numpy"), theta, phi, data)
    ndk, nwk = ndk.reshape(C, M, K), nwk.reshape(V, C, K)
    for c in range(C):
        assert ndk[c, :, c].sum() == T and ndk[c].sum() == T
        assert nwk[:, c, c].sum() == T and nwk[:, c].sum() == T


@pytest.mark.slow  # several seconds on 2 CPU cores
def test_fit_chains():
    X, theta, phi = _corpus(M=200, V=150, K=4, length=80, seed=8)
    m = LDA(4, n_iter=20, burn_in=100, monitor_every=10, n_chains=3, random_state=0, progress=False,
            backend="numpy").fit(X)
    assert m.loglik_traces_.shape == (3, 12) and m.best_chain_ == int(np.argmax(m.loglik_traces_[:, -1]))
    assert _tv_matched(m.components_, phi).max() < 0.1
    s = m.trace_.state
    assert s.theta.shape == (3, 200, 4) and s.phi.shape == (3, 150, 4)
    # Independent chains: their draws differ, and each one's topics are the planted ones (up to order).
    assert not np.allclose(s.phi[0], s.phi[1])
    for c in range(3):
        assert _tv_matched(s.phi_sum[c].T / 20, phi).max() < 0.1
    # ArviZ: the kept sweeps' values in the posterior (burn-in in warmup_posterior), each draw's sweep
    idata = m.to_arviz()
    np.testing.assert_array_equal(idata.posterior["loglik_per_token"].values, m.loglik_traces_[:, 10:])
    np.testing.assert_array_equal(idata.warmup_posterior["loglik_per_token"].values, m.loglik_traces_[:, :10])
    np.testing.assert_array_equal(idata.sample_stats["sweep"].values, [[110, 120]] * 3)
    with pytest.raises(ValueError, match="n_chains"):
        LDA(2, n_chains=0, progress=False, backend="numpy").fit(X)


def test_chains_checkpoint_resume(tmp_path):
    X, _, _ = _corpus(M=40, V=50, K=3, length=30, seed=6)
    kw = dict(n_iter=4, burn_in=2, n_chains=2, random_state=1, progress=False, backend="numpy")
    a = LDA(3, **kw).fit(X)
    LDA(3, checkpoint=tmp_path / "c.ckpt", checkpoint_every=3, **kw).fit(X)
    _stamp(tmp_path / "c.ckpt")
    b = LDA(3, checkpoint=tmp_path / "c.ckpt", checkpoint_every=3, **kw).fit(X)
    assert _stamped(tmp_path / "c.ckpt")    # resumed at the end: no sweep, no save
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.loglik_traces_, b.loglik_traces_)


@pytest.mark.gpu
@pytest.mark.parametrize("K,C,sparse", [(64, 1, False), (64, 2, True), (1024, 1, True), (1024, 3, False),
                                        (1000, 2, True), (5, 2, True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_zdraw_fused_matches_twin(cp, K, C, sparse, dtype):
    zg, dg, wg, rows, cols, _, _ = _zdraw_case("cupy", K, C, dtype, sparse)
    zn, dn, wn, _, _, _, _ = _zdraw_case("numpy", K, C, dtype, sparse)
    # The GPU counts are those of its own z.
    T, M, V = rows.size, 40, 70
    ref_d, ref_w = lda_mod.counts_twin(np.concatenate([rows + c * M for c in range(C)]),
                                       np.concatenate([cols * C + c for c in range(C)]), zg, C * M, V * C, K)
    np.testing.assert_array_equal(dg, ref_d)
    np.testing.assert_array_equal(wg, ref_w)
    # And z agrees with the NumPy twin but where a prefix sum lies within rounding of the target: never
    # in float64 at these sizes, rarely in float32 (a prefix within ~K ulps of u * total).
    miss = np.mean(zg != zn)
    assert (zg >= 0).all()
    if dtype == np.float64:
        assert miss == 0
    else:
        assert miss < 2e-3, miss


@pytest.mark.gpu
@pytest.mark.parametrize("K,sparse", [(64, False), (1024, True), (1024, False)])
def test_zdraw_fused_chi_square(cp, K, sparse):
    # 200,000 tokens of one (document, word) pair: z ~ Cat(theta * phi). Chi-square over the topics with
    # expected count >= 5 (the rest pooled), level 1e-4 each (3 cases: false-failure budget 3e-4).
    rs = np.random.default_rng(3)
    theta = np.zeros((1, 1, K), np.float32)
    nz = rs.choice(K, 40, replace=False)
    theta[0, 0, nz] = rs.dirichlet(np.full(40, 0.7))
    phi = (rs.random((1, 1, K)) + 0.05).astype(np.float32)
    T = 200_000
    data = lda_mod.LDAData(cp.zeros(T, np.int32), cp.zeros(T, np.int32), 1, 1, 0.1, 0.1, 0, True, sparse)
    ndk, nwk = lda_mod.zdraw_counts(default_rng(9, backend="cupy"), cp.asarray(theta), cp.asarray(phi), data)
    obs = cp.asnumpy(ndk)[0].astype(float)
    np.testing.assert_array_equal(obs, cp.asnumpy(nwk)[0])
    p = theta[0, 0].astype(float) * phi[0, 0]
    p /= p.sum()
    assert obs[p == 0].sum() == 0
    e = p * T
    big = e >= 5
    o2 = np.append(obs[big], obs[~big].sum())
    e2 = np.append(e[big], e[~big].sum())
    keep = e2 > 0
    assert stats.chisquare(o2[keep], e2[keep]).pvalue > 1e-4


@pytest.mark.gpu
@pytest.mark.parametrize("fused,sparse,C", [(True, True, 1), (True, False, 2), (False, False, 2), (True, True, 2)])
def test_cpu_gpu_sweep_chains(cp, fused, sparse, C):
    from gpumcmc import backend as B

    X, _, _ = _corpus(M=50, V=60, K=4, length=40, seed=4)
    out = []
    for backend in ("numpy", "cupy"):
        xp = B.get_backend(backend)
        rng = default_rng(11, backend=backend)
        rows, cols, M, V = lda_mod.tokens_from(X, xp)
        data, state = lda_mod.init(rng, rows, cols, M, V, 4, 0.25, 0.25, "float64", n_chains=C, fused=fused,
                                   sparse=sparse)
        for _ in range(2):
            state, _ = lda_mod.step(rng, state, data)
        out.append((B.to_host(state.theta), B.to_host(state.phi), B.to_host(state.phi_sum)))
    for a, b in zip(*out):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-12)


def test_fused_default_rule():
    # The fused z-draw is init's default only at large K where theta is expected mostly zero.
    f = lda_mod._fused_default
    assert f(1024, 1 / 1024, "float32")                 # ~10% of the no-count entries non-zero
    assert not f(1024, 50 / 1024, "float32")            # theta dense
    assert not f(1024, 1 / 1024, "float64")             # ~52% non-zero in float64
    assert not f(256, 1 / 256, "float32")               # small K: the two-kernel path
    rows, cols = np.array([0, 0, 1]), np.array([0, 1, 1])
    data, _ = lda_mod.init(default_rng(0, backend="numpy"), rows, cols, 2, 2, 1024, 1 / 1024, 1 / 1024)
    assert data.fused and data.sparse
    data, _ = lda_mod.init(default_rng(0, backend="numpy"), rows, cols, 2, 2, 1024, 0.05, 0.05)
    assert not data.fused


@pytest.mark.gpu
@pytest.mark.parametrize("fused,sparse,C", [(False, False, 1), (True, True, 2), (True, False, 1)])
def test_graph_sweeps_equal_eager_sweeps(cp, fused, sparse, C):
    """A sweep captured as a CUDA graph and replayed gives the eager sweeps' draws, bit for bit."""
    from gpumcmc.sampling import graph_step

    X, _, _ = _corpus(M=50, V=60, K=4, length=40, seed=4)
    states = []
    for use_graph in (False, True):
        rng = default_rng(13)
        rows, cols, M, V = lda_mod.tokens_from(X, cp)
        data, state = lda_mod.init(rng, rows, cols, M, V, 8, 0.1, 0.1, "float32", n_chains=C, fused=fused,
                                   sparse=sparse)
        step = functools.partial(lda_mod.step, data=data)
        step = graph_step(step) if use_graph else step
        for _ in range(5):
            state, _ = step(rng, state)
        states.append((cp.asnumpy(state.theta), cp.asnumpy(state.phi), cp.asnumpy(state.phi_sum), rng.advance(0)))
    for a, b in zip(*states):
        np.testing.assert_array_equal(a, b)


@pytest.mark.gpu
def test_lda_graph_switch_gives_the_same_fit(cp):
    X, _, _ = _corpus(M=40, V=50, K=3, length=30, seed=2)
    kw = dict(n_components=3, n_iter=10, burn_in=5, random_state=3, progress=False, backend="cupy")
    a = LDA(graph=False, **kw).fit(X)
    b = LDA(graph=True, **kw).fit(X)
    c = LDA(**kw).fit(X)   # the default takes the graph for a corpus this small
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.doc_topic_, b.doc_topic_)
    np.testing.assert_array_equal(a.components_, c.components_)


# -- the log-likelihood summed by the z-draw ------------------------------------------------------------

def _chain_log_likelihood(theta, phi, rows, cols):
    """Each chain's log_likelihood of (C, M, K) theta and (V, C, K) phi, on the host, in float64."""
    theta, phi = np.asarray(theta, np.float64), np.asarray(phi, np.float64)
    return np.array([float(lda_mod.log_likelihood(theta[c], phi[:, c], rows, cols)) for c in range(theta.shape[0])])


# K picks the z-draw: on the GPU, categorical_products' "prefix" (K = 5), "butterfly" (64 in float32) and
# "warp" (200) with fused=False, and the fused kernel (sparse theta rows or not); NumPy has one path.
@pytest.mark.parametrize("K, C, fused, sparse", [(5, 2, False, False), (64, 1, False, False), (200, 3, False, False),
                                                 (64, 2, True, False), (1024, 2, True, True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_zdraw_loglik_is_log_likelihood(xp, K, C, fused, sparse, dtype):
    """zdraw_counts(loglik=...) sums log sum_k theta phi of every token as it draws: equal to
    log_likelihood of the same theta and phi (the totals differ only in the order of their additions: a
    relative 1e-6 of each token's term in float32), and the draws are those of a call without it."""
    from gpumcmc import backend as B

    backend = "numpy" if xp is np else "cupy"
    rs = np.random.default_rng(K + C)
    M, V, T = 40, 70, 6000
    theta = rs.dirichlet(np.full(K, 0.05), size=(C, M))
    theta[:, ::2][theta[:, ::2] < 1e-6] = 0
    theta = (theta + 1e-3 * (rs.random((C, M, K)) < 0.05)).astype(dtype)
    phi = rs.dirichlet(np.full(V, 0.5), size=C * K).reshape(C, K, V).transpose(2, 0, 1).astype(dtype)
    rows, cols = np.sort(rs.integers(0, M, T)), rs.integers(0, V, T)
    order = np.lexsort((rows, cols))
    rows, cols = rows[order], cols[order]
    idx = np.int32 if backend == "cupy" else np.int64
    data = lda_mod.LDAData(xp.asarray(rows.astype(idx)), xp.asarray(cols.astype(idx)), M, V, 0.1, 0.1, 0, fused,
                           sparse)
    th, ph = xp.asarray(theta), xp.asarray(np.ascontiguousarray(phi))
    z0, z1 = xp.empty(C * T, np.int64), xp.empty(C * T, np.int64)
    ll = xp.full(C, 2.0)       # added to, not overwritten
    a = lda_mod.zdraw_counts(default_rng(4, backend=backend), th, ph, data, zout=z0)
    b = lda_mod.zdraw_counts(default_rng(4, backend=backend), th, ph, data, zout=z1, loglik=ll)
    np.testing.assert_array_equal(B.to_host(z0), B.to_host(z1))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(B.to_host(x), B.to_host(y))
    ref = _chain_log_likelihood(theta, phi, rows, cols)
    np.testing.assert_allclose(B.to_host(ll) - 2.0, ref, rtol=2e-6 if dtype == np.float32 else 1e-12)


def test_loglik_counts_a_token_without_weight_as_log_1e300():
    """A token whose theta * phi is all zero adds log(1e-300), as log_likelihood's floor does."""
    theta = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    phi = np.array([[[1.0, 0.0]], [[0.5, 0.5]]])          # (V, C, K)
    rows, cols = np.array([0, 1, 1]), np.array([0, 0, 1])  # token 1: theta[1] * phi[0] = 0
    data = lda_mod.LDAData(rows, cols, 2, 2, 0.1, 0.1, 0)
    ll = np.zeros(1)
    with _validate.validation(False):
        lda_mod.zdraw_counts(default_rng(0, backend="numpy"), theta, phi, data, loglik=ll)
    assert np.isclose(ll[0], np.log(1e-300) + np.log(0.5))
    assert np.isclose(ll[0], float(lda_mod.log_likelihood(theta[0], phi[:, 0], rows, cols)))


@pytest.mark.parametrize("fused", [True, False])
def test_step_loglik_scores_the_state_it_started_from(xp, fused):
    """step(loglik=True): the same draws as step(), and info.loglik is log_likelihood of the state given."""
    from gpumcmc import backend as B

    X, _, _ = _corpus(M=50, V=60, K=4, length=40, seed=4)
    backend = "numpy" if xp is np else "cupy"
    out = []
    for loglik in (False, True):
        rng = default_rng(11, backend=backend)
        rows, cols, M, V = lda_mod.tokens_from(X, xp)
        data, state = lda_mod.init(rng, rows, cols, M, V, 8, 0.1, 0.1, "float32", n_chains=2, fused=fused,
                                   sparse=fused)
        lls = []
        for _ in range(3):
            before = state
            state, info = lda_mod.step(rng, state, data, loglik=loglik)
            if loglik:
                lls.append((B.to_host(info.loglik), _chain_log_likelihood(B.to_host(before.theta),
                                                                          B.to_host(lda_mod._phi_store(before.phi)),
                                                                          B.to_host(data.rows), B.to_host(data.cols))))
            else:
                assert info.loglik is None
        out.append(tuple(B.to_host(a) for a in state))
        for got, ref in lls:
            np.testing.assert_allclose(got, ref, rtol=2e-6)
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)


# Recorded at 9b0c4f3 (log-likelihood by a pass of its own) with the fit below.
REF_THETA = [0.07072526961565018, 0.13170811533927917, 0.09246107935905457, 0.0015000038547441363,
             0.2642975151538849, 8.919808180962718e-08, 0.00019182859978172928, 0.20701919496059418,
             0.12534978985786438, 0.19830188155174255, 0.0266319178044796, 0.14444251358509064]
# phi_sum recorded again once it became the sum of each kept sweep's E[phi | n_wk] (the draws unchanged);
# the sum of the phi draws had 0.0449, 0.2356, 0.6573, 0.0376, 0.5529, 0.1316, 0.0192, 0.4790.
REF_PHI_SUM = [0.05176696181297302, 0.2582234740257263, 0.6382007002830505, 0.03489801287651062,
               0.5423958897590637, 0.13438913226127625, 0.020930105820298195, 0.4227863550186157]


def test_fit_draws_as_before_the_fused_loglik():
    """LDA.fit's draws for a seed, recorded before the log-likelihood moved into the z-draw (NumPy), from the
    random start (then the default)."""
    X = np.random.default_rng(0).poisson(0.7, size=(60, 80))
    m = LDA(n_components=7, n_iter=15, burn_in=5, random_state=3, progress=False, backend="numpy", n_chains=2,
            start="random").fit(X)
    s = m.trace_.state
    np.testing.assert_allclose(s.phi_sum.sum(axis=(1, 2)), [105.0, 105.0], rtol=1e-6)
    np.testing.assert_allclose(s.theta[:, :2, :3].ravel(), REF_THETA, rtol=1e-5)
    np.testing.assert_allclose(s.phi_sum[:, :2, :2].ravel(), REF_PHI_SUM, rtol=1e-5)
    assert m.loglik_traces_.shape == (2, 2) and np.all(np.isfinite(m.loglik_traces_))
    assert np.all(m.loglik_traces_ < 0) and np.all(m.loglik_traces_ > -np.log(80) - 1)


@pytest.mark.parametrize("graph", [False, True])
def test_fit_monitor_reads_the_sweeps_sum(xp, graph):
    """LDA.fit's loglik_traces_ at sweep i is log_likelihood (per token) of the state after i - 1 sweeps,
    from the sum the z-draw formed (with the sweeps replayed from a CUDA graph too, on the GPU)."""
    from gpumcmc import backend as B

    if graph and xp is np:
        pytest.skip("graphs are a GPU feature")
    backend = "numpy" if xp is np else "cupy"
    X, _, _ = _corpus(M=40, V=50, K=3, length=30, seed=2)
    m = LDA(3, n_iter=4, burn_in=2, monitor_every=2, n_chains=2, random_state=3, progress=False, backend=backend,
            graph=graph, start="random").fit(X)   # init's own start, which the replay below makes
    rng = default_rng(3, backend=backend)
    rows, cols, M, V = lda_mod.tokens_from(X, xp)
    data, state = lda_mod.init(rng, rows, cols, M, V, 3, 1 / 3, 1 / 3, "float32", burn_in=2, n_chains=2)
    ref = []
    for i in range(6):
        if (i + 1) % 2 == 0:
            ref.append(_chain_log_likelihood(B.to_host(state.theta), B.to_host(lda_mod._phi_store(state.phi)),
                                             B.to_host(data.rows), B.to_host(data.cols)) / rows.size)
        state, _ = lda_mod.step(rng, state, data)
    np.testing.assert_array_equal(m.loglik_trace_[0], [2, 4, 6])
    np.testing.assert_allclose(m.loglik_traces_, np.array(ref).T, rtol=2e-6)
    np.testing.assert_array_equal(B.to_host(m.trace_.state.theta), B.to_host(state.theta))


@pytest.mark.parametrize("method", ["prefix", "transpose", "butterfly", "warp"])
@pytest.mark.parametrize("index", [False, True])
def test_categorical_products_log_total(xp, method, index):
    """categorical_products(log_total=...) with each method (and counter_index, which the butterfly lays out
    in lanes on the GPU): the draws of a call without it, and the groups' log-likelihoods."""
    from gpumcmc import backend as B
    from gpumcmc import categorical_products

    backend = "numpy" if xp is np else "cupy"
    rs = np.random.default_rng(1)
    th = rs.dirichlet(np.ones(40), size=50).astype(np.float32)
    ph = rs.dirichlet(np.ones(40), size=30).astype(np.float32)
    r, c = rs.integers(0, 50, 999), rs.integers(0, 30, 999)
    G = 1 if (index and method == "butterfly") else 3
    kw = dict(counter_index=rs.permutation(5000)[:999]) if index else {}
    args = (xp.asarray(th), xp.asarray(ph), xp.asarray(r), xp.asarray(c))
    lt = xp.zeros(G)
    a = categorical_products(*args, default_rng(5, backend=backend), method=method, **kw)
    b = categorical_products(*args, default_rng(5, backend=backend), method=method, log_total=lt, **kw)
    np.testing.assert_array_equal(B.to_host(a), B.to_host(b))
    terms = np.log((th[r].astype(np.float64) * ph[c]).sum(1))
    np.testing.assert_allclose(B.to_host(lt), terms.reshape(G, -1).sum(1), rtol=1e-6)
    with pytest.raises(ValueError, match="equal groups"):
        categorical_products(*args, default_rng(5, backend=backend), method=method, log_total=xp.zeros(2), **kw)
    with pytest.raises(TypeError, match="float64"):
        categorical_products(*args, default_rng(5, backend=backend), method=method, log_total=xp.zeros(3, np.float32))


# -- held-out scores: document completion; empty documents -----------------------------------------------

def test_completion_split():
    rows = np.array([0, 0, 0, 1, 3, 3, 3, 3])
    first, second = lda_mod.completion_split(rows)
    np.testing.assert_array_equal(first, [1, 0, 1, 1, 1, 0, 1, 0])
    np.testing.assert_array_equal(second, ~first)


def test_transform_empty_documents_get_the_prior_mean(xp):
    """An empty document's transform is 1 / K exactly (not one noisy draw from the prior), beside
    documents with tokens; a matrix with no token at all gives the prior mean everywhere."""
    backend = "numpy" if xp is np else "cupy"
    X, _, _ = _corpus(M=60, V=50, K=3, length=30, seed=5)
    m = LDA(4, n_iter=5, burn_in=5, transform_iter=6, random_state=0, progress=False, backend=backend).fit(X)
    new = X[:5].toarray()
    new[[1, 3]] = 0
    theta = m.transform(new)
    np.testing.assert_array_equal(theta[[1, 3]], np.full((2, 4), 0.25, theta.dtype))
    assert np.all(np.abs(theta[[0, 2, 4]] - 0.25).max(axis=1) > 1e-3)   # documents with tokens move from it
    np.testing.assert_array_equal(m.transform(np.zeros((3, 50), np.int64)), np.full((3, 4), 0.25, theta.dtype))


def test_score_completion_is_held_out(xp):
    """score(method="completion") is log_likelihood of each document's second half under theta fitted on its
    first half, and it is below the optimistic method="full" per token (theta fitted on the tokens scored).
    Here full - completion is about 0.05 nats per token; the bound is 0."""
    from gpumcmc import backend as B

    backend = "numpy" if xp is np else "cupy"
    X, _, _ = _corpus(M=160, V=150, K=4, length=40, seed=9)
    m = LDA(4, n_iter=10, burn_in=30, random_state=0, progress=False, backend=backend).fit(X[:120])
    held = X[120:]
    rows, cols, M, V = lda_mod.tokens_from(held, xp, n_words=150)
    first, second = lda_mod.completion_split(rows)
    theta = m._theta(held, (rows[first], cols[first], M, V))[0]
    ref = float(lda_mod.log_likelihood(theta, m.phi_, rows[second], cols[second]))
    got = m.score(held, method="completion")
    assert np.isclose(got, ref, rtol=1e-12)
    n2 = int(B.to_host(second).sum())
    assert np.isclose(m.perplexity(held, method="completion"), np.exp(-ref / n2), rtol=1e-12)
    assert got / n2 < m.score(held) / int(rows.size)          # "full" is optimistic
    assert m.score(held) == m.score(held, method="full")
    with pytest.raises(ValueError, match="method"):
        m.score(held, method="half")
    with pytest.raises(ValueError, match="at least 2 tokens"):
        m.perplexity(np.eye(3, 150, dtype=np.int64), method="completion")


# -- the seeded start ----------------------------------------------------------------------------------------

def test_seeded_topics():
    X, _, _ = _corpus(M=80, V=60, K=3, length=30, seed=3)
    rows, cols, M, V = lda_mod.tokens_from(X, np)
    a = lda_mod.seeded_topics(rows, cols, M, V, 4, n_chains=2, seed=1)
    seen = np.bincount(cols, minlength=V) > 0
    assert a.shape == (60, 2, 4) and a.dtype == np.float32 and (a[seen] > 0).all() and (a >= 0).all()
    np.testing.assert_allclose(a.sum(axis=0), 1, rtol=1e-5)
    np.testing.assert_array_equal(a, lda_mod.seeded_topics(rows, cols, M, V, 4, n_chains=2, seed=1))
    assert not np.allclose(a[:, 0], a[:, 1])                      # chains start apart
    # Every topic starts half from one document: far from the corpus' word frequencies, and apart.
    uni = np.bincount(cols, minlength=V) / cols.size
    assert (0.5 * np.abs(a[:, 0] - uni[:, None]).sum(0) > 0.2).all()
    with pytest.raises(ValueError, match="at least n_components"):
        lda_mod.seeded_topics(rows, cols, M, V, 81)


@pytest.mark.slow  # several seconds on 2 CPU cores
def test_seeded_start(xp):
    """LDA(start="seeded") recovers planted topics."""
    backend = "numpy" if xp is np else "cupy"
    X, _, phi = _corpus(M=200, V=150, K=4, length=60, seed=8)
    m = LDA(4, n_iter=20, burn_in=40, random_state=2, progress=False, start="seeded", backend=backend).fit(X)
    assert _tv_matched(m.components_, phi).max() < 0.1


def test_seeded_start_state_and_shards(xp):
    """The seeded start is theta = 1/K and the seeded topics (no draw), and splitting the documents over
    shards gives one device's fit (NumPy); bad starts raise."""
    from gpumcmc.shards import Shards

    backend = "numpy" if xp is np else "cupy"
    X, _, _ = _corpus(M=30, V=40, K=3, length=20, seed=6)
    rows, cols, M, V = lda_mod.tokens_from(X, xp)
    phi0 = lda_mod.seeded_topics(rows, cols, M, V, 3, n_chains=2, seed=4)
    rng = default_rng(0, backend=backend)
    _, state = lda_mod.init(rng, rows, cols, M, V, 3, 0.3, 0.3, n_chains=2, phi_start=phi0)
    assert rng.advance(0) == 0
    np.testing.assert_array_equal(B.to_host(lda_mod._phi_store(state.phi)), phi0)
    np.testing.assert_array_equal(B.to_host(state.theta), np.full((2, M, 3), 1 / 3, np.float32))
    kw = dict(n_iter=2, burn_in=1, random_state=2, progress=False, start="seeded", n_chains=2)
    m = LDA(3, backend=backend, **kw).fit(X)
    if xp is np:
        s = LDA(3, devices=Shards(n_virtual=3), **kw).fit(X)
        np.testing.assert_array_equal(m.components_, s.components_)
        np.testing.assert_array_equal(m.doc_topic_, s.doc_topic_)
    with pytest.raises(ValueError, match="start"):
        LDA(3, backend=backend, start="kmeans", progress=False).fit(X)
    with pytest.raises(ValueError, match="phi_start must have shape"):
        lda_mod.init(default_rng(0, backend=backend), rows, cols, M, V, 3, 0.25, 0.25, phi_start=np.ones((V, 3)))


def _merged_topics(components, phi, far=0.3):
    """Planted topics whose matched fitted topic is more than ``far`` away in total variation (planted
    topics lie 0.6 to 0.9 apart; a recovered one within 0.1): 2 where two planted topics share one."""
    return int((_tv_matched(components, phi) > far).sum())


@pytest.mark.slow
def test_default_single_chains_stick_no_more_than_collapsed_gibbs():
    """Issue 37: over 20 planted corpora (K = 10, V = 500, 1,000 documents of 80 tokens), single chains with
    LDA's defaults (the seeded start) end with merged topics at most as often as the lda package's collapsed
    Gibbs (300 iterations) on the same corpora. On NumPy (corpora 100-119, chain seed = corpus index): the
    default 1 of 20, lda 2 of 20, start="random" 5 of 20. Fixed seeds, so deterministic for a NumPy and lda
    version; runs on NumPy, where the CPU suite can run it (about 20 s a corpus on 2 cores)."""
    lda = pytest.importorskip("lda")
    import logging

    logging.getLogger("lda").setLevel(logging.ERROR)
    K, V, M = 10, 500, 1000
    ours = theirs = 0
    for s in range(20):
        r, c, _, phi = synthetic_lda_corpus(M, V, doc_length=80, n_components=K, topic_concentration=0.05,
                                            random_state=100 + s, backend="numpy")
        X = sp.csr_matrix((np.ones(r.size), (r, c)), shape=(M, V)).astype(np.int64)
        m = LDA(K, random_state=s, progress=False, backend="numpy", monitor_every=50).fit(X)
        ours += _merged_topics(m.components_, phi) > 0
        p = lda.LDA(n_topics=K, n_iter=300, alpha=1 / K, eta=1 / K, random_state=s).fit(X)
        theirs += _merged_topics(p.topic_word_, phi) > 0
    assert ours <= theirs, (ours, theirs)


def test_fitted_priors_names_and_checkpoint_key(tmp_path):
    """transform and score read the fit's priors (set_params afterwards changed a fitted model's perplexity),
    a DataFrame's names are checked as in scikit-learn, and a checkpoint of other documents of the same
    sizes is refused instead of returning the earlier fit's topics."""
    pd = pytest.importorskip("pandas")
    X, _, _ = _corpus(M=60, V=40, K=3, length=30, seed=3)
    X = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
    kw = dict(n_iter=10, burn_in=10, random_state=0, progress=False, backend="numpy")
    m = LDA(3, **kw).fit(X)
    p = m.perplexity(X[:10])
    m.set_params(doc_topic_prior=5.0)
    assert m.perplexity(X[:10]) == p and m.doc_topic_prior_ == pytest.approx(1 / 3)
    m.set_params(n_components=7)
    assert m.transform(X[:3]).shape == (3, 3)
    words = [f"w{j}" for j in range(40)]
    named = LDA(3, **kw).fit(pd.DataFrame(X, columns=words))
    assert list(named.feature_names_in_) == words
    with pytest.raises(ValueError, match="another order"):
        named.transform(pd.DataFrame(X, columns=words)[words[::-1]])
    path = tmp_path / "lda.npz"
    first = LDA(3, checkpoint=path, **kw).fit(X[:30])
    with pytest.raises(ValueError, match="checkpoint_key"):
        LDA(3, checkpoint=path, **kw).fit(X[30:])
    again = LDA(3, checkpoint=path, **kw).fit(X[:30])  # the same fit resumes (here: is already done)
    np.testing.assert_array_equal(again.components_, first.components_)


def test_checkpoint_without_a_fixed_seed_is_refused_before_the_fit(tmp_path):
    X = np.random.default_rng(0).poisson(0.5, size=(10, 20))
    with pytest.raises(ValueError, match="fixed random_state"):
        LDA(n_components=2, n_iter=5, checkpoint=tmp_path / "c.npz", progress=False, backend="numpy").fit(X)
    assert not (tmp_path / "c.npz").exists()


def test_checkpoint_with_a_generator_seed_is_refused_before_the_fit(tmp_path):
    X = np.random.default_rng(0).poisson(0.5, size=(10, 20))
    with pytest.raises(ValueError, match="fixed random_state"):
        LDA(n_components=2, n_iter=5, checkpoint=tmp_path / "c.npz", random_state=np.random.default_rng(0),
            progress=False, backend="numpy").fit(X)
