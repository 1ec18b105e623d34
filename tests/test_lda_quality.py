"""LDA's default start (issue 37, item 2): the seeded start by default on small corpora, the bounded cost of the
seeded start on large ones, and the random start's draws.

The slow comparison with the ``lda`` package's collapsed Gibbs over 20 planted corpora is in tests/test_lda.py
(``test_default_single_chains_stick_no_more_than_collapsed_gibbs``).
"""

import numpy as np
import pytest
import scipy.sparse as sp

from gpumcmc._config import config
from gpumcmc.models import LDA
from gpumcmc.models import lda as lda_mod


def _pure_corpus(K=4, per_topic=40, words=20, length=400, seed=0):
    """Documents each of one of K topics with disjoint vocabularies (``words`` each): documents of one topic
    lie within cosine distance ~0.05 of each other, documents of two topics at distance 1."""
    rs = np.random.default_rng(seed)
    M, V = K * per_topic, K * words
    topic = np.repeat(np.arange(K), per_topic)
    cols = (topic[:, None] * words + rs.integers(0, words, (M, length))).ravel()
    rows = np.repeat(np.arange(M), length)
    return rows, cols, M, V, topic


def _seeded_topic_of(phi, K, words):
    """The planted topic each starting topic was seeded from: where its document's half of the weight lies."""
    return phi.reshape(K, words, -1).sum(axis=1).argmax(axis=0)


@pytest.mark.parametrize("path", ["exact", "sketch"])
def test_seeded_topics_one_per_planted_topic(monkeypatch, path):
    """k-means++ seeding picks one document of every planted topic, with exact cosines and with the count
    sketch that bounds the work on large corpora. After a pick, the documents of its topic keep a squared
    distance under 0.01 against 1 for the others, so a pick repeats a topic with chance under
    3 * 40 * 0.01 / (40 * 1) = 0.03 at the last pick; with three picks after the first, a repeat has chance
    under 0.1 a priori; the seeds are fixed and the outcome is the same on every run."""
    rows, cols, M, V, _ = _pure_corpus()
    exact = [lda_mod.seeded_topics(rows, cols, M, V, 4, n_chains=2, seed=seed, max_candidates=M) for seed in range(3)]
    if path == "sketch":  # every document a candidate still, as at the default on a small corpus
        monkeypatch.setattr(config, "lda_seed_exact_work", 0)
    got = []
    for seed in range(3):
        phi = lda_mod.seeded_topics(rows, cols, M, V, 4, n_chains=2, seed=seed, max_candidates=M)
        got.append(phi)
        assert phi.shape == (V, 2, 4) and phi.dtype == np.float32 and (phi > 0).all()
        np.testing.assert_allclose(phi.sum(axis=0), 1, rtol=1e-5)
        for ch in range(2):
            assert sorted(_seeded_topic_of(phi[:, ch], 4, 20)) == [0, 1, 2, 3], (path, seed, ch)
        np.testing.assert_array_equal(phi, lda_mod.seeded_topics(rows, cols, M, V, 4, n_chains=2, seed=seed,
                                                                 max_candidates=M))
    # The sketch draws its hashes and signs from the host generator before the first pick, so its picks (the
    # documents, of the same topics) differ from the exact path's: the knob reached seeded_topics.
    same = [np.array_equal(a, b) for a, b in zip(got, exact)]
    assert all(same) if path == "exact" else not any(same)


def test_seeded_topics_bounded_candidates_and_unsorted_tokens():
    """``max_candidates`` bounds the documents picked among (picks from at most that many, whose tokens alone
    are read, still one per planted topic where every topic is among them), and tokens given out of document
    order give the topics of the sorted stream. Without the count of tokens read, the bound ignored passed."""
    rows, cols, M, V, _ = _pure_corpus(K=3, per_topic=200)
    reads = []

    class Gathers(np.ndarray):
        """cols, noting how many tokens each gather by an index array reads."""

        def __getitem__(self, i):
            if isinstance(i, np.ndarray):
                reads.append(i.size)
            return super().__getitem__(i)

    phi = lda_mod.seeded_topics(rows, cols.view(Gathers), M, V, 3, seed=1, max_candidates=60)
    assert sorted(_seeded_topic_of(phi[:, 0], 3, 20)) == [0, 1, 2]
    assert reads == [60 * 400]     # the tokens of 60 candidates (of 600 documents of 400 tokens), read once
    perm = np.random.default_rng(0).permutation(rows.size)
    np.testing.assert_array_equal(lda_mod.seeded_topics(rows[perm], cols[perm], M, V, 3, seed=1, max_candidates=60),
                                  phi)


def test_default_start_is_seeded_on_small_corpora(monkeypatch):
    """LDA's default start (``"auto"``) is the seeded start where K times the tokens is at most
    config.lda_seed_exact_work and at least K documents have tokens (the same draws as ``start="seeded"``), and the
    random start otherwise (the same draws as ``start="random"``; where documents are too few,
    ``"seeded"`` raises)."""
    rows, cols, M, V, _ = _pure_corpus(K=3, per_topic=10, length=50)
    X = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(M, V))
    kw = dict(n_iter=3, burn_in=2, random_state=4, progress=False, backend="numpy")
    assert LDA(3).start == "auto"
    auto, seeded = LDA(3, **kw).fit(X), LDA(3, start="seeded", **kw).fit(X)
    rand = LDA(3, start="random", **kw).fit(X)
    np.testing.assert_array_equal(auto.components_, seeded.components_)
    assert not np.array_equal(auto.components_, rand.components_)
    monkeypatch.setattr(config, "lda_seed_exact_work", 3 * rows.size - 1)   # a corpus too large to seed by default
    np.testing.assert_array_equal(LDA(3, **kw).fit(X).components_, rand.components_)
    monkeypatch.undo()
    few = X[:5]
    auto, rand = LDA(6, **kw).fit(few), LDA(6, start="random", **kw).fit(few)
    np.testing.assert_array_equal(auto.components_, rand.components_)
    with pytest.raises(ValueError, match="at least n_components"):
        LDA(6, start="seeded", **kw).fit(few)


def test_random_start_draws_unchanged():
    """start="random" keeps the draws of earlier versions (then the default), to float32's last bit: the
    final phi draw of a small fit, recorded when components_ was still the mean of the phi draws (from the
    version before the seeded default, whose components_ this fit then gave), and components_ since it
    became the mean of E[phi | n_wk]."""
    rows, cols, M, V, _ = _pure_corpus(K=3, per_topic=10, length=50)
    X = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(M, V))
    m = LDA(3, n_iter=3, burn_in=2, random_state=4, progress=False, backend="numpy", start="random").fit(X)
    np.testing.assert_array_equal(np.asarray(m.trace_.state.phi[0][:6]).T, np.array(RANDOM_START_PHI, np.float32))
    np.testing.assert_array_equal(m.components_[:, :6], np.array(RANDOM_START_COMPONENTS, np.float32))


# The final phi draw (phi[0][:6].T) of that fit, the same before and after components_ changed
RANDOM_START_PHI = [
    [0.03839939460158348, 0.0020825511310249567, 0.013258841820061207, 0.006872669328004122, 0.0020157599356025457, 0.002850560937076807],
    [0.018554281443357468, 0.01142547745257616, 0.03181660920381546, 0.0002983625163324177, 0.01778147555887699, 0.029019145295023918],
    [9.70824567048112e-06, 0.031904470175504684, 0.0014647932257503271, 0.03423508256673813, 0.005055262241512537, 0.003293335670605302]]
# components_[:, :6] of that fit, the mean of E[phi | n_wk] over its kept sweeps
RANDOM_START_COMPONENTS = [
    [0.03314553201198578, 0.007715156301856041, 0.02069137990474701, 0.010595396161079407, 0.001185046974569559, 0.004147068131715059],
    [0.018886316567659378, 0.024524450302124023, 0.02202288620173931, 0.0012543774209916592, 0.02890828810632229, 0.035842690616846085],
    [0.0007148082950152457, 0.027197668328881264, 0.0035580394323915243, 0.026326000690460205, 0.0021183171775192022, 0.009991314262151718]]


@pytest.mark.parametrize("path", ["exact", "sketch"])
def test_seeded_topics_gpu_matches_numpy(cp, monkeypatch, path):
    """Tokens on the GPU give the topics of the same tokens on the host (the counts are exact on either, the
    picks are made on the host), and LDA's default start on CuPy is its seeded start there."""
    rows, cols, M, V, _ = _pure_corpus()
    exact = lda_mod.seeded_topics(rows, cols, M, V, 4, n_chains=2, seed=3, max_candidates=M)
    if path == "sketch":
        monkeypatch.setattr(config, "lda_seed_exact_work", 0)
    perm = np.random.default_rng(2).permutation(rows.size)    # out of order: sorted on the device
    for r, c in ((rows, cols), (rows[perm], cols[perm])):
        want = lda_mod.seeded_topics(r, c, M, V, 4, n_chains=2, seed=3, max_candidates=M)
        assert np.array_equal(want, exact) == (path == "exact")   # the knob reached the host's path
        got = lda_mod.seeded_topics(cp.asarray(r), cp.asarray(c), M, V, 4, n_chains=2, seed=3, max_candidates=M)
        assert isinstance(got, np.ndarray)
        np.testing.assert_array_equal(got, want)
    monkeypatch.undo()
    X = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(M, V))
    kw = dict(n_iter=2, burn_in=1, random_state=4, progress=False, backend="cupy")
    np.testing.assert_array_equal(LDA(4, **kw).fit(X).components_, LDA(4, start="seeded", **kw).fit(X).components_)
