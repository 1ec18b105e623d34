"""The GLM with its rows split over devices against one device: on NumPy, the one-device sweep with its
row sums all-reduced; on the GPU, the pass-by-pass kernels (glm_slice_shard_eval, glm_slice_decide)."""

from __future__ import annotations

import numpy as np
import pytest

import gpumcmc.models.glm as mg
from gpumcmc._config import config
from gpumcmc.models.glm import BayesianGLM
from gpumcmc.random import default_rng
from gpumcmc.sampling import sharded
from gpumcmc.shards import Shards

from conftest import fit_as_ranks, glm_data

FAMILIES = ("bernoulli", "poisson", "gaussian")


def _data(family, N=300, K=3, seed=0):
    return glm_data(family, N, K, seed)


def _sweeps(xp, X, y, family, shards, n, width_scale=1.0, dtype=np.float64, max_shrink=24, max_steps_out=4,
            seed=3, n_warmup=1):
    """``n`` sweeps from a common start: ``shards=None`` by :func:`step` (one device), else by
    ``sharded(over_rows(...), shards)``. Returns beta, eta (over all rows), width and the fallbacks, on the host."""
    from gpumcmc import backend

    C = 3
    name = "numpy" if xp is np else "cupy"
    rng = default_rng(seed, backend=name)
    fbs = []
    if shards is None:
        st, data = mg.init(xp.asarray(X, dtype=dtype), xp.asarray(y, dtype=dtype), family, C, 1.5)
        st = st._replace(width=st.width * width_scale)
        for _ in range(n):
            st, info = mg.step(rng, st, data, family, 0.8, n_warmup, max_steps_out, max_shrink)
            fbs.append(backend.to_host(info.fallbacks))
        eta = backend.to_host(st.eta)
    else:
        parts = mg.row_parts(np.asarray(X, dtype=dtype), np.asarray(y, dtype=dtype), shards, family, C)
        alg = sharded(mg.over_rows(family, 0.8, n_warmup, max_steps_out, max_shrink), shards)
        with shards.on(0):
            st = alg.init(rng, parts, C, 1.5)
            st = st._replace(width=st.width * width_scale)
            for _ in range(n):
                st, info = alg.step(rng, st)
                fbs.append(backend.to_host(info.fallbacks))
        eta = np.concatenate([backend.to_host(e) for e in st.eta], axis=1)
    return backend.to_host(st.beta), eta, backend.to_host(st.width), np.array(fbs)


# Settings that reach every branch of the passes: the defaults (most coordinates settle in the first
# pass); a huge step width (no stepping out, then shrinkage over the first pass's 8 proposals and
# several later passes of 16, up to max_shrink = 60); a tiny one (the bracket steps out, so the first
# pass takes no proposals and the second pass does the shrinkage); max_shrink = 2 (fallbacks).
CASES = {
    "default": dict(),
    "long_shrink": dict(width_scale=1e6, max_shrink=60),
    "step_out": dict(width_scale=1e-3),
    "fallbacks": dict(max_shrink=2, max_steps_out=1),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("n_virtual", [1, 3])
def test_numpy_shards_give_the_draws_of_one_device(case, n_virtual):
    """The NumPy sharded sweep against :func:`step` on one device, float64: the same
    candidates and decisions. With one shard the sums over rows are the same, so everything is equal
    bit for bit; with three they add the same terms in another order, which could flip a decision only
    where a candidate's log-density lies within rounding (about 1e-13) of the slice level: for these
    seeds none does, so the draws are equal to 1e-12."""
    X, y = _data("bernoulli", N=301, seed=1)
    kw = CASES[case]
    one = _sweeps(np, X, y, "bernoulli", None, 4, **kw)
    sh = _sweeps(np, X, y, "bernoulli", Shards(n_virtual=n_virtual), 4, **kw)
    if n_virtual == 1:
        for a, b in zip(one, sh):
            np.testing.assert_array_equal(a, b)
    else:
        for a, b in zip(one[:3], sh[:3]):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(one[3], sh[3])
    if case == "fallbacks":
        assert one[3].sum() > 0
    # the differential update keeps eta = X beta on every shard
    np.testing.assert_allclose(sh[1], sh[0][:, 0, :] @ X.T, rtol=1e-10, atol=1e-10)


def test_numpy_shards_count_the_evaluations_of_one_device():
    """On NumPy the rows' sweep is the single-device sweep with its row sums all-reduced: the same draws
    (bit for bit with one shard, to 1e-12 with two), fallbacks and evaluations as devices=None."""
    X, y = _data("gaussian", N=200, seed=3)
    kw = dict(family="gaussian", n_chains=2, n_samples=10, n_warmup=5, random_state=4, progress=False)
    one = BayesianGLM(backend="numpy", **kw).fit(X, y)
    for n_virtual in (1, 2):
        sh = BayesianGLM(devices=Shards(n_virtual=n_virtual), **kw).fit(X, y)
        for name in ("evaluations", "fallbacks"):
            np.testing.assert_array_equal(sh.trace_.stats[name], one.trace_.stats[name], err_msg=name)
        if n_virtual == 1:
            np.testing.assert_array_equal(sh.coef_draws_, one.coef_draws_)
        else:
            np.testing.assert_allclose(sh.coef_draws_, one.coef_draws_, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("family", FAMILIES)
def test_numpy_shards_float32_agree_with_one_device(family):
    """float32, three shards: the sums over rows round differently (about 1e-7 of the log density), so a
    candidate near the slice level can flip and a chain go on from another point. Most of the draws of
    four sweeps still agree (at least 80% of the coordinates) and all are finite."""
    X, y = _data(family, N=400, seed=2)
    one = _sweeps(np, X, y, family, None, 4, dtype=np.float32)
    sh = _sweeps(np, X, y, family, Shards(n_virtual=3), 4, dtype=np.float32)
    assert np.isfinite(sh[0]).all()
    same = np.isclose(one[0], sh[0], rtol=1e-4, atol=1e-5)
    assert same.mean() >= 0.8, same.mean()


def test_each_process_of_a_cluster_takes_the_same_decisions():
    """The layout of a Dask cluster (one shard per process), played by threads whose all-reduce meets at
    a barrier: every rank decides from the same sums, so all end with the same draws, which equal one
    device's."""
    X, y = _data("poisson", N=250, seed=4)
    kw = dict(family="poisson", n_chains=2, n_samples=15, n_warmup=10, random_state=7, progress=False)
    one = BayesianGLM(backend="numpy", **kw).fit(X, y)
    fits = fit_as_ranks(lambda sh: BayesianGLM(devices=sh, **kw).fit(X, y), world=3)
    for f in fits:
        np.testing.assert_allclose(f.coef_draws_, one.coef_draws_, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(fits[0].coef_draws_, fits[2].coef_draws_)


def test_shard_passes_and_allreduce_bytes():
    assert mg.shard_passes(24) == 3     # first pass, then 16 + 8 proposals
    assert mg.shard_passes(16) == 2
    assert mg.shard_passes(1) == 2
    # 4 chains, K = 51: 3 passes of 16 float64 sums a chain and coordinate, and the log-likelihood
    assert mg.allreduce_bytes(4, 51) == 8 * 4 * (51 * 3 * 16 + 1)


def test_the_old_sharded_names_say_where_they_went():
    for name, new in [("init_sharded", "row_parts"), ("make_sharded_step", "over_rows"),
                      ("init_groups_sharded", "group_parts"), ("make_groups_sharded_step", "over_groups")]:
        with pytest.raises(AttributeError, match=f"sharded.*{new}"):
            getattr(mg, name)()


def test_sharded_bad_settings():
    X, y = _data("bernoulli", N=50)
    with pytest.raises(ValueError, match="max_steps_out must be between 1 and 15"):
        BayesianGLM(devices=Shards(n_virtual=2), max_steps_out=16, progress=False).fit(X, y)
    with pytest.raises(ValueError, match="max_shrink must be at least 1"):
        BayesianGLM(devices=Shards(n_virtual=2), max_shrink=0, progress=False).fit(X, y)


# ---------------------------------------------------------------------------
# GPU: the kernels glm_slice_shard_eval and glm_slice_decide
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("family", FAMILIES)
def test_one_shard_equals_devices_none_on_the_gpu(cp, family, dtype):
    """One shard on the GPU: the same chunks of rows, summed in the same order, and the same decision
    code as glm_slice_pass, so the draws, eta and widths equal those of devices=None bit for bit (the
    default settings, where no coordinate needs a third pass of proposals)."""
    from gpumcmc.shards import one_device

    X, y = _data(family, N=3000, K=4, seed=5)
    one = _sweeps(cp, X, y, family, None, 3, dtype=dtype)
    sh = _sweeps(cp, X, y, family, one_device(1), 3, dtype=dtype)
    for a, b in zip(one, sh):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", list(CASES))
def test_gpu_shards_match_numpy_shards(cp, case, monkeypatch):
    """Three shards on one GPU (one_device(3), summed on the device; 512 rows a chunk, so each shard's
    rows span several blocks) against the NumPy sweep with three shards and against devices=None on the
    GPU, float64, in every case of CASES (later passes, stepping out, fallbacks): the same decisions but
    where a candidate lies within rounding of the slice level, so at least 95% of the coordinates agree
    to 1e-9, the fallbacks are equal, and eta = X beta on every shard."""
    from gpumcmc.shards import one_device

    monkeypatch.setattr(config, "glm_chunk_rows", 512)
    assert mg._chunk_plan(np, np.array([0]), np.array([6001]), 3).chunk_rows == 512
    X, y = _data("bernoulli", N=6001, K=4, seed=6)
    kw = CASES[case]
    gpu = _sweeps(cp, X, y, "bernoulli", one_device(3), 3, **kw)
    twin = _sweeps(np, X, y, "bernoulli", Shards(n_virtual=3), 3, **kw)
    single = _sweeps(cp, X, y, "bernoulli", None, 3, **kw)
    for ref in (twin, single):
        same = np.isclose(gpu[0], ref[0], rtol=1e-9, atol=1e-12)
        assert same.mean() >= 0.95, (same.mean(), gpu[0], ref[0])
        np.testing.assert_array_equal(gpu[3], ref[3])
    np.testing.assert_allclose(gpu[1], gpu[0][:, 0, :] @ X.T, rtol=1e-9, atol=1e-9)


def test_gpu_two_shards_fit_agrees_with_one_gpu(cp):
    """BayesianGLM(devices=one_device(2)) against devices=None on the GPU, float32, 100 draws: most
    draws agree (float32 sums over rows in another order can flip a candidate near the slice level and
    send a chain elsewhere): the posterior means agree within 0.5 posterior sd (the Monte Carlo error of
    each mean is about 0.07 sd at 400 draws, and the two chains share most of their path)."""
    from gpumcmc.shards import one_device

    X, y = _data("bernoulli", N=5000, K=3, seed=8)
    kw = dict(n_chains=4, n_samples=100, n_warmup=50, random_state=2, progress=False, dtype="float32")
    one = BayesianGLM(backend="cupy", **kw).fit(cp.asarray(X), cp.asarray(y))
    sh = BayesianGLM(devices=one_device(2), **kw).fit(X, y)
    sd = one.coef_draws_.std(axis=(0, 1))
    assert np.all(np.abs(one.coef_draws_.mean(axis=(0, 1)) - sh.coef_draws_.mean(axis=(0, 1))) < 0.5 * sd)
    assert np.isfinite(sh.coef_draws_).all()


# ---------------------------------------------------------------------------
# HierarchicalGLM(devices=...): whole groups on each shard
# ---------------------------------------------------------------------------

def _groups_data(seed=9, G=7, K=2):
    rs = np.random.default_rng(seed)
    sizes = rs.integers(20, 120, size=G)
    groups = np.repeat(np.arange(G), sizes)
    groups = np.array([f"g{g}" for g in groups])[rs.permutation(len(groups))]   # unsorted string labels
    gi = np.unique(groups, return_inverse=True)[1]
    X = rs.normal(size=(len(groups), K))
    B = 0.3 + 0.5 * rs.normal(size=(G, K))
    eta = np.sum(X * B[gi], axis=1)
    y = (rs.random(len(groups)) < 1 / (1 + np.exp(-eta))).astype(float)
    return X, y, groups


def test_group_bounds():
    assert mg.group_bounds([10, 10, 10, 10], 2) == [(0, 2), (2, 4)]
    assert mg.group_bounds([100, 1, 1, 1], 2) == [(0, 1), (1, 4)]
    assert mg.group_bounds([1, 1, 1, 100], 3) == [(0, 2), (2, 3), (3, 4)]   # at least one group each
    assert mg.group_bounds([5, 7, 9], 1) == [(0, 3)]
    with pytest.raises(ValueError, match="3 groups cannot be split over 4 shards"):
        mg.group_bounds([1, 2, 3], 4)
    assert mg.groups_allreduce_bytes(4, 1000, 21) == 4 * (1000 * 21 * 4 + 16)


@pytest.mark.parametrize("covariance", ["full", "diag"])
@pytest.mark.parametrize("n_virtual", [1, 3])
def test_hierarchical_groups_on_numpy_shards_give_the_draws_of_one_device(covariance, n_virtual):
    """Groups split over NumPy shards: each group's random numbers are one device's, its rows sum on one
    shard, and mu, Sigma are drawn from every group's gathered coefficients. With one shard everything
    is equal bit for bit; with three, a group's sum comes from a running sum that starts elsewhere, which
    could flip a decision only within rounding of a slice level (none for this seed): equal to 1e-12."""
    X, y, groups = _groups_data()
    kw = dict(n_chains=2, n_samples=20, n_warmup=15, random_state=3, progress=False, covariance=covariance)
    one = mg.HierarchicalGLM(backend="numpy", **kw).fit(X, y, groups)
    sh = mg.HierarchicalGLM(devices=Shards(n_virtual=n_virtual), **kw).fit(X, y, groups)
    for name in one.trace_.draws:
        if n_virtual == 1:
            np.testing.assert_array_equal(sh.trace_.draws[name], one.trace_.draws[name], err_msg=name)
        else:
            np.testing.assert_allclose(sh.trace_.draws[name], one.trace_.draws[name], rtol=1e-12, atol=1e-12,
                                       err_msg=name)
    np.testing.assert_array_equal(sh.trace_.stats["fallbacks"], one.trace_.stats["fallbacks"])
    np.testing.assert_allclose(sh.trace_.stats["loglik"], one.trace_.stats["loglik"], rtol=1e-12)
    assert list(sh.groups_) == list(one.groups_)
    assert sh.to_arviz().posterior["beta"].shape == (2, 20, 7, 3)


def test_hierarchical_groups_as_cluster_ranks():
    """Two processes of a cluster (threads with a barrier all-reduce), each holding its groups: both end
    with every group's draws, equal to one device's."""
    X, y, groups = _groups_data(seed=10, G=5)
    kw = dict(n_chains=2, n_samples=10, n_warmup=10, random_state=1, progress=False)
    one = mg.HierarchicalGLM(backend="numpy", **kw).fit(X, y, groups)
    fits = fit_as_ranks(lambda sh: mg.HierarchicalGLM(devices=sh, **kw).fit(X, y, groups))
    for f in fits:
        for name in one.trace_.draws:
            np.testing.assert_allclose(f.trace_.draws[name], one.trace_.draws[name], rtol=1e-12, atol=1e-12)


def test_hierarchical_devices_bad_input():
    X, y, groups = _groups_data(G=3)
    with pytest.raises(ValueError, match="3 groups cannot be split over 4 shards"):
        mg.HierarchicalGLM(devices=Shards(n_virtual=4), progress=False).fit(X, y, groups)
    with pytest.raises(ValueError, match="graph=True needs devices=None"):
        mg.HierarchicalGLM(devices=Shards(n_virtual=2), graph=True, progress=False).fit(X, y, groups)
    with pytest.raises(ValueError, match="one label per row"):
        mg.HierarchicalGLM(devices=Shards(n_virtual=2), progress=False).fit(X, y, groups[:-1])


@pytest.mark.parametrize("covariance", ["full", "diag"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_hierarchical_groups_on_gpu_shards_equal_one_gpu(cp, covariance, dtype, monkeypatch):
    """Three shards on one GPU (whole groups each, split into chunks of rows as one device splits them;
    64 rows a chunk, so the larger groups span several blocks) against devices=None on the GPU: the same
    sums, decisions and hyperparameter draws, so every draw is equal bit for bit."""
    from gpumcmc.shards import one_device

    X, y, groups = _groups_data(seed=11, G=9)
    kw = dict(n_chains=3, n_samples=20, n_warmup=20, random_state=5, progress=False, covariance=covariance,
              dtype=dtype)
    monkeypatch.setattr(config, "glm_chunk_rows", 64)
    assert mg._chunk_plan(np, np.array([0]), np.array([6001]), 3).chunk_rows == 64
    one = mg.HierarchicalGLM(backend="cupy", graph=False, **kw).fit(cp.asarray(X), cp.asarray(y), groups)
    sh = mg.HierarchicalGLM(devices=one_device(3), **kw).fit(X, y, groups)
    for name in one.trace_.draws:
        np.testing.assert_array_equal(sh.trace_.draws[name], one.trace_.draws[name], err_msg=name)
    np.testing.assert_array_equal(sh.trace_.stats["fallbacks"], one.trace_.stats["fallbacks"])
