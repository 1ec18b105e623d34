"""DPGaussianMixture: planted recovery, the fused kernel against its twin, chunking, bad input."""

from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest
from scipy import stats

from gpumcmc._config import config
from gpumcmc.models import DPGaussianMixture
from gpumcmc.models import mixture as mx
from gpumcmc.models.mixture import algorithm
from gpumcmc.random import default_rng
from gpumcmc.shards import one_device

from conftest import ALPHA, fit_as_ranks, to_np

relabel_module = importlib.import_module("gpumcmc.models.mixture.relabel")


def planted(seed=0, n=(300, 200, 100)):
    rs = np.random.default_rng(seed)
    centers = np.array([[-3.0, -3.0], [3.0, 3.0], [3.0, -4.0]])
    sds = np.array([1.0, 1.0, 0.5])
    X = np.concatenate([rs.normal(c, s, (m, 2)) for c, s, m in zip(centers, sds, n)])
    lab = np.repeat(np.arange(3), n)
    return X, lab, np.array(n) / sum(n)


def ari(a, b):
    from sklearn.metrics import adjusted_rand_score

    return adjusted_rand_score(a, b)


def fit(X, **kw):
    kw.setdefault("progress", False)
    kw.setdefault("random_state", 0)
    kw.setdefault("backend", "numpy")
    return DPGaussianMixture(**kw).fit(X)


# -- planted recovery ---------------------------------------------------------

def _assert_planted_moments(gm, X, lab):
    """The three heaviest components' means and covariances are the planted clusters' sample moments, up to
    the prior's pull and the Monte Carlo error (seen: 0.012 and 0.034 in Gibbs, 0.002 and 0.023 in BEM):
    means within 0.05, covariances within 0.15 sqrt(S_ii S_jj)."""
    top = np.argsort(gm.weights_)[::-1][:3]
    for j in range(3):
        m, c = X[lab == j].mean(axis=0), np.cov(X[lab == j].T)
        k = top[np.argmin(((gm.means_[top] - m) ** 2).sum(axis=1))]
        np.testing.assert_allclose(gm.means_[k], m, rtol=0, atol=0.05)
        assert (np.abs(gm.covariances_[k] - c) <= 0.15 * np.sqrt(np.outer(np.diag(c), np.diag(c)))).all(), \
            (j, gm.covariances_[k], c)


def test_gibbs_recovers_planted_mixture():
    X, lab, w = planted()
    gm = fit(X, n_components=8, n_iter=100, burn_in=400)
    assert ari(lab, gm.z_) > 0.95
    assert ari(lab, gm.predict(X)) > 0.95
    top = np.sort(gm.weights_)[::-1][:3]
    np.testing.assert_allclose(top, np.sort(w)[::-1], atol=0.06)
    _assert_planted_moments(gm, X, lab)
    assert gm.trace_.draws["means"].shape == (1, 100, 8, 2)


def test_bem_recovers_planted_mixture():
    X, lab, w = planted()
    gm = fit(X, n_components=3, method="bem", n_init=4, n_iter=300)
    assert gm.converged_
    assert ari(lab, gm.predict(X)) > 0.97
    np.testing.assert_allclose(np.sort(gm.weights_), np.sort(w), atol=0.02)
    _assert_planted_moments(gm, X, lab)
    # with a spare component, the planted three still carry almost all the weight
    gm4 = fit(X, n_components=4, method="bem", n_init=4, n_iter=300)
    assert np.sort(gm4.weights_)[::-1][:3].sum() > 0.9


def test_predictive_density_matches_sklearn():
    from sklearn.mixture import BayesianGaussianMixture

    X, _, _ = planted(0)
    Xt, _, _ = planted(1)
    sk = BayesianGaussianMixture(n_components=8, weight_concentration_prior_type="dirichlet_process",
                                 max_iter=500, random_state=0).fit(X)
    ref = sk.score(Xt)
    gibbs = fit(X, n_components=8, n_iter=100, burn_in=400)
    bem = fit(X, n_components=8, method="bem", n_iter=300)
    for gm in (gibbs, bem):
        s = gm.score(Xt)
        assert s > ref - 0.08, (s, ref)
        np.testing.assert_allclose(gm.score_samples(Xt).mean(), s)
        # the density and the responsibilities are those of the fitted attributes' mixture (SciPy's
        # densities; the model computes in float32, rounding the log density by a few 1e-6)
        with np.errstate(divide="ignore"):
            joint = np.log(gm.weights_) + np.stack([stats.multivariate_normal(m, c).logpdf(Xt)
                                                    for m, c in zip(gm.means_, gm.covariances_)], axis=1)
        dens = np.logaddexp.reduce(joint, axis=1)
        np.testing.assert_allclose(gm.score_samples(Xt), dens, rtol=0, atol=1e-4)
        p = gm.predict_proba(Xt)
        np.testing.assert_allclose(p, np.exp(joint - dens[:, None]), rtol=0, atol=1e-5)
        np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-5)
        np.testing.assert_array_equal(p.argmax(1), gm.predict(Xt))


# -- the sampler's pieces --------------------------------------------------------

def _random_params(rs, chains, k, p, dtype, dead=()):
    a = rs.normal(size=(chains, k, p, p))
    sigma = a @ np.swapaxes(a, -1, -2) / p + 0.3 * np.eye(p)
    mu = rs.normal(0, 2, (chains, k, p))
    w = rs.dirichlet(np.ones(k), size=chains)
    for j in dead:
        w[:, j] = 0.0
    with np.errstate(divide="ignore"):
        log_pi = np.log(w)
    return mx.kernel_params(log_pi, mu, np.linalg.cholesky(sigma), dtype), log_pi, mu, sigma


def test_logits_twin_matches_scipy():
    rs = np.random.default_rng(3)
    p, k = 3, 5
    params, log_pi, mu, sigma = _random_params(rs, 2, k, p, np.float64)
    x = rs.normal(0, 2, (7, p))
    lg = mx._logits_twin(x, params)
    for c in range(2):
        for j in range(k):
            ref = log_pi[c, j] + stats.multivariate_normal(mu[c, j], sigma[c, j]).logpdf(x)
            np.testing.assert_allclose(lg[c, j], ref, rtol=1e-10, atol=1e-10)


def test_gumbel_draws_follow_the_configuration_probabilities():
    # 20,000 copies of one point: the indicator frequencies against softmax(logits); one chi-square
    # check at ALPHA.
    rs = np.random.default_rng(4)
    p, k, n = 2, 6, 20000
    params, _, _, _ = _random_params(rs, 1, k, p, np.float64, dead=(4,))
    x = np.tile(np.array([[0.3, -0.2]]), (n, 1))
    z = np.empty((1, n), np.int32)
    mx.assign(x, params, 0, n, mx.MODE_SAMPLE, (123, 456), 7, z=z)
    lg = mx._logits_twin(x[:1], params)[0, :, 0]
    prob = np.exp(lg - np.logaddexp.reduce(lg))
    counts = np.bincount(z[0], minlength=k)
    assert counts[4] == 0  # a component of weight zero is never drawn
    live = prob > 0
    chi2 = ((counts[live] - n * prob[live]) ** 2 / (n * prob[live])).sum()
    assert stats.chi2.sf(chi2, live.sum() - 1) > ALPHA


def test_chunked_and_unchunked_runs_give_the_same_draws():
    X, _, _ = planted()
    a = fit(X, n_components=6, n_iter=20, burn_in=5, chunk_size=None, relabel=False)
    b = fit(X, n_components=6, n_iter=20, burn_in=5, chunk_size=97, relabel=False)
    np.testing.assert_array_equal(a.z_, b.z_)
    for name in ("weights", "means", "alpha"):
        np.testing.assert_array_equal(a.trace_.draws[name], b.trace_.draws[name])


def test_chunked_assignment_is_row_local():
    rs = np.random.default_rng(5)
    params, _, _, _ = _random_params(rs, 2, 9, 3, np.float32)
    x = rs.normal(0, 2, (501, 3)).astype(np.float32)
    z1 = np.empty((2, 501), np.int32)
    z2 = np.empty((2, 501), np.int32)
    mx.assign(x, params, 0, 501, mx.MODE_SAMPLE, (1, 2), 3, z=z1)
    for s in range(0, 501, 64):
        mx.assign(x, params, s, min(64, 501 - s), mx.MODE_SAMPLE, (1, 2), 3, z=z2)
    np.testing.assert_array_equal(z1, z2)


def test_niw_posterior_matches_direct_formula():
    rs = np.random.default_rng(6)
    x = rs.normal(size=(50, 2))
    model = mx.make_model(x, 3)
    z = np.zeros((1, 50), np.int32)
    z[0, 20:] = 1  # component 2 stays empty
    counts, s1, s2 = mx.gibbs_stats(model, z)
    kn, mn, dfn, psi = mx.niw_posterior(model, counts, s1, s2)
    xc = model.x.astype(np.float64)
    for j, rows in ((0, slice(0, 20)), (1, slice(20, 50))):
        d = xc[rows]
        nj, xbar = len(d), d.mean(0)
        scatter = (d - xbar).T @ (d - xbar)
        k0 = model.kappa0
        ref = model.psi0 + scatter + k0 * nj / (k0 + nj) * np.outer(xbar - model.m, xbar - model.m)
        np.testing.assert_allclose(psi[0, j], ref, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(mn[0, j], (k0 * model.m + nj * xbar) / (k0 + nj), rtol=1e-5, atol=1e-6)
        assert kn[0, j] == k0 + nj and dfn[0, j] == model.df0 + nj
    np.testing.assert_allclose(psi[0, 2], model.psi0)
    assert dfn[0, 2] == model.df0 and kn[0, 2] == model.kappa0


def test_relabel_undoes_a_permutation():
    rs = np.random.default_rng(7)
    ref = rs.normal(0, 5, (6, 2))
    perms = np.array([rs.permutation(6) for _ in range(4)])
    draws = ref[perms] + rs.normal(0, 0.01, (4, 6, 2))
    perm = mx.relabel(draws, ref)
    np.testing.assert_allclose(mx._take(draws, perm), np.broadcast_to(ref, draws.shape), atol=0.05)


def _relabel_per_draw(means, ref, scale, weights, ref_w, weight_cost=100.0):
    """The assignment as it was first written: one cost matrix per draw, on the host."""
    from scipy.optimize import linear_sum_assignment

    k, p = ref.shape
    flat = means.reshape(-1, k, p)
    sw, sref = np.sqrt(weights.reshape(-1, k)), np.sqrt(ref_w)
    perm = np.empty(flat.shape[:2], dtype=np.int64)
    for d in range(flat.shape[0]):
        cost = (((flat[d][:, None, :] - ref[None, :, :]) / scale) ** 2).sum(-1)
        cost = cost + weight_cost * (sw[d][:, None] - sref[None, :]) ** 2
        rows, cols = linear_sum_assignment(cost)
        perm[d, cols] = rows
    return perm.reshape(means.shape[:-1])


def _label_switched_draws(rs, chains=2, draws=30, k=7, p=3):
    mu = rs.normal(0, 3, (k, p))
    w = rs.dirichlet(np.ones(k))
    means = mu + rs.normal(0, 0.8, (chains, draws, k, p))  # noisy enough for near-ties
    weights = np.abs(w + rs.normal(0, 0.05, (chains, draws, k)))
    for c in range(chains):
        for d in range(draws):
            perm = rs.permutation(k)
            means[c, d], weights[c, d] = means[c, d, perm], weights[c, d, perm]
    return means, weights


@pytest.mark.parametrize("block_bytes", [None, 1, 5000])
def test_relabel_gives_the_labels_of_the_per_draw_assignment(block_bytes):
    # The batched cost matrices (in blocks of draws) are the per-draw ones, so the labels are the same.
    rs = np.random.default_rng(12)
    means, weights = _label_switched_draws(rs)
    ref, ref_w, scale = means[0, 3], weights[0, 3], np.array([1.0, 2.0, 0.5])
    got = mx.relabel(means, ref, scale, weights, ref_w, block_bytes=block_bytes)
    np.testing.assert_array_equal(got, _relabel_per_draw(means, ref, scale, weights, ref_w))
    k, p = ref.shape
    cost = mx.relabel_costs(means, ref, scale, weights, ref_w)
    d = 17
    direct = (((means.reshape(-1, k, p)[d][:, None, :] - ref[None]) / scale) ** 2).sum(-1) \
        + 100.0 * (np.sqrt(weights.reshape(-1, k)[d])[:, None] - np.sqrt(ref_w)[None]) ** 2
    np.testing.assert_array_equal(cost[d], direct)


@pytest.mark.parametrize("workers,block_bytes", [(1, None), (2, None), (3, 5000), (2, 1)])
def test_relabel_on_threads_gives_the_serial_labels(workers, block_bytes):
    # The assignments are solved on a thread pool, block after block; each draw's labels are the per-draw ones.
    rs = np.random.default_rng(13)
    means, weights = _label_switched_draws(rs, draws=41)
    ref, ref_w, scale = means[1, 5], weights[1, 5], np.array([1.0, 2.0, 0.5])
    got = mx.relabel(means, ref, scale, weights, ref_w, block_bytes=block_bytes, workers=workers)
    np.testing.assert_array_equal(got, _relabel_per_draw(means, ref, scale, weights, ref_w))
    with pytest.raises(ValueError, match="workers"):
        mx.relabel(means, ref, scale, weights, ref_w, workers=0)


def _align_three_rounds(weights, means, covariances, loglik, scale, rounds=3):
    """align_draws as it was first written: every round run, one draw at a time on the host."""
    c, d = np.unravel_index(int(np.argmax(loglik)), loglik.shape)
    ref_mu, ref_w = means[c, d], weights[c, d]
    for _ in range(rounds):
        perm = _relabel_per_draw(means, ref_mu, scale, weights, ref_w)
        w, mu = mx._take(weights, perm), mx._take(means, perm)
        ref_w = w.mean(axis=(0, 1))
        ref_mu = (w[..., None] * mu).sum(axis=(0, 1)) / np.maximum(w.sum(axis=(0, 1)), 1e-300)[:, None]
    return w, mu, mx._take(covariances, perm)


def _summaries_as_before(gm):
    """The fitted attributes from the stored draws, as the Gibbs fit computed them before the draws were
    kept on the device: every relabelling round, on the host, one draw at a time."""
    d = gm.trace_.draws
    w, mu, cov = d["weights"], d["means"], d["covariances"]
    if gm.relabel:
        w, mu, cov = _align_three_rounds(w, mu, cov, d["loglik"], gm._scale)
    aligned_w, aligned_mu = w, mu
    u = gm.chains_used_                            # the chains the estimates pool (all, where they agree)
    w, mu, cov = w[u], mu[u], cov[u]
    wm = w.mean(axis=(0, 1))
    ws = np.maximum(w.sum(axis=(0, 1)), 1e-300)
    return {"weights_": wm / wm.sum(),
            "means_": (w[..., None] * mu).sum(axis=(0, 1)) / ws[:, None] + gm._center,
            "covariances_": (w[..., None, None] * cov).sum(axis=(0, 1)) / ws[:, None, None],
            "alpha_": float(d["alpha"].mean()), "n_active_": int(np.round(np.median(d["n_active"]))),
            "aligned_weights": aligned_w, "aligned_means": aligned_mu + gm._center}


@pytest.mark.parametrize("kw", [dict(n_components=8, n_iter=40, burn_in=30),
                                dict(n_components=6, n_iter=25, burn_in=7, n_chains=2, random_state=4),
                                dict(n_components=5, n_iter=20, burn_in=0, relabel=False)])
def test_gibbs_fit_gives_the_attributes_of_the_per_draw_path(kw):
    # The draws are kept on the device and aligned once after the run (threads, rounds stopped once the
    # labels repeat): the attributes are those of the host computation from the same draws, bit for bit.
    X, _, _ = planted()
    gm = fit(X, **kw)
    want = _summaries_as_before(gm)
    for name in ("weights_", "means_", "covariances_", "alpha_", "n_active_"):
        np.testing.assert_array_equal(getattr(gm, name), want[name], err_msg=name)
    np.testing.assert_array_equal(gm._draws["weights"], want["aligned_weights"])
    np.testing.assert_array_equal(gm._draws["means"], want["aligned_means"])
    d = gm.trace_.draws
    # the monitors: every 10th iteration and the last, burn-in included, as the run driver records them
    its, ll = gm.trace_.monitors["loglik"]
    total = kw["burn_in"] + kw["n_iter"]
    np.testing.assert_array_equal(its, sorted(set(range(10, total + 1, 10)) | {total}))
    chains = kw.get("n_chains", 1)
    assert ll.shape == (len(its), chains) and gm.trace_.monitors["alpha"][1].shape == (len(its), chains)
    kept = its > kw["burn_in"]
    np.testing.assert_array_equal(ll[kept], d["loglik"][:, its[kept] - kw["burn_in"] - 1].T)
    np.testing.assert_array_equal(gm.trace_.monitors["alpha"][1][kept], d["alpha"][:, its[kept] - kw["burn_in"] - 1].T)
    np.testing.assert_array_equal(gm.trace_.stats["n_active"], d["n_active"])
    assert d["counts"].shape == d["weights"].shape
    np.testing.assert_array_equal(d["counts"].sum(-1), X.shape[0])


def test_to_arviz_and_attributes():
    X, _, _ = planted()
    gm = fit(X, n_components=5, n_iter=10, burn_in=5, n_chains=2)
    idata = gm.to_arviz()
    assert idata.posterior["weights"].shape == (2, 10, 5)
    assert idata.posterior["means"].shape == (2, 10, 5, 2)
    assert idata.posterior["alpha"].shape == (2, 10)
    assert gm.means_.shape == (5, 2) and gm.covariances_.shape == (5, 2, 2)
    np.testing.assert_allclose(gm.weights_.sum(), 1.0)
    # the draws ArviZ gets are the relabelled ones, in the data's coordinates, whose means are the attributes
    want = _summaries_as_before(gm)
    np.testing.assert_array_equal(idata.posterior["weights"].values, want["aligned_weights"])
    np.testing.assert_array_equal(idata.posterior["means"].values, want["aligned_means"])
    np.testing.assert_array_equal(idata.posterior["alpha"].values, gm.trace_.draws["alpha"])
    u = gm.chains_used_                             # the estimates pool the chains that agree
    w = idata.posterior["weights"].values[u].mean(axis=(0, 1))
    np.testing.assert_allclose(gm.weights_, w / w.sum(), rtol=1e-12)
    cov = idata.posterior["covariances"]
    assert cov.dims == ("chain", "draw", "component", "feature", "feature_bis") and cov.shape == (2, 10, 5, 2, 2)
    wd = idata.posterior["weights"].values[u][..., None, None]
    np.testing.assert_allclose(gm.covariances_, (wd * cov.values[u]).sum((0, 1)) / wd.sum((0, 1)), rtol=1e-5)
    # a refit by Bayesian EM keeps nothing of the Gibbs fit: no stale draws exported
    gm.set_params(method="bem", n_iter=20).fit(X)
    assert not hasattr(gm, "trace_") and not hasattr(gm, "z_")
    with pytest.raises(ValueError, match="method='gibbs'"):
        gm.to_arviz()
    gm.set_params(method="gibbs", n_iter=10).fit(X)
    assert not hasattr(gm, "converged_") and gm.to_arviz().posterior["means"].shape == (2, 10, 5, 2)


# -- bad input -------------------------------------------------------------------

@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_data_is_refused(bad):
    X, _, _ = planted()
    X[3, 1] = bad
    with pytest.raises(ValueError, match="NaN or inf"):
        fit(X, n_components=3, n_iter=2, burn_in=0)


@pytest.mark.parametrize("k", [0, -1, 2.5])
def test_bad_n_components(k):
    with pytest.raises(ValueError, match="n_components"):
        fit(np.zeros((5, 2)), n_components=k)


def test_too_few_samples():
    with pytest.raises(ValueError, match="at least 2 samples"):
        fit(np.ones((1, 3)), n_components=2)


def test_constant_column_is_handled_by_the_prior():
    X, lab, _ = planted()
    X = np.concatenate([X, np.full((len(X), 1), 4.0)], axis=1)
    gm = fit(X, n_components=6, n_iter=40, burn_in=40)
    assert np.isfinite(gm.score(X))
    assert ari(lab, gm.predict(X)) > 0.9


def test_bad_method():
    with pytest.raises(ValueError, match="method"):
        fit(np.zeros((5, 2)), method="vb")


# Priors used to reach the sweeps unchecked: NaN ended in the FloatingPointError about covariances, a mean of the
# wrong length in NumPy's reshape error, an asymmetric covariance_prior went through.
@pytest.mark.parametrize("kw,match", [
    (dict(mean_prior=[np.nan, 0.0]), "mean_prior must be finite"),
    (dict(mean_prior=[0.0]), r"mean_prior must hold one value per feature, shape \(2,\)"),
    (dict(covariance_prior=[[1.0, np.nan], [np.nan, 1.0]]), "covariance_prior must be finite"),
    (dict(covariance_prior=[1.0, np.inf]), "covariance_prior must be finite"),
    (dict(covariance_prior=[[1.0, 0.5], [0.1, 1.0]]), "covariance_prior must be a symmetric"),
    (dict(mean_precision_prior=0.0), "mean_precision_prior must be a positive"),
    (dict(mean_precision_prior=np.nan), "mean_precision_prior must be finite"),
    (dict(degrees_of_freedom_prior=np.inf), "degrees_of_freedom_prior must be finite"),
    (dict(alpha_prior=(np.inf, 1.0)), "alpha_prior must be finite"),
])
def test_bad_priors_are_refused(kw, match):
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match=match):
        mx.make_model(X, 2, **kw)  # also without scikit-learn's parameter constraints
    if "mean_precision_prior" not in kw and "degrees_of_freedom_prior" not in kw:
        with pytest.raises(ValueError, match=match):
            fit(X, n_components=2, n_iter=2, burn_in=0, **kw)


# float32 rounds X before centring it: far from 0 against its spread the fit was silently garbage (ARI 0 with a
# positive score at 1e8); fit warns, for the columns concerned, and only in float32.
def test_float32_fit_warns_for_data_far_from_zero():
    import warnings

    rs = np.random.default_rng(0)
    X = np.r_[rs.normal(-3, 1, (15, 2)), rs.normal(3, 1, (15, 2))]
    X[:, 1] += 1e8
    with pytest.warns(UserWarning, match=r"column\(s\) 1 lie far from 0.*dtype='float64'"):
        fit(X, n_components=2, n_iter=2, burn_in=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit(X, n_components=2, n_iter=2, burn_in=0, dtype="float64")
        fit(X - X.mean(axis=0), n_components=2, n_iter=2, burn_in=0)
        fit(np.c_[X[:, :1], np.full(30, 1e8)], n_components=2, n_iter=2, burn_in=0)  # a constant column is fine


# -- data ------------------------------------------------------------------------

def test_load_fcs_examples():
    from gpumcmc.datasets import fcs_example_files, load_fcs

    files = fcs_example_files()
    d = load_fcs(files["facscalibur"])
    assert d.data.shape == (37395, 7) and "Time" not in d.channels
    assert np.isfinite(d.data).all()
    raw = load_fcs("facscalibur", cofactor=None, channels=["FSC-H", 1])
    np.testing.assert_allclose(np.arcsinh(raw.data / 150.0), d.data[:, :2])
    assert load_fcs("lsr2", drop_time=False).data.shape == (14945, 11)
    assert load_fcs("fortessa", drop_time=False).data.shape == (11585, 11)
    with pytest.raises(ValueError, match="no channel"):
        load_fcs("facscalibur", channels=["nope"])


# -- GPU: kernel against twin, CPU against GPU --------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("p,k", [(2, 5), (14, 70), (5, 33)])
def test_kernel_matches_twin(cp, dtype, p, k):
    rs = np.random.default_rng(8)
    chains, n = 2, 3000
    params, _, _, _ = _random_params(rs, chains, k, p, dtype, dead=(1,))
    x = rs.normal(0, 2, (n, p)).astype(dtype)
    key, off = (11, 22), 5
    zt, lt = np.empty((chains, n), np.int32), np.empty((chains, n), dtype)
    mx._assign_twin(x, params, 0, n, mx.MODE_SAMPLE, key, off, z=zt, lse=lt)
    xg, pg = cp.asarray(x), cp.asarray(params)
    zg, lg = cp.empty((chains, n), cp.int32), cp.empty((chains, n), dtype)
    mx.assign(xg, pg, 0, n, mx.MODE_SAMPLE, key, off, z=zg, lse=lg)
    # float32: the kernel's quadratic forms reach ~1e3 for points far from every component, so logits
    # carry absolute errors near 1e-3; a bug shows up as wholesale disagreement, not as a few flips.
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(to_np(lg), lt, rtol=rtol, atol=rtol)
    assert (to_np(zg) == zt).mean() > 0.995
    # responsibilities, chunked on the GPU
    m = 1000
    rt = np.empty((chains, k, m), dtype)
    mx._assign_twin(x, params, 500, m, mx.MODE_RESP, key, off, lse=lt, resp=rt)
    rg = cp.empty((chains, k, m), dtype)
    mx.assign(xg, pg, 500, m, mx.MODE_RESP, key, off, lse=lg, resp=rg)
    np.testing.assert_allclose(to_np(rg), rt, rtol=100 * rtol, atol=10 * rtol)
    # float64 probabilities (what Bayesian EM asks for): the same values, written once in float64
    r64 = cp.empty((chains, k, m), cp.float64)
    l64 = cp.empty((chains, n), dtype)
    mx.assign(xg, pg, 500, m, mx.MODE_RESP, key, off, lse=l64, resp=r64)
    np.testing.assert_array_equal(to_np(r64), to_np(rg).astype(np.float64))
    np.testing.assert_array_equal(to_np(l64)[:, 500:500 + m], to_np(lg)[:, 500:500 + m])
    if dtype == np.float32:
        # the same probabilities in blocks of 128 rows (7 blocks of (chains, k, 128), then 104 rows)
        flat = cp.full(chains * k * m, -1.0)
        mx.assign(xg, pg, 500, m, mx.MODE_RESP, key, off, lse=l64, resp=flat, block_rows=128)
        head, tail = mx._resp_blocks(flat, 128, m, chains * k)
        got = np.concatenate([*to_np(head), to_np(tail)], axis=1).reshape(chains, k, m)
        np.testing.assert_array_equal(got, to_np(r64))
    za, zb = cp.empty((chains, n), cp.int32), np.empty((chains, n), np.int32)
    mx.assign(xg, pg, 0, n, mx.MODE_ARGMAX, z=za)
    mx._assign_twin(x, params, 0, n, mx.MODE_ARGMAX, key, off, z=zb)
    assert (to_np(za) == zb).mean() > 0.995


@pytest.mark.parametrize("dtype, p, tile", [(np.float32, 5, 27), (np.float32, 14, 27), (np.float64, 14, None)])
def test_gpu_left_out_components_give_the_same_bits(cp, dtype, p, tile, monkeypatch):
    # MIX_SKIP = 1 leaves out a tile of components that no row of a warp can choose or feel: the indicators,
    # log-sum-exps and probabilities of the full kernel bit for bit, in modes SAMPLE and ARGMAX with and
    # without the log-sum-exps and in mode RESP. The components in tiles of T (27, or the float64 default
    # of 25 at p = 14, so that a tile ends inside a Philox call's four): tile 0 the eight near ones, then
    # ones 20 nats down; tile 1 3,000 nats down; tile 2 copies of the near ones, then ones 20 nats down (rows
    # choose them, reading the words drawn at the end of tile 1 where it was left out); tile 3 pruned. A tally
    # compiled in counts, launch by launch, the tiles left out: tiles 1 and 3 in every mode; a kernel that
    # left the words undrawn gives other indicators.
    from gpumcmc import _loader
    from gpumcmc.models.mixture import ops

    base = () if tile is None else (("MIX_TILE", tile),)
    T = tile or dict(ops._defines(p, dtype))["MIX_TILE"]
    rs = np.random.default_rng(9)
    chains, n, k = 2, 4000, 4 * T
    _, log_pi, mu, sigma = _random_params(rs, chains, k, p, np.float64)
    log_pi[:, 8:T] -= 20.0
    log_pi[:, T:2 * T] -= 3000.0
    mu[:, 2 * T:2 * T + 8], sigma[:, 2 * T:2 * T + 8], log_pi[:, 2 * T:2 * T + 8] = mu[:, :8], sigma[:, :8], log_pi[:, :8]
    log_pi[:, 2 * T + 8:3 * T] -= 20.0
    log_pi[:, 3 * T:] = -np.inf
    pg = cp.asarray(mx.kernel_params(log_pi, mu, np.linalg.cholesky(sigma), dtype))
    x = cp.asarray(rs.normal(0, 2, (n, p)).astype(dtype))
    calls = [(mx.MODE_SAMPLE, True), (mx.MODE_SAMPLE, False), (mx.MODE_ARGMAX, True), (mx.MODE_ARGMAX, False),
             (mx.MODE_RESP, True)]

    def run(tune, count=None):
        monkeypatch.setattr(config, "mixture_defines", base + tune)
        out, skipped = [], []
        for mode, with_lse in calls:
            if count is not None:
                count[...] = 0
            z = cp.full((chains, n), -1, cp.int32) if mode != mx.MODE_RESP else None
            lse = cp.full((chains, n), np.nan, dtype) if with_lse else None
            resp = cp.empty((chains, k, n), dtype) if mode == mx.MODE_RESP else None
            mx.assign(x, pg, 0, n, mode, (11, 22), 5, z=z, lse=lse, resp=resp)
            out += [to_np(a) for a in (z, lse, resp) if a is not None]
            if count is not None:
                skipped.append(int(count[0]))
        return out, skipped

    def tallied(tune):
        monkeypatch.setattr(config, "mixture_defines", base + tune)
        ct = "float" if np.dtype(dtype) == np.float32 else "double"  # the module assign's kernel comes from
        mod = _loader.module_for(ops.FILE, f"mixture_logits<{ct}>", ops._NAMES, ops._defines(p, dtype))
        return run(tune, cp.ndarray((1,), cp.uint64, memptr=mod.get_global("mix_skip_tally")))

    full, _ = run((("MIX_SKIP", 0),))  # the full kernel in every mode (the launcher's default skips in mode RESP)
    z = full[0]
    assert ((z >= 2 * T) & (z < 2 * T + 8)).sum() > 100  # rows choose tile 2's near copies
    left_out, skipped = tallied((("MIX_SKIP", 1), ("MIX_SKIP_TALLY", 1)))
    for a, b in zip(full, left_out):
        np.testing.assert_array_equal(a, b)
    warps = chains * -(-n // (32 * dict(ops._defines(p, dtype))["MIX_ROWS"]))  # warps of rows, each chain
    assert all(s >= 2 * warps for s in skipped), (skipped, warps)  # tiles 1 and 3, by every warp, every mode
    broken, _ = tallied((("MIX_SKIP", 1), ("MIX_SKIP_TALLY", 1), ("MIX_SKIP_BREAK_WORDS", 1)))
    assert not np.array_equal(broken[0], full[0])


@pytest.mark.slow
def test_left_out_components_compile():
    # mixture.cu with MIX_SKIP = 1 and its tally (the CI's compile of every kernel uses the file's defaults)
    # compiles for sm_90 at the shapes the launcher asks for; the GPU tests beside it check its bits
    import os
    import shutil
    import subprocess

    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc")
    kernels = os.path.join(os.path.dirname(__file__), os.pardir, "kernels_cu")
    defines = [f"-D{k}={v}" for k, v in mx._defines(14, np.float32)] + ["-DMIX_SKIP=1", "-DMIX_SKIP_TALLY=1"]
    done = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", "--ptx", "-I", kernels, *defines, "-o", os.devnull,
                           os.path.join(kernels, "mixture.cu")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_gpu_fits_with_left_out_components_give_the_same_draws(cp, monkeypatch):
    # Gibbs (modes SAMPLE and ARGMAX) and Bayesian EM (mode RESP, whose pruned components have c_j = -inf; the
    # default there) with and without the left-out tiles
    X, _, _ = planted()
    kw = dict(n_components=40, n_iter=8, burn_in=2, backend="cupy")
    bem = dict(n_components=40, method="bem", n_iter=40, backend="cupy")
    monkeypatch.setattr(config, "mixture_defines", (("MIX_SKIP", 0),))  # the full kernel in every mode
    a, a_bem = fit(X, **kw), fit(X, **bem)
    monkeypatch.setattr(config, "mixture_defines", (("MIX_SKIP", 1),))
    b, b_bem = fit(X, **kw), fit(X, **bem)
    np.testing.assert_array_equal(a.z_, b.z_)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    for name in ("weights", "means", "covariances", "alpha", "loglik"):
        np.testing.assert_array_equal(a.trace_.draws[name], b.trace_.draws[name])
    for name in ("weights_", "means_", "covariances_", "lower_bound_"):
        np.testing.assert_array_equal(getattr(a_bem, name), getattr(b_bem, name))


def test_gpu_chunked_same_draws(cp):
    X, _, _ = planted()
    a = fit(X, n_components=6, n_iter=20, burn_in=5, relabel=False, backend="cupy")
    b = fit(X, n_components=6, n_iter=20, burn_in=5, relabel=False, backend="cupy", chunk_size=97)
    np.testing.assert_array_equal(a.z_, b.z_)
    np.testing.assert_array_equal(a.trace_.draws["means"], b.trace_.draws["means"])


def test_cpu_and_gpu_gibbs_agree(cp):
    # Same seed, same draws up to rounding: after three sweeps in float64 the indicators agree.
    X, lab, _ = planted()
    kw = dict(n_components=6, n_iter=3, burn_in=0, dtype="float64", relabel=False)
    c = fit(X, backend="numpy", **kw)
    g = fit(X, backend="cupy", **kw)
    assert (c.z_ == g.z_).mean() > 0.99
    np.testing.assert_allclose(c.trace_.draws["means"][:, 0], g.trace_.draws["means"][:, 0], rtol=1e-6, atol=1e-8)


def test_cpu_and_gpu_bem_agree(cp):
    X, lab, _ = planted()
    kw = dict(n_components=3, method="bem", n_iter=100)
    c = fit(X, backend="numpy", **kw)
    g = fit(X, backend="cupy", **kw)
    assert ari(c.predict(X), g.predict(X)) > 0.99
    assert abs(c.score(X) - g.score(X)) < 1e-3
    np.testing.assert_allclose(np.sort(c.weights_), np.sort(g.weights_), atol=1e-3)


def test_gpu_recovers_planted(cp):
    X, lab, _ = planted()
    # one spare component: over seeds 0-5 on NumPy the adjusted Rand index is 0.98-1.0 (eight components
    # can leave a chain in a split state for hundreds of sweeps)
    gm = fit(X, n_components=4, n_iter=100, burn_in=400, backend="cupy")
    assert ari(lab, gm.predict(X)) > 0.95
    assert np.isfinite(gm.score(X))


@pytest.mark.parametrize("chains", [1, 2])  # one chain skips the per-chain offsets
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("p,k", [(2, 5), (14, 300)])
def test_stats_kernel_matches_twin(cp, dtype, p, k, chains):
    rs = np.random.default_rng(9)
    n = 5000
    x = rs.normal(0, 2, (n, p))
    model = mx.make_model(cp.asarray(x), k, dtype=dtype)
    # skewed sizes: one component holds most rows (many tiles), some stay empty
    z = np.where(rs.random((chains, n)) < 0.7, 0, rs.integers(0, k // 2 + 1, (chains, n))).astype(np.int32)
    zg = cp.asarray(z)
    got = mx.gibbs_stats(model, zg, use_kernel=True)
    ref = mx.gibbs_stats(model, zg, use_kernel=False)
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    for a, b in zip(got, ref):
        np.testing.assert_allclose(to_np(a), to_np(b), rtol=rtol, atol=rtol * n)
    np.testing.assert_array_equal(to_np(got[0]), np.stack([np.bincount(r, minlength=k) for r in z]))
    again = mx.gibbs_stats(model, zg, use_kernel=True)
    for a, b in zip(got, again):  # deterministic: no floating-point atomics
        np.testing.assert_array_equal(to_np(a), to_np(b))


def test_bem_cuts_back_a_component_to_zero_weight():
    # A start whose third component sits far from every point: its probabilities underflow to 0, so it
    # sums less than one event, is held at weight zero (v = 0, log weight -inf in the E-step) from then on.
    X, lab, _ = planted()
    model = mx.make_model(X, 4, dtype=np.float32)
    state = mx.init(default_rng(0, backend="numpy"), model, 1, z=False)
    mu = state.mu.copy()
    mu[0, 2] = 1e3
    chol = np.linalg.cholesky(state.sigma)
    state = state._replace(mu=mu, params=mx.kernel_params(state.log_pi, mu, chol, np.float32))
    for _ in range(30):
        state = mx.bem_step(model, state)
    w = np.exp(state.log_pi[0])
    # the components are kept in order of decreasing summed probability: the far one is last
    assert w[3] == 0.0 and state.v[0, 3] == 0.0 and state.counts[0, 3] == 0.0
    assert (w[:3] > 0.1).all() and not np.isfinite(state.params[0, 3, 0])
    np.testing.assert_allclose(w.sum(), 1.0)
    assert np.isfinite(state.loglik).all()


def _planted_mixture(n_clusters, n=4000, p=5, seed=0):
    """Training and held-out draws of a p-D mixture of ``n_clusters`` correlated Gaussians (4 apart)."""
    rs = np.random.default_rng(seed)
    w = {3: [0.5, 0.3, 0.2], 6: [0.34, 0.26, 0.18, 0.12, 0.08, 0.02]}.get(n_clusters)
    w = np.asarray(w if w is not None else rs.dirichlet(np.full(n_clusters, 5.0)))
    centres = rs.normal(0, 4, (n_clusters, p))
    chol = np.linalg.cholesky(np.eye(p) * 0.5 + 0.3 * np.ones((p, p)))

    def draw(m):
        lab = rs.choice(n_clusters, m, p=w)
        return centres[lab] + rs.normal(size=(m, p)) @ chol.T, lab

    X, lab = draw(n)
    Xt, _ = draw(n)
    return X, lab, Xt


@pytest.mark.slow
@pytest.mark.parametrize("n_clusters,k", [(3, 16), (6, 16), (6, 32), (10, 32)])
def test_bem_prunes_to_the_planted_components_as_sklearn(n_clusters, k):
    # BEM on planted mixtures with many more components allowed: the components above 1% weight are the
    # planted ones (+-1), the ARI is within 0.01 of scikit-learn's BayesianGaussianMixture (DP prior, the
    # same truncation) and the held-out log-likelihood at least its. Deterministic for the seeds here.
    import warnings

    from sklearn.mixture import BayesianGaussianMixture

    X, lab, Xt = _planted_mixture(n_clusters)
    gm = fit(X, n_components=k, method="bem", n_init=4, n_iter=1000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sk = BayesianGaussianMixture(n_components=k, weight_concentration_prior_type="dirichlet_process",
                                     max_iter=1000, random_state=0).fit(X)
    assert abs(int((gm.weights_ > 0.01).sum()) - n_clusters) <= 1, gm.weights_
    assert ari(lab, gm.predict(X)) >= ari(lab, sk.predict(X)) - 0.01
    assert gm.score(Xt) >= sk.score(Xt)


def test_bem_kl_is_zero_at_the_prior_and_positive_away_from_it():
    # The lower bound that picks the BEM start: its KL term vanishes where the posteriors are the prior
    # (no probability anywhere) and is positive for a fitted state.
    X, _, _ = planted()
    model = mx.make_model(X, 4, dtype=np.float64)
    p = X.shape[1]
    prior = mx.State(np.zeros((1, 0), np.int32), None, np.zeros((1, 4)), np.broadcast_to(model.m, (1, 4, p)),
                     np.broadcast_to(model.psi0 / (model.df0 - p - 1), (1, 4, p, p)), None, np.array([0.7]),
                     np.zeros((1, 4)), None)
    np.testing.assert_allclose(mx._bem_kl(model, prior), 0.0, atol=1e-7)  # the Cholesky jitter of 1e-10
    state = mx.init_bem(default_rng(0, backend="numpy"), model, 2)
    for _ in range(20):
        state = mx.bem_step(model, state)
    assert (mx._bem_kl(model, state) > 1.0).all()


def _bem_states(X, k, iters, xp=np, **model_kw):
    """Every state of ``iters`` BEM iterates of two starts, from one :func:`make_bem_step` closure."""
    model = mx.make_model(xp.asarray(X), k, chains=2, **model_kw)
    state = mx.init(default_rng(0, backend=xp.__name__), model, 2, z=False)
    bem = mx.make_bem_step(model)
    states = []
    for _ in range(iters):
        state = bem(state)
        states.append(state)
    return states


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bem_chunked_matches_unchunked(dtype):
    # Several chunks sum their statistics in a (chunks, C k, q) buffer; one chunk takes the GEMM as is.
    X, _, _ = planted()
    a = _bem_states(X, 5, 20, dtype=dtype)[-1]
    b = _bem_states(X, 5, 20, dtype=dtype, chunk_size=97)[-1]
    for name in ("v", "mu", "sigma", "alpha", "counts", "loglik"):
        np.testing.assert_allclose(getattr(b, name), getattr(a, name), rtol=1e-9, atol=1e-12, err_msg=name)


def test_bem_states_do_not_share_the_step_buffers():
    # The closure reuses its probability and log-sum-exp buffers: later iterates leave earlier states alone.
    X, _, _ = planted()
    alone = _bem_states(X, 4, 1)[0]
    first = _bem_states(X, 4, 3)[0]
    for f in mx.State._fields:
        np.testing.assert_array_equal(getattr(first, f), getattr(alone, f), err_msg=f)


def test_bem_step_matches_make_bem_step():
    X, _, _ = planted()
    model = mx.make_model(X, 4)
    state = mx.init(default_rng(1, backend="numpy"), model, 2, z=False)
    a, b = mx.bem_step(model, state), mx.make_bem_step(model)(state)
    for f in mx.State._fields:
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)


def _counting_bem(monkeypatch):
    """Count BEM iterates, and note the count each time the convergence rule reads the state."""
    from gpumcmc.models.mixture import estimator as est

    count, reads = [0], []
    real_step, real_rule = est.make_bem_step, est._BemConverged.__call__

    def make(model):
        bem = real_step(model)

        def step(state):
            count[0] += 1
            return bem(state)

        return step

    def rule(self, state, info):
        reads.append(count[0])
        return real_rule(self, state, info)

    monkeypatch.setattr(est, "make_bem_step", make)
    monkeypatch.setattr(est._BemConverged, "__call__", rule)
    return reads


@pytest.mark.parametrize("kw, its, converged", [(dict(n_iter=37, tol=0.0), [10, 20, 30, 37], False),
                                                (dict(n_iter=500, tol=1e-3), [10, 20], True)])
def test_bem_fit_reads_its_rule_every_10_iterations_on_the_driver(monkeypatch, kw, its, converged):
    """BEM's fit runs on gpumcmc.sampling.run with a stop condition: the rule reads the state after every 10th
    iterate and after the last that n_iter allows, nowhere else, and the fit is init_bem and its steps written
    out, with the same rule: the kept start's means are those of the hand-made loop's state."""
    X, _, _ = planted()
    reads = _counting_bem(monkeypatch)
    gm = fit(X, n_components=4, method="bem", n_init=2, dtype="float64", **kw)
    assert reads == its and gm.n_iter_ == its[-1] and gm.converged_ is converged
    model = mx.make_model(X, 4, dtype=np.float64, alpha_prior=(1.0, 4.0), chains=2)
    state = mx.init_bem(default_rng(0, backend="numpy"), model, 2)
    bem = mx.make_bem_step(model)
    for _ in range(its[-1]):
        state = bem(state)
    assert any(np.array_equal(gm.means_, state.mu[c] + model.center) for c in range(2))


def test_chains_differ_and_share_the_model():
    X, _, _ = planted()
    gm = fit(X, n_components=4, n_iter=5, burn_in=5, n_chains=3, relabel=False)
    a = gm.trace_.draws["alpha"]
    assert a.shape == (3, 5) and len({tuple(r) for r in a}) == 3


def test_gemm_logits_match_the_direct_form():
    rs = np.random.default_rng(10)
    params, _, _, _ = _random_params(rs, 2, 7, 4, np.float64, dead=(3,))
    x = rs.normal(0, 2, (50, 4))
    direct = mx._logits_twin(x, params)
    gemm = mx._logits_gemm(x, mx._gemm_weights(params, 4))
    live = np.isfinite(direct)
    np.testing.assert_allclose(gemm[live], direct[live], rtol=1e-9, atol=1e-9)
    assert (gemm[~live] < -1e299).all()


def test_align_draws_keeps_empty_components_apart():
    # Three occupied components and three empty ones whose means are prior draws that can land next to
    # an occupied one; draws are label-switched copies. Aligned, each occupied component keeps its mean.
    rs = np.random.default_rng(11)
    mu = np.array([[-3.0, -3.0], [3.0, 3.0], [3.0, -4.0]])
    w = np.array([0.5, 0.3, 0.2])
    D = 40
    means = np.empty((1, D, 6, 2))
    weights = np.empty((1, D, 6))
    for d in range(D):
        full_mu = np.concatenate([mu + rs.normal(0, 0.02, mu.shape), mu[rs.integers(0, 3, 3)] + rs.normal(0, 0.3, (3, 2))])
        full_w = np.concatenate([w, np.full(3, 1e-4)])
        perm = rs.permutation(6)
        means[0, d], weights[0, d] = full_mu[perm], full_w[perm]
    wa, ma, _ = mx.align_draws(weights, means, np.zeros((1, D, 6, 2, 2)), rs.normal(size=(1, D)), np.ones(2))
    big = wa.mean(axis=(0, 1)) > 0.1
    assert big.sum() == 3
    assert np.ptp(ma[0][:, big], axis=0).max() < 0.2  # the same component in every draw


def test_non_finite_fit_is_reported():
    with pytest.raises(FloatingPointError, match="float64"):
        mx._check_finite_fit([np.array([1.0, np.nan])], "Gibbs")
    mx._check_finite_fit([np.array([1.0, 2.0])], "BEM")


def _weighted_stats(rs, model, chains, dead=()):
    """Statistics [n, s1, vech(s2)] of the data under random probabilities; ``dead`` components get none."""
    n, k = model.x.shape[0], model.k
    r = rs.dirichlet(np.full(k, 0.3), size=(chains, n)).transpose(0, 2, 1)
    r[:, list(dead)] = 0.0
    r /= r.sum(axis=1, keepdims=True)
    y = mx._y_block(to_np(model.x), np)
    return np.ascontiguousarray((r.reshape(chains * k, n) @ y).reshape(chains, k, -1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("p,k", [(2, 5), (14, 40)])
def test_gibbs_component_kernels_match_twins(cp, dtype, p, k):
    rs = np.random.default_rng(14)
    chains = 2
    x = rs.normal(0, 3, (300, p))
    model = mx.make_model(cp.asarray(x), k, dtype=dtype)
    host = mx.make_model(x, k, dtype=dtype)
    acc = _weighted_stats(rs, model, chains, dead=(1,))
    got = mx._posterior_kernel(model, cp.asarray(acc), mx._packed_prior(model))
    want = mx.niw_posterior(host, *mx._unpack_stats(acc, p))
    for name, g, w in zip(("kn", "mn", "dfn", "psi"), got, want):
        np.testing.assert_allclose(to_np(g), w, rtol=1e-12, atol=1e-10, err_msg=name)
    a = rs.normal(size=(chains, k, p, p))
    sigma = a @ np.swapaxes(a, -1, -2) / p + 0.3 * np.eye(p)
    mn, kn, eps = rs.normal(size=(chains, k, p)), rs.uniform(0.1, 100, (chains, k)), rs.normal(size=(chains, k, p))
    log_pi = np.log(rs.dirichlet(np.ones(k), size=chains))
    log_pi[:, 0] = -np.inf
    mu, params = mx._gibbs_params_kernel(*(cp.asarray(t) for t in (log_pi, mn, kn, sigma, eps)), dtype)
    mu_t, params_t = mx._gibbs_params_twin(log_pi, mn, kn, sigma, eps, dtype)
    np.testing.assert_allclose(to_np(mu), mu_t, rtol=1e-12, atol=1e-12)
    tol = 1e-5 if dtype == np.float32 else 1e-10
    fin = np.isfinite(params_t)
    np.testing.assert_array_equal(np.isfinite(to_np(params)), fin)
    np.testing.assert_allclose(to_np(params)[fin], params_t[fin], rtol=tol, atol=tol)


@pytest.mark.parametrize("gemm_rows", [None, 64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_bem_matches_numpy_and_chunks(cp, dtype, gemm_rows, monkeypatch):
    # Twenty iterates on the GPU (kernel probabilities, one GEMM per chunk or one batched GEMM over
    # blocks of 64 rows, the variational update on CuPy) against NumPy, unchunked and in chunks of 97 rows.
    monkeypatch.setattr(config, "mixture_gemm_rows", gemm_rows)
    monkeypatch.setattr(config, "mixture_gemm_min_blocks", 1)  # blocks from 64 rows up (600 rows: 9 blocks, 24 rows)
    X, _, _ = planted()
    ref = _bem_states(X, 5, 20, dtype=dtype)[-1]
    # the E-step reads the knobs where it runs (algorithm, not the package's old names): count its blocked GEMMs
    blocked = []
    real = algorithm._resp_blocks
    monkeypatch.setattr(algorithm, "_resp_blocks",
                        lambda flat, rows, m, ck: blocked.append(rows) or real(flat, rows, m, ck))
    tol = 1e-8 if dtype == np.float64 else 2e-4
    for chunk in (None, 97):
        got = _bem_states(X, 5, 20, xp=cp, dtype=dtype, chunk_size=chunk)[-1]
        for name in ("v", "mu", "sigma", "alpha", "counts", "loglik"):
            np.testing.assert_allclose(to_np(getattr(got, name)), getattr(ref, name), rtol=tol, atol=tol,
                                       err_msg=f"{name}, chunk {chunk}")
    # float32 data takes the batched GEMM over blocks of 64 rows in every chunk of at least 64 rows (one of 600, then
    # six of 97 and one of 18), in each of the 20 iterates; float64 data and gemm_rows = None never do
    spans = [600] + [min(97, 600 - s) for s in range(0, 600, 97)]
    assert blocked == ([64] * (20 * sum(m >= 64 for m in spans)) if gemm_rows and dtype == np.float32 else [])


def test_relabel_on_gpu_gives_the_host_labels(cp):
    rs = np.random.default_rng(15)
    means, weights = _label_switched_draws(rs)
    ref, ref_w, scale = means[1, 2], weights[1, 2], np.array([1.0, 2.0, 0.5])
    want = mx.relabel(means, ref, scale, weights, ref_w)
    got = mx.relabel(cp.asarray(means), cp.asarray(ref), scale, cp.asarray(weights), cp.asarray(ref_w))
    np.testing.assert_array_equal(got, want)
    loglik, cov = rs.normal(size=(2, 30)), rs.normal(size=means.shape + (3,))
    wa, ma, ca = mx.align_draws(weights, means, cov, loglik, scale)
    wg, mg, cg = mx.align_draws(cp.asarray(weights), cp.asarray(means), cov, loglik, scale)
    np.testing.assert_allclose(to_np(wg), wa, rtol=1e-12)
    np.testing.assert_allclose(to_np(mg), ma, rtol=1e-12)
    np.testing.assert_array_equal(cg, ca)  # the covariances stay on the host, permuted alike


def _scipy_perms(cost):
    from scipy.optimize import linear_sum_assignment

    perm = np.empty(cost.shape[:2], dtype=np.int64)
    for d, c in enumerate(cost):
        rows, cols = linear_sum_assignment(c)
        perm[d, cols] = rows
    return perm


@pytest.mark.parametrize("k", [1, 2, 5, 31, 33, 64, 256, 300])
def test_gpu_assignments_are_scipys_ties_included(cp, k):
    # lsa_solve runs SciPy's shortest augmenting path step for step, so every permutation is SciPy's: on
    # continuous costs, on small-integer costs full of exact ties (where the choice among equal path costs
    # decides), on a constant matrix, and on costs that differ in their last bits.
    rs = np.random.default_rng(100 + k)
    d = 40 if k <= 64 else 8
    costs = [rs.random((d, k, k)), rs.integers(0, 3, (d, k, k)).astype(np.float64),
             np.full((2, k, k), 1.5),
             0.3 + 0.3 * rs.integers(0, 2, (d, k, k)) + rs.integers(-2, 3, (d, k, k)) * 1e-17,
             rs.normal(0, 1e3, (d, k, k))]
    for i, cost in enumerate(costs):
        np.testing.assert_array_equal(relabel_module._assign_gpu(cp.asarray(cost)), _scipy_perms(cost),
                                      err_msg=f"cost set {i}")


def test_gpu_assignments_of_fitted_draws_are_scipys(cp):
    # Costs as align_draws builds them from a Gibbs run at k = 64, against a draw and against the mean.
    X, _, _ = planted()
    gm = fit(X, n_components=64, n_iter=30, burn_in=0, n_chains=2, relabel=False)
    d = gm.trace_.draws
    w, mu = d["weights"], d["means"]
    for ref_mu, ref_w in ((mu[1, 7], w[1, 7]), (mu.mean(axis=(0, 1)), w.mean(axis=(0, 1)))):
        cost = mx.relabel_costs(cp.asarray(mu), ref_mu, gm._scale, cp.asarray(w), ref_w)
        np.testing.assert_array_equal(relabel_module._assign_gpu(cost), _scipy_perms(cost.get()))


@pytest.mark.parametrize("p", [1, 3, 14, 17])
def test_gpu_fused_costs_are_relabel_costs_bits(cp, p):
    # relabel_costs_fused builds the costs in one pass with each operation rounded as CuPy's array expression
    # rounds it, so the assignments (which near ties can turn) see the same numbers.
    rs = np.random.default_rng(200 + p)
    k = 40
    means, ref = rs.normal(0, 3, (6, k, p)), rs.normal(0, 3, (k, p))
    weights, ref_w = rs.dirichlet(np.ones(k), 6), rs.dirichlet(np.ones(k))
    scale = rs.uniform(0.5, 2.0, p)
    for w, rw in ((weights, ref_w), (None, None)):
        want = mx.relabel_costs(cp.asarray(means), ref, scale, None if w is None else cp.asarray(w), rw)
        got = relabel_module._costs_fused(cp.asarray(means), None if w is None else cp.asarray(w), ref, rw, scale,
                                          100.0)
        assert int((got != want).sum()) == 0


def test_gpu_relabel_rejects_costs_that_are_not_finite(cp):
    rs = np.random.default_rng(16)
    means, weights = _label_switched_draws(rs)
    means[1, 4, 2, 0] = np.nan
    with pytest.raises(ValueError, match="not finite"):
        mx.relabel(cp.asarray(means), means[0, 0], None, cp.asarray(weights), weights[0, 0])


def test_relabel_above_the_gpu_limit_solves_on_the_host(cp, monkeypatch):
    rs = np.random.default_rng(17)
    means, weights = _label_switched_draws(rs)
    ref, ref_w = means[0, 1], weights[0, 1]
    want = mx.relabel(means, ref, None, weights, ref_w)
    monkeypatch.setattr(relabel_module, "GPU_MAX_K", 6)  # k = 7: the host path, fed from the GPU
    np.testing.assert_array_equal(mx.relabel(cp.asarray(means), ref, None, cp.asarray(weights), ref_w), want)


def test_gpu_gibbs_fit_gives_the_attributes_of_the_per_draw_path(cp):
    # On the GPU the draws stay there until the run ends, the relabelling costs are built there and copied
    # into page-locked blocks, and the averages are device reductions: the host path's values up to rounding.
    X, _, _ = planted()
    gm = fit(X, n_components=8, n_iter=40, burn_in=30, n_chains=2, backend="cupy")
    want = _summaries_as_before(gm)
    for name in ("weights_", "means_", "covariances_"):
        np.testing.assert_allclose(getattr(gm, name), want[name], rtol=1e-10, atol=1e-12, err_msg=name)
    assert gm.alpha_ == want["alpha_"] and gm.n_active_ == want["n_active_"]
    its, ll = gm.trace_.monitors["loglik"]
    np.testing.assert_array_equal(its, [10, 20, 30, 40, 50, 60, 70])
    np.testing.assert_array_equal(ll[3:], gm.trace_.draws["loglik"][:, [9, 19, 29, 39]].T)


def test_gpu_bem_prunes_as_numpy(cp):
    # The variational update is array code on both backends: on the GPU BEM keeps the components NumPy
    # keeps (above 1%) and labels the points alike.
    X, lab, _ = planted()
    a = fit(X, n_components=8, method="bem", n_iter=500, dtype="float64")
    b = fit(X, n_components=8, method="bem", n_iter=500, dtype="float64", backend="cupy")
    assert (a.weights_ > 0.01).sum() == (b.weights_ > 0.01).sum() == 3
    np.testing.assert_allclose(np.sort(b.weights_), np.sort(a.weights_), atol=1e-4)
    assert ari(a.predict(X), b.predict(X)) > 0.99


def test_mean_rows_matches_numpy(cp):
    # two-pass row means on the GPU (partial sums of 4096 values, then a remainder of 17)
    rs = np.random.default_rng(16)
    a = rs.normal(-3.0, 2.0, (3, config.mixture_mean_min_blocks * config.mixture_mean_block + 17)).astype(np.float32)
    want = a.astype(np.float64).mean(axis=1)
    np.testing.assert_allclose(to_np(mx._mean_rows(cp.asarray(a))), want, rtol=1e-12)
    np.testing.assert_allclose(mx._mean_rows(a), want, rtol=1e-12)


# -- data split over devices (shards) -----------------------------------------

def _dyadic(seed=1, n=256, p=2):
    # Values on a grid of 1/16 and n a power of two: every sum over the rows is exact in float64, so the
    # shards' sums equal one device's bit for bit whatever their order.
    rs = np.random.default_rng(seed)
    X = np.concatenate([rs.normal(-2, 0.5, (n // 2, p)), rs.normal(2, 0.7, (n - n // 2, p))])
    return np.round(X * 16) / 16


def _draws_equal(a, b, exact=True):
    np.testing.assert_array_equal(a.z_, b.z_)
    for key in ("weights", "means", "covariances", "alpha"):
        if exact:
            np.testing.assert_array_equal(a.trace_.draws[key], b.trace_.draws[key], err_msg=key)
        else:
            np.testing.assert_allclose(a.trace_.draws[key], b.trace_.draws[key], rtol=1e-9, atol=1e-12,
                                       err_msg=key)
    np.testing.assert_allclose(a.trace_.draws["loglik"], b.trace_.draws["loglik"], rtol=1e-6)


@pytest.mark.parametrize("parts", [2, 3])
def test_sharded_gibbs_gives_the_draws_of_one_device(parts):
    from gpumcmc.shards import Shards

    X = _dyadic()
    kw = dict(n_components=6, n_iter=15, burn_in=5, n_chains=2, relabel=False)
    one = fit(X, **kw)
    sharded = fit(X, devices=Shards(n_virtual=parts), chunk_size=50, **kw)
    _draws_equal(one, sharded)
    assert one.n_active_ == sharded.n_active_ and sharded.n_shards_ == parts


def test_sharded_gibbs_matches_one_device_up_to_rounding():
    # Off the grid the sums over shards round differently (about 1e-16 relative); the indicators,
    # which compare Gumbel-perturbed logits, still come out the same.
    from gpumcmc.shards import Shards

    X, _, _ = planted()
    kw = dict(n_components=6, n_iter=10, burn_in=5, dtype="float64", relabel=False)
    _draws_equal(fit(X, **kw), fit(X, devices=Shards(n_virtual=2), **kw), exact=False)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sharded_bem_matches_one_device(dtype):
    # Bayesian EM is deterministic: with the data split over shards its iterates equal one device's up to
    # the rounding of the sums' order, and so do the fitted mixture and the chosen start.
    from gpumcmc.shards import Shards

    X, _, _ = planted()
    kw = dict(n_components=5, method="bem", n_init=3, n_iter=60, dtype=dtype)
    one = fit(X, **kw)
    for parts in (2, 3):
        sh = fit(X, devices=Shards(n_virtual=parts), chunk_size=70, **kw)
        assert sh.n_iter_ == one.n_iter_ and sh.converged_ == one.converged_
        tol = 1e-9 if dtype == "float64" else 1e-4
        np.testing.assert_allclose(sh.bem_logliks_, one.bem_logliks_, rtol=tol)
        np.testing.assert_allclose(sh.weights_, one.weights_, rtol=tol, atol=tol)
        np.testing.assert_allclose(sh.means_, one.means_, rtol=tol, atol=tol)
        np.testing.assert_allclose(sh.covariances_, one.covariances_, rtol=tol, atol=tol)


def test_shard_noise_is_keyed_by_the_global_row():
    # A shard of rows [a, b) given row0 = a and the whole set's row count draws the rows' indicators of
    # the whole set; without row0 it would not (the test can fail).
    rs = np.random.default_rng(4)
    chains, n, k, p = 2, 500, 7, 3
    params, _, _, _ = _random_params(rs, chains, k, p, np.float64, dead=())
    x = rs.normal(0, 2, (n, p))
    z = np.empty((chains, n), np.int32)
    mx.assign(x, params, 0, n, mx.MODE_SAMPLE, (3, 4), 9, z=z)
    a, b = 170, 420
    zs = np.empty((chains, b - a), np.int32)
    mx.assign(np.ascontiguousarray(x[a:b]), params, 0, b - a, mx.MODE_SAMPLE, (3, 4), 9, z=zs, row0=a, ctr_rows=n)
    np.testing.assert_array_equal(zs, z[:, a:b])
    mx.assign(np.ascontiguousarray(x[a:b]), params, 0, b - a, mx.MODE_SAMPLE, (3, 4), 9, z=zs)
    assert (zs != z[:, a:b]).any()


def test_sharded_bad_input():
    from gpumcmc.shards import Shards

    X = _dyadic(n=8)
    with pytest.raises(ValueError, match="cannot be split"):
        fit(X[:3], n_components=2, devices=Shards(n_virtual=4))
    with pytest.raises(ValueError, match="NaN|finite"):
        fit(np.where(X == X[0, 0], np.nan, X), devices=Shards(n_virtual=2))
    assert mx.allreduce_bytes(256, 14) == 8 * (256 * 120 + 1)


def test_one_data_parallel_algorithm_serves_one_data_set():
    # gibbs()'s updates hold the prior of the data its init was given: started on a second data set, the
    # same algorithm would draw the first's with the second's prior (silently wrong draws); it raises.
    import gpumcmc
    from gpumcmc.models.mixture import sharded as mxs
    from gpumcmc.sampling import sharded
    from gpumcmc.shards import Shards

    shards = Shards(n_virtual=2)
    g = mxs.gibbs()
    datas = [_dyadic(), _dyadic()[::-1].copy() + 1.0]
    algs = [sharded(g, shards) for _ in datas]
    algs[0].init(gpumcmc.random.default_rng(0, backend="numpy"),
                 mxs.gibbs_parts(mxs.make_sharded_models(datas[0], 4, shards), shards, len(datas[0])))
    again = mxs.gibbs_parts(mxs.make_sharded_models(datas[0], 4, shards), shards, len(datas[0]))
    with pytest.raises(ValueError, match="another data set"):
        algs[1].init(gpumcmc.random.default_rng(0, backend="numpy"),
                     mxs.gibbs_parts(mxs.make_sharded_models(datas[1], 4, shards), shards, len(datas[1])))
    with pytest.raises(ValueError, match="another data set"):
        algs[0].init(gpumcmc.random.default_rng(0, backend="numpy"), again)   # new models, even of the same data
    fresh = sharded(mxs.gibbs(), shards)
    fresh.init(gpumcmc.random.default_rng(0, backend="numpy"), again)


def test_gpu_sharded_gibbs_gives_the_draws_of_one_device(cp):
    # Two and three shards on one GPU (summed on the device) against one device, and the kernel's
    # global-row keying against the whole-set launch and the twin. (p = 10, float32: the kernel build
    # the Fortessa and LSR-II benchmarks use.)
    p = 10
    X = _dyadic(n=1024, p=p)
    kw = dict(n_components=8, n_iter=15, burn_in=5, n_chains=2, relabel=False, backend="cupy")
    one = fit(X, **kw)
    for parts in (2, 3):
        _draws_equal(one, fit(X, devices=one_device(parts), **kw))
    rs = np.random.default_rng(5)
    params, _, _, _ = _random_params(rs, 2, 33, p, np.float32, dead=(1,))
    xh = rs.normal(0, 2, (3000, p)).astype(np.float32)
    x, pg = cp.asarray(xh), cp.asarray(params)
    z = cp.empty((2, 3000), cp.int32)
    mx.assign(x, pg, 0, 3000, mx.MODE_SAMPLE, (1, 2), 7, z=z)
    zs = cp.empty((2, 1300), cp.int32)
    part = np.ascontiguousarray(xh[1100:2400])
    mx.assign(cp.asarray(part), pg, 0, 1300, mx.MODE_SAMPLE, (1, 2), 7, z=zs, row0=1100, ctr_rows=3000)
    np.testing.assert_array_equal(to_np(zs), to_np(z)[:, 1100:2400])
    zt = np.empty((2, 1300), np.int32)
    mx._assign_twin(part, params, 0, 1300, mx.MODE_SAMPLE, (1, 2), 7, z=zt, row0=1100, ctr_rows=3000)
    assert (zt == to_np(zs)).mean() > 0.995  # float32 logits: a few near-ties may flip


def test_nccl_sharded_gibbs_gives_the_draws_of_one_device(cp):
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs")
    X = _dyadic(n=1024, p=3)
    kw = dict(n_components=8, n_iter=15, burn_in=5, relabel=False, backend="cupy")
    _draws_equal(fit(X, **kw), fit(X, devices="all", **kw))


def test_sharded_gibbs_across_processes_gives_every_rank_the_draws_of_one_device():
    # The layout of a Dask cluster (one shard per process, rank r of 2), with the processes played by
    # two threads whose all-reduce meets at a barrier: each rank keeps its own rows and indicators
    # and makes the global draws itself; both end with one device's draws.
    X = _dyadic()
    kw = dict(n_components=6, n_iter=12, burn_in=4, relabel=False)
    one = fit(X, **kw)
    fits = fit_as_ranks(lambda sh: fit(X, devices=sh, **kw))
    for key in ("weights", "means", "covariances", "alpha"):
        for r in range(2):
            np.testing.assert_array_equal(fits[r].trace_.draws[key], one.trace_.draws[key], err_msg=key)
    np.testing.assert_array_equal(np.concatenate([fits[0].z_, fits[1].z_]), one.z_)
    assert fits[0].z_.size == X.shape[0] // 2


def test_gpu_sharded_bem_matches_one_device(cp):
    X, _, _ = planted()
    kw = dict(n_components=5, method="bem", n_init=3, n_iter=30, tol=0.0, backend="cupy")
    one = fit(X, **kw)
    sh = fit(X, devices=one_device(3), **kw)
    assert sh.n_iter_ == one.n_iter_ == 30
    np.testing.assert_allclose(sh.bem_logliks_, one.bem_logliks_, rtol=1e-5)
    np.testing.assert_allclose(sh.means_, one.means_, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(sh.covariances_, one.covariances_, rtol=1e-4, atol=1e-4)


def test_bem_keeps_its_largest_component_on_few_events():
    """With fewer events than the prune count per component (n = 100, p = 14, k = 16: 59.5 events), BEM
    keeps the largest component instead of pruning every one (which left a log-likelihood of -inf). One
    component goes an iterate: after 3 iterates 13 are left, after 50 the largest alone."""
    X = np.random.default_rng(0).normal(size=(100, 14))
    for n_iter, live in ((3, 13), (50, 1)):
        m = DPGaussianMixture(n_components=16, method="bem", n_iter=n_iter, progress=False, backend="numpy",
                              random_state=0).fit(X)
        assert (m.weights_ > 0).sum() == live and np.isfinite(m.score(X))
    assert np.isclose(m.weights_.max(), 1.0)


def test_bem_overspecified_keeps_every_planted_cluster():
    """Three clusters of 40 points in 10-D (the prune count is 32.5 points): with k = 16 the start splits
    each cluster over several components, none holding 32.5. Pruning every one below it at once left a
    single component (adjusted Rand index 0, reported converged); one an iterate, their points move to the
    siblings first, and k = 16 finds the three as k = 3 does."""
    from sklearn.metrics import adjusted_rand_score

    rs = np.random.default_rng(0)
    z = np.repeat([0, 1, 2], 40)
    X = (rs.normal(size=(3, 10)) * 6)[z] + rs.normal(size=(120, 10))
    for k in (3, 16):
        m = DPGaussianMixture(n_components=k, method="bem", n_iter=1000, random_state=0, progress=False,
                              backend="numpy").fit(X)
        assert (m.weights_ > 0.01).sum() == 3 and adjusted_rand_score(z, m.predict(X)) == 1.0, k


# ---------------------------------------------------------------------------
# The Gibbs sweep's host work: fewer launches, the same values bit for bit
# ---------------------------------------------------------------------------

def _rng_on(xp, seed):
    return default_rng(seed, backend="numpy" if xp is np else "cupy")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch", [(), (2, 3)])
def test_bartlett_factor_is_tril_of_its_normals_with_the_chi_diagonal(xp, dtype, batch):
    """The factor (where with a cached mask, the diagonal copied through a strided view) is what tril and
    an indexed write of the diagonal give from the same draws, bit for bit."""
    from gpumcmc.random import _wishart

    p = 4
    df = xp.asarray(np.linspace(4.0, 12.0, int(np.prod(batch))).reshape(batch), dtype=dtype)
    for _ in range(2):  # the second call reads the cached constants
        a = _wishart.bartlett_factor(_rng_on(xp, 3), df, batch, p, np.dtype(dtype), xp)
    r = _rng_on(xp, 3)
    diag = xp.sqrt(2 * r.gamma((df[..., None] - xp.arange(p, dtype=dtype)) / 2, dtype=dtype))
    ref = xp.tril(r.standard_normal(batch + (p, p), dtype=dtype), -1)
    idx = xp.arange(p)
    ref[..., idx, idx] = diag
    assert a.dtype == dtype and a.shape == batch + (p, p)
    np.testing.assert_array_equal(to_np(a), to_np(ref))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_invwishart_hands_solve_a_view_of_the_same_values(xp, dtype):
    """invwishart passes C^T to the solver as a view; the draw equals the one made from a contiguous copy."""
    from gpumcmc.random import _wishart

    rs = np.random.default_rng(4)
    p, k = 5, 6
    g = rs.normal(size=(k, p, p))
    psi = xp.asarray(g @ np.swapaxes(g, -1, -2) + p * np.eye(p), dtype=dtype)
    df = xp.asarray(np.linspace(p + 1.0, p + 9.0, k), dtype=dtype)
    got = _rng_on(xp, 8).invwishart(df, psi, dtype=dtype)
    c = xp.linalg.cholesky(psi)
    a = _wishart.bartlett_factor(_rng_on(xp, 8), df, (k,), p, np.dtype(dtype), xp)
    m = xp.swapaxes(xp.linalg.solve(a, xp.ascontiguousarray(xp.swapaxes(c, -1, -2))), -1, -2)
    w = m @ xp.swapaxes(m, -1, -2)
    np.testing.assert_array_equal(to_np(got), to_np(0.5 * (w + xp.swapaxes(w, -1, -2))))


def test_log_pi_l1_gives_alphas_log1p_of_the_clipped_sticks(xp):
    """The alpha draw sums log_pi's log1p(-min(v, _V_MAX)) over the sticks j < k: after the clip that is
    log1p(-v_j) bit for bit, also for sticks at the clip's bounds."""
    rs = np.random.default_rng(5)
    vb = np.concatenate([rs.random((3, 40)), np.full((3, 2), 1.0), np.full((3, 2), 1e-310)], axis=1)
    vb = xp.asarray(vb)
    v = xp.concatenate([xp.clip(vb, 1e-300, algorithm._V_MAX), xp.ones((3, 1))], axis=1)
    log_pi, l1 = algorithm._log_pi_l1(v)
    np.testing.assert_array_equal(to_np(l1[:, :-1]), to_np(xp.log1p(-v[:, :-1])))
    np.testing.assert_array_equal(to_np(log_pi), to_np(algorithm._log_pi(v)))
    assert np.isfinite(to_np(l1)).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1,), (3, 5)])
def test_gpu_beta_and_gamma_of_device_arrays_draw_as_the_general_path(cp, dtype, shape):
    """Beta of two C-contiguous device arrays, and Gamma with a device array of scales, skip the general
    path's argument handling; size=shape takes the general path: the same draws, bit for bit."""
    rs = np.random.default_rng(6)
    a = cp.asarray(rs.uniform(0.5, 4.0, shape), dtype=dtype)
    b = cp.asarray(rs.uniform(0.5, 4.0, shape), dtype=dtype)
    for call in (lambda r, **kw: r.beta(a, b, **kw), lambda r, **kw: r.gamma(a, b, **kw),
                 lambda r, **kw: r.gamma(a, b, log=True, **kw), lambda r, **kw: r.gamma(a, 2.0, **kw)):
        fast = call(default_rng(7, backend="cupy"))
        general = call(default_rng(7, backend="cupy"), size=shape)
        assert fast.dtype == general.dtype == dtype and fast.shape == general.shape == shape
        np.testing.assert_array_equal(to_np(fast), to_np(general))
    with pytest.raises(ValueError, match="a must be positive"):
        default_rng(7, backend="cupy").beta(-a, b)



def test_gibbs_indicators_are_numbered_as_the_relabelled_components():
    """z_ names each point's component as weights_, means_ and predict do. It held the final draw's raw
    labels: means_[z_] lay on average 3.9 from each point's own cluster centre (0.1 through predict)."""
    rs = np.random.default_rng(7)
    mus = np.array([[-4, 0], [0, 4], [4, 0.]])
    z = rs.choice(3, 600, p=[.5, .3, .2])
    X = mus[z] + 0.7 * rs.normal(size=(600, 2))
    g = fit(X, n_components=6, n_iter=100, burn_in=100, n_chains=2, random_state=2)
    assert np.abs(g.means_[g.z_] - mus[z]).mean() < 0.3


def test_bem_converges_only_once_its_weights_settle_and_warns_otherwise():
    """A component that drains slowly barely moves the log-likelihood: with the log-likelihood rule alone BEM
    reported convergence at iterate 110 with a fourth component still at weight 0.098 (lower bound -3.616
    against -3.589 once it is gone). The weights must settle too. A fit that reaches n_iter first warns."""
    rs = np.random.default_rng(7)
    mus = np.array([[-4, 0], [0, 4], [4, 0.]])
    covs = [np.eye(2) * .5, np.array([[1, .5], [.5, 1]]), np.diag([2, .3])]
    z = rs.choice(3, 600, p=[.5, .3, .2])
    X = np.stack([rs.multivariate_normal(mus[k], covs[k]) for k in z])
    kw = dict(n_components=8, method="bem", random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = fit(X, n_iter=3000, **kw)
    assert m.converged_ and (m.weights_ > 0.01).sum() == 3 and m.lower_bound_ > -3.60, m.weights_
    with pytest.warns(UserWarning, match="did not converge in n_iter=50"):
        short = fit(X, n_iter=50, **kw)
    assert not short.converged_ and short.n_iter_ == 50


def test_bem_rule_waits_for_the_components_below_the_prune_count():
    """Pruning takes one component an iterate, so a rule that read only the log-likelihood and the weights
    could stop with a component below the prune count still live; it waits until none is."""
    from types import SimpleNamespace

    from gpumcmc.models.mixture.estimator import _BemConverged

    def state(counts):
        counts = np.array([counts], dtype=np.float64)
        w = counts / counts.sum()
        return SimpleNamespace(loglik=np.array([-1.0]), counts=counts,
                               log_pi=np.log(np.where(w > 0, w, 0.0), where=w > 0, out=np.full_like(w, -np.inf)))

    for pending, want in (([90.0, 8.0, 2.0, 0.0], False), ([90.0, 10.0, 0.0, 0.0], True)):
        rule = _BemConverged(1e-4, 1e-3, prune_count=5.0)
        rule(state(pending), None)
        assert rule(state(pending), None)[0] is want


def test_an_interrupted_refit_keeps_the_earlier_fit_whole():
    from sklearn.datasets import load_iris

    X = load_iris().data
    m = DPGaussianMixture(n_components=6, n_iter=20, burn_in=5, random_state=0, progress=False,
                          backend="numpy").fit(X)
    before = {k: v for k, v in vars(m).items()}
    score = m.score(X)

    def stop(*a):
        raise KeyboardInterrupt

    m.set_params(n_iter=1000)
    import gpumcmc.models.mixture.estimator as est
    real_run = est.run
    est.run = lambda *a, **k: real_run(*a, **dict(k, callback=lambda it, s, i: stop() if it == 3 else None))
    try:
        with pytest.raises(KeyboardInterrupt):
            m.fit(np.c_[X, X] * 10)   # other features: n_features_in_ would change first
    finally:
        est.run = real_run
    assert m.n_features_in_ == 4 and m.score(X) == score
    assert set(vars(m)) == set(before)


def test_fit_and_score_ignore_underflow_under_seterr_raise():
    from sklearn.datasets import load_iris

    X = load_iris().data
    with np.errstate(all="raise"):   # as set to hunt NaNs: a probability below the smallest float is no error
        for method in ("gibbs", "bem"):
            m = DPGaussianMixture(method=method, n_iter=20, random_state=0, progress=False, backend="numpy").fit(X)
            assert np.isfinite(m.score(X))


def test_the_cpu_design_is_kept_whole_up_to_1gb_and_else_built_in_blocks_of_64mb():
    from gpumcmc.models.mixture.algorithm import make_model

    X = np.random.default_rng(0).normal(size=(3000, 64))           # q = 2,145: 51 MB of design
    m = make_model(X, 16, dtype=np.float64)
    assert m.y_blocks is not None and sum(b.shape[0] for b in m.y_blocks) == 3000
    small = make_model(X, 16, dtype=np.float64, cache_bytes=1 << 20)  # as if it were over the cache's 1 GB
    assert small.y_blocks is None and small.stats_rows * 2145 * 8 <= 64 << 20


def test_the_design_built_in_pieces_has_the_products_of_one_pass():
    from gpumcmc.models.mixture.ops import _tri, _y_block

    x = np.random.default_rng(1).normal(size=(6000, 40)).astype(np.float32)   # 820 products: 3 pieces of 2,557 rows
    y = _y_block(x, np)
    ti, tj = _tri(40, np)
    xd = x.astype(np.float64)
    np.testing.assert_array_equal(y, np.concatenate([np.ones((6000, 1)), xd, xd[:, ti] * xd[:, tj]], axis=1))


def _fitted_blobs(n_chains, seed=0):
    rs = np.random.default_rng(1)
    c = rs.normal(0, 6, (3, 2))
    X = np.concatenate([c[i] + rs.normal(size=(300, 2)) for i in range(3)])
    m = DPGaussianMixture(n_components=8, n_iter=100, burn_in=100, n_chains=n_chains, random_state=seed,
                          progress=False, backend="numpy").fit(X)
    return X, m


def test_chains_in_one_partition_are_pooled():
    X, one = _fitted_blobs(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # no chain left out: no warning
        X, four = _fitted_blobs(4)
    assert four.chains_used_.tolist() == [0, 1, 2, 3]
    assert four.score(X) > one.score(X) - 0.02


def test_a_chain_in_another_partition_is_left_out_of_the_estimates():
    from gpumcmc.models.mixture.ops import _score_params

    X, m = _fitted_blobs(1)
    d = m._draws                                      # one chain's relabelled draws: copy it into a second chain
    w = np.concatenate([d["weights"]] * 2)
    mu = np.concatenate([d["means"], d["means"][:, :, ::-1] * 0.3]) - m._center   # chain 1: the clusters moved
    cov = np.stack([m.covariances_] * (2 * w.shape[1])).reshape(2, w.shape[1], *m.covariances_.shape)
    ll = np.concatenate([d["loglik"], d["loglik"]])
    xc = X - m._center
    score = lambda prm: _score_params(xc, prm, 4096)  # noqa: E731
    with pytest.warns(UserWarning, match=r"Chain\(s\) \[1\] found another partition"):
        used, best = m._chains_to_pool(w, mu, cov, ll, score)
    assert used.tolist() == [0] and best == 0
    used, best = m._chains_to_pool(w[[0, 0]], mu[[0, 0]], cov[[0, 0]], ll, score)   # two equal chains
    assert used.tolist() == [0, 1]


def test_unaligned_labels_or_one_draw_pool_every_chain():
    X, _ = _fitted_blobs(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for kw in (dict(relabel=False), dict(n_iter=1)):
            m = DPGaussianMixture(**{**dict(n_components=6, n_iter=20, burn_in=20, n_chains=3, random_state=0,
                                            progress=False, backend="numpy"), **kw}).fit(X)
            assert m.chains_used_.tolist() == [0, 1, 2]


def test_a_column_in_small_units_beside_one_in_large_units_is_not_taken_as_constant():
    # The prior's variance floor was 1e-3 of the mean variance of all columns: scaling one column by 1e4 made
    # the other look constant, and three clusters came out as two. Each column now keeps its own scale.
    rs = np.random.default_rng(0)
    X = np.concatenate([rs.normal(c, 1, (200, 2)) for c in [(0, 0), (5, 5), (0, 6)]])
    m = DPGaussianMixture(n_components=8, method="bem", random_state=0, progress=False, backend="numpy")
    assert (m.fit(X * [1e4, 1]).weights_ > 0.05).sum() == 3
    assert abs(m.score(X * [1e4, 1]) + np.log(1e4) - m.fit(X).score(X)) < 0.02


def test_kept_draws_let_the_sweeps_arrays_go_once_stacked():
    """_KeptDraws holds each kept sweep's arrays by reference until the end; stacking them lets them go (they
    were held beside the stacked draws and the relabelled copy: every covariance draw two or three times)."""
    import gc
    import weakref
    from types import SimpleNamespace

    from gpumcmc.models.mixture.estimator import _KeptDraws

    keep = _KeptDraws(burn_in=1, n_iter=3, every=10)
    refs, rs = [], np.random.default_rng(0)
    for it in range(4):
        s = SimpleNamespace(log_pi=np.log(rs.dirichlet(np.ones(3), size=2)), mu=rs.normal(size=(2, 3, 2)),
                            sigma=rs.normal(size=(2, 3, 2, 2)), alpha=np.ones(2), loglik=rs.normal(size=2),
                            counts=np.ones((2, 3)))
        keep(s, SimpleNamespace(n_active=np.full(2, 3)))
        if it >= 1:
            refs.append((weakref.ref(s.sigma), s.sigma.copy()))
        del s
    d = keep.draws(np)
    gc.collect()
    assert all(r() is None for r, _ in refs)
    np.testing.assert_array_equal(d["covariances"], np.stack([v for _, v in refs], axis=1))
    assert d["weights"].shape == (2, 3, 3)
