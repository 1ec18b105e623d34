"""Restricted Boltzmann machines: the visible distribution against exact enumeration, training, bad input.

Each chi-square test is one check at significance ALPHA (conftest), with a
fixed seed; the chains' final states are independent draws, so the test is exact
up to the chains' convergence (40 steps on a 5 x 3 machine with weights of
order 1 mixes far below the test's resolution).
"""

import itertools

import numpy as np
import pytest
from scipy import stats

from conftest import ALPHA
from gpumcmc._config import config
from gpumcmc.models import RBM
from gpumcmc.models import rbm as R
from gpumcmc import backend as B
from gpumcmc.random._philox import block_words, u01_f32


def _small_rbm(dtype=np.float64, backend="numpy"):
    rs = np.random.default_rng(7)
    return RBM(rs.normal(0, 1.0, (5, 3)), rs.normal(0, 0.5, 5), rs.normal(0, 0.5, 3), dtype=dtype, backend=backend)


def _chi_square(rbm, samples):
    samples = np.asarray(B.to_host(samples))
    states = np.array(list(itertools.product([0, 1], repeat=rbm.n_visible)), dtype=np.float64)
    logp = np.asarray(B.to_host(rbm.log_prob_visible_unnormalised(states)), dtype=np.float64)
    p = np.exp(logp - logp.max())
    p /= p.sum()
    code = 2 ** np.arange(rbm.n_visible)[::-1]
    counts = np.bincount(samples.astype(np.int64) @ code, minlength=len(states))
    expected = p * counts.sum()
    keep = expected >= 5
    obs, exp_ = counts[keep], expected[keep]
    if not keep.all():  # pool the rare states into one bin
        obs, exp_ = np.append(obs, counts[~keep].sum()), np.append(exp_, expected[~keep].sum())
    return stats.chisquare(obs, exp_).pvalue


def test_gpu_bias_set_after_construction_is_read_right(cp):
    # set_params (or an attribute) bypasses the constructor's contiguous copy; the launcher makes the bias it
    # passes by address contiguous and of the kernel's type, so the draws are those of a contiguous bias.
    rs = np.random.default_rng(6)
    W, table = rs.normal(0, 1.0, (6, 4)).astype(np.float32), rs.normal(0, 0.5, (6, 2))
    a = RBM(cp.asarray(W), cp.zeros(6, cp.float32), cp.zeros(4, cp.float32), backend="cupy")
    b = RBM(cp.asarray(W), cp.zeros(6, cp.float32), cp.zeros(4, cp.float32), backend="cupy")
    a.visible_bias = cp.asarray(table)[:, 0]                       # strided float64
    b.visible_bias = cp.asarray(np.ascontiguousarray(table[:, 0]), cp.float32)
    np.testing.assert_array_equal(B.to_host(a.sample(3, 20, random_state=1)), B.to_host(b.sample(3, 20, random_state=1)))


def test_strided_biases_are_stored_contiguous(xp):
    # The GPU kernels read the biases by their addresses: a strided bias (a column of one table) was read
    # as other values. Stored contiguous, with the same values.
    rs = np.random.default_rng(4)
    W, table = rs.normal(0, 1.0, (5, 3)), rs.normal(0, 0.5, (5, 2))
    rbm = RBM(xp.asarray(W), xp.asarray(table)[:, 0], xp.asarray(table)[:3, 1], dtype=np.float64,
              backend=xp.__name__)
    assert rbm.visible_bias.flags.c_contiguous and rbm.hidden_bias.flags.c_contiguous
    np.testing.assert_array_equal(B.to_host(rbm.visible_bias), table[:, 0])
    np.testing.assert_array_equal(B.to_host(rbm.hidden_bias), table[:3, 1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_visible_distribution_matches_enumeration(dtype):
    rbm = _small_rbm(dtype)
    v = rbm.sample(n_chains=20000, n_steps=40, random_state=3)
    assert v.shape == (20000, 5) and v.dtype == np.uint8
    assert _chi_square(rbm, v) > ALPHA


def test_chi_square_sees_a_wrong_machine():
    # The same draws against a machine with one bias changed by 0.3 must be rejected.
    rbm = _small_rbm()
    v = rbm.sample(n_chains=20000, n_steps=40, random_state=3)
    other = RBM(rbm.W, rbm.visible_bias + np.array([0.3, 0, 0, 0, 0]), rbm.hidden_bias, dtype=np.float64,
                backend="numpy")
    assert _chi_square(other, v) < ALPHA


def test_bernoulli_twin_uses_the_documented_words():
    pre = np.zeros((3, 5), dtype=np.float32)
    out = R.bernoulli_logits(pre, np.zeros(5, np.float32), (1, 2), 7)
    words = np.stack(block_words(0, 4, (1, 2), 7), axis=1).reshape(-1)[:15].reshape(3, 5)
    np.testing.assert_array_equal(out, (u01_f32(words) < 0.5).astype(np.float32))


def test_fit_on_digits_is_on_par_with_scikit_learn():
    from sklearn.neural_network import BernoulliRBM

    X = R.load_binary_digits()[:600]
    ours = RBM(n_hidden=32, learning_rate=0.05, batch_size=10, n_iter=5, random_state=0, backend="numpy",
               progress=False).fit(X)
    sk = BernoulliRBM(n_components=32, learning_rate=0.05, batch_size=10, n_iter=5, random_state=0).fit(X)
    pl_ours = ours.pseudo_likelihood(X)
    pl_sk = RBM.from_sklearn(sk, backend="numpy").pseudo_likelihood(X)
    # the score is scikit-learn's: the same flipped features for one seed, the same formula
    assert pl_sk == pytest.approx(sk.score_samples(X).mean(), rel=1e-12)
    untrained = RBM(np.zeros((64, 32)), np.zeros(64), np.zeros(32), backend="numpy").pseudo_likelihood(X)
    assert pl_ours > untrained + 10  # 64 * log 2 = 44.4 for the untrained machine
    # BernoulliRBM's attribute names, with its shapes, round-trip through from_sklearn
    for name in ("components_", "intercept_visible_", "intercept_hidden_"):
        assert getattr(ours, name).shape == getattr(sk, name).shape, name
        np.testing.assert_array_equal(getattr(RBM.from_sklearn(sk, backend="numpy"), name), getattr(sk, name))
    np.testing.assert_array_equal(ours.components_, ours.W.T)
    assert abs(pl_ours - pl_sk) < 3.0, (pl_ours, pl_sk)


_X = np.zeros((20, 4), np.uint8)
_BAD = [
    pytest.param(lambda: RBM(np.zeros((4, 3)), np.zeros(3), np.zeros(3), backend="numpy"), ValueError, "components_",
                 id="bias-shape"),
    pytest.param(lambda: RBM(n_hidden=2, backend="numpy", progress=False).fit(np.full((5, 4), 2.0)), ValueError,
                 r"values in \[0, 1\]", id="fit-outside-0-1"),
    pytest.param(lambda: _small_rbm().pseudo_likelihood(np.full((5, 5), 2.0)), ValueError, r"values in \[0, 1\]",
                 id="pseudo-likelihood-outside-0-1"),
    pytest.param(lambda: _small_rbm().sample(2, 3, random_state=0, initial=np.full(5, 2)), ValueError, "binary",
                 id="initial-not-binary"),
    pytest.param(lambda: RBM(np.full((4, 3), np.nan), np.zeros(4), np.zeros(3), backend="numpy"), ValueError, "NaN",
                 id="weights-nan"),
    pytest.param(lambda: RBM(n_hidden=2, backend="numpy", progress=False, fused=True).fit(_X), ValueError, "GPU only",
                 id="fused-on-cpu"),
    pytest.param(lambda: RBM(n_hidden=2, backend="numpy", progress=False, fused="yes").fit(_X), TypeError, "fused",
                 id="fused-not-bool"),
    pytest.param(lambda: _small_rbm().sample(n_chains=2, n_steps=-1), ValueError, "n_steps", id="negative-steps"),
    pytest.param(lambda: _small_rbm().sample(n_chains=2, n_steps=1.5), TypeError, "n_steps", id="float-steps"),
    pytest.param(lambda: _small_rbm().sample(n_chains=0, n_steps=1), ValueError, "n_chains", id="zero-chains"),
    pytest.param(lambda: RBM(n_hidden=0, backend="numpy", progress=False).fit(_X), ValueError, "n_hidden",
                 id="zero-hidden"),
    pytest.param(lambda: RBM(n_hidden=2, batch_size=0, backend="numpy", progress=False).fit(_X), ValueError,
                 "batch_size", id="zero-batch"),
    pytest.param(lambda: RBM(n_hidden=2, learning_rate=-1, backend="numpy", progress=False).fit(_X), ValueError,
                 "learning_rate", id="negative-rate"),
    # learning_rate=inf passed the > 0 check and trained all-NaN weights
    pytest.param(lambda: RBM(n_hidden=2, learning_rate=np.inf, backend="numpy", progress=False).fit(_X), ValueError,
                 "finite", id="infinite-rate"),
    # free_energy and its negation skipped the row checks of the other methods
    pytest.param(lambda: _small_rbm().free_energy(np.full((2, 5), np.nan)), ValueError, "NaN", id="free-energy-nan"),
    pytest.param(lambda: _small_rbm().free_energy(np.zeros(5)), ValueError, "2-d", id="free-energy-1d"),
    pytest.param(lambda: _small_rbm().free_energy(np.zeros((2, 4))), ValueError, "5 visible units",
                 id="free-energy-width"),
    pytest.param(lambda: _small_rbm().log_prob_visible_unnormalised(np.full((2, 5), np.inf)), ValueError, "inf",
                 id="log-prob-inf"),
    pytest.param(lambda: RBM(n_hidden=2, dtype=np.int32, backend="numpy", progress=False).fit(np.eye(3)), TypeError,
                 "dtype", id="int-dtype"),
    pytest.param(lambda: RBM(np.zeros((3, 2)), np.zeros(3), np.zeros(2), dtype=np.int32, backend="numpy"), TypeError,
                 "dtype", id="int-dtype-with-weights"),
]


@pytest.mark.parametrize("call, error, match", _BAD)
def test_bad_input_says_what_to_do(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_sample_of_zero_steps_gives_the_initial_states():
    v = _small_rbm().sample(n_chains=3, n_steps=0, random_state=0, initial=np.array([1, 0, 1, 1, 0]))
    np.testing.assert_array_equal(v, np.tile([1, 0, 1, 1, 0], (3, 1)))


def test_a_start_of_one_state_per_chain_runs_as_the_same_start_broadcast(xp):
    rbm = _small_rbm(backend=xp.__name__)
    row = np.array([1.0, 0, 1, 1, 0])
    given = np.tile(row, (3, 1))  # every chain's own start, already of the model's dtype
    a = rbm.sample(n_chains=3, n_steps=4, random_state=2, initial=xp.asarray(given))
    b = rbm.sample(n_chains=3, n_steps=4, random_state=2, initial=row)
    assert np.array_equal(B.to_host(a), B.to_host(b)) and (given == row).all()


def test_progress_bar_scores_fixed_rows_and_leaves_the_weights_alone():
    X = (np.random.default_rng(0).random((300, 8)) < 0.3).astype(np.uint8)
    kw = dict(n_hidden=4, n_iter=3, random_state=0, backend="numpy")
    quiet = RBM(progress=False, **kw).fit(X)
    shown = RBM(progress=True, **kw).fit(X)
    np.testing.assert_array_equal(quiet.W, shown.W)
    # the learning curve is kept with or without the bar (it was empty without)
    assert len(shown.pseudo_likelihood_) == 3 and quiet.pseudo_likelihood_ == shown.pseudo_likelihood_
    rows = X[np.linspace(0, len(X) - 1, config.rbm_progress_rows).astype(int)]
    assert shown.pseudo_likelihood_[-1] == pytest.approx(shown.pseudo_likelihood(rows), rel=1e-6)
    # the figure follows the training: the untrained machine scores 8 log(1/2) on every row
    assert shown.pseudo_likelihood_[-1] != pytest.approx(8 * np.log(0.5), abs=0.05)
    # the knob sets the rows scored
    with config.override(rbm_progress_rows=7):
        few = RBM(progress=True, **kw).fit(X)
    np.testing.assert_array_equal(few.W, shown.W)
    rows = X[np.linspace(0, len(X) - 1, 7).astype(int)]
    assert few.pseudo_likelihood_[-1] == pytest.approx(few.pseudo_likelihood(rows), rel=1e-6)
    assert few.pseudo_likelihood_[-1] != pytest.approx(shown.pseudo_likelihood_[-1], rel=1e-3)


def _reference_pcd(X, n_hidden, learning_rate, batch_size, n_iter, seed, dtype):
    """scikit-learn's PCD schedule written out as one loop (what RBM.fit ran before it went through
    gpumcmc.sampling.run), with the same random words: W, b, c after n_iter epochs."""
    from gpumcmc.random import default_rng

    rng = default_rng(seed, backend="numpy")
    X = X.astype(dtype)
    n, nv = X.shape
    W = rng.normal(0.0, 0.01, size=(nv, n_hidden), dtype=dtype)
    b, c, h_chain = np.zeros(nv, dtype), np.zeros(n_hidden, dtype), np.zeros((batch_size, n_hidden), dtype)
    sig = lambda x: 0.5 * (np.tanh(0.5 * x) + 1.0)  # noqa: E731
    from sklearn.utils import gen_even_slices

    n_batches = int(np.ceil(n / batch_size))  # BernoulliRBM.fit's minibatches
    slices = list(gen_even_slices(n_batches * batch_size, n_batches, n_samples=n))
    for _ in range(n_iter):
        for s, e in ((sl.start, sl.stop) for sl in slices):
            v_pos = X[s:e]
            h_pos = sig(v_pos @ W + c)
            off = rng.advance(2)
            v_neg = R.bernoulli_logits(h_chain @ W.T, b, rng.key, off)
            pre = v_neg @ W
            h_neg = sig(pre + c)
            h_chain = R.bernoulli_logits(pre, c, rng.key, off + 1)
            lr = np.dtype(dtype).type(learning_rate / (e - s))
            W += lr * (v_pos.T @ h_pos - v_neg.T @ h_neg)
            c += lr * (h_pos.sum(axis=0) - h_neg.sum(axis=0))
            b += lr * (v_pos.sum(axis=0) - v_neg.sum(axis=0))
    return W, b, c


@pytest.mark.parametrize("dtype, batch_size", [(np.float32, 10), (np.float64, 7)])
def test_fit_runs_scikit_learns_schedule_with_the_same_words(dtype, batch_size):
    """RBM.fit's epochs go through gpumcmc.sampling.run: the weights are those of the loop written out with
    scikit-learn's minibatches (95 rows in batches of 7: 13 of 7 and one of 4; they were cut evenly before)."""
    pytest.importorskip("sklearn")
    X = R.load_binary_digits()[:95]
    fit = RBM(n_hidden=6, learning_rate=0.05, batch_size=batch_size, n_iter=3, random_state=4, dtype=dtype,
              backend="numpy", progress=False).fit(X)
    W, b, c = _reference_pcd(X, 6, 0.05, batch_size, 3, 4, dtype)
    np.testing.assert_array_equal(fit.W, W)
    np.testing.assert_array_equal(fit.visible_bias, b)
    np.testing.assert_array_equal(fit.hidden_bias, c)


def test_fit_trains_the_model_it_is_called_on_and_the_class_spelling_warns():
    X = (np.random.default_rng(1).random((60, 6)) < 0.4).astype(np.uint8)
    kw = dict(learning_rate=0.05, batch_size=7, n_iter=3, random_state=2, backend="numpy", progress=False)
    model = RBM(n_hidden=5, **kw)
    assert model.fit(X) is model and model.W.shape == (6, 5)
    with pytest.warns(DeprecationWarning, match=r"RBM\(n_hidden=n_hidden, ...\)\.fit\(X\)"):
        old = RBM.fit(X, 5, **kw)
    np.testing.assert_array_equal(old.W, model.W)
    np.testing.assert_array_equal(old.hidden_bias, model.hidden_bias)
    # seeded at the call: fitting again gives the same weights; another seed others
    W = model.W.copy()
    np.testing.assert_array_equal(model.fit(X).W, W)
    assert not np.array_equal(model.set_params(random_state=3).fit(X).W, W)


def test_clone_copies_settings_and_weights():
    from sklearn.base import clone

    untrained = RBM(n_hidden=300, n_iter=2, backend="numpy")
    assert clone(untrained).get_params() == untrained.get_params()
    rbm = _small_rbm()
    twin = clone(rbm)
    assert twin.W is not rbm.W
    np.testing.assert_array_equal(twin.W, rbm.W)
    np.testing.assert_array_equal(twin.sample(4, 3, random_state=0), rbm.sample(4, 3, random_state=0))


def test_a_model_without_weights_says_to_fit_first():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError, match="fit"):
        RBM(n_hidden=3, backend="numpy").sample(2, 3)
    with pytest.raises(ValueError, match="all three"):
        RBM(np.zeros((4, 3)), backend="numpy")


# --------------------------------------------------------------------------- GPU

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_bernoulli_kernel_matches_twin(cp, dtype):
    rs = np.random.default_rng(0)
    pre = rs.normal(0, 3, (1000, 77)).astype(dtype)
    bias = rs.normal(0, 1, 77).astype(dtype)
    a = R.bernoulli_logits(pre, bias, (5, 6), 11)
    b = cp.asnumpy(R.bernoulli_logits(cp.asarray(pre), cp.asarray(bias), (5, 6), 11))
    # exp differs in the last bit between the CUDA and C libraries: a draw can differ only where
    # u (1 + e^-x) lies within a few ulp of 1.
    assert (a != b).mean() < 1e-4


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_visible_distribution_matches_enumeration(cp, dtype):
    rbm = _small_rbm(dtype, backend="cupy")
    v = rbm.sample(n_chains=200000, n_steps=40, random_state=4)
    assert _chi_square(rbm, v) > ALPHA


def test_gpu_fit_matches_cpu_quality(cp):
    X = R.load_binary_digits()
    gpu = RBM(n_hidden=64, learning_rate=0.05, n_iter=5, random_state=0, backend="cupy", progress=False).fit(X)
    cpu = RBM(n_hidden=64, learning_rate=0.05, n_iter=5, random_state=0, backend="numpy", progress=False).fit(X)
    assert abs(gpu.pseudo_likelihood(X) - cpu.pseudo_likelihood(X)) < 2.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_fused_epoch_follows_the_unfused_path(cp, dtype):
    """The one-launch epoch takes the same random words and arithmetic as the launch-per-product path.

    Only the order of the sums differs, so over 60 minibatches a Bernoulli draw may
    flip only where a uniform lands within rounding of its probability (about 1e-7
    per draw in float32, over ~40,000 draws): the weights agree to rounding, with
    uneven batches (the last minibatch is shorter) and two epochs.
    """
    X = R.load_binary_digits()[:295]
    kw = dict(learning_rate=0.05, batch_size=10, n_iter=2, random_state=3, backend="cupy", progress=False,
              dtype=dtype)
    fused = RBM(n_hidden=48, fused=True, **kw).fit(X)
    plain = RBM(n_hidden=48, fused=False, **kw).fit(X)
    tol = 2e-4 if dtype == np.float32 else 1e-10
    for a, b in ((fused.W, plain.W), (fused.visible_bias, plain.visible_bias), (fused.hidden_bias, plain.hidden_bias)):
        np.testing.assert_allclose(cp.asnumpy(a), cp.asnumpy(b), rtol=0, atol=tol)
    # and a test that can fail: another seed's chains give other weights
    other = RBM(n_hidden=48, fused=True, **{**kw, "random_state": 4}).fit(X)
    assert np.abs(cp.asnumpy(other.W) - cp.asnumpy(fused.W)).max() > 100 * tol


def test_gpu_fused_fit_on_digits_matches_scikit_learn_quality(cp):
    from sklearn.neural_network import BernoulliRBM

    X = R.load_binary_digits()
    ours = RBM(n_hidden=256, learning_rate=0.05, n_iter=10, random_state=0, backend="cupy", progress=False).fit(X)
    sk = BernoulliRBM(n_components=256, learning_rate=0.05, batch_size=10, n_iter=10, random_state=0).fit(X)
    assert abs(ours.pseudo_likelihood(X) - RBM.from_sklearn(sk, backend="numpy").pseudo_likelihood(X)) < 2.0


def test_sample_shows_a_progress_bar_by_default_as_ising_does(capsys):
    # None follows the model's progress setting (on by default); progress=False or RBM(progress=False) hides it.
    _small_rbm().sample(2, 3, random_state=0)
    assert "RBM" in capsys.readouterr().err
    _small_rbm().sample(2, 3, random_state=0, progress=False)
    rs = np.random.default_rng(7)
    quiet = RBM(rs.normal(0, 1.0, (5, 3)), rs.normal(0, 0.5, 5), rs.normal(0, 0.5, 3), progress=False, backend="numpy")
    quiet.sample(2, 3, random_state=0)
    assert capsys.readouterr().err == ""


def test_fit_read_on_the_class_is_the_instance_method():
    # help(RBM), the API docs and inspect read RBM.fit: they showed the deprecated classmethod's signature and
    # text, and RBM.fit(rbm, X) failed; the deprecated RBM.fit(X, n_hidden, ...) still warns and works.
    import inspect
    import warnings

    assert list(inspect.signature(RBM.fit).parameters) == ["self", "X", "y"]
    assert "persistent contrastive divergence" in " ".join(RBM.fit.__doc__.split())
    X = (np.random.default_rng(0).random((20, 5)) > 0.5).astype(float)
    r = RBM(n_hidden=3, n_iter=2, random_state=0, progress=False, backend="numpy")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert RBM.fit(r, X) is r
    with pytest.warns(DeprecationWarning, match="deprecated"):
        assert RBM.fit(X, 3, n_iter=2, progress=False, backend="numpy").W.shape == (5, 3)


def test_feature_names_of_a_dataframe_fit_are_checked():
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame((np.random.default_rng(0).random((30, 4)) > 0.5).astype(float), columns=list("abcd"))
    r = RBM(n_hidden=3, n_iter=2, random_state=0, progress=False, backend="numpy").fit(X)
    assert list(r.feature_names_in_) == list("abcd")
    with pytest.raises(ValueError, match="another order"):
        r.transform(X[["d", "c", "b", "a"]])
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        r.transform(X.values)


def test_settings_are_kept_as_given_and_checked_by_fit():
    assert repr(RBM()) == "RBM()"
    assert RBM(dtype="float64").get_params()["dtype"] == "float64"
    with pytest.raises(ValueError, match="learning_rate"):
        RBM(n_hidden=2, learning_rate="0.1", progress=False, backend="numpy").fit(np.eye(3))


def test_gibbs_steps_show_no_progress_bar(capsys):
    _small_rbm().gibbs(np.zeros((2, 5)), random_state=0)
    assert capsys.readouterr().err == ""
