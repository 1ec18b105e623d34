"""Data-parallel models on several GPUs, summed over NCCL: each against one device.

The other ``*_devices`` tests run the sharded code on NumPy (``Shards(n_virtual=k)``)
and on one GPU (``one_device(k)``), where the all-reduce is a sum in one GPU's
memory. Here the shards sit on distinct GPUs, so the arrays cross devices, the
global draws reach every GPU, and the sums go through NCCL: in one process
(``Shards([0, 1])``, ``devices="all"``) and in one process per GPU joined through
Dask (:func:`gpumcmc.shards.join_dask`). Every test skips on a machine with
fewer than two GPUs.

Which comparisons are exact. LDA all-reduces integer counts, the Bayesian
network integer counts, and HierarchicalGLM sums each group on one shard only
(the others add zeros), so their draws equal one device's bit for bit on any
number of GPUs. The mixture sums float64 moments, exact here because the test
data lie on a grid of 1/16 (``_dyadic``). BayesianGLM sums float64 candidate
log-likelihoods; NCCL adds two ranks' values as ``one_device(2)`` does (one
addition, which commutes), so two GPUs equal two shards on one GPU bit for bit,
while more GPUs may add in another order: those runs are compared by their
posterior means, as the one-GPU test of two shards is.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import numpy as np
import pytest

from gpumcmc.models import LDA
from gpumcmc.models import glm as mg
from gpumcmc.models.glm import BayesianGLM
from gpumcmc.shards import Shards, one_device

from test_glm_devices import _groups_data
from test_glm_devices import _sweeps as _glm_sweeps
from test_lda_devices import _assert_one_device, _corpus, _force_method
from test_lda_devices import _sweeps as _lda_sweeps
from test_mixture import _draws_equal, _dyadic
from test_mixture import fit as _mixture_fit
from conftest import to_np


@pytest.fixture
def gpus(cp):
    """The number of GPUs (at least 2, else the test skips)."""
    count = cp.cuda.runtime.getDeviceCount()
    if count < 2:
        pytest.skip("needs 2 GPUs")
    try:
        from cupy.cuda import nccl  # noqa: F401
    except Exception as err:
        pytest.skip(f"NCCL is not available to CuPy here: {err}")
    return count


def _layouts(count):
    """Two GPUs, and every GPU where there are more."""
    return [[0, 1]] + (["all"] if count > 2 else [])


# --------------------------------------------------------------------------- the all-reduce itself

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_allreduce_sums_over_every_gpu(cp, gpus, dtype):
    sh = Shards("all")
    assert sh.devices == list(range(gpus)) and sh.world == gpus
    rs = np.random.default_rng(1)
    host = [(rs.integers(-1000, 1000, size=(37, 5))).astype(dtype) for _ in range(gpus)]
    arrays = []
    for i, h in enumerate(host):
        with sh.on(i):
            arrays.append(cp.asarray(h))
    before = cp.cuda.runtime.getDevice()
    out = sh.allreduce(arrays)
    assert cp.cuda.runtime.getDevice() == before     # NCCL's group end leaves the current GPU as it was
    total = np.sum(np.stack(host), axis=0, dtype=dtype)
    for i, a in enumerate(out):
        assert a.device.id == i
        with sh.on(i):
            cp.cuda.get_current_stream().synchronize()
        np.testing.assert_array_equal(cp.asnumpy(a), total)


def test_shards_over_the_same_gpus_share_their_communicators(cp, gpus):
    """A second Shards over the same GPUs reuses the first's NCCL communicators (no set-up or teardown per
    fit); close() leaves them working for the others; free_communicators() destroys them, and the next
    Shards makes new ones that sum correctly."""
    from gpumcmc.shards import free_communicators

    free_communicators()
    a = Shards([0, 1])
    b = Shards([0, 1])
    assert a._comms is b._comms
    a.close()

    def check(sh):
        arrays = []
        for i in range(2):
            with sh.on(i):
                arrays.append(cp.full(7, float(i + 1)))
        sh.allreduce(arrays)
        for i, x in enumerate(arrays):
            with sh.on(i):
                np.testing.assert_array_equal(cp.asnumpy(x), np.full(7, 3.0))
    check(b)
    with pytest.raises(RuntimeError, match="closed"):
        check(a)                      # a closed Shards over GPUs does not hand back unsummed arrays
    assert free_communicators() == 1
    with pytest.raises(RuntimeError, match="free_communicators"):
        check(b)                      # nor passes destroyed handles to NCCL
    c = Shards([0, 1])
    assert c._comms is not b._comms
    check(c)
    assert free_communicators() == 1 and free_communicators() == 0


def test_a_checkpoint_puts_each_field_back_on_its_gpu(cp, gpus):
    """The driver restores a state field by field on the GPU its template's field is on, so a sharded state
    (one field per GPU) resumes where it ran."""
    from typing import NamedTuple

    from gpumcmc.sampling._driver import _rebuild

    class S(NamedTuple):
        a: object
        b: object
    with cp.cuda.Device(0):
        a = cp.arange(3.0)
    with cp.cuda.Device(1):
        b = cp.arange(4.0)
    with cp.cuda.Device(0):
        out = _rebuild(S(a, b), {"a": np.ones(3), "b": np.full(4, 2.0)})
    assert out.a.device.id == 0 and out.b.device.id == 1
    np.testing.assert_array_equal(cp.asnumpy(out.b), np.full(4, 2.0))


def test_scatter_puts_each_part_on_its_gpu(cp, gpus):
    with cp.cuda.Device(1):
        sh = Shards("all")
        assert cp.cuda.runtime.getDevice() == 1      # NCCL's set-up leaves the current GPU as it was
    with pytest.raises(ValueError, match="under `with shards.on"):
        sh.allreduce([cp.zeros(3) for _ in range(gpus)])     # all on GPU 0
    with cp.cuda.Device(1):
        gone = Shards("all")
        del gone
        gc.collect()                                          # NCCL's teardown, too, leaves it as it was
        assert cp.cuda.runtime.getDevice() == 1
    x = cp.arange(10 * gpus + 3, dtype=cp.float64)
    parts = sh.scatter(x)
    assert [p.device.id for p in parts] == list(range(gpus))
    np.testing.assert_array_equal(np.concatenate([cp.asnumpy(p) for p in parts]), cp.asnumpy(x))


_SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"""


def test_replica_copies_do_not_wait_for_later_work_on_shard_zero(cp, gpus):
    """A Replica waits for the work queued on GPU 0 before it was made, not after: else the other GPUs
    would wait for shard 0's share of a sweep, and the GPUs would run in turn (as they once did)."""
    from gpumcmc.shards import Replica

    sh = Shards([0, 1])
    with sh.on(0):
        x = cp.arange(5.0)
        rep = Replica(sh, x)
        spin = cp.RawKernel(_SPIN, "spin")
        spin((1,), (1,), (cp.int64(2 * 10**9),))        # about a second of GPU 0's time, queued after
        busy = cp.cuda.Event()
        busy.record()
    with sh.on(1):
        y = rep(1)
        assert y.device.id == 1
        cp.cuda.get_current_stream().synchronize()
        np.testing.assert_array_equal(cp.asnumpy(y), np.arange(5.0))
    assert not busy.done        # GPU 1's copy was done while GPU 0 still ran the later kernel
    busy.synchronize()


def test_allreduce_async_runs_beside_later_work(cp, gpus):
    """allreduce_async sums on a side stream of each GPU: work queued after it on the GPUs' streams (here
    a second of spinning) does not hold the sums back, and wait() orders later work after them."""
    sh = Shards([0, 1])
    host = [np.arange(6.0) * (i + 1) for i in range(2)]
    arrays = []
    for i, h in enumerate(host):
        with sh.on(i):
            arrays.append(cp.asarray(h))
    before = cp.cuda.runtime.getDevice()
    wait = sh.allreduce_async(arrays)
    assert cp.cuda.runtime.getDevice() == before
    spin = cp.RawKernel(_SPIN, "spin")
    busy = []
    for i in range(2):
        with sh.on(i):
            spin((1,), (1,), (cp.int64(2 * 10**9),))
            busy.append(cp.cuda.get_current_stream().record())
    for i in range(2):
        with sh.on(i):
            side = sh._sides[i]
            side.synchronize()
            np.testing.assert_array_equal(arrays[i].get(stream=side), host[0] + host[1])
    assert not any(e.done for e in busy)      # the sums were done while both GPUs still spun
    wait()
    doubled = []
    for i in range(2):
        with sh.on(i):
            doubled.append(arrays[i] * 2)     # queued after wait(): reads the sums
    for i in range(2):
        with sh.on(i):
            np.testing.assert_array_equal(cp.asnumpy(doubled[i]), 2 * (host[0] + host[1]))


# --------------------------------------------------------------------------- LDA

@pytest.mark.parametrize("fused, K, method", [
    (True, 40, None), (False, 8, None), (False, 40, "butterfly"), (False, 130, "warp"),
])
def test_lda_shards_on_gpus_are_one_device(cp, gpus, monkeypatch, fused, K, method):
    """Documents on 2 (and all) GPUs: one device's theta, phi and generator, bit for bit."""
    if method:
        _force_method(monkeypatch, method)
    X, _ = _corpus(M=51, V=50, K=4, length=30, seed=4)
    kw = dict(fused=fused, sparse=fused)
    a, ra = _lda_sweeps("cupy", None, X, K, 2, 3, **kw)
    for devices in _layouts(gpus):
        sh = Shards(devices)
        b, rb = _lda_sweeps("cupy", sh, X, K, 2, 3, **kw)
        assert [t.device.id for t in b.theta] == sh.devices
        _assert_one_device(a, ra, b, rb, cp.asnumpy)


def test_lda_estimator_on_every_gpu_is_one_device(cp, gpus):
    X, _ = _corpus(M=120, V=80, K=4, length=40, seed=6)
    kw = dict(n_iter=4, burn_in=2, monitor_every=2, random_state=4, progress=False, n_chains=2)
    a = LDA(16, backend="cupy", **kw).fit(X)
    b = LDA(16, devices="all", **kw).fit(X)
    assert b.n_shards_ == gpus
    np.testing.assert_array_equal(cp.asnumpy(a.components_), cp.asnumpy(b.components_))
    np.testing.assert_array_equal(cp.asnumpy(a.doc_topic_), cp.asnumpy(b.doc_topic_))
    np.testing.assert_allclose(to_np(a.loglik_traces_), to_np(b.loglik_traces_), rtol=1e-6)


def test_variates_of_arrays_on_another_gpu_equal_those_of_copies(cp, gpus):
    """Gamma, Beta and Wishart parameters that lie on GPU 1, drawn under GPU 0: the draws of copies on GPU 0
    (the fast paths pass an array as it is only where it lies on the current GPU)."""
    from gpumcmc.random import default_rng

    with cp.cuda.Device(1):
        a1 = cp.linspace(0.5, 3.0, 1000)
        b1 = cp.linspace(1.0, 2.0, 1000)
        psi1 = cp.broadcast_to(cp.eye(3) * 2.0, (4, 3, 3)).copy()
    with cp.cuda.Device(0):
        a0, b0, psi0 = cp.asarray(a1), cp.asarray(b1), cp.asarray(psi1)
        for draw in (lambda r, a, b, psi: r.gamma(a, b), lambda r, a, b, psi: r.beta(a, b),
                     lambda r, a, b, psi: r.invwishart(5.0, psi)):
            got = draw(default_rng(3, backend="cupy"), a1, b1, psi1)
            want = draw(default_rng(3, backend="cupy"), a0, b0, psi0)
            assert got.device.id == 0
            np.testing.assert_array_equal(to_np(got), to_np(want))


# --------------------------------------------------------------------------- mixture

def test_mixture_gibbs_on_two_gpus_is_one_device(cp, gpus):
    X = _dyadic(n=1024, p=3)
    kw = dict(n_components=8, n_iter=15, burn_in=5, relabel=False, backend="cupy")
    one = _mixture_fit(X, **kw)
    kw["backend"] = None
    _draws_equal(one, _mixture_fit(X, devices=[0, 1], **kw))


def test_mixture_update_made_once_reaches_every_gpu(cp, gpus):
    """The mixture's global draws, made once on GPU 0 (DataParallel's ``shared``), reach every GPU: each
    shard's fields lie on its own GPU and equal, bit for bit, those of the update made on every GPU."""
    from gpumcmc.models.mixture import algorithm as mxa
    from gpumcmc.models.mixture import sharded as mxs
    from gpumcmc.random import default_rng
    from gpumcmc.sampling import sharded
    from gpumcmc.shards import Shards

    X = _dyadic(n=4096, p=3)
    shards = Shards(list(range(gpus)))
    models = mxs.make_sharded_models(X, 8, shards, dtype=np.float32, chains=2)
    got = []
    for alg in (mxs.gibbs(), mxs.gibbs()._replace(shared=())):
        a = sharded(alg, shards)
        rng = default_rng(3, backend="cupy")
        state = a.init(rng, mxs.gibbs_parts(models, shards, X.shape[0]), 2)
        for _ in range(4):
            state, _ = a.step(rng, state)
        got.append(state)
    for i, (s_once, s_every) in enumerate(zip(*got)):
        for f in mxa.State._fields:
            assert getattr(s_once, f).device.id == shards.devices[i], f
            np.testing.assert_array_equal(to_np(getattr(s_once, f)), to_np(getattr(s_every, f)), err_msg=f)
            if f != "z":
                np.testing.assert_array_equal(to_np(getattr(s_once, f)), to_np(getattr(got[0][0], f)), err_msg=f)


def test_mixture_bem_on_every_gpu_matches_one_device(cp, gpus):
    from test_mixture import planted

    X, _, _ = planted()
    kw = dict(n_components=5, method="bem", n_init=3, n_iter=30, tol=0.0)
    one = _mixture_fit(X, backend="cupy", **kw)
    sh = _mixture_fit(X, devices="all", backend=None, **kw)
    assert sh.n_iter_ == one.n_iter_ == 30
    np.testing.assert_allclose(sh.bem_logliks_, one.bem_logliks_, rtol=1e-5)
    np.testing.assert_allclose(sh.means_, one.means_, rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------- GLM

@pytest.mark.parametrize("family", ["bernoulli", "poisson", "gaussian"])
def test_glm_sweeps_on_two_gpus_equal_two_shards_on_one(cp, gpus, family, monkeypatch):
    """Rows on GPUs 0 and 1 against the same two shards on GPU 0: the same draws, eta and widths bit
    for bit (512 rows a chunk, so each shard spans several blocks)."""
    from test_glm_devices import _data

    monkeypatch.setattr(mg, "_CHUNK_ROWS", 512)
    X, y = _data(family, N=4001, K=4, seed=5)
    ref = _glm_sweeps(cp, X, y, family, one_device(2), 3)
    got = _glm_sweeps(cp, X, y, family, Shards([0, 1]), 3)
    for a, b in zip(ref, got):
        np.testing.assert_array_equal(a, b)


def test_glm_fit_on_every_gpu_agrees_with_one_gpu(cp, gpus):
    """BayesianGLM(devices="all") against devices=None, float32, 100 draws: the posterior means agree
    within 0.5 posterior sd (as test_gpu_two_shards_fit_agrees_with_one_gpu, which says why)."""
    from test_glm_devices import _data

    X, y = _data("bernoulli", N=5000, K=3, seed=8)
    kw = dict(n_chains=4, n_samples=100, n_warmup=50, random_state=2, progress=False, dtype="float32")
    one = BayesianGLM(backend="cupy", **kw).fit(cp.asarray(X), cp.asarray(y))
    sh = BayesianGLM(devices="all", **kw).fit(X, y)
    sd = one.coef_draws_.std(axis=(0, 1))
    assert np.isfinite(sh.coef_draws_).all()
    assert np.all(np.abs(one.coef_draws_.mean(axis=(0, 1)) - sh.coef_draws_.mean(axis=(0, 1))) < 0.5 * sd)


@pytest.mark.parametrize("covariance", ["full", "diag"])
def test_hierarchical_glm_on_gpus_equals_one_gpu(cp, gpus, covariance, monkeypatch):
    """Whole groups on each GPU: every draw equals devices=None's bit for bit, on 2 and on all GPUs."""
    X, y, groups = _groups_data(seed=11, G=9)
    kw = dict(n_chains=3, n_samples=20, n_warmup=20, random_state=5, progress=False, covariance=covariance,
              dtype="float64")
    monkeypatch.setattr(mg, "_CHUNK_ROWS", 64)
    one = mg.HierarchicalGLM(backend="cupy", graph=False, **kw).fit(cp.asarray(X), cp.asarray(y), groups)
    for devices in _layouts(gpus):
        sh = mg.HierarchicalGLM(devices=devices, **kw).fit(X, y, groups)
        for name in one.trace_.draws:
            np.testing.assert_array_equal(sh.trace_.draws[name], one.trace_.draws[name], err_msg=name)


# --------------------------------------------------------------------------- Bayesian network

def test_bayesnet_on_two_gpus_is_one_device(cp, gpus):
    from test_bayesnet_devices import KW, _data, _fresh, _same

    X = _data(n=3000, frac=0.5)
    _same(_fresh().fit(X, backend="cupy", **KW), _fresh().fit(X, devices=[0, 1], **KW))


# --------------------------------------------------------------------------- one process per GPU, through Dask

@pytest.fixture(scope="module")
def _cluster():
    """One dask-cuda cluster for this module's tests: one worker process per GPU."""
    from gpumcmc import backend

    if not backend.cupy_available() or backend.get_backend("cupy").cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs")
    dask_cuda = pytest.importorskip("dask_cuda")
    distributed = pytest.importorskip("distributed")
    with dask_cuda.LocalCUDACluster(dashboard_address=None, silence_logs=40) as cluster, \
            distributed.Client(cluster) as client:
        client.run(sys.path.insert, 0, str(Path(__file__).resolve().parent))
        yield client


@pytest.fixture
def cuda_cluster(cp, gpus, _cluster):
    return _cluster


def test_join_dask_sums_over_one_process_per_gpu(cuda_cluster, gpus):
    """The multi-machine path on one host: NCCL's id passed through the scheduler, one rank a worker."""
    from gpumcmc.shards import join_dask

    client = cuda_cluster
    ranks = join_dask(client, "sum")
    assert sorted(ranks.values()) == list(range(gpus))

    def task(n):
        import cupy

        from gpumcmc.shards import worker_shards
        sh = worker_shards("sum")
        part = sh.scatter(cupy.arange(n, dtype=cupy.float64))[0]
        total = sh.allreduce([part.sum(keepdims=True)])[0]
        return sh.ranks[0], sh.world, int(part.size), float(total.get()[0])

    futures = [client.submit(task, 1001, workers=[w], pure=False) for w in ranks]
    got = sorted(f.result() for f in futures)
    assert [g[0] for g in got] == list(range(gpus)) and all(g[1] == gpus for g in got)
    assert sum(g[2] for g in got) == 1001
    assert all(g[3] == 1001 * 1000 / 2 for g in got)


def test_mixture_across_dask_workers_gives_every_rank_one_devices_draws(cuda_cluster, gpus):
    """Each worker fits the mixture on its rows with worker_shards(); every rank makes the draws of one
    device, and the ranks' indicators together are one device's."""
    from gpumcmc.shards import join_dask

    client = cuda_cluster
    ranks = join_dask(client, "mixture")
    X = _dyadic(n=1024, p=3)
    kw = dict(n_components=8, n_iter=12, burn_in=4, relabel=False)
    one = _mixture_fit(X, backend="cupy", **kw)

    def task(X, kw):
        from gpumcmc.backend import to_host
        from gpumcmc.models import DPGaussianMixture
        from gpumcmc.shards import worker_shards

        sh = worker_shards("mixture")
        m = DPGaussianMixture(progress=False, random_state=0, devices=sh, **kw).fit(X)
        return sh.ranks[0], {k: to_host(v) for k, v in m.trace_.draws.items()}, to_host(m.z_)

    futures = [client.submit(task, X, kw, workers=[w], pure=False) for w in ranks]
    got = sorted((f.result() for f in futures), key=lambda g: g[0])
    for _, draws, _ in got:
        for key in ("weights", "means", "covariances", "alpha"):
            np.testing.assert_array_equal(draws[key], one.trace_.draws[key], err_msg=key)
    np.testing.assert_array_equal(np.concatenate([g[2] for g in got]), one.z_)
