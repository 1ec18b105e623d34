"""Tests of gpumcmc.models.BayesianNetwork (SAME chromatic Gibbs with missing data)."""
import glob
import os
import warnings

import numpy as np
import pytest
from scipy import stats

from gpumcmc._config import config
from gpumcmc.models.bayesnet import BayesianNetwork


def _mask(X, frac, seed):
    M = X.copy()
    M[np.random.default_rng(seed).random(M.shape) < frac] = -1
    return M


def _fresh():
    net = BayesianNetwork.koller()
    net.cpts_ = None
    return net


def _joint(net, Y):
    """P(Y) of complete cases Y: the product of each node's CPT entry, written out here (the references
    below do not go through BayesianNetwork.log_prob, which impute uses)."""
    p = np.ones(len(Y))
    for j, v in enumerate(net.nodes):
        p *= net.cpts_[v][tuple(Y[:, net.nodes.index(q)] for q in net.parents[v]) + (Y[:, j],)]
    return p


def test_koller_cpts():
    net = BayesianNetwork.koller()
    assert net.cpts_["G"].shape == (2, 2, 3)
    np.testing.assert_allclose(net.cpts_["G"][1, 0], [0.9, 0.08, 0.02])
    for v in net.nodes:
        np.testing.assert_allclose(net.cpts_[v].sum(-1), 1.0)
    # log_prob over every joint state: the product of the CPT entries, summing to one
    Y = np.array(list(np.ndindex(*[net.card[v] for v in net.nodes])))
    np.testing.assert_allclose(net.log_prob(Y), np.log(_joint(net, Y)), rtol=1e-12)
    assert np.exp(net.log_prob(Y)).sum() == pytest.approx(1.0, rel=1e-12)


def test_kl_falls_with_cases():
    truth = BayesianNetwork.koller()
    X = _mask(truth.sample(4000, 0), 0.5, 1)
    kw = dict(n_iter=30, same=2, random_state=0, progress=False, backend="numpy")
    kls = [_fresh().set_params(**kw).fit(X[:n]).kl_avg(truth)
           for n in (100, 4000)]
    assert kls[1] < kls[0] / 3


def test_latent_node_and_deterministic_rows():
    truth = BayesianNetwork.koller()
    truth.cpts_["S"] = np.array([[1.0, 0.0], [0.0, 1.0]])
    X = truth.sample(2000, 2)
    X[:, truth.nodes.index("D")] = -1
    fit = _fresh().set_params(n_iter=20, same=1, random_state=3, progress=False, backend="numpy").fit(X)
    assert np.all(np.isfinite(fit.cpts_["D"]))
    assert fit.cpts_["S"][0, 0] > 0.99 and fit.cpts_["S"][1, 1] > 0.99


def test_imputed_draws_match_enumeration():
    # false-failure budget: one chi-square test at alpha = 1e-3, fixed seeds
    net = BayesianNetwork.koller()
    x = np.array([[-1, 1, 0, -1, 1]])
    Y = np.array([[i, 1, 0, g, 1] for i in range(2) for g in range(3)])
    p = _joint(net, Y); p /= p.sum()
    n = 3000
    imp = net.impute(np.repeat(x, n, 0), method="draw", random_state=4)
    obs = np.bincount(imp[:, 0] * 3 + imp[:, 3], minlength=6)
    assert stats.chisquare(obs, n * p).pvalue > 1e-3


def test_gibbs_imputations_given_fixed_cpts():
    # 20,000 cases with 30% of the cells missing at random, through the public path: the learnt CPTs are
    # nearly as close to the truth as the posterior mean of the same cases before masking (KL_avg 1.1 to
    # 2.6 times its, for this and two other seeds). A sweep that reads a child's table at a wrong stride
    # stays below KL_avg 0.01 (13 to 23 times), so the bound is relative: 5 times.
    truth = BayesianNetwork.koller()
    full = truth.sample(20000, 5)
    X = _mask(full, 0.3, 6)
    fit = _fresh().set_params(n_iter=15, same=1, random_state=7, progress=False, backend="numpy").fit(X)
    cpts = {}
    for j, v in enumerate(truth.nodes):
        c = np.ones(truth.cpts_[v].shape)  # the prior's 1 + counts
        np.add.at(c, tuple(full[:, truth.nodes.index(q)] for q in truth.parents[v]) + (full[:, j],), 1)
        cpts[v] = c / c.sum(-1, keepdims=True)
    complete = BayesianNetwork(truth.parents, truth.states, cpts).kl_avg(truth)
    assert fit.kl_avg(truth) < 5 * complete, (fit.kl_avg(truth), complete)


@pytest.mark.parametrize("batch_size", [None, 15])
def test_cpt_draws_of_complete_cases_follow_the_documented_dirichlet(batch_size):
    # With no missing cell every replica holds the cases, so each iteration's CPT rows are independent draws
    # of Dirichlet(m (prior - 1) + 1 + m counts). The mean of n draws of a row against its alpha / alpha_0:
    # n (alpha_0 + 1) sum_k (mean_k - mu_k)^2 / mu_k is chi-square with K - 1 degrees of freedom (the
    # Dirichlet's covariance is the multinomial's over alpha_0 + 1), summed over the rows: one check at
    # ALPHA per case, fixed seeds.
    from conftest import ALPHA

    truth = BayesianNetwork.koller()
    X = truth.sample(40, 3)
    prior, m, n, burn = 3.0, 2, 500, 5
    fit = BayesianNetwork(truth.parents, truth.states, n_iter=n + burn, burn_in=burn, same=m, prior=prior,
                          batch_size=batch_size, random_state=0, progress=False, backend="numpy").fit(X)
    chi2, dof = 0.0, 0
    for j, v in enumerate(truth.nodes):
        c = np.zeros(truth.cpts_[v].shape)
        np.add.at(c, tuple(X[:, truth.nodes.index(q)] for q in truth.parents[v]) + (X[:, j],), 1)
        a = (m * (prior - 1) + 1 + m * c).reshape(-1, c.shape[-1])
        mu = a / a.sum(-1, keepdims=True)
        got = fit.trace_[v][burn:].reshape(n, *a.shape).mean(0)
        chi2 += (n * (a.sum(-1, keepdims=True) + 1) * (got - mu) ** 2 / mu).sum()
        dof += a.size - len(a)
    assert stats.chi2.sf(chi2, dof) > ALPHA, chi2


def test_same_schedule_and_arviz():
    # m = 1, 1, 2, 2, 3, 3: iteration t runs with the schedule's m at t, so the first 2 (4) CPT draws are
    # those of a fit of 2 iterations at m = 1 (4 at m = 1, 1, 2, 2), and the run is neither m = 1 nor
    # m = 3 throughout.
    truth = BayesianNetwork.koller()
    X = _mask(truth.sample(300, 0), 0.4, 1)

    def fit_(n_iter, same):
        return _fresh().set_params(n_iter=n_iter, same=same, random_state=0, progress=False,
                                   backend="numpy").fit(X)

    fit = fit_(6, lambda t: 1 + t // 2)
    assert fit.imputations_.shape == (3, 300, 5)  # the largest m's replicas
    for n_iter, same in ((2, 1), (4, [1, 1, 2, 2])):
        prefix = fit_(n_iter, same)
        for v in fit.nodes:
            np.testing.assert_array_equal(fit.trace_[v][:n_iter], prefix.trace_[v])
    for m in (1, 3):
        assert not np.array_equal(fit.trace_["G"], fit_(6, m).trace_["G"])
    idata = fit.to_arviz()  # the draws after burn_in_ (3 of 6), their burn-in in warmup_posterior
    g = idata.posterior["cpt_G"]
    assert g.dims == ("chain", "draw", "I", "D", "G") and list(g.coords["G"].values) == list(truth.states["G"])
    np.testing.assert_array_equal(g.values.reshape(3, -1, 3), fit.trace_["G"][3:])
    np.testing.assert_array_equal(idata.warmup_posterior["cpt_G"].values.reshape(3, -1, 3), fit.trace_["G"][:3])


def test_same_is_checked():
    # a schedule shorter than n_iter used to raise a raw IndexError (a longer one was cut short), and a
    # string or a fraction was int()-ed; the callable's values are checked as they come.
    X = BayesianNetwork.koller().sample(20, 0)

    def fit_(same):
        return _fresh().set_params(n_iter=4, same=same, progress=False, backend="numpy").fit(X)

    for same in ([1, 2], [1, 2, 2, 2, 2]):
        with pytest.raises(ValueError, match=rf"length {len(same)}, but n_iter = 4"):
            fit_(same)
    for same, err, match in (("2", TypeError, "string '2'"), (2.5, ValueError, "same is 2.5, not a whole number"),
                             ([1, 2, "a", 1], TypeError, r"same\[2\] is 'a', not an integer"),
                             (lambda t: 1 + t / 2, ValueError, "returned 1.5 at iteration 1"),
                             (lambda t: 1 - t, ValueError, "between 1 and 65535.*returned 0 at iteration 1")):
        with pytest.raises(err, match=match):
            fit_(same)
    assert fit_(lambda t: np.ceil(t / 2) + 1).imputations_.shape[0] == 3  # whole-number floats are m
    assert fit_(lambda t: np.asarray(1 + t)).imputations_.shape[0] == 4  # and 0-d arrays
    assert fit_(np.array([1, 2, 2, 1])).imputations_.shape[0] == 2


def test_dataframe_and_bad_input():
    pd = pytest.importorskip("pandas")
    net = BayesianNetwork.koller()
    df = pd.DataFrame({"I": ["0", None, "1"], "G": ["2", "1", np.nan]})
    with pytest.warns(UserWarning, match="no column"):
        X = net._encode(df)
    assert X[1, 0] == -1 and X[0, 3] == 2 and X[0, 1] == -1
    with pytest.raises(ValueError, match="Unknown state"), pytest.warns(UserWarning, match="no column"):
        net._encode(pd.DataFrame({"I": ["7"]}))
    with pytest.raises(ValueError, match="not nodes"):
        net._encode(pd.DataFrame({"Q": ["0"]}))
    with pytest.raises(ValueError):
        net._encode(np.array([[0, 0, 0, 3, 0]]))
    with pytest.raises(TypeError):
        net._encode(np.zeros((2, 3), dtype=int))


def test_log_prob_encodes_and_checks_cases_as_fit_does():
    # log_prob takes what fit takes (an integer array or a DataFrame of state names) with fit's checks, and
    # refuses missing cells: -1 used to index a CPT's last state, a DataFrame or a bad shape a raw IndexError.
    net = BayesianNetwork.koller()
    Y = np.array([[0, 1, 0, 2, 1], [1, 0, 1, 0, 0]])
    with pytest.raises(ValueError, match=r"complete cases.*row 1.*impute"):
        net.log_prob(np.array([[1, 0, 0, 0, 0], [-1, 0, 0, 0, 0]]))
    with pytest.raises(ValueError, match="out of range"):
        net.log_prob(np.array([[0, 0, 0, 3, 0]]))
    for bad in (Y[:, :4], Y[0], Y.astype(float)):
        with pytest.raises(TypeError, match=r"X must be a DataFrame or an integer array \(n_cases, 5\)"):
            net.log_prob(bad)
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({v: [net.states[v][k] for k in Y[:, j]] for j, v in enumerate(net.nodes)})
    np.testing.assert_array_equal(net.log_prob(df), net.log_prob(Y))
    np.testing.assert_allclose(net.log_prob(Y), np.log(_joint(net, Y)), rtol=1e-12)
    with pytest.raises(ValueError, match="complete cases"):
        net.log_prob(df.assign(G=[None, "1"]))
    with pytest.raises(ValueError, match=r"no column for node\(s\) \['L'\]"):
        net.log_prob(df.drop(columns="L"))


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
    g = _fresh().set_params(n_iter=10, same=2, random_state=0, progress=False, backend="cupy").fit(X)
    c = _fresh().set_params(n_iter=10, same=2, random_state=0, progress=False, backend="numpy").fit(X)
    assert abs(g.kl_avg(truth) - c.kl_avg(truth)) < 0.02


def test_gibbs_sweep_matches_enumeration_fixed_cpts():
    # replicas are independent chains; after 15 sweeps each replica's (I, G) should follow the exact
    # conditional given the observed cells. False-failure budget: one chi-square at alpha = 1e-3.
    net = BayesianNetwork.koller()
    x = np.array([[-1, 1, 0, -1, 1]])
    Y = np.array([[i, 1, 0, g, 1] for i in range(2) for g in range(3)])
    p = _joint(net, Y); p /= p.sum()
    # (I=1, G=2) has probability 7e-4: pooled with (I=1, G=1) so that every expected count is >= 5.
    m = 20000
    net.set_params(n_iter=15, same=m, random_state=11, progress=False, backend="numpy", learn=False).fit(x)
    Z = net.imputations_[:, 0].astype(np.int64)
    obs = np.bincount(Z[:, 0] * 3 + Z[:, 3], minlength=6)
    pool = lambda a: np.concatenate([a[:4], [a[4] + a[5]]])  # noqa: E731
    assert stats.chisquare(pool(obs), m * pool(p)).pvalue > 1e-3


def _random_net(seed, cards=(2, 3, 5, 2, 17, 3, 2, 4)):
    """A random DAG over len(cards) nodes (each node has up to 3 earlier parents) with random CPTs."""
    rs = np.random.default_rng(seed)
    names = [f"x{i}" for i in range(len(cards))]
    parents = {v: sorted(rs.choice(names[:i], size=min(i, rs.integers(0, 4)), replace=False).tolist())
               for i, v in enumerate(names)}
    states = {v: [str(k) for k in range(c)] for v, c in zip(names, cards)}
    cpts = {v: rs.dirichlet(np.ones(states[v].__len__()), size=tuple(len(states[p]) for p in parents[v]))
            for v in names}
    return BayesianNetwork(parents, states, cpts)


def test_minibatches_recover_cpts():
    truth = BayesianNetwork.koller()
    X = _mask(truth.sample(8000, 5), 0.3, 6)
    fit = _fresh().set_params(n_iter=15, same=2, random_state=7, progress=False, backend="numpy",
                              batch_size=2000).fit(X)
    assert fit.kl_avg(truth) < 0.01
    obs = X >= 0
    np.testing.assert_array_equal(fit.imputations_[:, obs], np.broadcast_to(X[obs], (2, obs.sum())))
    assert fit.trace_["G"].shape == (15, 4, 3)


def test_one_batch_is_the_default():
    truth = BayesianNetwork.koller()
    X = _mask(truth.sample(500, 0), 0.4, 1)
    a = _fresh().set_params(n_iter=4, same=3, random_state=2, progress=False, backend="numpy").fit(X)
    b = _fresh().set_params(n_iter=4, same=3, random_state=2, progress=False, backend="numpy", batch_size=500).fit(X)
    for v in a.nodes:
        np.testing.assert_array_equal(a.cpts_[v], b.cpts_[v])
    np.testing.assert_array_equal(a.imputations_, b.imputations_)


def test_impossible_cases_and_bad_settings():
    net = BayesianNetwork.koller()
    net.cpts_["G"] = np.array([[[0.5, 0.5, 0.0]] * 2] * 2)
    net.cpts_["L"] = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="probability 0"):
        net.set_params(n_iter=2, progress=False, backend="numpy", learn=False).fit(np.array([[0, 0, 0, -1, 1]]))
    X = np.array([[0, 0, 0, -1, 1]])
    with pytest.raises(ValueError, match="prior"):
        _fresh().set_params(n_iter=2, same=10, prior=0.5, progress=False, backend="numpy").fit(X)
    with pytest.raises(ValueError, match="batch_size"):
        _fresh().set_params(n_iter=2, progress=False, backend="numpy", batch_size=0).fit(X)
    # no cases: said so, not blamed on the batch_size the user left unset
    with pytest.raises(ValueError, match="X has no cases"):
        _fresh().set_params(n_iter=2, progress=False, backend="numpy").fit(X[:0])


def _blanket_net(seed):
    """x3 (5 states) has parents x0, x1 and children x4 (with co-parent x2) and x5."""
    rs = np.random.default_rng(seed)
    parents = {"x0": [], "x1": [], "x2": [], "x3": ["x0", "x1"], "x4": ["x3", "x2"], "x5": ["x3"]}
    cards = {"x0": 2, "x1": 3, "x2": 2, "x3": 5, "x4": 3, "x5": 2}
    states = {v: [str(k) for k in range(c)] for v, c in cards.items()}
    cpts = {v: rs.dirichlet(np.ones(cards[v]), size=tuple(cards[p] for p in parents[v])) for v in cards}
    return BayesianNetwork(parents, states, cpts)


def test_sweep_twin_draws_the_exact_conditional():
    # many replicas of one case, one sweep of the colour holding x3 from a fixed state: the draws of x3
    # follow its Markov-blanket conditional (its parents' row and both children's factors).
    # False-failure budget: one chi-square test at alpha = 1e-3.
    from gpumcmc.models import bayesnet as bn

    net = _blanket_net(3)
    plan = bn._Plan(net)
    v = 3
    c = next(i for i, g in enumerate(plan.groups) if v in g)
    x = np.array([1, 2, 0, 0, 1, 1])
    X = x[None].copy()
    X[0, v] = -1
    b = plan.batch(X, 0, 1)
    m = 20000
    Z = np.repeat(np.where(X < 0, 0, X).astype(np.uint8)[None], m, 0)
    bad = np.zeros(1, np.int32)
    bn._NumpyOps(plan).sweep(Z, m, b, c, plan.tables_of(net.cpts_), (1, 2), 5, bad)
    Y = np.repeat(x[None], 5, 0)
    Y[:, v] = np.arange(5)
    p = _joint(net, Y)
    p /= p.sum()
    obs = np.bincount(Z[:, 0, v], minlength=5)
    keep = m * p >= 5  # states too rare for the chi-square approximation are pooled
    exp_, got = m * p[keep], obs[keep]
    if (~keep).any():
        exp_, got = np.append(exp_, m * p[~keep].sum()), np.append(got, obs[~keep].sum())
    assert stats.chisquare(got, exp_).pvalue > 1e-3
    assert bad[0] == 0


def _tiny_net(n_children, scale, seed=0):
    """x (3 states, parent a) with n_children binary children y_c, each P(y_c = 1 | x = k) = scale * f[c, k]
    for f in (0.5, 2): a case with every y_c = 1 makes the products of x's Markov blanket about
    scale**n_children."""
    rs = np.random.default_rng(seed)
    ys = [f"y{c}" for c in range(n_children)]
    parents = {"a": [], "x": ["a"], **{y: ["x"] for y in ys}}
    states = {v: [str(k) for k in range(3 if v == "x" else 2)] for v in parents}
    cpts = {"a": np.array([0.4, 0.6]), "x": rs.dirichlet(np.ones(3), size=2)}
    for y in ys:
        one = scale * rs.uniform(0.5, 2.0, size=3)
        cpts[y] = np.stack([1.0 - one, one], axis=-1)
    return BayesianNetwork(parents, states, cpts)


def _log_joint(net, Y):
    """log P(Y) of complete cases Y as a sum of the log CPT entries (no product that could underflow)."""
    lp = np.zeros(len(Y))
    for j, v in enumerate(net.nodes):
        lp += np.log(net.cpts_[v][tuple(Y[:, net.nodes.index(q)] for q in net.parents[v]) + (Y[:, j],)])
    return lp


# (network, a complete case, the node left missing): a blanket of two children (one with a co-parent),
# products near 1e-180 (drawn as products), near 1e-300 and below the smallest float64 (both drawn again
# in log space, below BN_TINY = 2**-960)
_CONDITIONALS = {
    "blanket": (lambda: _blanket_net(3), [1, 2, 0, 0, 1, 1], "x3"),
    "products 1e-180": (lambda: _tiny_net(6, 1e-30), None, "x"),
    "products 1e-300": (lambda: _tiny_net(10, 1e-30), None, "x"),
    "products underflow": (lambda: _tiny_net(12, 1e-30), None, "x"),
}


def _one_sweep(ops, net, case, node, m, xp=np):
    """The states of ``node`` in m replicas of one case after one sweep of its colour (from the case's
    own state), with the exact conditional and the sweep's flag of impossible cells."""
    from conftest import to_np

    from gpumcmc.models import bayesnet as bn

    plan = bn._Plan(net)
    x = np.ones(len(net.nodes), dtype=np.int64) if case is None else np.array(case)
    v = net.nodes.index(node)
    X = x[None].copy()
    X[0, v] = -1
    b = plan.batch(X, 0, 1)
    c = next(i for i, g in enumerate(plan.groups) if v in g)
    Z = xp.asarray(np.repeat(np.where(X < 0, 0, X).astype(np.uint8)[None], m, 0))
    bad = xp.zeros(1, np.int32)
    if xp is not np:
        b.upload(xp)
    ops(plan).sweep(Z, m, b, c, xp.asarray(plan.tables_of(net.cpts_)), (7, 9), 3, bad)
    Y = np.repeat(x[None], net.card[node], 0)
    Y[:, v] = np.arange(net.card[node])
    lw = _log_joint(net, Y)
    p = np.exp(lw - lw.max())
    return to_np(Z)[:, 0, v], p / p.sum(), int(bad[0])


def _chisquare_pvalue(draws, p):
    """Chi-square p-value of the draws against the probabilities p, states expected fewer than 5 times pooled."""
    m, obs = len(draws), np.bincount(draws, minlength=len(p))
    keep = m * p >= 5
    exp_, got = m * p[keep], obs[keep]
    if (~keep).any():
        exp_, got = np.append(exp_, m * p[~keep].sum()), np.append(got, obs[~keep].sum())
    return stats.chisquare(got, exp_).pvalue if len(got) > 1 else 1.0


@pytest.mark.parametrize("name", list(_CONDITIONALS))
def test_sweep_draws_the_exact_conditional_also_where_products_underflow(name):
    # 20,000 replicas of one case, one sweep: the missing cell's draws follow its exact conditional, written
    # here as a sum of log CPT entries; no cell is flagged impossible and every draw is a state (no NaN
    # reached a comparison). False-failure budget: one chi-square test at ALPHA per case (4 cases), fixed seeds.
    from conftest import ALPHA

    from gpumcmc.models import bayesnet as bn

    make, case, node = _CONDITIONALS[name]
    net = make()
    draws, p, bad = _one_sweep(bn._NumpyOps, net, case, node, 20000)
    assert bad == 0 and draws.max() < len(p)
    assert np.isfinite(p).all() and p.min() > 1e-3  # the test's cases: every state plausible, so each is checked
    assert _chisquare_pvalue(draws, p) > ALPHA


def test_tiny_tables_sit_on_both_sides_of_the_log_space_threshold():
    # the cases above reach the paths they are named for: products near 1e-180 above BN_TINY, the others below
    from gpumcmc.models import bayesnet as bn

    for name, below in (("products 1e-180", False), ("products 1e-300", True), ("products underflow", True)):
        net = _CONDITIONALS[name][0]()
        t = bn._Plan(net).tables_of(net.cpts_)[1]
        blanket = np.prod([net.cpts_[y][:, 1] for y in net.nodes if y.startswith("y")], axis=0)  # (3,)
        total = (net.cpts_["x"][1] * blanket).sum()
        assert (total < bn.ops._TINY) == below, (name, total)
        assert t.min() > 0


def test_fit_with_tiny_fixed_cpts_imputes_without_nan():
    # Gibbs imputation with the CPTs fixed, on cases whose blankets underflow as products: every cell filled
    # with a state, and the imputations' log-probabilities finite.
    net = _tiny_net(12, 1e-30)
    X = np.ones((40, len(net.nodes)), dtype=np.int64)
    X[:, net.nodes.index("x")] = -1
    X[::3, net.nodes.index("a")] = -1
    Y = net.impute(X, method="draw", random_state=0, max_combinations=1, replicas=4, n_sweeps=6, backend="numpy")
    assert (Y >= 0).all() and np.isfinite(_log_joint(net, Y)).all()


@pytest.mark.parametrize("name", list(_CONDITIONALS))
def test_gpu_sweep_draws_the_exact_conditional_and_the_twins(cp, name):
    # as the NumPy test, on the GPU: the same draws as the twin (the product path has no transcendental
    # function; the log-space path agrees unless a uniform falls within ~1e-16 of a boundary) and the
    # exact conditional. False-failure budget: one chi-square test at ALPHA per case (4 cases), fixed seeds.
    from conftest import ALPHA

    from gpumcmc.models import bayesnet as bn

    make, case, node = _CONDITIONALS[name]
    net = make()
    draws, p, bad = _one_sweep(bn._GpuOps, net, case, node, 20000, xp=cp)
    twin, _, _ = _one_sweep(bn._NumpyOps, net, case, node, 20000)
    assert bad == 0
    np.testing.assert_array_equal(draws, twin)
    assert _chisquare_pvalue(draws, p) > ALPHA


def test_counts_twin_matches_a_loop():
    from gpumcmc.models import bayesnet as bn

    net = _blanket_net(1)
    Z = net.sample(50, 2).astype(np.uint8)[None]
    plan = bn._Plan(net)
    got = bn._NumpyOps(plan).counts(Z, 1, 50)
    for j, v in enumerate(net.nodes):
        want = np.zeros(net.cpts_[v].shape, dtype=np.int64)
        for row in Z[0]:
            want[tuple(row[net.nodes.index(q)] for q in net.parents[v]) + (row[j],)] += 1
        np.testing.assert_array_equal(got[plan.toff[j]:plan.toff[j + 1]], want.ravel())


def _ops_both(cp, net, X, m):
    from gpumcmc.models import bayesnet as bn

    plan = bn._Plan(net)
    b = plan.batch(X, 0, len(X))
    rs = np.random.default_rng(0)
    Z = np.repeat(np.where(X < 0, 0, X).astype(np.uint8)[None], m, 0)
    Z[:, b.case, b.node] = (rs.random((m, b.M)) * plan.card[b.node]).astype(np.uint8)
    return plan, b, Z


@pytest.mark.parametrize("specialise", [False, True])  # the generic kernels, and the network written in
@pytest.mark.parametrize("seed", [0, 3])
def test_gpu_kernels_match_twin(cp, seed, specialise, monkeypatch):
    from gpumcmc.models import bayesnet as bn

    monkeypatch.setattr(config, "bayesnet_specialise", specialise)

    net = _random_net(seed)
    X = _mask(net.sample(3000, 1), 0.4, 2)
    m = 3
    plan, b, Z = _ops_both(cp, net, X, m)
    tables = plan.tables_of(net.cpts_)
    Zd, tables_d = cp.asarray(Z), cp.asarray(tables)
    bad, bad_d = np.zeros(1, np.int32), cp.zeros(1, cp.int32)
    cpu, gpu = bn._NumpyOps(plan), bn._GpuOps(plan)
    b.upload(cp)
    key = (0x12345678, 0x9ABCDEF0)
    for sweep in range(3):
        for c in range(len(plan.groups)):
            cpu.sweep(Z, m, b, c, tables, key, sweep, bad)
            gpu.sweep(Zd, m, b, c, tables_d, key, sweep, bad_d)
        np.testing.assert_array_equal(cp.asnumpy(Zd), Z)
    np.testing.assert_array_equal(cp.asnumpy(gpu.counts(Zd, m, len(X))), cpu.counts(Z, m, len(X)))
    np.testing.assert_array_equal(cp.asnumpy(gpu.counts(Zd, 2, len(X))), cpu.counts(Z, 2, len(X)))
    g = np.random.default_rng(1).normal(size=plan.C)
    np.testing.assert_allclose(cp.asnumpy(gpu.normalise(cp.asarray(g))), cpu.normalise(g), rtol=1e-13, atol=1e-13)
    assert bad[0] == 0 and int(bad_d[0]) == 0


@pytest.mark.parametrize("specialise", [False, True])
@pytest.mark.parametrize("register_cells", [32, 1 << 20])  # Koller-sized nets only, or this one's cells too
def test_gpu_counts_in_global_memory(cp, monkeypatch, specialise, register_cells):
    from gpumcmc.models import bayesnet as bn

    monkeypatch.setattr(config, "bayesnet_specialise", specialise)
    monkeypatch.setattr(config, "bayesnet_register_cells", register_cells)

    net = _random_net(5)
    X = _mask(net.sample(2000, 1), 0.3, 2)
    plan, b, Z = _ops_both(cp, net, X, 2)
    monkeypatch.setattr(config, "bayesnet_shared_cells", 0)
    np.testing.assert_array_equal(cp.asnumpy(bn._GpuOps(plan).counts(cp.asarray(Z), 2, len(X))),
                                  bn._NumpyOps(plan).counts(Z, 2, len(X)))


@pytest.mark.parametrize("specialise", [False, True])
@pytest.mark.parametrize("same", [3, [1, 3, 2, 3, 1]])  # a schedule: launches of several m on one part
@pytest.mark.parametrize("batch_size", [None, 700])
def test_gpu_fit_matches_cpu(cp, batch_size, same, specialise, monkeypatch):
    monkeypatch.setattr(config, "bayesnet_specialise", specialise)
    truth = BayesianNetwork.koller()
    X = _mask(truth.sample(2000, 0), 0.5, 1)
    kw = dict(n_iter=5, same=same, random_state=0, progress=False, batch_size=batch_size)
    g = _fresh().set_params(backend="cupy", **kw).fit(X)
    c = _fresh().set_params(backend="numpy", **kw).fit(X)
    np.testing.assert_array_equal(g.imputations_, c.imputations_)
    for v in g.nodes:
        np.testing.assert_allclose(g.cpts_[v], c.cpts_[v], rtol=1e-10)
        np.testing.assert_allclose(g.cpts_last_[v], c.cpts_last_[v], rtol=1e-10)
        np.testing.assert_allclose(g.trace_[v], c.trace_[v], rtol=1e-10)


@pytest.mark.parametrize("defines", [(("BN_GROUP", 2),), (("BN_GROUP", 4),), (("BN_GROUP", 4), ("BN_MIN_BLOCKS", 3)),
                                     (("BN_COUNT_ROWS", 1),)])
@pytest.mark.parametrize("specialise", [False, True])
def test_gpu_launch_variants_give_the_twins_draws(cp, defines, specialise):
    # the sweep's grouped cells (20,000 cases: blocks of 256 cases, so most lanes' cells share a node), a launch
    # bound, the counts a row a thread: the same draws as the NumPy twin.
    truth = BayesianNetwork.koller()
    X = _mask(truth.sample(20000, 0), 0.5, 1)
    kw = dict(n_iter=3, same=2, random_state=0, progress=False)
    with config.override(bayesnet_defines=defines, bayesnet_specialise=specialise):
        g = _fresh().set_params(backend="cupy", **kw).fit(X)
    c = _fresh().set_params(backend="numpy", **kw).fit(X)
    np.testing.assert_array_equal(g.imputations_, c.imputations_)
    for v in g.nodes:
        np.testing.assert_allclose(g.trace_[v], c.trace_[v], rtol=1e-10)


def _wide_network():
    """A network whose nodes take 3, 17, 5 and 70 states (the sweep's instantiations for 4, 64 and 256 states),
    with random CPTs."""
    parents = {"A": [], "B": ["A"], "C": ["A", "B"], "D": ["C"], "E": ["D", "A"]}
    card = {"A": 3, "B": 17, "C": 5, "D": 70, "E": 2}
    rng = np.random.default_rng(11)
    cpts = {v: rng.dirichlet(np.ones(card[v]), size=tuple(card[p] for p in parents[v])) for v in parents}
    return BayesianNetwork(parents, {v: [str(i) for i in range(k)] for v, k in card.items()}, cpts)


def _specialised_source(net):
    from gpumcmc.models.bayesnet import algorithm, ops

    return ops._net_prelude(algorithm._Plan(net)) + '#include "bayesnet.cu"\n'


def test_specialised_prelude_counts_small_networks_in_registers():
    # Koller's 26 CPT cells are counted in registers (BN_NET_REG_COUNT), the wide network's 1,079 by atomics;
    # a network whose code passes the limit keeps the generic kernels
    from gpumcmc.models.bayesnet import algorithm, ops

    koller, wide = (ops._net_prelude(algorithm._Plan(n)) for n in (BayesianNetwork.koller(), _wide_network()))
    assert "#define BN_NET_REG_C 26\n" in koller and "BN_NET_COUNT" in koller
    assert "BN_NET_REG" not in wide and "BN_NET_COUNT" in wide
    # every cell of each node's table gets one compare-add: Koller's tables hold 2, 2, 12, 4 and 6 cells
    assert [koller.count(f"r[{c}] +=") for c in range(26)] == [1] * 26 and "r[26]" not in koller
    with config.override(bayesnet_register_cells=25):
        assert "BN_NET_REG" not in ops._net_prelude(algorithm._Plan(BayesianNetwork.koller()))
    with config.override(bayesnet_specialise_chars=100):
        assert ops._net_prelude(algorithm._Plan(BayesianNetwork.koller())) == ""


@pytest.mark.parametrize("which", ["koller", "wide"])
def test_specialised_kernels_compile(which, tmp_path):
    # the sweep and the counts with the network written in (config.bayesnet_specialise) compile for sm_90; the
    # GPU test below checks their draws
    import shutil
    import subprocess

    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc")
    net = BayesianNetwork.koller() if which == "koller" else _wide_network()
    src = tmp_path / "bn_net.cu"
    src.write_text(_specialised_source(net))
    kernels = os.path.join(os.path.dirname(__file__), os.pardir, "kernels_cu")
    done = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", "--ptx", "-I", kernels, "-o", os.devnull, str(src)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("which", ["koller", "wide"])
def test_gpu_specialised_kernels_give_the_same_draws(cp, which):
    # bn_products_net and BN_NET_COUNT compute what the generic kernels compute, in the same order: the same
    # imputations and CPT draws bit for bit, and the twin's
    net = BayesianNetwork.koller() if which == "koller" else _wide_network()
    X = _mask(net.sample(20000, 0), 0.5, 1)
    kw = dict(n_iter=4, same=3, random_state=0, progress=False)

    def fit(backend):
        return BayesianNetwork(net.parents, net.states, backend=backend, **kw).fit(X)

    with config.override(bayesnet_specialise=True):
        s = fit("cupy")
    with config.override(bayesnet_specialise=False):
        g = fit("cupy")
    c = fit("numpy")
    np.testing.assert_array_equal(s.imputations_, g.imputations_)
    np.testing.assert_array_equal(s.imputations_, c.imputations_)
    for v in g.nodes:
        np.testing.assert_array_equal(s.trace_[v], g.trace_[v])


@pytest.mark.parametrize("specialise", [False, True])
def test_gpu_fit_replayed_from_a_graph_gives_the_same_draws(cp, specialise, monkeypatch):
    # config.bayesnet_graph: one GPU, one batch, one m: the iteration captured once and replayed, the draws of
    # the eager fit bit for bit (learning the CPTs, and imputing with them fixed); a schedule of m falls back
    from gpumcmc.sampling import _graph

    captured = []
    real = _graph.graph_step
    monkeypatch.setattr(_graph, "graph_step", lambda step: captured.append(1) or real(step))
    net = BayesianNetwork.koller()
    X = _mask(net.sample(20000, 0), 0.5, 1)
    for same, learn, graphed in ((3, True, True), (3, False, True), ([1, 3, 2, 3, 1, 2], True, False)):
        kw = dict(n_iter=6, same=same, random_state=0, progress=False, backend="cupy", learn=learn)
        with config.override(bayesnet_specialise=specialise):
            g = BayesianNetwork(net.parents, net.states, None if learn else net.cpts_, **kw).fit(X)
            before = len(captured)
            with config.override(bayesnet_graph=True):
                h = BayesianNetwork(net.parents, net.states, None if learn else net.cpts_, **kw).fit(X)
        assert (len(captured) > before) == graphed
        np.testing.assert_array_equal(g.imputations_, h.imputations_)
        if learn:
            for v in g.nodes:
                np.testing.assert_array_equal(g.trace_[v], h.trace_[v])
                np.testing.assert_array_equal(g.cpts_last_[v], h.cpts_last_[v])


def test_gpu_normalise_into_another_array(cp):
    from gpumcmc.models import bayesnet as bn

    plan = bn._Plan(_random_net(2))
    g = np.random.default_rng(3).normal(size=plan.C)
    x = cp.asarray(g)
    out = cp.zeros((3, 2, plan.C))
    got = bn._GpuOps(plan).normalise(x, out=out[1])
    assert got.data.ptr == out[1].data.ptr
    np.testing.assert_array_equal(cp.asnumpy(x), g)  # the input is left as it was
    np.testing.assert_allclose(cp.asnumpy(out[1]), bn._NumpyOps(plan).normalise(g.copy()), rtol=1e-13, atol=1e-13)
    assert not out[0].any() and not out[2].any()
    inplace = cp.empty((2, plan.C))
    inplace[0] = x
    bn._GpuOps(plan).normalise(inplace[0], out=inplace)  # the log-gammas in the tables' first row
    np.testing.assert_array_equal(cp.asnumpy(inplace), cp.asnumpy(out[1]))


# --------------------------------------------------------------------------- estimates and imputation

def _posterior_mean(net, cases, m, prior):
    # each CPT row's Dirichlet(m (prior - 1) + 1 + counts) mean, the counts over the (replica-stacked) cases
    out = {}
    for j, v in enumerate(net.nodes):
        c = np.zeros(net._cpt_shape(v))
        np.add.at(c, tuple(cases[:, net.nodes.index(q)] for q in net.parents[v]) + (cases[:, j],), 1)
        a = m * (prior - 1.0) + 1.0 + c
        out[v] = a / a.sum(-1, keepdims=True)
    return out


def test_cpts_are_the_posterior_mean_given_the_counts():
    # cpts_ averages, over the kept iterations, each row's Dirichlet mean given the counts that iteration's
    # CPTs were drawn from. With burn_in = n_iter - 1 only the last counts are kept: those of the final
    # imputations (every replica). The mean of the draws (trace_) estimates the same expectation.
    truth = BayesianNetwork.koller()
    X = _mask(truth.sample(500, 0), 0.4, 1)
    fit = _fresh().set_params(n_iter=8, same=2, random_state=0, progress=False, backend="numpy").fit(X)
    assert fit.burn_in_ == 4
    for v in fit.nodes:
        shape = fit.cpts_[v].shape
        np.testing.assert_allclose(fit.cpts_[v], fit.trace_[v][4:].mean(0).reshape(shape), atol=0.05)
        np.testing.assert_array_equal(fit.cpts_last_[v], fit.trace_[v][-1].reshape(shape))
        np.testing.assert_allclose(fit.cpts_[v].sum(-1), 1.0, rtol=1e-12)
    for batch_size in (None, 150):
        one = _fresh().set_params(n_iter=8, same=2, random_state=0, progress=False, backend="numpy", burn_in=7,
                                  batch_size=batch_size).fit(X)
        want = _posterior_mean(truth, one.imputations_.reshape(-1, len(truth.nodes)).astype(np.int64), 2, 1.0)
        for v in fit.nodes:
            np.testing.assert_allclose(one.cpts_[v], want[v], rtol=1e-13)
    for bad in (8, -1, 2.5):
        with pytest.raises(ValueError, match="burn_in"):
            _fresh().set_params(n_iter=8, progress=False, backend="numpy", burn_in=bad).fit(X)


@pytest.mark.parametrize("prior", [1e-3, 1e-6])
def test_cpts_of_a_small_prior_keep_unseen_states(prior):
    # Complete cases: every iteration's counts are the data's, so cpts_ is (count + prior) / (row total +
    # states x prior) to rounding. The mean of the draws misses a state never seen in its row by orders of
    # magnitude (its shape is the prior alone and most of its draws underflow): 1.5e-7 for 2.1e-5 at 1e-3.
    truth = BayesianNetwork.koller()
    X = truth.sample(47, 3)
    fit = BayesianNetwork(truth.parents, truth.states, n_iter=200, prior=prior, random_state=0, progress=False,
                          backend="numpy").fit(X)
    want, unseen = _posterior_mean(truth, X, 1, prior), 0
    for v in fit.nodes:
        np.testing.assert_allclose(fit.cpts_[v], want[v], rtol=1e-12)
        unseen += int((want[v] < 10 * prior).sum())
    assert unseen > 0  # the case the draws' mean gets wrong is present


def test_mean_of_the_trace_beats_the_last_draw_on_sachs():
    # The reason cpts_ is the mean: on sachs (11 nodes, 3 states each) at m = 1 the final draw keeps
    # the posterior's spread. Fixed seeds; at this size the mean's KL_avg is about 2/3 of the draw's.
    files = [f for f in _bif_files() if os.path.basename(f) == "sachs.bif.gz"]
    if not files:
        pytest.skip("pgmpy has no sachs.bif.gz")
    truth = BayesianNetwork.from_bif(files[0])
    X = _mask(truth.sample(2000, 0), 0.5, 1)
    fit = BayesianNetwork(truth.parents, truth.states, n_iter=40, same=1, random_state=0, progress=False,
                          backend="numpy").fit(X)
    last = BayesianNetwork(truth.parents, truth.states, fit.cpts_last_)
    assert fit.kl_avg(truth) < 0.8 * last.kl_avg(truth)


def _enumerated(net, x):
    """The exact conditional of case x's missing cells: (joint states, probabilities)."""
    mis = np.flatnonzero(x < 0)
    combos = np.array(list(np.ndindex(*[net.card[net.nodes[j]] for j in mis])))
    Y = np.repeat(x[None], len(combos), 0)
    Y[:, mis] = combos
    p = _joint(net, Y)
    return Y, p / p.sum()


def test_impute_mode_is_the_joint_mode_where_enumeration_is_small():
    net = _blanket_net(2)
    X = _mask(net.sample(40, 3), 0.5, 4)
    got = net.impute(X)
    for x, y in zip(X, got):
        if (x < 0).any():
            Y, p = _enumerated(net, x)
            np.testing.assert_array_equal(y, Y[np.argmax(p)])
        else:
            np.testing.assert_array_equal(y, x)


def test_gibbs_imputation_draws_the_conditional():
    # max_combinations=1 sends every case to the Gibbs branch. Each case runs its own replicas, so
    # 3000 copies of one case give 3000 independent draws of (I, G) given the rest after 50 sweeps.
    # False-failure budget: one chi-square test at ALPHA, fixed seeds.
    from conftest import ALPHA

    net = BayesianNetwork.koller()
    x = np.array([-1, 1, 0, -1, 1])
    Y, p = _enumerated(net, x)
    n = 3000
    imp = net.impute(np.repeat(x[None], n, 0), method="draw", random_state=5, max_combinations=1,
                     replicas=2, backend="numpy")
    obs = np.bincount(imp[:, 0] * 3 + imp[:, 3], minlength=6)
    pool = lambda a: np.concatenate([a[:4], [a[4] + a[5]]])  # noqa: E731  (I=1, G=2 is 7e-4 alone)
    assert stats.chisquare(pool(obs), n * pool(p)).pvalue > ALPHA


def test_gibbs_imputation_mode_finds_the_joint_mode():
    # Cases with 2 missing cells of Koller (at most 6 joint states, so the mode has probability >= 1/6):
    # one of 64 replicas misses it with probability <= (5/6)^64 < 1e-5, so all 60 cases find it except
    # with probability < 6e-4 (fixed seeds).
    net = BayesianNetwork.koller()
    X = net.sample(60, 7)
    rs = np.random.default_rng(8)
    for row in X:
        row[rs.choice(5, 2, replace=False)] = -1
    got = net.impute(X, random_state=9, max_combinations=1, backend="numpy")
    for x, y in zip(X, got):
        Y, p = _enumerated(net, x)
        np.testing.assert_array_equal(y, Y[np.argmax(p)])


@pytest.mark.slow
def test_gibbs_imputation_of_a_case_too_large_to_enumerate():
    # hailfinder (56 nodes, CPTs with zeros) with 80% of the cells missing: about 10^30 joint states.
    # The Gibbs branch fills them within a time bound, with possible joint states.
    import time

    files = [f for f in _bif_files() if os.path.basename(f) == "hailfinder.bif.gz"]
    if not files:
        pytest.skip("pgmpy has no hailfinder.bif.gz")
    net = BayesianNetwork.from_bif(files[0])
    X = _mask(net.sample(4, 0), 0.8, 1)
    X[0] = -1  # a case with nothing observed
    for method in ("mode", "draw"):
        t0 = time.perf_counter()
        Y = net.impute(X, method=method, random_state=0, backend="numpy")
        assert time.perf_counter() - t0 < 60
        assert (Y >= 0).all() and np.isfinite(net.log_prob(Y)).all()
        np.testing.assert_array_equal(Y[X >= 0], X[X >= 0])


def test_impute_of_an_impossible_case_raises():
    net = BayesianNetwork.koller()
    net.cpts_["L"] = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    net.cpts_["G"] = np.array([[[0.5, 0.5, 0.0]] * 2] * 2)
    x = np.array([[0, 0, 0, -1, 1]])  # L = 1 needs G = 2, which has probability 0
    with pytest.raises(ValueError, match="probability 0"):
        net.impute(x)
    with pytest.raises(ValueError, match="probability 0"):
        net.impute(x, max_combinations=1, backend="numpy")


def test_gpu_gibbs_imputation_matches_twin(cp):
    net = _blanket_net(4)
    X = _mask(net.sample(500, 1), 0.6, 2)
    for method in ("mode", "draw"):
        g = net.impute(X, method=method, random_state=3, max_combinations=1, backend="cupy")
        c = net.impute(X, method=method, random_state=3, max_combinations=1, backend="numpy")
        np.testing.assert_array_equal(g, c)


# --------------------------------------------------------------------------- bad input, one row each

_BIF_HEAD = """network x {
}
variable A {
  type discrete [ 2 ] { a0, a1 };
}
variable B {
  type discrete [ 2 ] { b0, b1 };
}
"""
_BIF_GOOD = _BIF_HEAD + """probability ( A ) {
  table 0.3, 0.7;
}
probability ( B | A ) {
  (a0) 0.1, 0.9;
  (a1) 0.5, 0.5;
}
"""


def _bif(tmp_path, text):
    path = tmp_path / "net.bif"
    path.write_text(text)
    return BayesianNetwork.from_bif(path)


def _write(path, text):
    path.write_text(text)
    return path


def _cyclic_later():
    net = _fresh().set_params(n_iter=1, progress=False, backend="numpy")
    net.parents["I"] = ["L"]
    return net


def _df(cols):
    pd = pytest.importorskip("pandas")
    return pd.DataFrame(cols)


_BAD = [
    ("garbage BIF file", lambda tp: _bif(tp, "this is not a network\n{ at all }\n"), ValueError, "no variables"),
    ("a .gz file that is not gzipped", lambda tp: BayesianNetwork.from_bif(_write(tp / "net.bif.gz", _BIF_GOOD)),
     ValueError, "cannot be read as gzipped BIF"),
    ("parents made cyclic after the constructor", lambda tp: _cyclic_later().fit(np.zeros((2, 5), int)), ValueError,
     "directed cycle"),
    ("undeclared variable", lambda tp: _bif(tp, _BIF_GOOD.replace("( B | A )", "( B | C )")), ValueError,
     "'C', which no variable block declares"),
    ("missing probability block", lambda tp: _bif(tp, _BIF_GOOD[:_BIF_GOOD.index("probability ( B")]), ValueError,
     r"no probability block for \['B'\]"),
    ("table of the wrong length", lambda tp: _bif(tp, _BIF_GOOD.replace("0.3, 0.7;", "0.3, 0.3, 0.4;")),
     ValueError, "has 3 values; .* needs 2"),
    ("unknown parent state", lambda tp: _bif(tp, _BIF_GOOD.replace("(a1)", "(zz)")), ValueError,
     "state 'zz' of 'A', whose states are"),
    ("row with too few values", lambda tp: _bif(tp, _BIF_GOOD.replace("0.5, 0.5;", "1.0;")), ValueError,
     "has 1 values; 'B' has 2 states"),
    ("missing row", lambda tp: _bif(tp, _BIF_GOOD.replace("  (a1) 0.5, 0.5;\n", "")), ValueError, r"no row \(a1\)"),
    ("a value not a number", lambda tp: _bif(tp, _BIF_GOOD.replace("0.3, 0.7", "0.3, x")), ValueError,
     "not a number"),
    ("cyclic parents", lambda tp: BayesianNetwork({"A": ["B"], "B": ["A"]}, {"A": [0, 1], "B": [0, 1]}),
     ValueError, "directed cycle among"),
    ("a node its own parent", lambda tp: BayesianNetwork({"A": ["A"]}, {"A": [0, 1]}), ValueError, "directed cycle"),
    ("CPT of the wrong size", lambda tp: BayesianNetwork({}, {"A": [0, 1]}, {"A": [0.2, 0.3, 0.5]}), ValueError,
     "has 3 cells"),
    ("CPT missing", lambda tp: BayesianNetwork({}, {"A": [0, 1]}, {}), ValueError, "no table for node"),
    ("a string of parents", lambda tp: BayesianNetwork({"B": "A"}, {"A": [0, 1], "B": [0, 1]}), TypeError,
     "list of node names"),
    ("DataFrame with -1 cells", lambda tp: BayesianNetwork.koller().set_params(n_iter=1, progress=False).fit(
        _df({v: [-1, 0] for v in "IDSGL"})), ValueError,
     "None or NaN, not -1"),
    ("kl_avg against another network", lambda tp: BayesianNetwork.koller().kl_avg(_bif(tp, _BIF_GOOD)), ValueError,
     "same nodes"),
    ("kl_avg against another structure", lambda tp: BayesianNetwork.koller().kl_avg(BayesianNetwork(
        {"G": ["I"], "L": ["G"], "S": ["I"]}, BayesianNetwork.koller().states,
        {"I": [.5, .5], "D": [.5, .5], "S": [[.5, .5]] * 2, "G": [[1 / 3] * 3] * 2, "L": [[.5, .5]] * 3})),
     ValueError, "node 'G' has parents"),
    ("kl_avg against a dict", lambda tp: BayesianNetwork.koller().kl_avg(BayesianNetwork.koller().cpts_), TypeError,
     "another BayesianNetwork"),
    ("impute method", lambda tp: BayesianNetwork.koller().impute(np.zeros((1, 5), int), method="mean"), ValueError,
     "'mode' or 'draw'"),
    ("impute replicas", lambda tp: BayesianNetwork.koller().impute(np.zeros((1, 5), int), replicas=0), ValueError,
     "replicas must be a positive integer"),
]


@pytest.mark.parametrize("call, err, match", [pytest.param(c, e, m, id=i) for i, c, e, m in _BAD])
def test_bad_input_raises(tmp_path, call, err, match):
    with pytest.raises(err, match=match):
        call(tmp_path)


def test_good_bif_reads():  # the base text of the bad-input rows is itself valid
    import tempfile
    import pathlib

    with tempfile.TemporaryDirectory() as d:
        net = _bif(pathlib.Path(d), _BIF_GOOD)
    np.testing.assert_allclose(net.cpts_["B"], [[0.1, 0.9], [0.5, 0.5]])
    assert net.parents == {"A": [], "B": ["A"]}
    # A conditional table lists the child's state slowest, then the parents' in their order, the last
    # fastest (as pgmpy's BIFReader reads it): the same CPT as the rows above, and one of two parents.
    rows = "  (a0) 0.1, 0.9;\n  (a1) 0.5, 0.5;"
    c = "variable C {\n  type discrete [ 3 ] { c0, c1, c2 };\n}\nvariable B"
    with tempfile.TemporaryDirectory() as d:
        same = _bif(pathlib.Path(d), _BIF_GOOD.replace(rows, "  table 0.1, 0.5, 0.9, 0.5;"))
        two = _bif(pathlib.Path(d), _BIF_HEAD.replace("variable B", c) + """probability ( A ) {
  table 0.3, 0.7;
}
probability ( C ) {
  table 0.2, 0.3, 0.5;
}
probability ( B | A, C ) {
  table 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4;
}
""")
    np.testing.assert_array_equal(same.cpts_["B"], net.cpts_["B"])
    assert two.parents["B"] == ["A", "C"]
    np.testing.assert_allclose(two.cpts_["B"], [[[0.1, 0.9], [0.2, 0.8], [0.3, 0.7]],
                                                [[0.4, 0.6], [0.5, 0.5], [0.6, 0.4]]])


def test_dataframe_without_a_node_column_warns():
    net = BayesianNetwork.koller()
    df = _df({v: ["0", "1"] for v in "IDSL"})
    with pytest.warns(UserWarning, match=r"no column for node\(s\) \['G'\]"):
        X = net._encode(df)
    assert (X[:, 3] == -1).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        net._encode(_df({**{v: ["0", "1"] for v in "IDSL"}, "G": [None, None]}))


# --------------------------------------------------------------------------- scikit-learn conventions

def test_settings_in_the_constructor_and_clone():
    sklearn_base = pytest.importorskip("sklearn.base")
    truth = BayesianNetwork.koller()
    net = BayesianNetwork(truth.parents, truth.states, n_iter=4, same=2, random_state=1, progress=False,
                          backend="numpy")
    assert net.get_params()["same"] == 2 and net.get_params()["cpts"] is None
    twin = sklearn_base.clone(net)
    assert twin.get_params()["n_iter"] == 4 and twin.cpts_ is None and twin.nodes == net.nodes
    X = _mask(truth.sample(300, 0), 0.4, 1)
    a, b = net.fit(X), twin.fit(X)
    for v in truth.nodes:
        np.testing.assert_array_equal(a.trace_[v], b.trace_[v])
    fitted = sklearn_base.clone(a)  # the constructor's cpts (none here): unfitted
    assert fitted.cpts_ is None and fitted.trace_ is None
    given = sklearn_base.clone(truth)  # a network built with CPTs keeps them
    np.testing.assert_array_equal(given.cpts_["G"], truth.cpts_["G"])
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(a)
    with pytest.raises(NotFittedError):
        check_is_fitted(sklearn_base.clone(net))


def test_settings_given_to_fit_still_work_and_warn():
    truth = BayesianNetwork.koller()
    X = _mask(truth.sample(300, 0), 0.4, 1)
    new = BayesianNetwork(truth.parents, truth.states, n_iter=4, same=2, random_state=1, progress=False,
                          backend="numpy").fit(X)
    with pytest.warns(DeprecationWarning, match=r"BayesianNetwork\(parents, states, n_iter=\.\.\., same=\.\.\."):
        old = BayesianNetwork(truth.parents, truth.states).fit(X, n_iter=4, same=2, random_state=1, progress=False,
                                                                backend="numpy")
    with pytest.warns(DeprecationWarning, match="n_iter"):
        pos = BayesianNetwork(truth.parents, truth.states, same=2, random_state=1, progress=False,
                              backend="numpy").fit(X, 4)
    for v in truth.nodes:
        np.testing.assert_array_equal(old.trace_[v], new.trace_[v])
        np.testing.assert_array_equal(pos.trace_[v], new.trace_[v])
    assert old.n_iter == 100  # a setting given to fit is for that call only
    with pytest.raises(TypeError, match="unexpected keyword"):
        old.fit(X, n_iters=3)
    with pytest.raises(TypeError, match="y is not used"):
        old.fit(X, np.zeros(len(X)))


def test_twin_normalise_into_another_array():
    from gpumcmc.models import bayesnet as bn

    plan = bn._Plan(_random_net(2))
    g = np.random.default_rng(3).normal(size=plan.C)
    out = np.zeros((3, 2, plan.C))
    got = bn._NumpyOps(plan).normalise(g.copy(), out=out[1])
    assert np.shares_memory(got, out) and not out[0].any() and not out[2].any()
    rows = np.split(out[1, 0], plan.row_ptr[1:-1])
    np.testing.assert_allclose([np.logaddexp.reduce(r) for r in rows], 0.0, atol=1e-12)
    np.testing.assert_array_equal(out[1, 1], np.exp(out[1, 0]))  # the probabilities: the logs' exp
    inplace = np.empty((2, plan.C))
    inplace[0] = g
    bn._NumpyOps(plan).normalise(inplace[0], out=inplace)  # the log-gammas in the tables' first row
    np.testing.assert_array_equal(inplace, out[1])


def test_gibbs_imputation_in_chunks_is_the_same_method(monkeypatch):
    # chunks of 7 cases: each chunk's chains get their own seed from random_state, so the draws differ
    # from one chunk's, but every case is filled, observed cells are kept, and the result is the same
    # for the same seed.
    net = BayesianNetwork.koller()
    X = _mask(net.sample(30, 1), 0.6, 2)
    monkeypatch.setattr(config, "bayesnet_impute_cells", 7 * 8 * 5)
    a = net.impute(X, method="draw", random_state=3, max_combinations=1, replicas=8, backend="numpy")
    b = net.impute(X, method="draw", random_state=3, max_combinations=1, replicas=8, backend="numpy")
    np.testing.assert_array_equal(a, b)
    assert (a >= 0).all() and (a[X >= 0] == X[X >= 0]).all() and np.isfinite(net.log_prob(a)).all()


# The draws of a NumPy fit for a seed: the final CPT draw of G (2 x 2 x 3) and a checksum of the replicas'
# imputations. Recorded again when the sweep moved to products of probabilities and one Philox call for four
# cells (issue 38), which changed every draw. Any changed draw moves these by far more than the tolerance,
# which only allows for a last-bit difference of exp/log between platforms.
_RECORDED = {
    "batches": (dict(n_iter=6, same=2, batch_size=130),
                [0.3245225492045714, 0.34486548806264666, 0.3306119627327824, 0.04169641954190451,
                 0.2591357198914615, 0.6991678605666338, 0.7993914602652229, 0.13630942791154146,
                 0.06429911182323567, 0.4682571126370306, 0.2337175607769762, 0.29802532658599323],
                ((2, 600, 5), 2967, 8937375)),
    "three_parts": (dict(n_iter=5, same=[1, 2, 3, 3, 2], batch_size=250, shards=3),
                    [0.3415704309891281, 0.37549862124341143, 0.28293094776746064, 0.06907661588129153,
                     0.22622034626145707, 0.7047030378572515, 0.7786699833347609, 0.20204166133935425,
                     0.019288355325885236, 0.6923607816002637, 0.09351671630221085, 0.21412250209752495],
                    ((3, 600, 5), 4445, 19959796)),
}


@pytest.mark.parametrize("name", list(_RECORDED))
def test_draws_for_a_seed_are_the_recorded_ones(name, monkeypatch):
    from gpumcmc.models.bayesnet import estimator
    from gpumcmc.shards import Shards

    kw, last_g, (shape, total, weighted) = _RECORDED[name]
    kw = dict(kw)
    if "shards" in kw:
        kw["devices"] = Shards(n_virtual=kw.pop("shards"))
    runs = []
    monkeypatch.setattr(estimator, "run", lambda *a, **k: runs.append(k) or _run(*a, **k))  # the driver's loop
    net = BayesianNetwork.koller()
    X = _mask(net.sample(600, random_state=1), 0.4, 2)
    fit = BayesianNetwork(net.parents, net.states, random_state=5, progress=False, backend="numpy", **kw).fit(X)
    assert len(runs) == 1 and runs[0]["desc"] == "BayesianNetwork"
    np.testing.assert_allclose(fit.trace_["G"][-1].ravel(), last_g, rtol=1e-12, atol=0)
    np.testing.assert_allclose(fit.cpts_last_["G"].ravel(), last_g, rtol=1e-12, atol=0)
    imp = fit.imputations_.astype(np.int64)
    assert imp.shape == shape
    assert (int(imp.sum()), int((imp * np.arange(imp.size).reshape(shape)).sum())) == (total, weighted)


def _run(*args, **kwargs):
    from gpumcmc.sampling import run

    return run(*args, **kwargs)


def test_fit_without_networkx_names_the_package(monkeypatch):
    """fit colours the moral graph with networkx, an optional extra: without it, an ImportError that says
    what to install (it used to be a bare ModuleNotFoundError from inside the estimator)."""
    import builtins

    real = builtins.__import__

    def no_networkx(name, *args, **kwargs):
        if name == "networkx" or name.startswith("networkx."):
            raise ModuleNotFoundError("No module named 'networkx'")
        return real(name, *args, **kwargs)
    net = BayesianNetwork.koller()
    X = net.sample(50, random_state=0)
    monkeypatch.setattr(builtins, "__import__", no_networkx)
    with pytest.raises(ImportError, match=r'pip install networkx \(or "gpumcmc\[networkx\]"\)'):
        BayesianNetwork(net.parents, net.states, n_iter=2, backend="numpy", progress=False).fit(X)


def test_set_params_of_the_structure_makes_the_network_again():
    from sklearn.base import clone

    net = BayesianNetwork.koller()
    uniform = {v: np.full(net._cpt_shape(v), 1.0 / net.card[v]) for v in net.nodes}
    a = BayesianNetwork.koller().set_params(cpts=uniform, n_iter=5)
    b = clone(a)
    for m in (a, b):
        assert m.n_iter == 5
        np.testing.assert_array_equal(m.cpts_["I"], [0.5, 0.5])
    states = dict(net.states, L=["a", "b", "c"])
    c = BayesianNetwork.koller().set_params(states=states, cpts=None)
    assert c.card["L"] == 3 and c.cpts_ is None
    with pytest.raises(ValueError, match="CPT of 'L'"):
        BayesianNetwork.koller().set_params(states=states)   # the old tables do not fit three states of L


def test_a_refused_set_params_leaves_the_network_as_it_was():
    net = BayesianNetwork.koller()
    parents = dict(net.parents, L=["G", "I"])
    with pytest.raises(ValueError, match="CPT of 'L'"):
        net.set_params(parents=parents, n_iter=7)
    assert net.parents["L"] == ["G"] and set(net.cpts_) == set(net.nodes) and net.n_iter != 7
    assert net.sample(2, random_state=0).shape == (2, 5)


def test_repr_and_set_params_errors_with_an_array_schedule():
    # A NumPy-array ``same`` schedule made the repr (and so set_params' error and Jupyter's display) raise.
    net = BayesianNetwork.koller()
    n2 = BayesianNetwork(net.parents, net.states, same=np.ceil(np.linspace(1, 4, 6)))
    assert "same=array([1., 2., 3., 3., 4., 4.])" in repr(n2)
    with pytest.raises(ValueError, match="Invalid parameter 'n_iters'"):
        n2.set_params(n_iters=5)


def test_methods_before_a_fit_raise_not_fitted_error():
    from gpumcmc.sampling import NotFittedError  # a subclass of scikit-learn's, where it is installed

    net = BayesianNetwork({"a": []}, {"a": ["0", "1"]}, backend="numpy", progress=False)
    for call in (lambda: net.sample(3), net.to_arviz, lambda: net.impute(np.array([[-1]]))):
        with pytest.raises(NotFittedError):
            call()


def test_dataframes_with_pandas_missing_marker_and_float_codes():
    # pandas' NA (nullable and "string" columns) is missing, and states named "0", "1" read as floats from a
    # CSV with blank cells (0.0, 1.0, NaN) are those states.
    pd = pytest.importorskip("pandas")
    net = BayesianNetwork({"a": [], "b": ["a"]}, {"a": ["0", "1"], "b": ["x", "y"]}, backend="numpy", progress=False)
    df = pd.DataFrame({"a": [0.0, 1.0, np.nan, 1.0], "b": pd.array(["x", pd.NA, "y", "x"], dtype="string")})
    np.testing.assert_array_equal(net._encode(df), [[0, 0], [1, -1], [-1, 1], [1, 0]])
    df2 = pd.DataFrame({"a": pd.array([0, None, 1, 1], dtype="Int64"), "b": ["x", "y", None, "x"]})
    np.testing.assert_array_equal(net._encode(df2), [[0, 0], [-1, 1], [1, -1], [1, 0]])
    with pytest.raises(ValueError, match="Unknown state '2.5'"):
        net._encode(pd.DataFrame({"a": [2.5], "b": ["x"]}))


def test_a_fit_with_a_huge_table_warns(monkeypatch):
    from gpumcmc.models.bayesnet import estimator

    monkeypatch.setattr(estimator, "_LARGE_TABLE", 100)   # a small network stands in for a 10^8-cell table
    parents = {"p0": [], "p1": [], "p2": [], "c": ["p0", "p1", "p2"]}
    states = {v: [str(s) for s in range(5)] for v in parents}
    X = np.random.default_rng(0).integers(0, 5, size=(50, 4))
    with pytest.warns(UserWarning, match="Node 'c''s table has 625 cells .3 parents"):
        BayesianNetwork(parents, states, n_iter=2, random_state=0, progress=False, backend="numpy").fit(X)


def test_a_fit_whose_kept_draws_are_huge_warns(monkeypatch):
    """Tables under the cell limit whose draws, one kept an iteration, would take over _LARGE_KEPT_GB warn too,
    naming the iterations."""
    from gpumcmc.models.bayesnet import estimator

    parents = {"p0": [], "p1": [], "c": ["p0", "p1"]}
    states = {v: [str(s) for s in range(5)] for v in parents}
    X = np.random.default_rng(0).integers(0, 5, size=(50, 3))
    cells = 5 + 5 + 125
    assert 640_000 * 100 * 28 / 2**30 > estimator._LARGE_KEPT_GB  # 640,000 cells, 100 iterations: 1.7 GB warn
    monkeypatch.setattr(estimator, "_LARGE_KEPT_GB", 40 * cells * 28 / 2**30)  # 40 iterations' worth
    kw = dict(random_state=0, progress=False, backend="numpy")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        BayesianNetwork(parents, states, n_iter=40, **kw).fit(X)
    with pytest.warns(UserWarning, match="135 in all.*each of its 41 iterations' draws"):
        BayesianNetwork(parents, states, n_iter=41, **kw).fit(X)
    with pytest.warns(UserWarning, match="each of its 41 iterations' draws"):  # the deprecated settings of fit
        BayesianNetwork(parents, states, **kw).fit(X, n_iter=41)
    with pytest.warns(UserWarning, match="each of its 41 iterations' draws"):
        BayesianNetwork(parents, states, **kw).fit(X, 41)
