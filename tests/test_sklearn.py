"""scikit-learn's own machinery with gpumcmc's estimators: Pipeline, GridSearchCV, cross_val_score,
clone, check_is_fitted, and ``check_estimator`` with each check that cannot pass named with its reason.

Every fit here is a short run on the NumPy backend: these tests check the contract, not the
statistics (the models' own test files do that).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")

from sklearn import config_context  # noqa: E402
from sklearn.base import clone, is_classifier, is_regressor  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402
from sklearn.utils.validation import check_is_fitted  # noqa: E402

from gpumcmc.models import (LDA, RBM, BayesianGLM, BayesianNetwork, DPGaussianMixture,  # noqa: E402
                            HierarchicalGLM, Ising)
from gpumcmc.nested import NestedSampler  # noqa: E402


def _blobs(n=120, seed=0):
    rs = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [6.0, 6.0], [-6.0, 6.0]])
    return centres[rs.integers(0, 3, n)] + rs.normal(0, 1, (n, 2))


def _counts(n_docs=40, n_words=12, seed=0):
    rs = np.random.default_rng(seed)
    topics = rs.dirichlet(np.full(n_words, 0.3), 2)
    return np.stack([rs.multinomial(30, topics[i % 2]) for i in range(n_docs)])


def _logistic(n=150, seed=0):
    rs = np.random.default_rng(seed)
    X = rs.normal(size=(n, 3))
    y = (rs.random(n) < 1 / (1 + np.exp(-(X @ np.array([1.5, -1.0, 0.5]))))).astype(float)
    return X, y


def _mixture(**kw):
    return DPGaussianMixture(**{"n_components": 4, "n_iter": 20, "burn_in": 10, "progress": False,
                                "backend": "numpy", "random_state": 0, **kw})


def _lda(**kw):
    return LDA(**{"n_components": 2, "n_iter": 20, "burn_in": 10, "progress": False, "backend": "numpy",
                  "random_state": 0, **kw})


def _glm(**kw):
    return BayesianGLM(**{"family": "bernoulli", "n_samples": 30, "n_warmup": 20, "n_chains": 2,
                          "progress": False, "backend": "numpy", "random_state": 0, **kw})


def _hglm(**kw):
    return HierarchicalGLM(**{"family": "bernoulli", "n_samples": 20, "n_warmup": 10, "n_chains": 2,
                              "progress": False, "backend": "numpy", "random_state": 0, **kw})


@pytest.mark.parametrize("make", [_mixture, _lda, _glm, _hglm], ids=["mixture", "lda", "glm", "hglm"])
def test_clone_and_not_fitted(make):
    est = make()
    c = clone(est)
    assert c is not est and c.get_params() == est.get_params()
    with pytest.raises(NotFittedError):
        check_is_fitted(est)


def test_mixture_in_pipeline_grid_search_and_cross_val_score():
    X = _blobs()
    pipe = make_pipeline(StandardScaler(), _mixture())
    labels = pipe.fit(X).predict(X)
    assert labels.shape == (len(X),)
    check_is_fitted(pipe[-1])
    # score, which the search maximises, is the mean log-likelihood: on three separated blobs 4 components
    # (one left empty) beat 2 (two blobs merged) on each held-out half, by about 0.3 nats a point
    assert pipe[-1].score(pipe[0].transform(X)) == pytest.approx(
        pipe[-1].score_samples(pipe[0].transform(X)).mean(), rel=1e-6)
    search = GridSearchCV(_mixture(), {"n_components": [2, 4]}, cv=KFold(2, shuffle=True, random_state=0))
    search.fit(X)
    assert search.best_params_["n_components"] == 4
    res = search.cv_results_
    assert all(res[f"split{i}_test_score"][1] > res[f"split{i}_test_score"][0] + 0.1 for i in range(2)), res
    scores = cross_val_score(make_pipeline(StandardScaler(), _mixture()), X, cv=3)
    assert scores.shape == (3,) and np.all(np.isfinite(scores))


def test_lda_in_pipeline_grid_search_and_cross_val_score():
    X = _counts()
    theta = make_pipeline(_lda()).fit_transform(X)
    assert theta.shape == (len(X), 2)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-5)
    # score, which the search maximises, is the log-likelihood: the two planted topics beat one topic on
    # each held-out half (by over 40 nats), so the search picks 2
    search = GridSearchCV(_lda(), {"n_components": [1, 2]}, cv=2)
    search.fit(X)
    assert search.best_params_["n_components"] == 2
    res = search.cv_results_
    assert all(res[f"split{i}_test_score"][1] > res[f"split{i}_test_score"][0] + 20 for i in range(2)), res
    scores = cross_val_score(_lda(), X, cv=2)
    assert scores.shape == (2,) and np.all(np.isfinite(scores))


def test_glm_in_pipeline_grid_search_and_cross_val_score():
    X, y = _logistic()
    pipe = make_pipeline(StandardScaler(), _glm()).fit(X, y)
    assert pipe.predict(X).shape == y.shape
    # bernoulli's score is the accuracy of predict, as a scikit-learn classifier's; with this seed the fit
    # classifies within 0.1 of the true coefficients' rule (whose accuracy is about 0.75 here)
    acc = pipe.score(X, y)
    assert acc == np.mean(pipe.predict(X) == y)
    truth = np.mean((X @ np.array([1.5, -1.0, 0.5]) > 0) == y)
    assert acc >= truth - 0.1
    # the search maximises the accuracy: a prior of scale 0.01 shrinks the coefficients to about 0.01 and
    # classifies worse on each held-out half (by about 0.12) than the default scale, which it picks
    search = GridSearchCV(_glm(), {"prior_scale": [0.01, 2.5]}, cv=2).fit(X, y)
    assert search.best_params_["prior_scale"] == 2.5
    res = search.cv_results_
    assert all(res[f"split{i}_test_score"][1] > res[f"split{i}_test_score"][0] + 0.05 for i in range(2)), res
    scores = cross_val_score(_glm(), X, y, cv=3)
    assert scores.shape == (3,) and np.all(np.isfinite(scores))


def test_hierarchical_glm_in_pipeline_routes_groups():
    X, y = _logistic(200)
    groups = np.arange(len(y)) % 4
    pipe = make_pipeline(StandardScaler(), _hglm())
    pipe.fit(X, y, hierarchicalglm__groups=groups)
    check_is_fitted(pipe[-1])
    # the groups reached the fit: the draws are those of a fit on the scaled X with the groups
    assert pipe[-1].groups_.tolist() == [0, 1, 2, 3]
    np.testing.assert_array_equal(pipe[-1].beta_draws_,
                                  _hglm().fit(StandardScaler().fit_transform(X), y, groups).beta_draws_)
    assert clone(pipe).get_params()["hierarchicalglm__n_chains"] == 2


def test_estimator_type_follows_the_family():
    # one class for the three families: scikit-learn's tags say classifier or regressor from the parameter
    for make in (_glm, _hglm):
        assert is_classifier(make()) and not is_regressor(make())
        assert is_regressor(make(family="gaussian")) and is_regressor(make(family="poisson"))
    assert not hasattr(_glm(family="gaussian"), "predict_proba") and hasattr(_glm(), "predict_proba")


def test_bad_parameters_raise_scikit_learns_error_with_the_models_sentence():
    from sklearn.utils._param_validation import InvalidParameterError

    X, y = _logistic(20)
    with pytest.raises(InvalidParameterError, match=r"The 'n_chains' parameter of BayesianGLM must be an int "
                                                    r"in the range \[1, inf\). Got 0 instead. n_chains must be "
                                                    r"at least 1, got 0"):
        _glm(n_chains=0).fit(X, y)
    with pytest.raises(InvalidParameterError, match="The 'start' parameter of LDA must be a str among"):
        _lda(start="kmeans").fit(_counts())
    with pytest.raises(InvalidParameterError, match="The 'tol' parameter of DPGaussianMixture"):
        _mixture(tol=-1.0).fit(_blobs())


def test_hierarchical_glm_in_cross_val_score_and_grid_search_with_routed_groups():
    X, y = _logistic(200)
    groups = np.arange(len(y)) % 4
    with config_context(enable_metadata_routing=True):
        est = _hglm().set_fit_request(groups=True).set_score_request(groups=True)
        scores = cross_val_score(est, X, y, cv=2, params={"groups": groups})
    # each fold's score is the fold's own fit and score, with the fold's groups
    from sklearn.model_selection import StratifiedKFold

    by_hand = [_hglm().fit(X[tr], y[tr], groups[tr]).score(X[te], y[te], groups[te])
               for tr, te in StratifiedKFold(2).split(X, y)]
    assert scores.tolist() == by_hand
    with config_context(enable_metadata_routing=True):
        search = GridSearchCV(est, {"covariance": ["full", "diag"]}, cv=2).fit(X, y, groups=groups)
        assert search.best_params_["covariance"] in ("full", "diag")
    fitted = _hglm().fit(X, y, groups)
    assert fitted.score(X, y, groups) == np.mean(fitted.predict(X, groups) == y)
    with pytest.raises(ValueError, match="not seen at fit"):
        fitted.predict(X[:3], np.array([0, 1, 7]))
    with pytest.raises(ValueError, match="fitted on 4 groups"):
        fitted.predict(X)


# check_estimator: each estimator with short runs on NumPy; the checks each one cannot pass are named, with
# their reasons, by the estimator itself (_expected_failed_checks) and must fail (strict xfail).
_CHECKED = [
    LDA(n_components=2, n_iter=5, burn_in=5, transform_iter=4, progress=False, backend="numpy", random_state=0),
    DPGaussianMixture(n_components=3, n_iter=5, burn_in=5, progress=False, backend="numpy", random_state=0),
    # float64: in float32, BEM's first sweeps on the checks' small uniform or tied data can lose a covariance's
    # positive definiteness (FloatingPointError naming dtype='float64'); its own tests cover float32
    DPGaussianMixture(n_components=3, method="bem", n_iter=5, n_init=2, progress=False, backend="numpy",
                      random_state=0, dtype="float64"),
    BayesianGLM(n_samples=10, n_warmup=10, n_chains=1, progress=False, backend="numpy", random_state=0),
    BayesianGLM(family="gaussian", n_samples=10, n_warmup=10, n_chains=1, progress=False, backend="numpy",
                random_state=0),
    HierarchicalGLM(n_samples=10, n_warmup=10, n_chains=1, progress=False, backend="numpy", random_state=0),
    RBM(n_hidden=3, n_iter=2, batch_size=5, progress=False, backend="numpy", random_state=0),
    BayesianGLM(family="poisson", n_samples=10, n_warmup=10, n_chains=1, progress=False, backend="numpy",
                random_state=0),
    HierarchicalGLM(family="poisson", n_samples=10, n_warmup=10, n_chains=1, progress=False, backend="numpy",
                    random_state=0),
]


@parametrize_with_checks(_CHECKED, expected_failed_checks=lambda est: est._expected_failed_checks())
def test_check_estimator(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check(estimator)


# The models whose settings moved into __init__: clone gives an equal, unfitted model whose run repeats
# the original's.
def _net():
    return BayesianNetwork({"a": [], "b": ["a"]}, {"a": ["0", "1"], "b": ["0", "1"]}, n_iter=4,
                           backend="numpy", random_state=1, progress=False)


def _nested():
    return NestedSampler(_gauss_loglike, _box, 2, nlive=30, dlogz=1.0, random_state=3, progress=False,
                         backend="numpy")


def _gauss_loglike(x):
    return -0.5 * (x ** 2).sum(-1)


def _box(u):
    return 10.0 * u - 5.0


def _net_result(net):
    X = np.array([[0, 1], [1, -1], [-1, 0], [1, 1], [0, 0]])  # state indices, -1 for missing
    fitted = net.fit(X)
    return np.concatenate([np.ravel(fitted.trace_[v]) for v in fitted.nodes])


@pytest.mark.parametrize("make, result", [
    (_net, _net_result),
    (lambda: Ising((8, 8), beta=0.4, field=0.1, backend="numpy"),
     lambda m: m.sample(3, n_chains=2, random_state=1, progress=False).energy),
    (lambda: RBM(n_hidden=3, n_iter=2, batch_size=5, backend="numpy", random_state=0, progress=False),
     lambda m: m.fit((np.arange(40).reshape(10, 4) % 3 == 0).astype(np.float32)).W),
    (_nested, lambda s: np.asarray(s.run().results.logz)),
], ids=["bayesnet", "ising", "rbm", "nested"])
def test_clone_of_the_models_with_settings_in_init(make, result):
    import inspect

    model = make()
    sig = inspect.signature(type(model).__init__)
    assert not any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values())
    twin = clone(model)
    assert twin is not model and type(twin) is type(model)
    p, q = model.get_params(deep=False), twin.get_params(deep=False)
    assert p.keys() == q.keys() == set(sig.parameters) - {"self"}
    for k in p:  # clone passes each setting unchanged (a deep copy of a dict or an array)
        assert type(p[k]) is type(q[k]) and (p[k] is q[k] or repr(p[k]) == repr(q[k])), k
    assert clone(model).__dict__.keys() == twin.__dict__.keys()
    np.testing.assert_array_equal(result(twin), result(model))


_ON_BACKEND = {
    "lda": (lambda b: _lda(backend=b), lambda: (_counts(), None)),
    "mixture": (lambda b: _mixture(backend=b), lambda: (_blobs(), None)),
    "glm": (lambda b: _glm(backend=b), _logistic),
    "hglm": (lambda b: _hglm(backend=b), _logistic),
}


@pytest.mark.parametrize("name", list(_ON_BACKEND))
def test_contract_on_each_backend(name, xp):
    """On the GPU too: fit from host data, check_is_fitted, the predict-side methods on host data, the
    estimator's attributes unchanged by them, and a wrong feature count refused in scikit-learn's words."""
    make, data = _ON_BACKEND[name]
    X, y = data()
    est = make("numpy" if xp is np else "cupy")
    est.fit(X) if y is None else est.fit(X, y)
    check_is_fitted(est)
    before = dict(vars(est))
    method = est.transform if name == "lda" else est.predict
    out = method(X)
    assert isinstance(out, np.ndarray) and out.shape[0] == len(X)
    assert np.isfinite(est.score(X) if y is None else est.score(X, y))
    assert vars(est).keys() == before.keys() and all(vars(est)[k] is before[k] for k in before)
    with pytest.raises(ValueError, match=f"X has {X.shape[1] + 1} features, but {type(est).__name__} is "
                                         f"expecting {X.shape[1]} features as input"):
        method(np.concatenate([X, X[:, :1]], axis=1))


def test_without_scikit_learn_the_shim_keeps_the_conventions():
    # A fresh interpreter in which scikit-learn cannot be imported: the estimators still import, fit, predict,
    # score and refuse a bad setting with their own sentence.
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "sklearn" or name.startswith("sklearn."):
                    raise ImportError("scikit-learn is blocked in this test")
        sys.meta_path.insert(0, Block())
        import numpy as np
        from gpumcmc.models import LDA, BayesianGLM, DPGaussianMixture, HierarchicalGLM
        from gpumcmc.sampling._estimator import HAVE_SKLEARN, NotFittedError
        assert not HAVE_SKLEARN
        rs = np.random.default_rng(0)
        X = rs.normal(size=(60, 2)); y = (X[:, 0] > 0).astype(float); g = np.arange(60) % 3
        kw = dict(n_samples=5, n_warmup=5, n_chains=1, progress=False, backend="numpy", random_state=0)
        assert 0.5 < BayesianGLM(**kw).fit(X, y).score(X, y) <= 1
        assert 0.5 < HierarchicalGLM(**kw).fit(X, y, g).score(X, y, g) <= 1
        assert not hasattr(BayesianGLM(family="gaussian"), "predict_proba")
        m = DPGaussianMixture(n_components=3, n_iter=5, burn_in=5, progress=False, backend="numpy", random_state=0)
        assert m.fit(X).predict(X).shape == (60,)
        lda = LDA(2, n_iter=3, burn_in=2, progress=False, backend="numpy", random_state=0)
        assert lda.fit_transform(rs.poisson(1, (10, 6))).shape == (10, 2)
        assert repr(LDA(3)) == "LDA(n_components=3)" and LDA(3).set_params(n_iter=5).get_params()["n_iter"] == 5
        try:
            BayesianGLM(n_chains=0, backend="numpy").fit(X, y)
        except ValueError as e:
            assert str(e).startswith("n_chains must be at least 1, got 0"), e
        else:
            raise AssertionError("n_chains=0 was accepted")
        try:
            LDA(2).transform(np.ones((2, 6)))
        except NotFittedError:
            pass
        else:
            raise AssertionError("transform before fit did not raise NotFittedError")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


# --- scikit-learn's methods for each kind of model: the RBM as BernoulliRBM, LDA's feature names, the
# mixture's fit_predict and sample.

def _binary(n=60, d=8, seed=0):
    return (np.random.default_rng(seed).random((n, d)) < 0.3).astype(np.float64)


def test_rbm_transform_and_score_samples_match_bernoulli_rbm():
    """With scikit-learn's weights, transform is BernoulliRBM.transform and score_samples (same seed, so the
    same flipped features) is BernoulliRBM.score_samples; pseudo_likelihood is their mean."""
    from sklearn.neural_network import BernoulliRBM

    X = _binary()
    sk = BernoulliRBM(n_components=5, n_iter=3, random_state=7).fit(X)
    ours = RBM.from_sklearn(sk, backend="numpy")
    np.testing.assert_allclose(ours.transform(X), sk.transform(X), rtol=1e-12)
    np.testing.assert_allclose(ours.score_samples(X, random_state=7), sk.score_samples(X), rtol=1e-12)
    assert ours.pseudo_likelihood(X, random_state=3) == pytest.approx(ours.score_samples(X, random_state=3).mean(),
                                                                      rel=1e-12)
    assert list(ours.get_feature_names_out()) == [f"rbm{j}" for j in range(5)]
    with pytest.raises(ValueError, match="8 visible units"):
        ours.transform(X[:, :5])
    with pytest.raises(ValueError, match=r"values in \[0, 1\]"):
        ours.score_samples(X + 0.5)
    # probabilities in [0, 1] are taken, as BernoulliRBM takes them (its digits example scales to [0, 1])
    np.testing.assert_allclose(ours.score_samples(X * 0.5, random_state=7), sk.score_samples(X * 0.5), rtol=1e-12)


def test_rbm_fit_transform_gibbs_and_pipeline():
    """fit_transform is fit then transform; gibbs is one block-Gibbs step (sample with n_steps=1); the RBM
    feeds a classifier in a Pipeline, as scikit-learn's RBM example does."""
    from sklearn.linear_model import LogisticRegression

    X = _binary(n=80)
    kw = dict(n_hidden=6, n_iter=3, random_state=0, backend="numpy", progress=False)
    np.testing.assert_array_equal(RBM(**kw).fit_transform(X), RBM(**kw).fit(X).transform(X))
    rbm = RBM(**kw).fit(X)
    v = rbm.gibbs(X[:10], random_state=4)
    assert v.shape == (10, 8) and set(np.unique(v)) <= {0, 1}
    np.testing.assert_array_equal(v, rbm.sample(10, 1, random_state=4, initial=X[:10]))
    y = X[:, 0].astype(int)   # a label the visible units carry
    pipe = make_pipeline(RBM(**kw), LogisticRegression()).fit(X, y)
    # the classifier sees the RBM's hidden probabilities: the same model as one fitted on them by hand
    H = RBM(**kw).fit_transform(X)
    by_hand = LogisticRegression().fit(H, y)
    np.testing.assert_allclose(pipe[-1].coef_, by_hand.coef_, rtol=1e-10)
    np.testing.assert_array_equal(pipe.predict_proba(X), by_hand.predict_proba(H))


def test_lda_feature_names_name_its_topics():
    X = _counts()
    lda = _lda(n_components=3).fit(X)
    names = lda.get_feature_names_out()
    assert list(names) == ["lda0", "lda1", "lda2"] and lda.transform(X).shape[1] == len(names)


def test_mixture_fit_predict_is_fit_then_predict():
    X = _blobs()
    np.testing.assert_array_equal(_mixture().fit_predict(X), _mixture().fit(X).predict(X))


def test_mixture_sample_draws_from_the_fitted_mixture():
    """sample(n) returns (X, y) grouped by component, with each component's share, mean and covariance those
    of the fitted mixture, each within 5 standard errors: 4 shares, and 2 means and 3 covariance entries of
    each of at most 4 components, 24 checks of 2-sided p = 5.7e-7, 1.4e-5 together (below ALPHA)."""
    X = _blobs(n=600) @ np.array([[2.0, 0.8], [0.0, 0.5]])   # components with correlated, unequal spreads
    m = _mixture(method="bem", n_init=1).fit(X)
    with pytest.raises(NotFittedError):
        _mixture().sample(3)
    with pytest.raises(ValueError, match="n_samples"):
        m.sample(0)
    n = 40_000
    S, y = m.sample(n, random_state=5)
    assert S.shape == (n, 2) and y.shape == (n,) and (np.diff(y) >= 0).all()
    np.testing.assert_array_equal(S, m.sample(n, random_state=5)[0])
    share = np.bincount(y, minlength=len(m.weights_)) / n
    assert np.all(np.abs(share - m.weights_) <= 5 * np.sqrt(m.weights_ * (1 - m.weights_) / n) + 1e-12)
    for j in np.flatnonzero(m.weights_ * n > 1000):
        Sj = S[y == j]
        se = np.sqrt(np.diag(m.covariances_[j]) / len(Sj))
        assert np.all(np.abs(Sj.mean(axis=0) - m.means_[j]) <= 5 * se)
        # a normal sample's covariance entry (a, b) has variance (C_aa C_bb + C_ab^2) / n
        C = m.covariances_[j]
        se_cov = np.sqrt((np.outer(np.diag(C), np.diag(C)) + C ** 2) / len(Sj))
        assert np.all(np.abs(np.cov(Sj.T) - C) <= 5 * se_cov), (np.cov(Sj.T), C)


def test_rbm_methods_on_the_gpu_equal_numpys(cp):
    """transform, score_samples and gibbs of one float64 model on CuPy and on NumPy (transform and
    score_samples come back on the host either way)."""
    rs = np.random.default_rng(1)
    W, b, c = rs.normal(0, 0.3, (8, 5)), rs.normal(0, 0.3, 8), rs.normal(0, 0.3, 5)
    X = _binary()
    on_np = RBM(W, b, c, dtype=np.float64, backend="numpy")
    on_gpu = RBM(W, b, c, dtype=np.float64, backend="cupy")
    t = on_gpu.transform(cp.asarray(X))
    assert isinstance(t, np.ndarray)
    np.testing.assert_allclose(t, on_np.transform(X), rtol=1e-12)
    np.testing.assert_allclose(on_gpu.score_samples(X, random_state=2), on_np.score_samples(X, random_state=2),
                               rtol=1e-10)
    # the same random words; exp and the products differ in the last bit between the CUDA and C libraries, so
    # a draw can differ only where its uniform lies within a few ulp of its probability (not among these 96)
    np.testing.assert_array_equal(cp.asnumpy(on_gpu.gibbs(X[:12], random_state=3)), on_np.gibbs(X[:12], random_state=3))


def test_mixture_precisions_follow_scikit_learns_convention():
    from scipy import linalg

    m = _mixture(method="bem", n_init=1).fit(_blobs() @ np.array([[1.0, 0.6], [0.0, 0.4]]))
    for j, cov in enumerate(m.covariances_):
        np.testing.assert_allclose(m.precisions_[j] @ cov, np.eye(2), atol=1e-10)
        expected = linalg.solve_triangular(linalg.cholesky(cov, lower=True), np.eye(2), lower=True).T
        np.testing.assert_allclose(m.precisions_cholesky_[j], expected, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(m.precisions_cholesky_[j] @ m.precisions_cholesky_[j].T, m.precisions_[j],
                                   rtol=1e-10)
    assert not hasattr(_mixture(), "precisions_")


def test_rbm_takes_scaled_digits_as_bernoulli_rbm_does():
    """scikit-learn's RBM example feeds digits scaled to [0, 1] to BernoulliRBM in a Pipeline; the guide says
    RBM works there too. It refused anything but 0/1. After fit: n_features_in_ and h_samples_ (the persistent
    chains), and check_is_fitted holds for a model made from BernoulliRBM's weights."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import BernoulliRBM
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import minmax_scale
    from sklearn.utils.validation import check_is_fitted

    X, y = load_digits(return_X_y=True)
    X = minmax_scale(X[:300])
    pipe = make_pipeline(RBM(n_hidden=32, n_iter=5, learning_rate=0.06, random_state=0, progress=False,
                             backend="numpy"), LogisticRegression(max_iter=500)).fit(X, y[:300])
    theirs = make_pipeline(BernoulliRBM(n_components=32, n_iter=5, learning_rate=0.06, random_state=0),
                           LogisticRegression(max_iter=500)).fit(X, y[:300])
    rbm = pipe[0]
    assert pipe.score(X, y[:300]) > theirs.score(X, y[:300]) - 0.15, (pipe.score(X, y[:300]), theirs.score(X, y[:300]))
    assert rbm.n_features_in_ == 64 and rbm.h_samples_.shape == (10, 32)
    check_is_fitted(RBM.from_sklearn(theirs[0]))
