"""GLM likelihood kernel and the slice-within-Gibbs GLM samplers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import optimize, stats

from gpumcmc._config import config
from gpumcmc.glm import loglik_and_grad
from gpumcmc.models.glm import BayesianGLM, HierarchicalGLM

from conftest import ALPHA, glm_data

FAMILIES = ("bernoulli", "poisson", "gaussian")


def _data(family, N=60, K=3, seed=0):
    return glm_data(family, N, K, seed)


def _reference(X, y, b, family, w, off, sigma):
    eta = X @ b + (0 if off is None else off)
    if family == "bernoulli":
        ll = y * eta - np.logaddexp(0, eta)
    elif family == "poisson":
        ll = stats.poisson.logpmf(y, np.exp(eta))
    else:
        ll = stats.norm.logpdf(y, eta, sigma)
    return np.sum(ll * (1 if w is None else w))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("extras", [False, True])
def test_f_and_g_against_reference_and_finite_differences(family, extras):
    X, y = _data(family)
    rs = np.random.default_rng(1)
    w = rs.random(len(y)) + 0.5 if extras else None
    off = rs.normal(size=len(y)) * 0.3 if extras else None
    B = rs.normal(size=(5, 3)) * 0.4
    f, g = loglik_and_grad(X, y, B, family, weights=w, offset=off, sigma=0.7)
    assert f.shape == (5,) and g.shape == (5, 3)
    h = 1e-6
    for b in range(5):
        ref = _reference(X, y, B[b], family, w, off, 0.7)
        np.testing.assert_allclose(f[b], ref, rtol=1e-10)
        fd = [(_reference(X, y, B[b] + h * e, family, w, off, 0.7)
               - _reference(X, y, B[b] - h * e, family, w, off, 0.7)) / (2 * h) for e in np.eye(3)]
        np.testing.assert_allclose(g[b], fd, rtol=1e-5, atol=1e-5)
    # One chain given as a 1-D beta: the value and gradient of that row of the batched call, as a scalar and
    # a (K,) vector (two statements: assert_allclose returns None, so `a and b` never ran b).
    f1, g1 = loglik_and_grad(X, y, B[2], family, weights=w, offset=off, sigma=0.7)
    assert np.ndim(f1) == 0 and g1.shape == (3,)
    np.testing.assert_allclose(f1, f[2], rtol=1e-12)
    np.testing.assert_allclose(g1, g[2], rtol=1e-12)


def test_bernoulli_stable_for_large_eta():
    X = np.array([[1000.0], [-1000.0], [800.0]])
    y = np.array([0.0, 1.0, 1.0])
    f, g = loglik_and_grad(X, y, np.ones(1), "bernoulli")
    np.testing.assert_allclose(f, -2000.0)
    np.testing.assert_allclose(g, [-1000.0 - 1000.0])
    assert np.isfinite(f) and np.all(np.isfinite(g))


def test_float32():
    X, y = _data("bernoulli")
    f, g = loglik_and_grad(X.astype(np.float32), y.astype(np.float32), np.zeros(3, np.float32))
    assert f.dtype == np.float32 and g.dtype == np.float32
    np.testing.assert_allclose(f, -len(y) * np.log(2), rtol=1e-5)


@pytest.mark.parametrize("bad, match", [
    (dict(y=np.array([0.0, 2.0, 1.0])), "0 and 1"),
    (dict(y=np.array([0.0, np.nan, 1.0])), "NaN"),
    (dict(X=np.array([[np.inf], [1.0], [1.0]])), "NaN or inf"),
    (dict(y=np.array([0.0, 1.0])), "shape"),
    (dict(beta=np.zeros(2)), "beta must"),
    (dict(family="probit"), "family"),
])
def test_bad_input_loglik(bad, match):
    args = dict(X=np.ones((3, 1)), y=np.array([0.0, 1.0, 1.0]), beta=np.zeros(1), family="bernoulli")
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        loglik_and_grad(args["X"], args["y"], args["beta"], args["family"])


# Bad values of loglik_and_grad's input, each with the message the check gives (the sentence the earlier
# separate check gave, then where): (family, what to spoil, how, expected message). Rows 3 and 7 of 10.
_BAD_VALUES = [
    ("bernoulli", "y", lambda a: a.__setitem__(3, 2.0),
     "y must hold only 0 and 1 for family='bernoulli'; encode the classes as 0/1. The first row that does not is 3."),
    ("bernoulli", "y", lambda a: a.__setitem__(7, np.nan), "y contains NaN or inf; remove those rows first. "
                                                           "The first such row is 7."),
    ("poisson", "y", lambda a: a.__setitem__(3, 1.5),
     "y must hold non-negative integer counts for family='poisson'. The first row that does not is 3."),
    ("poisson", "y", lambda a: a.__setitem__(7, -1.0),
     "y must hold non-negative integer counts for family='poisson'. The first row that does not is 7."),
    ("gaussian", "y", lambda a: a.__setitem__(7, np.inf), "y contains NaN or inf; remove those rows first. "
                                                          "The first such row is 7."),
    ("bernoulli", "X", lambda a: a.__setitem__((7, 1), np.inf),
     "X contains NaN or inf; remove or impute those values first. The first such row is 7."),
    ("gaussian", "X", lambda a: a.__setitem__((3, 0), np.nan),
     "X contains NaN or inf; remove or impute those values first. The first such row is 3."),
    ("poisson", "beta", lambda a: a.__setitem__(1, np.nan), "beta contains NaN or inf; every coefficient must be "
                                                            "finite."),
    ("bernoulli", "beta2", lambda a: a.__setitem__((2, 0), -np.inf),
     "beta contains NaN or inf; every coefficient must be finite. The first such chain (row of beta) is 2."),
    ("gaussian", "offset", lambda a: a.__setitem__(7, np.nan), "offset contains NaN or inf; every value must be "
                                                               "finite. The first such row is 7."),
    ("bernoulli", "weights", lambda a: a.__setitem__(3, np.inf), "weights contains NaN or inf; every weight must "
                                                                 "be finite. The first such row is 3."),
    # Two bad values: the lower row wins, and within a row the lower code (X before y).
    ("bernoulli", "Xy", lambda a: None,
     "X contains NaN or inf; remove or impute those values first. The first such row is 3."),
]


def _bad_case(family, what, spoil, dtype=np.float64):
    X, y = _data(family, N=10, K=2, seed=4)
    args = dict(X=X.astype(dtype), y=y.astype(dtype), beta=np.full(2, 0.1, dtype), weights=None, offset=None)
    if what == "beta2":
        args["beta"] = np.full((3, 2), 0.1, dtype)
    if what in ("offset", "weights"):
        args[what] = np.ones(10, dtype)
    if what == "Xy":
        args["y"][5] = 0.5
        args["y"][3] = 7.0
        args["X"][3, 1] = np.nan
    else:
        spoil(args["beta" if what == "beta2" else what])
    return args


@pytest.mark.parametrize("family, what, spoil, message", _BAD_VALUES)
def test_loglik_bad_values_name_the_row(xp, family, what, spoil, message):
    """The default check refuses each bad value with the same message on both backends, and check=False
    skips it (the call then returns whatever the arithmetic gives)."""
    a = {k: (None if v is None else xp.asarray(v)) for k, v in _bad_case(family, what, spoil).items()}
    with pytest.raises(ValueError) as e:
        loglik_and_grad(a["X"], a["y"], a["beta"], family, weights=a["weights"], offset=a["offset"])
    assert str(e.value) == message
    with np.errstate(all="ignore"):
        loglik_and_grad(a["X"], a["y"], a["beta"], family, weights=a["weights"], offset=a["offset"], check=False)


def test_loglik_check_follows_validation_switch():
    import gpumcmc
    a = _bad_case(*_BAD_VALUES[0][:3])
    with gpumcmc.validation(False):
        loglik_and_grad(a["X"], a["y"], a["beta"], "bernoulli")  # no check while value checks are off
    with pytest.raises(ValueError, match="0 and 1"):
        loglik_and_grad(a["X"], a["y"], a["beta"], "bernoulli")


@pytest.mark.parametrize("kernel", ["rows", "tiled", "gemm"])
@pytest.mark.parametrize("family, what, spoil, message", _BAD_VALUES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_loglik_bad_values_every_kernel(cp, kernel, family, what, spoil, message, dtype):
    """Each GPU path gives the NumPy check's message: "rows" and "tiled" note the value in the status
    word, "gemm" checks in a pass of its own."""
    a = {k: (None if v is None else cp.asarray(v)) for k, v in _bad_case(family, what, spoil, dtype).items()}
    with pytest.raises(ValueError) as e:
        loglik_and_grad(a["X"], a["y"], a["beta"], family, weights=a["weights"], offset=a["offset"], kernel=kernel)
    assert str(e.value) == message


@pytest.mark.parametrize("kernel, N", [("rows", 300_000), ("tiled", 300_000), ("rows", 1000)])
def test_loglik_check_far_row_and_deferred(cp, kernel, N):
    """A bad value in the last row of many blocks' worth of rows is found and named; inside
    gpumcmc.deferred_validation() the call does not wait and gpumcmc.check() raises it; a good call
    waits for its kernels once (a direct call) and check=False not at all."""
    import gpumcmc
    from gpumcmc import _status
    rs = np.random.default_rng(9)
    X = cp.asarray(rs.normal(size=(N, 5)), dtype=cp.float32)
    y = cp.asarray(rs.random(N) < 0.5, dtype=cp.float32)
    b = cp.zeros((2, 5), dtype=cp.float32)
    before = _status.syncs
    f, g = loglik_and_grad(X, y, b, kernel=kernel)
    assert _status.syncs - before == 1
    before = _status.syncs
    loglik_and_grad(X, y, b, kernel=kernel, check=False)
    assert _status.syncs == before
    y[N - 1] = 3.0
    with pytest.raises(ValueError, match=f"The first row that does not is {N - 1}."):
        loglik_and_grad(X, y, b, kernel=kernel)
    y[N - 1] = 1.0
    X[N - 2, 4] = cp.nan
    with gpumcmc.deferred_validation():
        loglik_and_grad(X, y, b, kernel=kernel)  # recorded, not raised
        with pytest.raises(ValueError, match=f"X contains NaN or inf; .* The first such row is {N - 2}."):
            gpumcmc.check()
    X[N - 2, 4] = 0.0
    f2, g2 = loglik_and_grad(X, y, b, kernel=kernel)  # the word was read and reset: good input passes
    assert bool(cp.isfinite(f2).all())


def test_bad_input_models():
    X, y = _data("bernoulli", N=20)
    with pytest.raises(ValueError, match="counts"):
        BayesianGLM("poisson", backend="numpy").fit(X, y - 0.5)
    with pytest.raises(ValueError, match="rows"):
        BayesianGLM(backend="numpy").fit(X, y[:-1])
    with pytest.raises(ValueError, match="NaN"):
        BayesianGLM(backend="numpy").fit(np.where(X > 1, np.nan, X), y)
    with pytest.raises(ValueError, match="one label per row"):
        HierarchicalGLM(backend="numpy").fit(X, y, np.zeros(5))


_BAD_SETTINGS = [
    (dict(n_chains=0), ValueError, "n_chains must be at least 1, got 0"),
    (dict(n_chains=2.5), TypeError, "n_chains must be an integer"),
    (dict(family="gaussian", sigma=0), ValueError, "sigma must be a positive finite number, got 0"),
    (dict(family="gaussian", sigma=float("nan")), ValueError, "sigma must be a positive finite number"),
    (dict(n_samples=0), ValueError, "n_samples must be at least 1, got 0"),
    (dict(n_warmup=-1), ValueError, "n_warmup must be at least 0"),
    (dict(max_shrink=0), ValueError, "max_shrink must be at least 1"),
    (dict(prior_scale=float("inf")), ValueError, "prior_scale must be a positive finite number"),
    (dict(family="probit"), ValueError, "family must be one of"),
]


# Every bad setting against each model that takes it (HierarchicalGLM has no prior_scale: that case is not
# in its table, where it once ran as a test that returned before checking anything).
@pytest.mark.parametrize("kw, error, match, model", [
    (kw, error, match, model) for model in ("flat", "hierarchical") for kw, error, match in _BAD_SETTINGS
    if model == "flat" or "prior_scale" not in kw])
def test_bad_settings_raise_naming_the_argument(kw, error, match, model):
    X, y = _data("bernoulli", N=20)
    if model == "flat":
        call = lambda: BayesianGLM(backend="numpy", progress=False, **kw).fit(X, y)  # noqa: E731
    else:
        call = lambda: HierarchicalGLM(backend="numpy", progress=False, **kw).fit(X, y, np.arange(20) % 2)  # noqa: E731
    with pytest.raises(error, match=match):
        call()


# max_draws=0 once gave all-NaN probabilities (predict all zeros) with only NumPy's "Mean of empty slice"
# warning, -1 a ValueError from linspace and 2.5 a bare TypeError: each prediction method of both models
# now names max_draws, and None still means every draw.
def test_bad_max_draws_raise_naming_the_argument():
    X, y = _data("bernoulli", N=20)
    kw = dict(n_chains=1, n_samples=3, n_warmup=2, random_state=0, progress=False, backend="numpy")
    flat = BayesianGLM(**kw).fit(X, y)
    g = np.arange(20) % 2
    hier = HierarchicalGLM(**kw).fit(X, y, g)
    calls = [lambda d: flat.predict_mean(X, max_draws=d), lambda d: flat.predict_proba(X, max_draws=d),
             lambda d: flat.predict(X, max_draws=d), lambda d: flat.score(X, y, max_draws=d),
             lambda d: hier.predict_mean(X, g, max_draws=d), lambda d: hier.predict_proba(X, g, max_draws=d),
             lambda d: hier.predict(X, g, max_draws=d), lambda d: hier.score(X, y, g, max_draws=d)]
    for call in calls:
        for bad in (0, -1):
            with pytest.raises(ValueError, match="max_draws must be at least 1 or None"):
                call(bad)
        with pytest.raises(TypeError, match="max_draws must be an integer or None"):
            call(2.5)
        call(None)
        call(np.int64(2))
    np.testing.assert_array_equal(flat.predict_mean(X, max_draws=None), flat.predict_mean(X, max_draws=3))


# prior_scale=1e200 once raised a bare OverflowError from prior_scale**2 (float64) and 1e20 in float32 cast
# the prior to inf with overflow warnings; 1e-200 made the precision infinite and every draw NaN. Each is
# refused at fit (and by the sampler's init) naming prior_scale and its range for the dtype; psi0 past the
# dtype's range made HierarchicalGLM's Sigma inf and mu NaN.
@pytest.mark.parametrize("value, dtype, match", [
    (1e200, "float64", r"prior_scale=1e\+200 is out of range for dtype float64.*prior_scale=1e6"),
    (1e155, "float64", r"within about \[7.5e-155, 1.3e\+154\]"),
    (1e20, "float32", r"within about \[5.4e-20, 1.8e\+19\]"),
    (1e-200, "float64", "out of range for dtype float64.*larger prior_scale"),
])
def test_prior_scale_beyond_the_dtype_raises(value, dtype, match):
    from gpumcmc.models.glm import init

    X, y = _data("bernoulli", N=20)
    with pytest.raises(ValueError, match=match):
        BayesianGLM(prior_scale=value, dtype=dtype, backend="numpy", progress=False).fit(X, y)
    with pytest.raises(ValueError, match="prior_scale"):
        init(X.astype(dtype), y.astype(dtype), "bernoulli", 2, value)


def test_psi0_zero_is_refused():
    # psi0 = 0 (the improper limit) was accepted: with one group tau^2 came out 0 from the first draw and every
    # chain repeated one value, with only NumPy's runtime warnings to show for it.
    X, y = np.ones((20, 1)), (np.arange(20) % 2).astype(float)
    with pytest.raises(ValueError, match=r"psi0.*range \(0(\.0)?, inf\)"):
        HierarchicalGLM(psi0=0.0, covariance="diag", backend="numpy", progress=False).fit(X, y, np.zeros(20, int))


def test_psi0_beyond_the_dtype_raises():
    X, y = _data("bernoulli", N=20)
    with pytest.raises(ValueError, match=r"psi0=1e\+40 is too large for dtype float32.*at most 3.4e\+32"):
        HierarchicalGLM(psi0=1e40, dtype="float32", backend="numpy", progress=False).fit(X, y, np.arange(20) % 2)


@pytest.mark.parametrize("groups", [np.where(np.arange(20) == 7, np.nan, np.arange(20) % 2),
                                    np.array(["a", "b"] * 7 + [None] + ["a"] * 5, dtype=object)])
def test_hierarchical_missing_group_label_raises(groups):
    X, y = _data("bernoulli", N=20)
    with pytest.raises(ValueError, match="groups holds a missing label .* at row"):
        HierarchicalGLM(backend="numpy", progress=False).fit(X, y, groups)


def test_hierarchical_group_labels_of_mixed_kinds_name_groups():
    X, y = _data("bernoulli", N=20)
    with pytest.raises(TypeError, match="groups holds labels that cannot be sorted together"):
        HierarchicalGLM(backend="numpy", progress=False).fit(X, y, np.array([1, "a"] * 10, dtype=object))


def test_poisson_fit_with_large_features_does_not_warn_of_overflow():
    # Slice candidates far out give exp(eta) = inf, a log density of -inf: expected, not worth a warning.
    rs = np.random.default_rng(0)
    X = rs.normal(size=(200, 2)) * 1e6
    y = rs.poisson(np.exp(X @ [0.5e-6, -0.25e-6] + 0.3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        BayesianGLM("poisson", n_samples=20, n_warmup=20, random_state=0, progress=False, backend="numpy").fit(X, y)


def test_score_and_predict_proba_follow_the_family():
    """score is scikit-learn's for the family (accuracy, or R^2 of the predictive mean) and predict_proba
    exists only for family='bernoulli'."""
    from sklearn.metrics import accuracy_score, r2_score
    kw = dict(n_samples=40, n_warmup=40, random_state=0, progress=False, backend="numpy")
    Xb, yb = _data("bernoulli", N=200)
    m = BayesianGLM("bernoulli", **kw).fit(Xb, yb)
    assert hasattr(m, "predict_proba") and m.predict_proba(Xb[:3]).shape == (3, 2)
    assert m.score(Xb, yb) == accuracy_score(yb, m.predict(Xb))
    w = np.linspace(0.5, 2.0, 200)
    assert m.score(Xb, yb, sample_weight=w) == pytest.approx(accuracy_score(yb, m.predict(Xb), sample_weight=w))
    for family in ("poisson", "gaussian"):
        X, y = _data(family, N=200)
        est = BayesianGLM(family, **kw)
        assert not hasattr(est, "predict_proba")
        est.fit(X, y)
        assert not hasattr(est, "predict_proba")
        with pytest.raises(AttributeError):
            est.predict_proba(X)
        assert est.score(X, y) == pytest.approx(r2_score(y, est.predict_mean(X)), rel=1e-12)


def test_gaussian_posterior_matches_closed_form():
    """KS on each of 2 coordinates against the exact normal posterior (2 checks at ALPHA).

    The prior (scale 0.3: about an eighth of the posterior precision) moves the posterior mean by about one
    posterior sd, so the prior term is checked too: at scale 1.5 it moved the mean by 0.03 sd, and a prior
    scale read 10 times too large passed (p = 0.5); now it gives p < 1e-11, and sigma read as a variance
    p < 1e-6 (p = 3e-5 before)."""
    rs = np.random.default_rng(3)
    N, K, sigma, s0 = 40, 2, 0.8, 0.3
    X = rs.normal(size=(N, K))
    y = X @ np.array([0.7, -0.4]) + sigma * rs.normal(size=N)
    prec = X.T @ X / sigma**2 + np.eye(K) / s0**2
    cov = np.linalg.inv(prec)
    mean = cov @ X.T @ y / sigma**2
    m = BayesianGLM("gaussian", prior_scale=s0, sigma=sigma, fit_intercept=False, n_chains=4, n_samples=2000,
                    n_warmup=200, random_state=11, progress=False, backend="numpy").fit(X, y)
    d = m.coef_draws_[:, ::10].reshape(-1, K)   # thinned: successive sweeps are correlated
    for k in range(K):
        p = stats.kstest(d[:, k], stats.norm(mean[k], np.sqrt(cov[k, k])).cdf).pvalue
        assert p > ALPHA, (k, p)
    assert m.trace_.stats["fallbacks"].sum() == 0


def test_logistic_matches_laplace_at_large_n():
    pytest.importorskip("arviz")  # the summary below reads the ArviZ export
    rs = np.random.default_rng(4)
    N = 3000
    X = rs.normal(size=(N, 2))
    y = (rs.random(N) < 1 / (1 + np.exp(-(0.3 + X @ [1.0, -0.5])))).astype(float)
    D = np.column_stack([np.ones(N), X])
    s0 = 2.5

    def nlp(b):
        f, g = loglik_and_grad(D, y, b)
        return -(f - 0.5 * b @ b / s0**2), -(g - b / s0**2)

    b_map = optimize.minimize(nlp, np.zeros(3), jac=True, method="BFGS").x
    p = 1 / (1 + np.exp(-D @ b_map))
    cov = np.linalg.inv((D * (p * (1 - p))[:, None]).T @ D + np.eye(3) / s0**2)
    m = BayesianGLM(prior_scale=s0, n_chains=4, n_samples=400, n_warmup=100, random_state=5,
                    progress=False, backend="numpy").fit(X, y)
    d = m.coef_draws_.reshape(-1, 3)
    sd = np.sqrt(np.diag(cov))
    # Posterior means agree within 0.25 posterior sd (Monte Carlo error ~0.05 sd, Laplace bias O(1/N)).
    assert np.all(np.abs(d.mean(0) - b_map) < 0.25 * sd), (d.mean(0), b_map, sd)
    np.testing.assert_allclose(d.std(0), sd, rtol=0.15)
    idata = m.to_arviz()
    assert idata.posterior["beta"].shape == (4, 400, 2)
    proba = m.predict_proba(X[:50])
    assert proba.shape == (50, 2) and np.allclose(proba.sum(1), 1)
    assert (m.predict(X) == y).mean() > 0.65  # the Bayes rate here is about 0.69


def test_hierarchical_predict_proba_by_group():
    """HierarchicalGLM (bernoulli) gives class probabilities under each row's group, consistent with
    predict and predict_mean; the other families have no predict_proba."""
    rs = np.random.default_rng(3)
    G, n = 3, 120
    groups = np.repeat(np.array(["a", "b", "c"]), n)
    X = rs.standard_normal((G * n, 2))
    shift = np.repeat([-2.0, 0.0, 2.0], n)          # the groups' intercepts differ widely
    y = (rs.random(G * n) < 1 / (1 + np.exp(-(shift + X[:, 0])))).astype(float)
    kw = dict(n_samples=40, n_warmup=40, n_chains=2, random_state=0, progress=False, backend="numpy")
    m = HierarchicalGLM("bernoulli", **kw).fit(X, y, groups)
    p = m.predict_proba(X, groups)
    assert p.shape == (G * n, 2) and np.allclose(p.sum(axis=1), 1.0) and ((p >= 0) & (p <= 1)).all()
    np.testing.assert_array_equal(p[:, 1], m.predict_mean(X, groups))
    np.testing.assert_array_equal(m.predict(X, groups), (p[:, 1] > 0.5).astype(m.predict(X, groups).dtype))
    by_group = [p[groups == g, 1].mean() for g in ("a", "b", "c")]
    assert by_group[0] < 0.35 < by_group[1] < 0.65 < by_group[2]   # the planted intercepts' order
    with pytest.raises(ValueError, match="not seen at fit"):
        m.predict_proba(X[:2], np.array(["a", "z"]))
    Xg, yg = _data("gaussian", N=60)
    est = HierarchicalGLM("gaussian", **kw)
    assert not hasattr(est, "predict_proba")
    assert not hasattr(est.fit(Xg, yg), "predict_proba")


@pytest.mark.parametrize("backend", ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)])
def test_hierarchical_recovers_planted_coefficients(backend, request):
    """Planted group coefficients (8 groups of 80 to 200 rows, 2 coefficients) each within 4.5 posterior sd of
    the posterior mean (normal approximation): 16 checks with a two-sided tail of 6.8e-6 each, a
    false-failure budget of 1.1e-4. Rows given to the wrong groups, or every group pooled to the mean, miss
    it by a z of 8 or more."""
    pytest.importorskip("arviz")  # the summary below reads the ArviZ export
    if backend == "cupy":
        request.getfixturevalue("cp")
    rs = np.random.default_rng(6)
    G, K = 8, 2
    mu = np.array([0.5, -1.0])
    beta = mu + 0.5 * rs.normal(size=(G, K))
    sizes = rs.integers(80, 200, size=G)           # ragged groups
    groups = np.repeat(np.arange(G), sizes)
    perm = rs.permutation(len(groups))
    groups = groups[perm]
    X = rs.normal(size=(len(groups), K - 1))
    eta = beta[groups, 0] + X[:, 0] * beta[groups, 1]
    y = (rs.random(len(groups)) < 1 / (1 + np.exp(-eta))).astype(float)
    m = HierarchicalGLM(n_chains=2, n_samples=150, n_warmup=100, random_state=7, progress=False,
                        backend=backend).fit(X, y, groups)
    est = m.coef_
    assert est.shape == (G, K)
    sd = m.beta_draws_.std(axis=(0, 1))
    z = (est - beta) / sd
    assert np.abs(z).max() < 4.5, z      # 16 coordinates, each within 4.5 posterior sd
    idata = m.to_arviz()
    assert idata.posterior["beta"].shape == (2, 150, G, K)
    assert idata.posterior["Sigma"].shape == (2, 150, K, K)


@pytest.mark.parametrize("backend", ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)])
def test_hierarchical_diag_recovers_planted_coefficients_and_tau(backend, request):
    """covariance="diag": planted beta_g ~ N(mu, diag(tau^2)) recovered, gaussian family with known sigma.

    Each check is the planted value's z-score under the posterior (normal approximation; log tau for
    tau), |z| below the two-sided ALPHA quantile: 40 x 2 coefficients, 2 means and 2 scales, 84 checks
    at ALPHA each (a false-failure budget of 84 ALPHA = 0.8%)."""
    pytest.importorskip("arviz")  # the summary below reads the ArviZ export
    if backend == "cupy":
        request.getfixturevalue("cp")
    rs = np.random.default_rng(13)
    G, n = 40, 40
    mu, tau = np.array([0.5, -1.0]), np.array([0.8, 0.3])
    beta = mu + tau * rs.normal(size=(G, 2))
    groups = np.repeat(np.arange(G), n)[rs.permutation(G * n)]
    X = rs.normal(size=(G * n, 1))
    y = beta[groups, 0] + X[:, 0] * beta[groups, 1] + 0.5 * rs.normal(size=G * n)
    m = HierarchicalGLM("gaussian", sigma=0.5, covariance="diag", n_chains=2, n_samples=300, n_warmup=100,
                        random_state=3, progress=False, backend=backend).fit(X, y, groups)
    zc = stats.norm.isf(ALPHA / 2)
    z = (m.coef_ - beta) / m.beta_draws_.std(axis=(0, 1))
    assert np.abs(z).max() < zc, z
    d = m.trace_.draws
    mus = d["mu"].reshape(-1, 2)
    assert np.all(np.abs(mus.mean(0) - mu) < zc * mus.std(0)), (mus.mean(0), mus.std(0))
    lt = np.log(d["tau"]).reshape(-1, 2)
    assert np.all(np.abs(lt.mean(0) - np.log(tau)) < zc * lt.std(0)), (np.exp(lt.mean(0)), lt.std(0))
    idata = m.to_arviz()
    assert idata.posterior["tau"].shape == (2, 300, 2)
    assert idata.posterior["mu"].shape == (2, 300, 2)
    assert "Sigma" not in idata.posterior
    assert "Sigma" not in d


def test_diag_hyperparameter_draw_is_the_conjugate_conditional(xp):
    """Given fixed group coefficients, 20,000 chains' (tau_k^2, mu_k) draws against the exact
    inverse-gamma and normal conditionals: KS on each of 3 coordinates for each (6 checks at ALPHA)."""
    from gpumcmc.models.glm import HyperPrior, _draw_hyper
    from gpumcmc.random import default_rng
    rs = np.random.default_rng(21)
    C, G, K = 20_000, 12, 3
    b = rs.normal(size=(G, K)) * [0.5, 1.0, 2.0] + [1.0, 0.0, -1.0]
    kappa0, nu0, psi0 = 2.0, 3.0, 0.5
    beta = xp.asarray(np.broadcast_to(b, (C, G, K)).copy())
    rng = default_rng(4, backend="cupy" if xp is not np else "numpy")
    mu, prec, sigma = _draw_hyper(rng, beta, HyperPrior(kappa0, nu0, psi0, "diag"), xp)
    mu, prec, sigma = (np.asarray(a.get() if xp is not np else a) for a in (mu, prec, sigma))
    tau2 = np.diagonal(sigma, axis1=1, axis2=2)
    np.testing.assert_allclose(np.diagonal(prec, axis1=1, axis2=2) * tau2, 1.0, rtol=1e-12)
    assert np.all(sigma[:, ~np.eye(K, dtype=bool)] == 0)
    bbar, S = b.mean(0), ((b - b.mean(0)) ** 2).sum(0)
    kn = kappa0 + G
    for k in range(K):
        ig = stats.invgamma((nu0 + G) / 2, scale=(psi0 + S[k] + kappa0 * G / kn * bbar[k] ** 2) / 2)
        assert stats.kstest(tau2[:, k], ig.cdf).pvalue > ALPHA
        zk = (mu[:, k] - G * bbar[k] / kn) / np.sqrt(tau2[:, k] / kn)
        assert stats.kstest(zk, stats.norm.cdf).pvalue > ALPHA


def test_full_hyperparameter_draw_is_the_conjugate_conditional(xp):
    """Given fixed group coefficients, 20,000 chains' (Sigma, mu) draws against the normal-inverse-Wishart
    conditional: Sigma_kk ~ InvGamma((nu - K + 1)/2, psi_kk/2) for each of 3 coordinates; v^T Sigma^-1 v
    ~ (v^T psi^-1 v) chi2(nu) for v = (1, 1, 1), which involves the off-diagonal entries; and
    L^-1 (mu - m) sqrt(kappa0 + G) ~ N(0, I) with L the Cholesky factor of Sigma, per coordinate.
    7 KS checks at ALPHA each. On CuPy this is the glm_niw kernel."""
    from gpumcmc.models.glm import HyperPrior, _draw_hyper
    from gpumcmc.random import default_rng
    rs = np.random.default_rng(22)
    C, G, K = 20_000, 12, 3
    b = rs.normal(size=(G, K)) * [0.5, 1.0, 2.0] + [1.0, 0.0, -1.0]
    kappa0, nu0 = 2.0, 5.0
    psi0 = np.array([[1.0, 0.3, 0.0], [0.3, 2.0, -0.4], [0.0, -0.4, 0.5]])
    beta = xp.asarray(np.broadcast_to(b, (C, G, K)).copy())
    rng = default_rng(4, backend="cupy" if xp is not np else "numpy")
    mu, prec, sigma = _draw_hyper(rng, beta, HyperPrior(kappa0, nu0, xp.asarray(psi0)), xp)
    mu, prec, sigma = (np.asarray(a.get() if xp is not np else a) for a in (mu, prec, sigma))
    np.testing.assert_allclose(prec @ sigma, np.broadcast_to(np.eye(K), (C, K, K)), atol=1e-9)
    kn, nu = kappa0 + G, nu0 + G
    bbar = b.mean(0)
    psi = psi0 + (b - bbar).T @ (b - bbar) + kappa0 * G / kn * np.outer(bbar, bbar)
    for k in range(K):
        ig = stats.invgamma((nu - K + 1) / 2, scale=psi[k, k] / 2)
        assert stats.kstest(sigma[:, k, k], ig.cdf).pvalue > ALPHA
    v = np.ones(K)
    q = np.einsum("i,cij,j->c", v, prec, v) / (v @ np.linalg.solve(psi, v))
    assert stats.kstest(q, stats.chi2(nu).cdf).pvalue > ALPHA
    L = np.linalg.cholesky(sigma)
    w = np.linalg.solve(L, (mu - G * bbar / kn)[:, :, None])[:, :, 0] * np.sqrt(kn)
    for k in range(K):
        assert stats.kstest(w[:, k], stats.norm.cdf).pvalue > ALPHA


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_niw_kernel_matches_twin(cp, dtype, monkeypatch):
    """The glm_niw kernel against the host twin on the same random numbers (the generator's draws agree
    across backends), and against the twin's arithmetic run on CuPy (the fallback for large K)."""
    import gpumcmc.models.glm as mg
    from gpumcmc.random import default_rng
    rs = np.random.default_rng(23)
    C, G, K = 5, 37, 6
    beta = (rs.normal(size=(C, G, K)) * 0.7 + rs.normal(size=K)).astype(dtype)
    psi0 = np.eye(K) * 0.8
    hyper = mg.HyperPrior(1.5, K + 2.0, psi0)
    ref = mg._draw_hyper(default_rng(9, backend="numpy"), beta, hyper, np)
    got = mg._draw_hyper(default_rng(9, backend="cupy"), cp.asarray(beta), hyper._replace(psi0=cp.asarray(psi0)), cp)
    from gpumcmc.models.glm import algorithm
    launches = []
    real = algorithm._niw_kernel
    monkeypatch.setattr(algorithm, "_niw_kernel", lambda *a: launches.append(1) or real(*a))  # where it is called
    monkeypatch.setattr(config, "glm_niw_kernel", False)
    fb = mg._draw_hyper(default_rng(9, backend="cupy"), cp.asarray(beta), hyper._replace(psi0=cp.asarray(psi0)), cp)
    assert launches == []  # the knob reached the draw: the fallback's array code ran, not the kernel
    tol = 1e-10 if dtype == np.float64 else 2e-6
    for r, g, f in zip(ref, got, fb):
        assert g.dtype == dtype
        np.testing.assert_allclose(cp.asnumpy(g), r, rtol=tol, atol=tol)
        np.testing.assert_allclose(cp.asnumpy(f), r, rtol=tol, atol=tol)


def test_hierarchical_fit_runs_on_the_driver(capsys, tmp_path):
    """HierarchicalGLM.fit loops through gpumcmc.sampling.run, which owns the warm-up, the kept draws and the
    progress bar (labelled with the class name): trace_ is the driver's Trace of n_warmup + n_samples
    iterations, and a fit with progress=True gives the same draws as one without."""
    from gpumcmc.sampling import Trace

    X, y = _data("bernoulli", N=60)
    groups = np.arange(60) % 3
    kw = dict(n_chains=2, n_samples=7, n_warmup=5, random_state=4, backend="numpy")
    quiet = HierarchicalGLM(progress=False, **kw).fit(X, y, groups)
    shown = HierarchicalGLM(progress=True, **kw).fit(X, y, groups)
    assert isinstance(quiet.trace_, Trace) and quiet.trace_.iterations == 12 and not quiet.trace_.stopped
    assert quiet.trace_.draws["beta"].shape[:3] == (2, 7, 3)
    np.testing.assert_array_equal(shown.beta_draws_, quiet.beta_draws_)
    assert "HierarchicalGLM" in capsys.readouterr().err


def test_hierarchical_bad_covariance():
    X, y = _data("bernoulli", N=20)
    with pytest.raises(ValueError, match="covariance must be 'full'"):
        HierarchicalGLM(covariance="block", backend="numpy").fit(X, y, np.zeros(20))
    with pytest.raises(ValueError, match="nu0 must be positive"):
        HierarchicalGLM(covariance="diag", nu0=0.0, backend="numpy").fit(X, y, np.zeros(20))


@pytest.mark.parametrize("kernel", ["rows", "tiled", "gemm"])
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernel_matches_twin(cp, family, dtype, kernel):
    X, y = _data(family, N=5000, K=7)
    rs = np.random.default_rng(2)
    B = (rs.normal(size=(37, 7)) * 0.3).astype(dtype)
    if kernel == "rows":
        B = B[:8]   # the most chains it takes
    w = (rs.random(5000) + 0.5).astype(dtype)
    off = (rs.normal(size=5000) * 0.2).astype(dtype)
    X, y = X.astype(dtype), y.astype(dtype)
    f, g = loglik_and_grad(X, y, B, family, weights=w, offset=off, sigma=0.7)
    fc, gc = loglik_and_grad(cp.asarray(X), cp.asarray(y), cp.asarray(B), family, weights=cp.asarray(w),
                             offset=cp.asarray(off), sigma=0.7, kernel=kernel)
    assert fc.dtype == dtype and gc.dtype == dtype
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(cp.asnumpy(fc), f, rtol=tol)
    np.testing.assert_allclose(cp.asnumpy(gc), g, rtol=tol, atol=tol * np.abs(g).max())


# Shapes for the tiled kernel (kernels_cu/glm.cu, glm_fg_tiles): columns on both sides of each
# columns-per-lane instantiation (32, 64, 128, 256); tiles of 32 to 256 rows with a part-filled last
# tile; fewer rows than one tile; more chains than one pass over a tile takes (8), with the block's
# accumulators in shared memory or, when B * (K + 1) doubles do not fit, in global memory; and X not
# 16-byte aligned (a view one row in), which the kernel reads element by element.
_TILED_CASES = [
    # N, K, B, dtype, extras, unaligned
    (5000, 1, 3, np.float32, True, False),
    (4099, 31, 1, np.float32, False, False),
    (4099, 32, 2, np.float32, True, False),
    (3001, 33, 9, np.float32, True, False),
    (3001, 50, 1, np.float32, False, True),
    (2000, 64, 40, np.float32, False, False),
    (2000, 65, 1, np.float32, True, True),
    (1537, 128, 5, np.float32, False, False),
    (1537, 129, 1, np.float32, True, False),
    (700, 256, 2, np.float32, True, False),
    (20, 50, 1, np.float32, True, False),
    (5000, 7, 17, np.float64, True, True),
    (3001, 33, 1, np.float64, False, False),
    (2000, 64, 40, np.float64, True, False),
    (1537, 100, 3, np.float64, True, True),
    (1537, 128, 1, np.float64, False, False),
]


# Shapes for glm_fg_rows: those above that it takes (up to 8 chains, K < 256, 32 rows of K in a tile),
# and more where K is not 2 mod 4 (rows stored with a wider stride, element by element) or one or two
# columns with 8 chains (tiles cut short to fit the chains' sums in shared memory).
_ROWS_CASES = [c for c in _TILED_CASES if c[2] <= 8 and c[1] < 256 and 32 * c[1] * np.dtype(c[3]).itemsize <= 32768]
_ROWS_CASES += [
    (3001, 4, 8, np.float32, True, True),
    (5000, 1, 8, np.float64, True, False),
    (4099, 12, 7, np.float64, False, True),
    (2500, 64, 4, np.float32, True, False),
    (33, 255, 6, np.float32, False, False),
    # two columns and eight chains: phase 2's row subsets capped so that the end's sums fit in shared memory
    (3001, 2, 8, np.float32, True, False),
    (2000, 2, 8, np.float64, False, True),
]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kernel, N, K, B, dtype, extras, unaligned",
                         [("tiled",) + c for c in _TILED_CASES] + [("rows",) + c for c in _ROWS_CASES])
def test_tiled_kernel_shapes(cp, family, kernel, N, K, B, dtype, extras, unaligned):
    rs = np.random.default_rng(K * 1000 + B)
    X = rs.normal(size=(N, K)) / np.sqrt(K)         # eta of order one for every K
    eta = X @ (rs.normal(size=K) * 0.5)
    y = {"bernoulli": rs.random(N) < 1 / (1 + np.exp(-eta)), "poisson": rs.poisson(np.exp(eta)),
         "gaussian": eta + 0.7 * rs.normal(size=N)}[family]
    Bm = (rs.normal(size=(B, K)) * 0.5).astype(dtype)
    w = (rs.random(N) + 0.5).astype(dtype) if extras else None
    off = (rs.normal(size=N) * 0.2).astype(dtype) if extras else None
    X, y = X.astype(dtype), y.astype(dtype)
    f, g = loglik_and_grad(X, y, Bm, family, weights=w, offset=off, sigma=0.7)
    Xc = cp.asarray(X)
    if unaligned:
        # one element in: a row of K elements may itself be a multiple of 16 bytes
        Xc = cp.concatenate([cp.zeros(1, dtype=dtype), Xc.ravel()])[1:].reshape(N, K)
        assert Xc.flags.c_contiguous and Xc.data.ptr % 16 != 0
    c = (lambda a: None if a is None else cp.asarray(a))
    fc, gc = loglik_and_grad(Xc, cp.asarray(y), cp.asarray(Bm), family, weights=c(w), offset=c(off), sigma=0.7,
                             kernel=kernel)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(cp.asnumpy(fc), f, rtol=tol, atol=tol * np.abs(f).max())
    np.testing.assert_allclose(cp.asnumpy(gc), g, rtol=tol, atol=tol * np.abs(g).max())


@pytest.mark.parametrize("kernel", ["tiled", "rows"])
def test_tiled_kernel_repeats_bit_for_bit(cp, kernel):
    X, y = _data("bernoulli", N=100_000, K=50)
    B = np.random.default_rng(3).normal(size=(3, 50)) * 0.1
    Xc, yc, Bc = cp.asarray(X, dtype=np.float32), cp.asarray(y, dtype=np.float32), cp.asarray(B, dtype=np.float32)
    f1, g1 = loglik_and_grad(Xc, yc, Bc, kernel=kernel)
    f2, g2 = loglik_and_grad(Xc, yc, Bc, kernel=kernel)
    assert bool((f1 == f2).all()) and bool((g1 == g2).all())


def test_rows_kernel_refuses_many_chains(cp):
    X = cp.zeros((10, 3), dtype=np.float32)
    with pytest.raises(ValueError, match="up to 8 chains"):
        loglik_and_grad(X, cp.zeros(10, dtype=np.float32), cp.zeros((9, 3), dtype=np.float32), kernel="rows")


def test_tiled_kernel_splits_chains_over_launches(cp, monkeypatch):
    """Chains beyond what one launch's partial sums may hold go to further launches (forced here)."""
    import gpumcmc.glm as glm
    from gpumcmc import _loader
    X, y = _data("poisson", N=3000, K=20)
    B = np.random.default_rng(5).normal(size=(11, 20)) * 0.1
    f, g = loglik_and_grad(X, y, B, "poisson")
    monkeypatch.setattr(config, "glm_part_bytes", 8 * 21 * _loader.sm_count() * 4 * 3)   # 3 chains a launch
    launches = []
    real = glm._kernel_args.args
    monkeypatch.setattr(glm._kernel_args, "args", lambda file, kernel, **kw: launches.append(kernel) or real(
        file, kernel, **kw))
    fc, gc = loglik_and_grad(cp.asarray(X), cp.asarray(y), cp.asarray(B), "poisson", kernel="tiled")
    assert launches.count("glm_fg_tiles") == 4, launches   # 11 chains, 3 a launch
    np.testing.assert_allclose(cp.asnumpy(fc), f, rtol=1e-10)
    np.testing.assert_allclose(cp.asnumpy(gc), g, rtol=1e-10, atol=1e-10 * np.abs(g).max())


def test_tiled_kernel_refuses_too_many_columns(cp):
    X = cp.zeros((10, 257), dtype=np.float32)
    with pytest.raises(ValueError, match="at most 256 columns"):
        loglik_and_grad(X, cp.zeros(10, dtype=np.float32), cp.zeros(257, dtype=np.float32), kernel="tiled")


def test_bad_kernel_name():
    with pytest.raises(ValueError, match="kernel must be one of"):
        loglik_and_grad(np.ones((3, 1)), np.array([0.0, 1.0, 1.0]), np.zeros(1), kernel="fast")


def test_removed_rowwise_kernel_names_its_successors():
    """kernel="rowwise" (removed) says which kernels to use instead, on either backend's input."""
    with pytest.raises(ValueError, match="kernel='rowwise'.*removed.*'rows'.*'tiled'"):
        loglik_and_grad(np.ones((3, 1)), np.array([0.0, 1.0, 1.0]), np.zeros(1), kernel="rowwise")


def test_loglik_takes_the_gpu_where_weights_or_offset_are_there(cp):
    # The backend came from X, y and beta alone: a CuPy offset with NumPy X raised in numpy.asarray.
    X, y = glm_data("poisson", 300, 4, seed=5)
    beta, off, w = np.full(4, 0.1), np.linspace(-1, 1, 300), np.linspace(0.5, 2, 300)
    f0, g0 = loglik_and_grad(cp.asarray(X), cp.asarray(y), cp.asarray(beta), "poisson", cp.asarray(w), cp.asarray(off))
    f1, g1 = loglik_and_grad(X, y, beta, "poisson", cp.asarray(w), cp.asarray(off))
    assert isinstance(f1, cp.ndarray)
    np.testing.assert_array_equal(f1.get(), f0.get())
    np.testing.assert_array_equal(g1.get(), g0.get())


def test_cpu_gpu_agree(cp):
    rs = np.random.default_rng(8)
    X = rs.normal(size=(2000, 3))
    y = (rs.random(2000) < 1 / (1 + np.exp(-X @ [1.0, 0.5, -1.0]))).astype(float)
    kw = dict(n_chains=4, n_samples=300, n_warmup=100, random_state=3, progress=False)
    a = BayesianGLM(backend="numpy", **kw).fit(X, y)
    b = BayesianGLM(backend="cupy", **kw).fit(cp.asarray(X), cp.asarray(y))
    sd = a.coef_draws_.std(axis=(0, 1))
    assert np.all(np.abs(a.coef_ - b.coef_) < 0.3 * sd[1:])


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("max_steps_out,chunk_rows", [(4, None), (4, 16), (16, None)])
def test_slice_kernel_matches_numpy_sweep(cp, family, max_steps_out, chunk_rows, monkeypatch):
    """Three sweeps of the GPU kernels against the NumPy path, same random numbers (float64): the
    split-row kernel (glm_slice_pass) with one chunk per group and with several (16 rows a chunk), and,
    for max_steps_out=16 (more stepping-out points than a pass evaluates), the one-block-per-group
    kernel (glm_slice_segment)."""
    import gpumcmc.models.glm as mg
    from gpumcmc.random import default_rng
    monkeypatch.setattr(config, "glm_chunk_rows", chunk_rows)
    from gpumcmc.models.glm import algorithm
    segment = []
    real = algorithm._slice_kernel_coordinate
    monkeypatch.setattr(algorithm, "_slice_kernel_coordinate",  # where it is called
                        lambda *a: segment.append(1) or real(*a))
    rs = np.random.default_rng(9)
    G, K = 12, 3
    groups = np.repeat(np.arange(G), rs.integers(30, 90, size=G))
    X, y = _data(family, N=len(groups), K=K, seed=4)
    out = {}
    for name, xp in (("numpy", np), ("cupy", cp)):
        st, data = mg.init(xp.asarray(X), xp.asarray(y), family, 3, 1.5, xp.asarray(groups))
        if xp is cp and chunk_rows:
            assert data.plan.n_chunks > G
        rng = default_rng(5, backend=name)
        for _ in range(3):
            st, info = mg.step(rng, st, data, family, 0.7, n_warmup=10, max_steps_out=max_steps_out)
        out[name] = tuple(cp.asnumpy(a) if xp is cp else a for a in (st.beta, st.eta, st.width, info.fallbacks))
    assert bool(segment) == (max_steps_out >= mg._PMAX)
    same = np.isclose(out["numpy"][0], out["cupy"][0], rtol=1e-6, atol=1e-9)
    assert same.mean() > 0.95, same.mean()   # a slice boundary within rounding can flip a rare candidate
    np.testing.assert_array_equal(out["numpy"][3], out["cupy"][3])
    beta = out["cupy"][0]
    eta_ref = np.stack([np.sum(X * beta[c, groups, :], axis=1) for c in range(3)])
    np.testing.assert_allclose(out["cupy"][1], eta_ref, rtol=1e-8, atol=1e-8)   # differential update exact
    wsame = np.isclose(out["numpy"][2], out["cupy"][2], rtol=1e-6)
    assert wsame.mean() > 0.95, wsame.mean()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_slice_pass_kernel_long_shrinkage_and_flat_rows(cp, dtype, monkeypatch):
    """The split-row kernel where shrinkage runs past both passes' proposals (a step width of 1e6
    against a posterior sd of about 0.03: some coordinates need more than the 4 + 16 proposals the
    two passes evaluate, which the deciding block then continues alone), one group split over many
    chunks, against the NumPy twin."""
    import gpumcmc.models.glm as mg
    from gpumcmc.random import default_rng
    monkeypatch.setattr(config, "glm_chunk_rows", 512)
    X, y = _data("bernoulli", N=6000, K=4, seed=7)
    out = {}
    for name, xp in (("numpy", np), ("cupy", cp)):
        st, data = mg.init(xp.asarray(X, dtype=dtype), xp.asarray(y, dtype=dtype), "bernoulli", 4, 2.0)
        assert xp is np or data.plan.chunk_rows == 512
        st = st._replace(width=st.width * 1e6)
        rng = default_rng(8, backend=name)
        st, info = mg.step(rng, st, data, "bernoulli", 1.0, n_warmup=0, max_shrink=60)
        out[name] = tuple(cp.asnumpy(a) if xp is cp else a for a in (st.beta, st.eta, info.fallbacks))
        if xp is np:  # per coordinate: x0, both ends (rejected at once), then the longest shrinkage
            assert info.evaluations[0] > 4 * (3 + 20), info.evaluations
    # In float32 the two sum rows' log-likelihoods rounded differently (about 1e-7 of a log density of
    # -4000), which can move a candidate across the slice level and the chain apart from there on; in
    # float64 that is about 1e-12, and the draws agree.
    tol, need = (1e-9, 0.9) if dtype == np.float64 else (2e-5, 0.5)
    same = np.isclose(out["numpy"][0], out["cupy"][0], rtol=tol, atol=tol)
    assert same.mean() >= need, (same.mean(), out["numpy"][0], out["cupy"][0])
    np.testing.assert_array_equal(out["cupy"][2], 0)
    eta_ref = out["cupy"][0][:, 0, :] @ X.T
    np.testing.assert_allclose(out["cupy"][1], eta_ref, rtol=1e-4 if dtype == np.float32 else 1e-9,
                               atol=1e-4 if dtype == np.float32 else 1e-9)


def test_differential_update_keeps_eta_equal_to_x_beta():
    from gpumcmc.models.glm import init, step
    from gpumcmc.random import default_rng
    rs = np.random.default_rng(10)
    groups = np.repeat(np.arange(5), rs.integers(10, 40, size=5))
    X, y = _data("poisson", N=len(groups), K=3, seed=2)
    st, data = init(X, y, "poisson", 2, 1.0, groups)
    rng = default_rng(1, backend="numpy")
    for _ in range(5):
        st, info = step(rng, st, data, "poisson", 1.0, n_warmup=3)
    ref = np.stack([np.sum(X * st.beta[c, groups, :], axis=1) for c in range(2)])
    np.testing.assert_allclose(st.eta, ref, rtol=1e-10, atol=1e-10)
    assert np.all(info.fallbacks == 0)


def test_kernel_many_columns_falls_back(cp):
    rs = np.random.default_rng(12)
    X = rs.normal(size=(300, 4000)) * 0.01
    y = (rs.random(300) < 0.5).astype(float)
    B = rs.normal(size=(2, 4000))
    f, g = loglik_and_grad(X, y, B)
    fc, gc = loglik_and_grad(cp.asarray(X), cp.asarray(y), cp.asarray(B))
    np.testing.assert_allclose(cp.asnumpy(fc), f, rtol=1e-10)
    np.testing.assert_allclose(cp.asnumpy(gc), g, rtol=1e-8, atol=1e-10)


def _ar_draws(rs, C, D, M, phi):
    x = np.zeros((C, D, M))
    e = rs.normal(size=(C, D, M))
    for t in range(1, D):
        x[:, t] = phi * x[:, t - 1] + e[:, t]
    return x


@pytest.mark.parametrize("shape, phi", [((4, 200, 6), 0.0), ((4, 201, 6), 0.9), ((1, 80, 4), 0.95),
                                        ((2, 57, 4), -0.5)])
def test_vectorised_bulk_ess_matches_arviz(shape, phi):
    # benchmarks.glm.ess_bulk (all coordinates in one pass) against ArviZ's bulk ESS, coordinate by
    # coordinate: the same definition, so equal to rounding; also with ties (rounded draws), chains
    # with different means and a constant coordinate.
    az = pytest.importorskip("arviz")
    from benchmarks.glm import ess_bulk

    rs = np.random.default_rng(3)
    x = _ar_draws(rs, *shape, phi)
    x[..., 1] = np.round(x[..., 1])
    x[..., 2] += np.arange(shape[0])[:, None] * 0.5
    x[..., 3] = 1.0
    ours = ess_bulk(x)
    ref = np.array([az.ess(x[:, :, j]) for j in range(shape[2])])
    np.testing.assert_allclose(ours, ref, rtol=1e-10)


@pytest.mark.gpu
def test_vectorised_bulk_ess_cupy_matches_numpy(cp):
    from benchmarks.glm import ess_bulk

    x = _ar_draws(np.random.default_rng(4), 4, 300, 50, 0.8)
    x[..., 0] = np.round(x[..., 0])
    np.testing.assert_allclose(ess_bulk(x, xp=cp), ess_bulk(x), rtol=1e-9)


@pytest.mark.parametrize("model", ["flat", "full", "diag"])
def test_graph_gives_the_same_draws(cp, model):
    """The sweep replayed from a CUDA graph (the GPU default) against eager sweeps: the same draws,
    bit for bit (the graph replays the same kernels with the same generator offsets)."""
    rs = np.random.default_rng(11)
    X, y = _data("bernoulli", N=900, K=3, seed=12)
    groups = np.repeat(np.arange(9), 100)[rs.permutation(900)]
    kw = dict(n_chains=3, n_samples=40, n_warmup=30, random_state=4, progress=False, backend="cupy")
    draws = []
    for graph in (False, True):
        if model == "flat":
            m = BayesianGLM(graph=graph, **kw).fit(cp.asarray(X), cp.asarray(y))
        else:
            m = HierarchicalGLM(covariance=model, graph=graph, **kw).fit(cp.asarray(X), cp.asarray(y), groups)
        draws.append(m.trace_.draws)
    for name in draws[0]:
        np.testing.assert_array_equal(draws[0][name], draws[1][name], err_msg=name)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("n_virtual", [2, 3])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sharded_glm_same_draws_as_one_device(family, n_virtual, dtype):
    """Rows split over NumPy shards: the log-density sums over rows are all-reduced, so every decision
    is the one device's. The sums add the same terms in another order, so a decision could differ
    only where a candidate's log-density lies within rounding of the slice level (about 1e-13
    relative in float64); for this seed none does: the draws and fallbacks are equal, bit for bit,
    and the log-likelihood stat to 1e-12."""
    from gpumcmc.shards import Shards

    X, y = _data(family, N=301, K=3, seed=21)
    kw = dict(family=family, n_chains=3, n_samples=40, n_warmup=30, random_state=5, progress=False,
              backend="numpy", dtype=dtype)
    one = BayesianGLM(**kw).fit(X, y)
    sh = BayesianGLM(devices=Shards(n_virtual=n_virtual), **kw).fit(X, y)
    np.testing.assert_array_equal(sh.coef_draws_, one.coef_draws_)
    np.testing.assert_array_equal(sh.trace_.stats["fallbacks"], one.trace_.stats["fallbacks"])
    np.testing.assert_allclose(sh.trace_.stats["loglik"], one.trace_.stats["loglik"], rtol=1e-12 if dtype == "float64"
                               else 1e-6)
    assert sh.to_arviz().posterior["beta"].shape == (3, 40, 3)


def test_sharded_glm_fallbacks_and_bounds():
    """Tiny max_shrink (fallbacks every sweep) and max_steps_out = 1 still follow the one device's path;
    bad settings say what to do."""
    from gpumcmc.shards import Shards

    X, y = _data("bernoulli", N=200, K=2, seed=22)
    for ms, mso in ((2, 1), (1, 4)):
        kw = dict(n_chains=2, n_samples=30, n_warmup=10, random_state=2, progress=False, backend="numpy",
                  max_shrink=ms, max_steps_out=mso, fit_intercept=False)
        one = BayesianGLM(**kw).fit(X, y)
        sh = BayesianGLM(devices=Shards(n_virtual=2), **kw).fit(X, y)
        assert one.trace_.stats["fallbacks"].sum() > 0
        np.testing.assert_array_equal(sh.coef_draws_, one.coef_draws_)
    with pytest.raises(ValueError, match="cannot be split"):
        BayesianGLM(devices=Shards(n_virtual=3), progress=False).fit(X[:2], y[:2])
    with pytest.raises(ValueError, match="graph=True needs devices=None"):
        BayesianGLM(devices=Shards(n_virtual=2), graph=True, progress=False).fit(X, y)


@pytest.mark.parametrize("family", FAMILIES)
def test_sharded_glm_one_gpu_two_shards(cp, family):
    """The multi-GPU path on one GPU (two shards, summed on the device) against devices=None on NumPy,
    float64, same seed: the same decisions (CuPy's exp/log1p may differ from NumPy's in the last
    bit, far below any slice level here), so the draws agree to 1e-9 relative and the fallbacks exactly."""
    from gpumcmc.shards import one_device

    X, y = _data(family, N=401, K=3, seed=23)
    kw = dict(family=family, n_chains=3, n_samples=40, n_warmup=30, random_state=6, progress=False)
    ref = BayesianGLM(backend="numpy", **kw).fit(X, y)
    sh = BayesianGLM(devices=one_device(2), **kw).fit(cp.asarray(X), cp.asarray(y))
    np.testing.assert_allclose(sh.coef_draws_, ref.coef_draws_, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(sh.trace_.stats["fallbacks"], ref.trace_.stats["fallbacks"])


def test_columns_of_one_table_give_the_draws_of_copies(xp):
    # The GPU kernels read y by its address: y given as a column of the table that also holds X was read as
    # the table's first N values (a silently wrong posterior on CuPy; NumPy read it right). The data for the
    # kernels is contiguous, and the draws are those of contiguous copies, on either backend.
    from gpumcmc.models.glm.algorithm import init

    X, y = glm_data("bernoulli", 400, 3, seed=3)
    table = xp.asarray(np.column_stack([X, y]))
    _, data = init(table[:, :-1], table[:, -1], "bernoulli", n_chains=2)
    assert data.y.flags.c_contiguous
    fit = lambda a, b: BayesianGLM("bernoulli", n_samples=20, n_warmup=5, random_state=0, progress=False,  # noqa: E731
                                   backend=xp.__name__).fit(a, b).coef_draws_
    np.testing.assert_array_equal(fit(table[:, :-1], table[:, -1]), fit(xp.asarray(X), xp.asarray(y)))


def test_refit_leaves_no_attribute_of_an_earlier_fit():
    """A poisson refit drops the bernoulli fit's classes_, and a refit refused for its settings keeps the
    last fit's family_ beside its coefficients."""
    rs = np.random.default_rng(0)
    X, y = rs.normal(size=(60, 2)), (rs.random(60) < 0.5).astype(float)
    m = BayesianGLM("bernoulli", n_samples=5, n_warmup=2, progress=False, backend="numpy", random_state=0).fit(X, y)
    assert hasattr(m, "classes_")
    m.set_params(family="poisson").fit(X, y)
    assert not hasattr(m, "classes_") and m.family_ == "poisson"
    with pytest.raises(ValueError, match="n_chains"):
        m.set_params(family="bernoulli", n_chains=0).fit(X, y)
    assert m.family_ == "poisson"


@pytest.mark.parametrize("cls", [BayesianGLM, HierarchicalGLM])
def test_docstring_names_every_parameter(cls):
    """Each constructor parameter is an entry of the class docstring's Parameters section (``name, name``
    lines at its indentation), so the rendered API lists it: a parameter named only in prose is not."""
    import inspect

    doc = inspect.getdoc(cls)
    section = doc.split("Parameters\n----------\n", 1)[1].split("\n\n", 1)[0]
    listed = {name.strip() for line in section.splitlines() if line and not line[0].isspace()
              for name in line.split(" : ")[0].split(",")}
    assert set(inspect.signature(cls).parameters) <= listed


def test_hierarchical_summary_reads_its_draws():
    """HierarchicalGLM.summary is ArviZ's table of its own export, as BayesianGLM's is: one row per mu_k, with
    the draws' mean."""
    pytest.importorskip("arviz")
    X, y = _data("bernoulli", N=90)
    g = np.arange(90) % 3
    m = HierarchicalGLM(n_samples=20, n_warmup=10, n_chains=2, random_state=0, progress=False,
                        backend="numpy").fit(X, y, g)
    table = m.summary(var_names=["mu"], round_to="none")
    K = m.trace_.draws["mu"].shape[-1]
    assert list(table.index) == ["mu[intercept]"] + [f"mu[x{k}]" for k in range(K - 1)]
    np.testing.assert_allclose(table["mean"].to_numpy(), m.trace_.draws["mu"].reshape(-1, K).mean(axis=0),
                               rtol=1e-12)


def test_dataframe_column_names_label_the_arviz_coefficients():
    """A DataFrame's column names become feature_names_in_ (as in scikit-learn) and label the coefficients
    in to_arviz; HierarchicalGLM labels its intercept and takes names too. Plain arrays keep 0..K-1."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("arviz")
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(120, 3)), columns=["age", "bmi", "dose"])
    y = (rng.random(120) < 0.5).astype(float)
    kw = dict(n_samples=20, n_warmup=20, n_chains=2, random_state=0, progress=False, backend="numpy")
    m = BayesianGLM("bernoulli", **kw).fit(X, y)
    assert list(m.feature_names_in_) == ["age", "bmi", "dose"]
    assert list(m.to_arviz().posterior["beta"].coords["feature"].values) == ["age", "bmi", "dose"]
    assert list(m.to_arviz(["a", "b", "c"]).posterior["beta"].coords["feature"].values) == ["a", "b", "c"]
    h = HierarchicalGLM("bernoulli", **kw).fit(X, y, np.arange(120) % 3)
    assert list(h.to_arviz().posterior["coef"].values) == ["intercept", "age", "bmi", "dose"]
    assert list(h.to_arviz(["a", "b", "c"]).posterior["mu"].coords["coef"].values) == ["intercept", "a", "b", "c"]
    with pytest.raises(ValueError, match="3 features"):
        h.to_arviz(["a"])
    m.fit(X.to_numpy(), y)  # refit on an array: the names go
    assert not hasattr(m, "feature_names_in_")
    assert list(m.to_arviz().posterior["beta"].coords["feature"].values) == [0, 1, 2]


def test_hierarchical_default_does_not_tie_the_spread_to_the_mean():
    """Gaussian groups around a common mean of 10 with spread 0.1. The old default kappa0 = 1 put mu's prior
    at N(0, Sigma), so Sigma had to grow to reach 10: E tau came out near 3 and E mu near 8.9. The default
    kappa0 = 0 (a flat prior on mu) gives mu near 10 and tau at the floor psi0 sets (about 0.37); intercept_ is
    coef_'s column 0. Fixed seeds."""
    rs = np.random.default_rng(1)
    G, ng = 8, 50
    b = 10 + 0.1 * rs.normal(size=G)
    gid = np.repeat(np.arange(G), ng)
    y = b[gid] + rs.normal(size=G * ng)
    kw = dict(covariance="diag", fit_intercept=False, n_chains=2, n_samples=400, n_warmup=200, random_state=0,
              progress=False, backend="numpy")
    h = HierarchicalGLM("gaussian", **kw).fit(np.ones((G * ng, 1)), y, gid)
    assert abs(h.trace_.draws["mu"].mean() - 10) < 0.3 and h.trace_.draws["tau"].mean() < 0.6
    old = HierarchicalGLM("gaussian", kappa0=1.0, **kw).fit(np.ones((G * ng, 1)), y, gid)
    assert old.trace_.draws["tau"].mean() > 2  # the coupling the default no longer has
    np.testing.assert_array_equal(h.intercept_, np.zeros(G))
    w = HierarchicalGLM("gaussian", n_chains=1, n_samples=20, n_warmup=20, random_state=0, progress=False,
                        backend="numpy").fit(rs.normal(size=(G * ng, 2)), y, gid)
    assert w.coef_.shape == (G, 3) and np.array_equal(w.intercept_, w.coef_[:, 0])


def test_predict_checks_the_feature_names_it_was_fitted_with():
    """Columns given in another order were used as they came: a model fitted on (a, b) predicted from (b, a)
    with a mean error of 3.2 for 0.08. As scikit-learn, other names raise and an array warns."""
    pd = pytest.importorskip("pandas")
    rs = np.random.default_rng(0)
    X = pd.DataFrame(rs.normal(size=(200, 2)), columns=["a", "b"])
    y = 3 * X.a + 0.1 * rs.normal(size=200)
    m = BayesianGLM("gaussian", n_samples=50, n_warmup=50, n_chains=1, random_state=0, progress=False,
                    backend="numpy").fit(X, y)
    with pytest.raises(ValueError, match="another order"):
        m.predict(X[["b", "a"]])
    with pytest.raises(ValueError, match="unseen at fit time"):
        m.predict(X.rename(columns={"a": "c"}))
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        m.predict(X.to_numpy())
    assert np.abs(m.predict(X) - y).mean() < 0.2


def test_prediction_follows_the_settings_of_the_fit_not_later_set_params():
    rs = np.random.default_rng(5)
    X = rs.normal(size=(400, 2))
    y = (rs.random(400) < 1 / (1 + np.exp(-(0.5 + X @ np.array([1.0, -1.0]))))).astype(float)
    m = BayesianGLM(n_chains=1, n_samples=20, n_warmup=10, random_state=0, progress=False, backend="numpy").fit(X, y)
    ref = m.predict_proba(X)
    m.set_params(fit_intercept=False, dtype="float32")
    np.testing.assert_array_equal(m.predict_proba(X), ref)
    g = np.arange(400) % 3
    h = HierarchicalGLM(n_chains=1, n_samples=10, n_warmup=10, random_state=0, progress=False,
                        backend="numpy").fit(X, y, groups=g)
    ref = h.predict_mean(X, groups=g)
    h.set_params(fit_intercept=False)
    np.testing.assert_array_equal(h.predict_mean(X, groups=g), ref)
    # a refit takes the new settings
    h.fit(X, y, groups=g)
    assert h.beta_draws_.shape[-1] == 2


def test_prediction_ignores_underflow_under_seterr_raise():
    rs = np.random.default_rng(2)
    X = rs.normal(size=(200, 2))
    y = (X[:, 0] > 0) * 1.0
    m = BayesianGLM(n_chains=1, n_samples=10, n_warmup=10, random_state=0, progress=False, backend="numpy").fit(X, y)
    with np.errstate(all="raise"):
        p = m.predict_proba(X * 100)
    assert np.isfinite(p).all()


def test_a_fit_whose_chains_have_not_mixed_warns_and_one_that_has_does_not():
    # A calendar-year column: the slice steps cross its ridge with the intercept slowly, and the four chains
    # end far apart (split-R-hat about 2); the same data centred mix (R-hat near 1).
    from gpumcmc.sampling._estimator import ConvergenceWarning
    from gpumcmc.sampling._diagnostics import split_rhat

    rs = np.random.default_rng(0)
    year = rs.integers(2000, 2021, 300).astype(float)
    y = 0.5 * (year - 2010) + rs.normal(size=300)
    kw = dict(prior_scale=1e4, n_samples=200, n_warmup=100, random_state=0, progress=False, backend="numpy")
    with pytest.warns(ConvergenceWarning, match="split-R-hat of (intercept|x0) is .* Raise n_warmup"):
        BayesianGLM("gaussian", **kw).fit(year[:, None], y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = BayesianGLM("gaussian", **kw).fit(year[:, None] - 2010, y)
    assert split_rhat(m.coef_draws_).max() < 1.1 and abs(m.coef_[0] - 0.5) < 0.05


def test_split_rhat_against_its_definition():
    from gpumcmc.sampling._diagnostics import split_rhat

    rs = np.random.default_rng(1)
    x = rs.normal(size=(3, 40, 2))
    x[:, :, 1] += 3 * np.arange(3)[:, None]         # chains apart: R-hat well above 1
    h = np.concatenate([x[:, :20], x[:, 20:]])      # six half-chains of 20
    w, b = h.var(axis=1, ddof=1).mean(0), h.mean(axis=1).var(axis=0, ddof=1)
    np.testing.assert_allclose(split_rhat(x), np.sqrt((19 / 20 * w + b) / w))
    assert split_rhat(x)[1] > 2 and split_rhat(x)[0] < 1.1
    assert split_rhat(np.ones((2, 10, 1)))[0] == 1.0 and np.isnan(split_rhat(np.ones((2, 3))))
    # the trailing elements go in blocks (a hierarchical GLM's draws are (chain, draw, group, K')): the values of
    # one pass over them all, in float64 from float32 draws too
    from gpumcmc.sampling import _diagnostics
    big = rs.normal(size=(3, 40, 7, 5)).astype(np.float32)
    whole = split_rhat(big)
    _diagnostics._BLOCK, block = 3 * 40 * 4, _diagnostics._BLOCK
    try:
        np.testing.assert_allclose(split_rhat(big), whole, rtol=1e-14)
    finally:
        _diagnostics._BLOCK = block
    assert whole.shape == (7, 5)


def test_a_prior_that_holds_a_coefficient_back_warns():
    # y in centimetres with the default prior_scale=2.5 on the intercept: the posterior (correct for that
    # prior) puts a 169 cm intercept at 157, and the fit says why; with a flat prior it is where the data are.
    rs = np.random.default_rng(0)
    x = rs.normal(size=(200, 1))
    y = 170 + 5 * x[:, 0] + 10 * rs.normal(size=200)
    kw = dict(sigma=10, n_samples=200, n_warmup=100, random_state=0, progress=False, backend="numpy")
    with pytest.warns(UserWarning, match=r"posterior mean of intercept is 15\d.*prior standard deviations"):
        BayesianGLM("gaussian", **kw).fit(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        m = BayesianGLM("gaussian", prior_scale=1e6, **kw).fit(x, y)
    assert abs(m.intercept_ - 169.1) < 3


def test_predictions_go_through_the_rows_in_blocks(monkeypatch):
    """predict_mean takes the rows a block at a time (a (draws, rows) array of a million rows was tens of GB):
    each row's mean over the draws as from one (draws, n) array, to rounding, for both estimators; the blocks'
    temporaries stay within a few times _PREDICT_BLOCK elements."""
    import tracemalloc

    from gpumcmc.models.glm import estimator as est
    rs = np.random.default_rng(1)
    X, y = rs.standard_normal((200, 3)), (rs.random(200) < 0.5).astype(float)
    groups = rs.integers(0, 3, 200)
    kw = dict(n_samples=100, n_warmup=20, n_chains=2, random_state=0, progress=False, backend="numpy")
    single = BayesianGLM("bernoulli", **kw).fit(X, y)
    hier = HierarchicalGLM("bernoulli", **kw).fit(X, y, groups)
    Xt, gt = rs.standard_normal((5_000, 3)), rs.integers(0, 3, 5_000)
    b = single.coef_draws_.reshape(-1, 4)
    whole = (1 / (1 + np.exp(-(b[:, :1] + b[:, 1:] @ Xt.T)))).mean(axis=0)
    bh = hier.beta_draws_.reshape((-1,) + hier.beta_draws_.shape[2:])
    eta = np.einsum("dnk,nk->dn", bh[:, gt, :], np.column_stack([np.ones(5_000), Xt]))
    whole_h = (1 / (1 + np.exp(-eta))).mean(axis=0)
    monkeypatch.setattr(est, "_PREDICT_BLOCK", 200 * 300)  # 200 draws: blocks of 300 rows, 17 of them
    np.testing.assert_allclose(single.predict_mean(Xt), whole, rtol=1e-12)
    np.testing.assert_allclose(hier.predict_mean(Xt, gt), whole_h, rtol=1e-12)
    tracemalloc.start()
    single.predict_mean(Xt)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 10 * 8 * 200 * 300 + 8 * 5_000 * 4, peak  # whole arrays: 5 x 8 x 200 x 5,000 = 40 MB


@pytest.mark.parametrize("hierarchical", [False, True])
def test_a_fit_holds_one_copy_of_the_rows_while_it_samples(monkeypatch, hierarchical):
    """Once the sampler has its transposed copy of the design, the fit's checked copy of X and the design with
    its intercept column are freed: a fit held the rows three times over for the whole run (4.9 GB of float64
    at 4 M rows of 50 columns, where the kernels read 1.6)."""
    import gc
    import weakref

    from gpumcmc.models.glm import estimator as est
    refs, alive = [], []
    design, real_run = est._GLMBase._design, est.run

    def _design(self, X, intercept):
        D = design(self, X, intercept)
        refs.extend([weakref.ref(X), weakref.ref(D)])
        return D

    def run(*args, **kwargs):
        gc.collect()
        alive.extend(r() is not None for r in refs)
        return real_run(*args, **kwargs)
    monkeypatch.setattr(est._GLMBase, "_design", _design)
    monkeypatch.setattr(est, "run", run)
    rs = np.random.default_rng(0)
    # float32 rows for a float64 fit: the checked X is a copy of the caller's
    X, y = rs.standard_normal((300, 3)).astype(np.float32), (rs.random(300) < 0.5).astype(float)
    kw = dict(n_samples=5, n_warmup=5, n_chains=2, random_state=0, progress=False, backend="numpy", dtype="float64")
    if hierarchical:
        HierarchicalGLM("bernoulli", **kw).fit(X, y, rs.integers(0, 3, 300))
    else:
        BayesianGLM("bernoulli", **kw).fit(X, y)
    assert alive == [False, False]


@pytest.mark.parametrize("kernel", ["rows", "tiled"])
def test_float32_f_of_rows_fitted_well_keeps_their_log_likelihood(cp, kernel):
    """Separable float32 data (|eta| from 10 to 20, every row on its right side): each row's log-likelihood is
    -log1p(exp(-|eta|)), 5e-5 down to 2e-9, which a float softplus added to eta first rounds away. f and g hold
    within 1e-5 of the NumPy twin's double sums."""
    rs = np.random.default_rng(4)
    N = 20_000
    # |eta| from 10 to 20 by the first column, the others small: no cancellation in the float dot products
    X = np.column_stack([rs.choice([-1.0, 1.0], N) * rs.uniform(10, 20, N), 0.1 * rs.standard_normal((N, 2))])
    X = X.astype(np.float32)
    beta = np.array([[1.0, -0.5, 0.25]], dtype=np.float32)
    y = (X.astype(np.float64) @ beta[0].astype(np.float64) > 0).astype(np.float32)
    f, g = loglik_and_grad(X, y, beta, "bernoulli")
    fc, gc = loglik_and_grad(cp.asarray(X), cp.asarray(y), cp.asarray(beta), "bernoulli", kernel=kernel)
    assert -1.0 < float(f[0]) < 0  # 20,000 rows of 5e-5 at most
    np.testing.assert_allclose(cp.asnumpy(fc), f, rtol=1e-5)
    np.testing.assert_allclose(cp.asnumpy(gc), g, rtol=1e-5, atol=1e-5 * np.abs(g).max())
