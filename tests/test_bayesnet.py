"""Tests of gpumcmc.models.BayesianNetwork (SAME chromatic Gibbs with missing data)."""
import glob
import os

import numpy as np
import pytest
from scipy import stats

from gpumcmc.models.bayesnet import BayesianNetwork


def _mask(X, frac, seed):
    M = X.copy()
    M[np.random.default_rng(seed).random(M.shape) < frac] = -1
    return M


def _fresh():
    net = BayesianNetwork.koller()
    net.cpts_ = None
    return net


def test_koller_cpts():
    net = BayesianNetwork.koller()
    assert net.cpts_["G"].shape == (2, 2, 3)
    np.testing.assert_allclose(net.cpts_["G"][1, 0], [0.9, 0.08, 0.02])
    for v in net.nodes:
        np.testing.assert_allclose(net.cpts_[v].sum(-1), 1.0)


def test_kl_falls_with_cases():
    truth = BayesianNetwork.koller()
    X = _mask(truth.sample(4000, 0), 0.5, 1)
    kls = [_fresh().fit(X[:n], n_iter=30, same=2, random_state=0, progress=False, backend="numpy").kl_avg(truth)
           for n in (100, 4000)]
    assert kls[1] < kls[0] / 3


def test_latent_node_and_deterministic_rows():
    truth = BayesianNetwork.koller()
    truth.cpts_["S"] = np.array([[1.0, 0.0], [0.0, 1.0]])
    X = truth.sample(2000, 2)
    X[:, truth.nodes.index("D")] = -1
    fit = _fresh().fit(X, n_iter=20, same=1, random_state=3, progress=False, backend="numpy")
    assert np.all(np.isfinite(fit.cpts_["D"]))
    assert fit.cpts_["S"][0, 0] > 0.99 and fit.cpts_["S"][1, 1] > 0.99


def test_imputed_draws_match_enumeration():
    # false-failure budget: one chi-square test at alpha = 1e-3, fixed seeds
    net = BayesianNetwork.koller()
    x = np.array([[-1, 1, 0, -1, 1]])
    Y = np.array([[i, 1, 0, g, 1] for i in range(2) for g in range(3)])
    p = np.exp(net.log_prob(Y)); p /= p.sum()
    n = 3000
    imp = net.impute(np.repeat(x, n, 0), method="draw", random_state=4)
    obs = np.bincount(imp[:, 0] * 3 + imp[:, 3], minlength=6)
    assert stats.chisquare(obs, n * p).pvalue > 1e-3


def test_gibbs_imputations_given_fixed_cpts():
    # run the sampler's Gibbs sweep with the CPT draws effectively fixed (huge counts via prior)
    # through the public path: with many complete cases the learnt CPTs approach the truth
    truth = BayesianNetwork.koller()
    X = _mask(truth.sample(20000, 5), 0.3, 6)
    fit = _fresh().fit(X, n_iter=15, same=1, random_state=7, progress=False, backend="numpy")
    assert fit.kl_avg(truth) < 0.01


def test_same_schedule_and_arviz():
    truth = BayesianNetwork.koller()
    X = _mask(truth.sample(300, 0), 0.4, 1)
    fit = _fresh().fit(X, n_iter=6, same=lambda t: 1 + t // 2, random_state=0, progress=False, backend="numpy")
    idata = fit.to_arviz()
    assert "cpt_G" in idata.posterior


def test_dataframe_and_bad_input():
    pd = pytest.importorskip("pandas")
    net = BayesianNetwork.koller()
    df = pd.DataFrame({"I": ["0", None, "1"], "G": ["2", "1", np.nan]})
    X = net._encode(df)
    assert X[1, 0] == -1 and X[0, 3] == 2 and X[0, 1] == -1
    with pytest.raises(ValueError, match="Unknown state"):
        net._encode(pd.DataFrame({"I": ["7"]}))
    with pytest.raises(ValueError, match="not nodes"):
        net._encode(pd.DataFrame({"Q": ["0"]}))
    with pytest.raises(ValueError):
        net._encode(np.array([[0, 0, 0, 3, 0]]))
    with pytest.raises(TypeError):
        net._encode(np.zeros((2, 3), dtype=int))


def _bif_files():
    import pgmpy
    return sorted(glob.glob(os.path.join(os.path.dirname(pgmpy.__file__), "utils", "example_models", "*.bif.gz")))


@pytest.mark.parametrize("name", ["asia", "cancer", "sachs", "alarm", "child", "insurance"])
def test_bif_reader(name, tmp_path):
    files = [f for f in _bif_files() if os.path.basename(f) == f"{name}.bif.gz"]
    if not files:
        pytest.skip(f"pgmpy has no {name}.bif.gz")
    net = BayesianNetwork.from_bif(files[0])
    for v in net.nodes:
        assert net.cpts_[v].shape == tuple(net.card[p] for p in net.parents[v]) + (net.card[v],)
        np.testing.assert_allclose(net.cpts_[v].sum(-1), 1.0, atol=1e-4)
    net.to_bif(tmp_path / "x.bif")
    back = BayesianNetwork.from_bif(tmp_path / "x.bif")
    assert back.kl_avg(net) < 1e-9


def test_gpu_runs(cp):
    truth = BayesianNetwork.koller()
    X = _mask(truth.sample(2000, 0), 0.5, 1)
    g = _fresh().fit(X, n_iter=10, same=2, random_state=0, progress=False, backend="cupy")
    c = _fresh().fit(X, n_iter=10, same=2, random_state=0, progress=False, backend="numpy")
    assert abs(g.kl_avg(truth) - c.kl_avg(truth)) < 0.02


def test_gibbs_sweep_matches_enumeration_fixed_cpts():
    # replicas are independent chains; after 15 sweeps each replica's (I, G) should follow the exact
    # conditional given the observed cells. False-failure budget: one chi-square at alpha = 1e-3.
    net = BayesianNetwork.koller()
    x = np.array([[-1, 1, 0, -1, 1]])
    Y = np.array([[i, 1, 0, g, 1] for i in range(2) for g in range(3)])
    p = np.exp(net.log_prob(Y)); p /= p.sum()
    m = 4000
    net.fit(x, n_iter=15, same=m, random_state=11, progress=False, backend="numpy", learn=False)
    Z = net.imputations_[:, 0]
    obs = np.bincount(Z[:, 0] * 3 + Z[:, 3], minlength=6)
    assert stats.chisquare(obs, m * p).pvalue > 1e-3
