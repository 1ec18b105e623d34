"""BayesianNetwork.fit(devices=...): the cases split over devices, the CPT counts all-reduced.

Every missing cell draws from the counter of its place in the whole batch's list of cells, and the
CPT draws use one key everywhere, so for a seed the sharded draws equal one device's exactly (the
counts are integers: their sums do not depend on the order).
"""

import numpy as np
import pytest

from gpumcmc.models import bayesnet as bn
from gpumcmc.models.bayesnet import BayesianNetwork
from gpumcmc.shards import Shards

from conftest import fit_as_ranks


def _data(n=600, frac=0.4, seed=0):
    X = BayesianNetwork.koller().sample(n, seed)
    X[np.random.default_rng(seed + 1).random(X.shape) < frac] = -1
    return X


def _fresh():
    net = BayesianNetwork.koller()
    net.cpts_ = None
    return net


def _same(a, b):
    np.testing.assert_array_equal(a.imputations_, b.imputations_)
    for v in a.nodes:
        np.testing.assert_array_equal(a.trace_[v], b.trace_[v], err_msg=v)
        np.testing.assert_array_equal(a.cpts_[v], b.cpts_[v], err_msg=v)


KW = dict(n_iter=5, same=3, random_state=4, progress=False)


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("batch_size", [None, 250, 50])
def test_sharded_fit_gives_the_draws_of_one_device(parts, batch_size):
    # batch_size=50: a batch has two blocks of the cell order (32 cases each), so with three devices
    # one of them has no part of it, and the sums still add up.
    X = _data()
    one = _fresh().set_params(backend="numpy", batch_size=batch_size, **KW).fit(X)
    sharded = _fresh().set_params(devices=Shards(n_virtual=parts), batch_size=batch_size, **KW).fit(X)
    _same(one, sharded)
    assert sharded.n_shards_ == parts and sharded.imputation_rows_ is None


def test_parts_hold_cells_of_every_colour_and_shift_their_counters():
    # The split is not trivial (every device sweeps cells of every colour), and a part's cells are
    # numbered from where its colour's range starts in the whole batch; those ranges tile the batch.
    X = _data()
    plan = bn._Plan(BayesianNetwork.koller())
    block = bn._block_rows(len(X))
    cuts = bn._block_cuts(0, len(X), block)
    whole = plan.batch(X, 0, len(X))
    got = []
    for a, b in Shards(n_virtual=3).bounds(len(cuts) - 1):
        part = plan.batch(X, cuts[a], cuts[b], within=(0, len(X)), block=block)
        assert part.Mtot == whole.M and (np.diff(part.gptr) > 0).all()
        got.append(part)
    for c in range(len(plan.groups)):
        starts = [int(p.g0[c]) for p in got]
        lens = [int(p.gptr[c + 1] - p.gptr[c]) for p in got]
        assert starts[0] == whole.gptr[c] and starts[1:] == list(np.cumsum(lens)[:-1] + starts[0])
        assert sum(lens) == whole.gptr[c + 1] - whole.gptr[c]
    assert got[1].g0[0] > 0


def test_part_uniforms_are_the_whole_batch_fill():
    from gpumcmc.random import default_rng

    X = _data(n=300)
    plan = bn._Plan(BayesianNetwork.koller())
    block = bn._block_rows(len(X))
    part = plan.batch(X, 96, 224, within=(0, len(X)), block=block)
    whole = plan.batch(X, 0, len(X), block=block)
    rng = default_rng(9, backend="numpy")
    u = rng.random((3, whole.M))
    # where the part's cells sit among the whole batch's cells (same case, same node)
    key = {(int(c), int(v)): j for j, (c, v) in enumerate(zip(whole.case, whole.node))}
    cols = [key[(int(c) + 96, int(v))] for c, v in zip(part.case, part.node)]
    np.testing.assert_array_equal(bn._uniforms(np, rng.key, 0, 3, part), u[:, cols])


def test_fixed_cpts_impute_as_one_device():
    X = _data(n=400, frac=0.5)
    net = BayesianNetwork.koller()
    net.set_params(n_iter=3, same=2, random_state=1, progress=False, learn=False)
    a = net.set_params(backend="numpy").fit(X).imputations_
    b = net.set_params(backend=None, devices=Shards(n_virtual=3)).fit(X).imputations_
    np.testing.assert_array_equal(a, b)


def test_each_process_of_a_cluster_ends_with_the_draws_of_one_device():
    # The layout of a Dask cluster (one shard per process, rank r of 2), with the processes played by
    # two threads whose all-reduce meets at a barrier: each rank sweeps its own cases, draws the CPTs
    # itself, and both end with one device's CPT draws and their own rows of its imputations.
    X = _data()
    kw = dict(KW, batch_size=250)
    one = _fresh().set_params(backend="numpy", **kw).fit(X)
    fits = fit_as_ranks(lambda sh: _fresh().set_params(devices=sh, **kw).fit(X))
    for f in fits:
        for v in one.nodes:
            np.testing.assert_array_equal(f.trace_[v], one.trace_[v], err_msg=v)
        np.testing.assert_array_equal(f.imputations_, one.imputations_[:, f.imputation_rows_])
    rows = np.concatenate([f.imputation_rows_ for f in fits])
    np.testing.assert_array_equal(np.sort(rows), np.arange(len(X)))
    assert 0 < len(fits[0].imputation_rows_) < len(X)


@pytest.mark.parametrize("devices, err, match", [
    ("some", ValueError, "'all'"), (True, TypeError, "GPU id"), ([], ValueError, "empty"),
    ([0, 0], ValueError, "twice"), (-1, ValueError, ">= 0"), (1.5, TypeError, "GPU id"),
    (["0"], TypeError, "GPU id"),
])
def test_bad_devices_raise(devices, err, match):
    with pytest.raises(err, match=match):
        _fresh().set_params(n_iter=1, progress=False, devices=devices).fit(_data(n=50))


def test_devices_and_backend_must_agree():
    X = _data(n=50)
    with pytest.raises(ValueError, match="n_virtual"):
        _fresh().set_params(n_iter=1, progress=False, backend="numpy", devices=[0]).fit(X)
    with pytest.raises(ValueError, match="leave backend unset"):
        _fresh().set_params(n_iter=1, progress=False, backend="cupy", devices=Shards(n_virtual=2)).fit(X)


def test_allreduce_bytes():
    # Koller: CPT cells 2 + 2 + 4 + 12 + 6 = 26, int32 counts, once per batch visit
    net = BayesianNetwork.koller()
    assert bn.allreduce_bytes(net) == 4 * 26
    assert bn.allreduce_bytes(net, n_batches=4) == 4 * 26 * 4


@pytest.mark.parametrize("specialise", [False, True])  # the generic kernels, and the network written in
def test_gpu_sharded_fit_gives_the_draws_of_one_device(cp, specialise, monkeypatch):
    # Two and three parts on one GPU (summed on the device) against one GPU: the same kernels, so the
    # same draws bit for bit; against the NumPy twin, the imputations equal and the CPTs within
    # rounding (the twin's exp may differ from the GPU's in the last bit).
    from gpumcmc._config import config
    from gpumcmc.shards import one_device

    monkeypatch.setattr(config, "bayesnet_specialise", specialise)

    X = _data(n=3000, frac=0.5)
    for batch_size in (None, 1100, 40):  # 40: two blocks a batch, so one of three parts is empty
        kw = dict(KW, batch_size=batch_size)
        one = _fresh().set_params(backend="cupy", **kw).fit(X)
        for parts in (2, 3):
            _same(one, _fresh().set_params(devices=one_device(parts), **kw).fit(X))
        twin = _fresh().set_params(devices=Shards(n_virtual=2), **kw).fit(X)
        np.testing.assert_array_equal(one.imputations_, twin.imputations_)
        for v in one.nodes:
            np.testing.assert_allclose(one.trace_[v], twin.trace_[v], rtol=1e-10)


def test_gpu_part_uniforms_match_the_twin(cp):
    X = _data(n=3000)
    plan = bn._Plan(BayesianNetwork.koller())
    block = bn._block_rows(len(X))
    part = plan.batch(X, 1024, 2048, within=(0, len(X)), block=block)
    np.testing.assert_array_equal(cp.asnumpy(bn._uniforms(cp, (5, 6), 7, 4, part)),
                                  bn._uniforms(np, (5, 6), 7, 4, part))


def test_nccl_sharded_fit_gives_the_draws_of_one_device(cp):
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs")
    X = _data(n=3000, frac=0.5)
    _same(_fresh().set_params(backend="cupy", **KW).fit(X), _fresh().set_params(devices="all", **KW).fit(X))
