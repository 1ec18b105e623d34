"""Data-parallel shards: splitting, summing over shards, and NCCL on a GPU."""

import numpy as np
import pytest

from gpumcmc.shards import Shards, bounds, join_dask, worker_shards


@pytest.mark.parametrize("n,parts", [(0, 1), (1, 3), (10, 3), (1000, 7), (7, 7)])
def test_bounds_cover_every_row_once(n, parts):
    b = bounds(n, parts)
    assert len(b) == parts
    assert b[0][0] == 0 and b[-1][1] == n
    assert all(b[i][1] == b[i + 1][0] for i in range(parts - 1))
    sizes = [hi - lo for lo, hi in b]
    assert max(sizes) - min(sizes) <= 1


def test_scatter_and_allreduce_on_virtual_shards():
    x = np.arange(30.0).reshape(10, 3)
    sh = Shards(n_virtual=3)
    parts = sh.scatter(x)
    assert [p.shape for p in parts] == [(4, 3), (3, 3), (3, 3)]
    np.testing.assert_array_equal(np.concatenate(parts), x)
    cols = sh.scatter(x, axis=1)
    assert [p.shape for p in cols] == [(10, 1)] * 3
    np.testing.assert_array_equal(np.concatenate(cols, axis=1), x)
    sums = sh.allreduce([p.sum(axis=0) for p in parts])
    for s in sums:
        np.testing.assert_array_equal(s, x.sum(axis=0))


def test_allreduce_async_on_virtual_shards_sums_at_once():
    sh = Shards(n_virtual=3)
    parts = [np.arange(4.0) * (i + 1) for i in range(3)]
    wait = sh.allreduce_async(parts)
    for p in parts:
        np.testing.assert_array_equal(p, np.arange(4.0) * 6)
    assert wait() is None


def test_counts_summed_over_shards_equal_the_global_counts():
    # The pattern of every data-parallel sampler here: local sufficient
    # statistics, summed over shards, equal the statistics of the whole data.
    z = np.random.default_rng(0).integers(0, 17, size=10_001)
    whole = np.bincount(z, minlength=17)
    for n in (1, 2, 5):
        sh = Shards(n_virtual=n)
        local = [np.bincount(p, minlength=17) for p in sh.scatter(z)]
        np.testing.assert_array_equal(sh.allreduce(local)[0], whole)
        assert sh.ranks == list(range(n))


def test_bad_input_says_what_to_do():
    with pytest.raises(ValueError, match="n_virtual"):
        Shards(n_virtual=0)
    with pytest.raises(ValueError, match="not both"):
        Shards(devices=[0], n_virtual=2)
    sh = Shards(n_virtual=2)
    with pytest.raises(ValueError, match="one array per local shard"):
        sh.allreduce([np.zeros(3)])
    with pytest.raises(ValueError, match="equal shapes"):
        sh.allreduce([np.zeros(3), np.zeros(4)])
    with pytest.raises(ValueError, match="one stream per local shard"):
        sh.allreduce([np.zeros(3), np.zeros(3)], streams=[None])
    with pytest.raises(ValueError, match="equal shapes"):
        sh.allreduce([np.zeros(3), np.zeros(3, np.float32)])
    with pytest.raises(TypeError, match="dask"):
        join_dask(object())
    with pytest.raises(RuntimeError, match="join_dask"):
        worker_shards("nothing-here")


@pytest.mark.gpu
def test_shards_on_one_gpu_sum_on_the_stream_given(cp):
    from gpumcmc.shards import one_device

    sh = one_device(2)
    side = cp.cuda.Stream(non_blocking=True)
    a, b = cp.arange(4.0), cp.ones(4)
    cp.cuda.get_current_stream().synchronize()
    sh.allreduce([a, b], streams=[side, side])
    side.synchronize()
    np.testing.assert_array_equal(a.get(stream=side), np.arange(4.0) + 1)
    np.testing.assert_array_equal(b.get(stream=side), np.arange(4.0) + 1)
    wait = sh.allreduce_async([a, b])             # one GPU: summed at once
    wait()
    np.testing.assert_array_equal(cp.asnumpy(a), 2 * (np.arange(4.0) + 1))


@pytest.mark.gpu
def test_gpu_shards_scatter_and_sum(cp):
    x = cp.arange(12, dtype=cp.float32).reshape(6, 2)
    sh = Shards("all")
    assert len(sh) == cp.cuda.runtime.getDeviceCount()
    parts = sh.scatter(x)
    assert sum(p.shape[0] for p in parts) == 6
    before = cp.cuda.runtime.getDevice()
    local = []
    for i, p in enumerate(parts):
        with sh.on(i):
            local.append(p.sum(axis=0))
    assert cp.cuda.runtime.getDevice() == before
    sums = sh.allreduce(local)
    for i, s in enumerate(sums):
        with sh.on(i):
            np.testing.assert_array_equal(cp.asnumpy(s), [30.0, 36.0])
    with pytest.raises(ValueError, match="twice"):
        Shards([0, 0])
    with pytest.raises(ValueError, match="no GPU with id"):
        Shards([cp.cuda.runtime.getDeviceCount()])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_nccl_allreduce_path(cp, dtype):
    """The NCCL call itself, on a communicator of one rank (any machine with one GPU)."""
    try:
        from cupy.cuda import nccl
        comm = nccl.NcclCommunicator.initAll([0])[0]
    except Exception as err:  # CuPy without NCCL
        pytest.skip(f"NCCL is not available to CuPy here: {err}")
    sh = Shards._from_comm(comm, 0, 0, 1)
    a = cp.arange(1000, dtype=dtype)
    out = sh.allreduce([a])[0]
    cp.cuda.get_current_stream().synchronize()
    np.testing.assert_array_equal(cp.asnumpy(out), np.arange(1000, dtype=dtype))
    with pytest.raises(ValueError, match="C-contiguous"):
        sh.allreduce([a[::2]])
    with pytest.raises(TypeError, match="NCCL cannot sum"):
        sh.allreduce([cp.zeros(3, dtype=cp.complex64)])


@pytest.mark.gpu
def test_join_dask_on_a_cuda_cluster(cp):
    """The multi-machine path: NCCL's unique id passed through the Dask scheduler (one GPU worker here)."""
    dask_cuda = pytest.importorskip("dask_cuda")
    distributed = pytest.importorskip("distributed")
    try:
        from cupy.cuda import nccl
        nccl.get_unique_id()
    except Exception as err:
        pytest.skip(f"NCCL is not available to CuPy here: {err}")

    def task(n):  # runs on the worker, pickled by value
        import cupy

        from gpumcmc.shards import worker_shards
        sh = worker_shards("t")
        part = sh.scatter(cupy.arange(n, dtype=cupy.float64))[0]
        total = sh.allreduce([part.sum(keepdims=True)])[0]
        return sh.ranks, sh.world, float(total.get()[0])

    with dask_cuda.LocalCUDACluster(n_workers=1, CUDA_VISIBLE_DEVICES="0", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        ranks = join_dask(client, "t")
        assert sorted(ranks.values()) == [0]
        got_ranks, world, total = client.submit(task, 1000, pure=False).result()
    assert got_ranks == [0] and world == 1
    assert total == 1000 * 999 / 2


@pytest.mark.parametrize("devices, err, match", [
    ("gpus", ValueError, "'all'"), (True, TypeError, "devices must be"), ([], ValueError, "empty"),
    ([0, 0], ValueError, "twice"), (-1, ValueError, ">= 0"), (1.5, TypeError, "devices must be"),
    ([0, "1"], TypeError, "integer GPU ids"),
])
def test_the_form_of_devices_is_checked_before_any_gpu_is_asked(devices, err, match):
    from gpumcmc.shards import check_devices, resolve

    with pytest.raises(err, match=match):
        check_devices(devices)
    with pytest.raises(err, match=match):
        resolve(devices, None)


def test_resolve_refuses_gpus_on_numpy_and_a_backend_that_disagrees():
    from gpumcmc.shards import resolve

    with pytest.raises(ValueError, match="n_virtual"):
        resolve([0], "numpy", "the rows")
    with pytest.raises(ValueError, match="disagrees"):
        resolve(Shards(n_virtual=2), "cupy")
    sh, name = resolve(Shards(n_virtual=2), None)
    assert name == "numpy" and len(sh) == 2


def test_a_replica_on_numpy_is_the_array_itself():
    from gpumcmc.shards import Replica

    sh = Shards(n_virtual=3)
    x = np.arange(4.0)
    r = Replica(sh, x)
    assert all(r(i) is x for i in range(3))


def test_balanced_cuts_nearest_boundaries_and_one_item_each():
    from gpumcmc.shards import balanced_cuts

    assert balanced_cuts([10, 10, 10, 10], 2) == [0, 2, 4]
    assert balanced_cuts([100, 1, 1, 1], 2) == [0, 1, 4]
    assert balanced_cuts([1, 1, 100], 3) == [0, 1, 2, 3]          # every run holds an item
    assert balanced_cuts([3, 3, 3], 1) == [0, 3]
    rs = np.random.default_rng(2)
    for _ in range(200):
        sizes = rs.integers(1, 40, size=int(rs.integers(4, 30)))
        parts = int(rs.integers(1, 4))
        cuts = balanced_cuts(sizes, parts)
        assert cuts[0] == 0 and cuts[-1] == len(sizes) and all(b > a for a, b in zip(cuts, cuts[1:]))
        ends = np.concatenate([[0], np.cumsum(sizes)])
        for r, c in enumerate(cuts[1:-1], 1):   # within one item of the target
            assert abs(ends[c] - r * ends[-1] / parts) <= sizes.max()


def test_clearing_the_memo_keeps_the_shared_communicators():
    """The NCCL communicators that Shards over the same GPUs share stay registered through
    _loader.clear_cache() / memo.clear(): dropped from the registry, they would be destroyed by the garbage
    collector inside some later call (the half-second teardown the sharing avoids), and
    free_communicators() would no longer find them to destroy."""
    import os

    from gpumcmc import shards as sh
    from gpumcmc._config import memo

    key, comms = (os.getpid(), (-2, -1)), ["a stand-in for a set of communicators"]
    sh._COMMS[key] = comms
    try:
        memo.clear()
        memo.clear(0)
        assert sh._COMMS.get(key) is comms
    finally:
        sh._COMMS.pop(key, None)


def test_shards_copy_and_pickle_so_estimators_given_one_clone():
    """A Shards held a module and could not be copied: clone, GridSearchCV and pickling failed for an
    estimator given devices=Shards(n_virtual=k)."""
    import copy
    import pickle

    from gpumcmc.shards import Shards

    s = pickle.loads(pickle.dumps(Shards(n_virtual=3)))
    assert s.world == 3 and s.xp is np and copy.deepcopy(s).world == 3
    pytest.importorskip("sklearn")
    from sklearn.base import clone

    from gpumcmc.models import LDA

    c = clone(LDA(devices=Shards(n_virtual=2), progress=False, backend="numpy"))
    assert c.devices.world == 2


def test_gpus_named_without_a_gpu_say_to_use_virtual_shards(monkeypatch):
    from gpumcmc import backend
    from gpumcmc.models import BayesianGLM
    from gpumcmc.shards import Shards

    monkeypatch.setattr(backend, "cupy_available", lambda: False)
    X = np.random.default_rng(0).normal(size=(50, 2))
    for devices in ("all", 0, [0, 1]):
        with pytest.raises(ValueError, match=r"n_virtual"):
            BayesianGLM(devices=devices, n_samples=5, n_warmup=5, progress=False).fit(X, (X[:, 0] > 0) * 1.0)
    with pytest.raises(ValueError, match="none is available"):
        Shards([0, 1])


def test_a_pickled_gpu_shards_loads_as_a_placeholder_where_its_gpus_are_not(monkeypatch):
    import pickle

    from gpumcmc import backend
    from gpumcmc.models import BayesianGLM
    from gpumcmc.shards import Shards, _AbsentGPUs, _load_shards

    monkeypatch.setattr(backend, "cupy_available", lambda: False)
    X = np.random.default_rng(0).normal(size=(60, 2))
    y = (X[:, 0] > 0) * 1.0
    m = BayesianGLM(devices=Shards(n_virtual=2), n_samples=5, n_warmup=5, random_state=0, progress=False).fit(X, y)
    m.devices = _load_shards([0, 1])                      # as a Shards([0, 1]) is loaded on this machine
    assert isinstance(m.devices, _AbsentGPUs) and isinstance(_load_shards([0, 0], True), _AbsentGPUs)
    back = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(back.predict(X), m.predict(X))   # the fitted model loads and predicts
    with pytest.raises(ValueError, match="not available here"):
        back.fit(X, y)
