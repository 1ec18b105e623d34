"""Independent runs through Dask: the same draws on a LocalCluster of processes as in one process."""

import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

import gpumcmc
from gpumcmc.distributed import concat_arviz, fit_runs, map_runs, run_seeds
from gpumcmc.sampling import Estimator, run


class AR(NamedTuple):
    x: np.ndarray   # (chain,)


def _step(rng, s):
    return AR(0.9 * s.x + rng.normal(size=s.x.shape)), None


def ar_chains(seed, n_iter):
    rng = gpumcmc.random.default_rng(seed, backend="numpy")
    return run(_step, AR(np.zeros(2)), rng, n_iter=n_iter, collect=lambda s, i: {"x": s.x}, progress=False).draws["x"]


class ARChains(Estimator):
    def __init__(self, n_iter=50, random_state=None):
        self.n_iter = n_iter
        self.random_state = random_state

    def fit(self, X=None):
        self.draws_ = ar_chains(self.random_state, self.n_iter)
        return self

    def to_arviz(self):
        return gpumcmc.sampling.to_arviz({"x": self.draws_})


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       silence_logs=40)
    c = distributed.Client(cluster)
    # The workers import this test module by name, as the pickled functions refer to it.
    c.run(sys.path.insert, 0, str(Path(__file__).resolve().parent))
    yield c
    c.close()
    cluster.close()


def test_runs_on_a_cluster_equal_runs_here(client):
    here = map_runs(ar_chains, 4, random_state=7, args=(30,))
    there = map_runs(ar_chains, 4, random_state=7, args=(30,), client=client)
    for a, b in zip(here, there):
        np.testing.assert_array_equal(a, b)
    # distinct seeds give distinct runs
    assert not np.array_equal(here[0], here[1])


def test_fit_runs_and_concat(client):
    pytest.importorskip("arviz")
    here = fit_runs(ARChains(n_iter=20), n_runs=3, random_state=1)
    there = fit_runs(ARChains(n_iter=20), n_runs=3, random_state=1, client=client)
    for a, b in zip(here, there):
        np.testing.assert_array_equal(a.draws_, b.draws_)
    idata = concat_arviz(there)
    # every run's chains, in the order of the runs
    np.testing.assert_array_equal(idata.posterior["x"].values, np.concatenate([r.draws_ for r in here]))
    assert not np.array_equal(here[0].draws_, here[1].draws_)


def nested_run(seed, nlive):
    from gpumcmc.nested import NestedSampler, correlated_gaussian

    ll, pt, _ = correlated_gaussian(2, rho=0.5)
    return NestedSampler(ll, pt, 2, nlive=nlive, random_state=seed, progress=False, backend="numpy").run().results


@pytest.mark.slow
def test_nested_runs_on_a_cluster_combine_as_runs_here(client):
    """Nested-sampling runs as Dask tasks, merged by the combined-runs estimator: the same evidence and
    points as the same runs made here."""
    from gpumcmc.nested import combine_runs, correlated_gaussian

    here = combine_runs(map_runs(nested_run, 3, random_state=2, args=(40,)))
    there = combine_runs(map_runs(nested_run, 3, random_state=2, args=(40,), client=client))
    np.testing.assert_array_equal(here.logl, there.logl)
    np.testing.assert_array_equal(here.nlive, there.nlive)
    assert here.logz == there.logz and here.n_runs == 3 and here.nlive.max() == 120
    # The analytic evidence within 4 logzerr: a false failure with probability 6e-5 (< ALPHA) where logzerr
    # is the combined estimate's standard deviation; the seed was fixed before looking.
    assert abs(here.logz - correlated_gaussian(2)[2]) < 4 * here.logzerr


def test_bad_arguments():
    # Each message names the argument: a generator given as random_state raises a TypeError from NumPy's
    # SeedSequence too, so the type alone would not show that run_seeds checked it.
    with pytest.raises(ValueError, match="n_runs must be a positive integer"):
        run_seeds(0)
    with pytest.raises(TypeError, match="random_state must be an int.*cannot be split between processes"):
        run_seeds(2, random_state=np.random.default_rng(0))
    with pytest.raises(TypeError, match="client must be a dask.distributed.Client"):
        map_runs(ar_chains, 2, client=object())
    with pytest.raises(TypeError, match="estimator must be a gpumcmc estimator"):
        fit_runs(object())


def _gpu_normal_means(seed, n):
    import gpumcmc as g

    x = g.random.default_rng(seed, backend="cupy").normal(size=(4, n))
    return g.to_host(x.mean(axis=1))


@pytest.mark.gpu
def test_gpu_runs_on_a_dask_cuda_cluster_equal_runs_here(cp):
    """On a GPU host, dask-cuda's LocalCUDACluster gives one worker per GPU; the draws equal one process's."""
    dask_cuda = pytest.importorskip("dask_cuda")
    distributed = pytest.importorskip("distributed")
    here = map_runs(_gpu_normal_means, 3, random_state=5, args=(10_000,))
    with dask_cuda.LocalCUDACluster(dashboard_address=None, silence_logs=40) as cluster, \
            distributed.Client(cluster) as c:
        c.run(sys.path.insert, 0, str(Path(__file__).resolve().parent))
        assert len(c.scheduler_info()["workers"]) == cp.cuda.runtime.getDeviceCount()
        there = map_runs(_gpu_normal_means, 3, random_state=5, args=(10_000,), client=c)
    for a, b in zip(here, there):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(here[0], here[1])


def test_concat_arviz_refuses_chains_of_different_lengths():
    """Runs of different lengths (nested runs resample to their own effective size) were stacked with NaN
    padding by ArviZ; they are refused, naming combine_runs."""
    pytest.importorskip("arviz")
    from gpumcmc.sampling import to_arviz

    a, b = to_arviz({"x": np.zeros((2, 10))}), to_arviz({"x": np.ones((1, 12))})
    with pytest.raises(ValueError, match="combine_runs"):
        concat_arviz([a, b])
    assert concat_arviz([a, to_arviz({"x": np.ones((1, 10))})].copy()).posterior["x"].shape == (3, 10)


def test_fit_runs_passes_the_data_as_arguments_of_their_own_so_that_large_ones_are_scattered(monkeypatch):
    import scipy.sparse as sp

    from gpumcmc import distributed
    from gpumcmc.models import BayesianGLM

    seen = {}

    def fake_map_runs(fn, n_runs, *, random_state=None, args=(), kwargs=None, client=None, pure=False):
        seen["args"] = args
        return [fn(s, *args) for s in distributed.run_seeds(n_runs, random_state)]

    monkeypatch.setattr(distributed, "map_runs", fake_map_runs)
    X = np.random.default_rng(0).normal(size=(200_000, 1))        # 1.6 MB: scattered once by map_runs
    y = (X[:, 0] > 0) * 1.0
    est = BayesianGLM(n_samples=2, n_warmup=2, n_chains=1, progress=False, backend="numpy")
    fits = distributed.fit_runs(est, X, y, n_runs=2, random_state=0)
    assert any(a is X for a in seen["args"]) and distributed._is_large(X)
    assert len(fits) == 2 and fits[0].coef_draws_.shape == (1, 2, 2)   # intercept and one coefficient
    assert distributed._is_large(sp.random(3000, 3000, density=0.02, format="csr"))


def test_large_pandas_and_coo_data_count_as_large():
    pd = pytest.importorskip("pandas")
    import scipy.sparse as sp

    from gpumcmc.distributed import _is_large

    assert _is_large(pd.DataFrame(np.zeros((200_000, 2))))
    assert _is_large(sp.random(3000, 3000, density=0.02, format="coo"))
    assert not _is_large(pd.DataFrame(np.zeros((10, 2))))
