"""The sampler protocol (``gpumcmc.sampling._protocol``): ``sharded`` of a ``DataParallel`` against one shard.

A conjugate normal model (unknown mean and precision, two-block Gibbs) written
once as ``local`` + ``update``: over three virtual shards its draws equal one
shard's bit for bit where the sums are exact, and to rounding elsewhere; the
combinator's contract (generator offsets, in-place sums, deferred statistics,
errors) checked piece by piece; and the DP mixture's Gibbs sweep through
``sharded`` against its one-device ``make_step``.
"""

from __future__ import annotations

import copy
from typing import NamedTuple

import numpy as np
import pytest

from gpumcmc.models.mixture import algorithm as mxa
from gpumcmc.models.mixture import sharded as mxs
from gpumcmc.random import default_rng
from gpumcmc.sampling import Algorithm, Collective, DataParallel, Overlap, run, shard_states, sharded
from gpumcmc.shards import Shards, one_device

from conftest import fit_as_ranks, to_np


# --------------------------------------------------------------------------- a normal model, written once

class State(NamedTuple):
    mu: object   # (chain,) the mean
    tau: object  # (chain,) the precision


class Stats(NamedTuple):
    n: object    # (1,) rows
    s1: object   # (1,) sum of y
    s2: object   # (1,) sum of y^2


def _init(rng, parts, shards, chains=4):
    states = []
    for i in range(len(parts)):
        with shards.on(i):
            xp = shards.xp
            states.append(State(xp.zeros(chains), xp.ones(chains)))
    return states


def _local(rng, state, y):
    return Stats(y.size + 0.0 * y[:1], y.sum(keepdims=True), (y * y).sum(keepdims=True))


def _update(rng, s, st):
    # mu ~ N(0, 100), tau ~ Gamma(2, rate 1): mu | tau, y and then tau | mu, y
    prec = 0.01 + st.n * s.tau
    mu = rng.normal(s.tau * st.s1 / prec, 1 / prec ** 0.5)
    ss = st.s2 - 2 * mu * st.s1 + st.n * mu * mu
    return State(mu, rng.gamma(2 + st.n / 2, 1 / (1 + ss / 2))), None


NORMAL = DataParallel(_init, _local, _update)


def _run(shards, y, n_iter=60, seed=3):
    alg = sharded(NORMAL, shards)
    state = alg.init(default_rng(seed, backend="numpy" if shards.xp is np else "cupy"), shards.scatter(y))
    return run(alg.step, state, seed, n_iter=n_iter, progress=False,
               collect=lambda s, info: {"mu": s[0].mu, "tau": s[0].tau})


def _grid(n=999, seed=0):
    # values on a grid of 1/8 with |y| < 2^6: every sum of up to 2^20 of them, and of their squares, is exact
    return np.round(np.random.default_rng(seed).normal(3.0, 2.0, n) * 8) / 8


def test_three_shards_give_one_shards_draws_where_the_sums_are_exact():
    y = _grid()
    one, three = _run(Shards(n_virtual=1), y), _run(Shards(n_virtual=3), y)
    for name in ("mu", "tau"):
        np.testing.assert_array_equal(three.draws[name], one.draws[name], err_msg=name)
    # and the sampler is the model's: the mean of 4 x 50 draws of mu is the sample mean (the prior's pull is
    # 1e-5 of it) to within 4 posterior standard deviations of mu, more than 50 of the draws' Monte Carlo
    # standard errors: a false failure far below ALPHA. A wrong update (a sum for a mean) is off by far more.
    sd = y.std() / np.sqrt(y.size)
    assert abs(one.draws["mu"][:, 10:].mean() - y.mean()) < 4 * sd


def test_three_shards_match_one_to_rounding_off_the_grid():
    # data whose sum over three parts rounds otherwise than over the whole (NumPy's pairwise sums often
    # agree for gentler data): the draws differ, in their last bits only
    y = np.random.default_rng(1).lognormal(1.0, 1.0, 1000)
    assert y.sum() != sum(part.sum() for part in Shards(n_virtual=3).scatter(y))
    one, three = _run(Shards(n_virtual=1), y), _run(Shards(n_virtual=3), y)
    assert not np.array_equal(three.draws["mu"], one.draws["mu"])
    for name in ("mu", "tau"):
        np.testing.assert_allclose(three.draws[name], one.draws[name], rtol=1e-13, err_msg=name)


def test_every_shard_holds_the_same_global_draws_and_the_generator_moves_as_one_devices():
    y = _grid(300)
    shards = Shards(n_virtual=3)
    alg = sharded(NORMAL, shards)
    state = alg.init(None, shards.scatter(y))
    assert type(state) is shard_states(3) and state._fields == ("shard0", "shard1", "shard2")
    rng, rng1 = default_rng(5, backend="numpy"), default_rng(5, backend="numpy")
    one = sharded(NORMAL, Shards(n_virtual=1))
    s1 = one.init(None, [y])
    for _ in range(3):
        state, _ = alg.step(rng, state)
        s1, _ = one.step(rng1, s1)
    assert rng.offset == rng1.offset == 6    # one normal and one gamma call a sweep, whatever the shards
    np.testing.assert_array_equal(state[0].mu, s1[0].mu)      # the one shard's draws (sums exact on the grid)
    np.testing.assert_array_equal(state[0].tau, s1[0].tau)
    for s in state[1:]:
        np.testing.assert_array_equal(s.mu, state[0].mu)
        np.testing.assert_array_equal(s.tau, state[0].tau)


def _counting(update, calls):
    def counted(rng, s, st):
        calls.append(1)
        return update(rng, s, st)

    return counted


@pytest.mark.parametrize("world", [2, 3])
def test_an_update_of_shared_fields_is_made_once_and_gives_the_same_draws(world):
    """With ``shared`` the update runs once a step (on shard 0), every shard holds its draws, and the draws,
    the generator's moves and the local fields are those of the update made on every shard."""
    y = _grid(300)
    every, once = [], []
    runs = []
    for alg, calls in ((DataParallel(_init, _local, _counting(_update, every)), every),
                       (DataParallel(_init, _local, _counting(_update, once), shared=("mu", "tau")), once)):
        shards = Shards(n_virtual=world)
        a = sharded(alg, shards)
        rng = default_rng(5, backend="numpy")
        state = a.init(rng, shards.scatter(y))
        draws = []
        for _ in range(4):
            state, _ = a.step(rng, state)
            draws.append([(s.mu.copy(), s.tau.copy()) for s in state])
        runs.append((draws, rng.offset))
    assert len(every) == 4 * world and len(once) == 4
    assert runs[0][1] == runs[1][1]
    for step_every, step_once in zip(runs[0][0], runs[1][0]):
        for (mu_e, tau_e), (mu_o, tau_o) in zip(step_every, step_once):
            np.testing.assert_array_equal(mu_o, mu_e)
            np.testing.assert_array_equal(tau_o, tau_e)


def test_shared_fields_reach_other_gpus_packed_by_dtype(monkeypatch):
    """The copy of the shared fields to another GPU, with NumPy standing in for CuPy: each dtype's fields
    go as one contiguous buffer (a strided field too; CuPy copies no strided array between GPUs), come
    back as views of their shapes and values, None stays None, and shard 0's device keeps the arrays."""
    import contextlib
    import types

    import gpumcmc.shards as gs
    from gpumcmc.sampling import _protocol as P

    copies = []

    def peer_copy(xp, x, dev):
        assert x.flags.c_contiguous and x.ndim == 1
        copies.append((dev, x.dtype.str))
        return x.copy()

    class Event:
        def record(self):
            pass

    waits = []
    stream = types.SimpleNamespace(wait_event=lambda e: waits.append(e))
    fake_np = types.SimpleNamespace(concatenate=np.concatenate, ascontiguousarray=np.ascontiguousarray,
                                    cuda=types.SimpleNamespace(Event=lambda disable_timing: Event(),
                                                               get_current_stream=lambda: stream))
    shards = types.SimpleNamespace(xp=fake_np, devices=[0, 0, 1, 2], on=lambda i: contextlib.nullcontext())
    monkeypatch.setattr(gs, "_peer_copy", peer_copy)

    class S(NamedTuple):
        z: object
        a: object
        b: object
        c: object
        d: object

    rs = np.random.default_rng(0)
    s0 = S(np.zeros(3), rs.random((2, 3)), rs.random((4, 5))[:, ::2], rs.random(3).astype(np.float32), None)
    others = [S(np.full(3, i), None, None, None, None) for i in (1, 2, 3)]
    out = P._share(shards, s0, [s0] + others, ("a", "b", "c", "d"))
    assert out[0] is s0 and out[1].a is s0.a and out[1].b is s0.b      # shard 1 shares GPU 0
    assert sorted(copies) == [(1, "<f4"), (1, "<f8"), (2, "<f4"), (2, "<f8")]
    for i, st in enumerate(out[1:], start=1):
        np.testing.assert_array_equal(st.z, others[i - 1].z)            # the local field is the shard's own
        assert st.d is None
        for f in ("a", "b", "c"):
            np.testing.assert_array_equal(getattr(st, f), getattr(s0, f))
            assert getattr(st, f).shape == getattr(s0, f).shape
            assert getattr(st, f).dtype == getattr(s0, f).dtype
    assert out[2].a is not s0.a and out[2].b.flags.c_contiguous
    # each other GPU waits for the packing (one event), and shard 0 for each other GPU's copies (one each),
    # before shard 0's later work may reuse the packed buffers' memory
    assert len(waits) == 2 + 2 and len({id(e) for e in waits}) == 3


def test_shared_names_must_be_fields_of_the_state():
    for bad in ("mu", ("mu", 1), None):
        with pytest.raises(TypeError, match="tuple of the state's field names"):
            sharded(DataParallel(_init, _local, _update, shared=bad), Shards(n_virtual=2))
    shards = Shards(n_virtual=2)
    alg = sharded(DataParallel(_init, _local, _update, shared=("mu", "sigma")), shards)
    with pytest.raises(ValueError, match=r"\['sigma'\].*fields its update writes"):
        alg.init(None, shards.scatter(_grid(10)))


def test_the_mixtures_update_is_made_once_with_every_field_but_z_shared():
    """The mixture's Gibbs and BEM algorithms name every field but the indicators as shared: on 3 virtual
    shards their draws equal those of the update made on every shard, bit for bit."""
    assert mxs.gibbs().shared == mxs.bem().shared == tuple(f for f in mxa.State._fields if f != "z")
    rs = np.random.default_rng(4)
    X = np.round(np.concatenate([rs.normal(-2, 0.5, (96, 2)), rs.normal(2, 0.7, (96, 2))]) * 16) / 16
    shards = Shards(n_virtual=3)
    models = mxs.make_sharded_models(X, 5, shards, dtype=np.float64, chains=2)
    got = []
    for alg in (mxs.gibbs(), mxs.gibbs()._replace(shared=())):
        a = sharded(alg, shards)
        rng = default_rng(7, backend="numpy")
        state = a.init(rng, mxs.gibbs_parts(models, shards, X.shape[0]), 2)
        for _ in range(3):
            state, _ = a.step(rng, state)
        got.append(state)
    for s_once, s_every in zip(*got):
        for f in mxa.State._fields:
            np.testing.assert_array_equal(getattr(s_once, f), getattr(s_every, f), err_msg=f)


def test_statistics_are_summed_per_dtype_without_writing_locals_arrays():
    shards = Shards(n_virtual=3)
    parts = shards.scatter(np.arange(7.0))
    returned, seen = [], []

    def local(rng, state, part):
        counts = np.array([part.size, 1], dtype=np.int64)
        returned.append((counts, part))
        return counts, part.sum(keepdims=True), np.full((2, 2), part[0])   # a plain tuple, two dtypes

    def update(rng, state, stats):
        seen.append(stats)
        return state, None

    alg = sharded(DataParallel(lambda rng, parts, sh: [State(np.zeros(1), np.zeros(1))] * 3, local, update), shards)
    alg.step(default_rng(0), alg.init(None, parts))
    for counts, total, square in seen:
        np.testing.assert_array_equal(counts, [7, 3])
        assert counts.dtype == np.int64
        np.testing.assert_array_equal(total, [21.0])
        np.testing.assert_array_equal(square, np.full((2, 2), 0.0 + 3.0 + 5.0))
    for (counts, part), size in zip(returned, (3, 2, 2)):
        np.testing.assert_array_equal(counts, [size, 1])    # the sums went to copies


def test_a_bare_array_and_a_namedtuple_come_back_as_they_went():
    shards = Shards(n_virtual=2)
    seen = []
    update = lambda rng, s, st: (seen.append(st), (s, None))[1]
    for local, check in [(lambda r, s, p: p.sum(keepdims=True), lambda st: isinstance(st, np.ndarray)),
                         (lambda r, s, p: Stats(p[:1] * 0 + p.size, p.sum(keepdims=True), p.sum(keepdims=True)),
                          lambda st: type(st) is Stats and st.n[0] == 4)]:
        seen.clear()
        alg = sharded(DataParallel(_init, local, update), shards)
        alg.step(default_rng(0), alg.init(None, shards.scatter(np.arange(4.0))))
        assert len(seen) == 2 and all(check(st) for st in seen)


def test_every_shards_local_runs_before_any_deferred_statistics():
    shards = Shards(n_virtual=3)
    order = []

    def local(rng, state, part):
        order.append(("local", int(part[0])))

        def finish():
            order.append(("finish", int(part[0])))
            return part.sum(keepdims=True)

        return finish

    alg = sharded(DataParallel(_init, local, lambda rng, s, st: (s, None)), shards)
    alg.step(default_rng(0), alg.init(None, shards.scatter(np.arange(6.0))))
    assert order == [("local", 0), ("local", 2), ("local", 4), ("finish", 0), ("finish", 2), ("finish", 4)]


class Counted(NamedTuple):
    mu: object       # (chain,) the mean
    tau: object      # (chain,) the precision
    seen: object     # (1,) the rows of this shard, the local field that finish sets


class CountedStats(NamedTuple):
    n: object        # (1,) rows
    s1: object       # (1,) sum of y
    s2: object       # (1,) sum of y^2
    count: object    # (1,) int64 rows, alone of its dtype: summed in place
    nothing: object  # None, not summed


def test_an_overlap_sums_beside_the_rest_of_the_local_work():
    """A local part that returns an Overlap: its statistics are summed while every shard's finish runs (after
    every shard's local), update gets the states finish returned, a None field stays None, an array alone of
    its dtype is summed in place, a keyword option of the step reaches local, and the draws are those of
    the plain normal model."""
    y = _grid(300)
    calls, local_counts = [], []

    def init(rng, parts, shards, chains=4):
        return [Counted(*s, np.zeros(1)) for s in _init(rng, parts, shards, chains)]

    def local(rng, state, part, tag="plain"):
        calls.append(("local", tag))
        st = CountedStats(part.size + 0.0 * part[:1], part.sum(keepdims=True), (part * part).sum(keepdims=True),
                          np.array([part.size], np.int64), None)
        local_counts.append(st.count)

        def finish():
            calls.append(("finish", tag))
            return state._replace(seen=np.array([part.size], float))

        return Overlap(st, finish)

    def update(rng, state, st):
        assert st.nothing is None and st.count[0] == y.size
        mu_tau, info = _update(rng, State(state.mu, state.tau), Stats(st.n, st.s1, st.s2))
        return Counted(*mu_tau, state.seen), info

    shards = Shards(n_virtual=3)
    alg = sharded(DataParallel(init, local, update), shards)
    state = alg.init(None, shards.scatter(y))
    plain = sharded(NORMAL, shards)
    ps = plain.init(None, shards.scatter(y))
    rng, rng1 = default_rng(5, backend="numpy"), default_rng(5, backend="numpy")
    for _ in range(3):
        calls.clear()
        state, _ = alg.step(rng, state, tag="opt")
        ps, _ = plain.step(rng1, ps)
        assert calls == [("local", "opt")] * 3 + [("finish", "opt")] * 3
        assert [int(c[0]) for c in local_counts[-3:]] == [y.size] * 3     # the arrays local made hold the sums
    for s, p, part in zip(state, ps, shards.scatter(y)):
        np.testing.assert_array_equal(s.mu, p.mu)
        np.testing.assert_array_equal(s.tau, p.tau)
        assert s.seen[0] == part.size
    assert rng.offset == rng1.offset


def test_shards_that_draw_differently_are_refused():
    shards = Shards(n_virtual=2)

    def local(rng, state, part):
        for _ in range(int(part[0] > 0)):   # shard 1 draws, shard 0 does not
            rng.random(1)
        return part.sum(keepdims=True)

    alg = sharded(DataParallel(_init, local, lambda rng, s, st: (s, None)), shards)
    with pytest.raises(RuntimeError, match="different numbers of generator calls"):
        alg.step(default_rng(0), alg.init(None, shards.scatter(np.arange(4.0))))


def test_bad_arguments():
    with pytest.raises(TypeError, match="DataParallel"):
        sharded(Algorithm(None, None), Shards(n_virtual=2))
    with pytest.raises(TypeError, match="Shards"):
        sharded(NORMAL, 2)
    alg = sharded(NORMAL, Shards(n_virtual=2))
    with pytest.raises(ValueError, match="one part of the data per local shard"):
        alg.init(None, [np.zeros(3)])
    with pytest.raises(RuntimeError, match="init"):
        alg.step(default_rng(0), None)
    bad = sharded(DataParallel(lambda rng, parts, sh: [], _local, _update), Shards(n_virtual=2))
    with pytest.raises(ValueError, match="returned 0 states"):
        bad.init(None, [np.zeros(3), np.zeros(3)])


def test_a_sharded_run_resumes_from_its_checkpoint(tmp_path):
    y = _grid(200)
    shards = Shards(n_virtual=2)
    whole = _run(shards, y, n_iter=12)
    alg = sharded(NORMAL, shards)
    state = alg.init(None, shards.scatter(y))
    path = tmp_path / "ck.npz"
    kw = dict(n_iter=12, progress=False, checkpoint=path, checkpoint_every=4,
              collect=lambda s, info: {"mu": s[0].mu, "tau": s[0].tau})
    stopped = []

    class Interrupted(Exception):
        pass

    def stop_at_eight(it, s, info):
        if it == 8:
            stopped.append(it)
            raise Interrupted

    with pytest.raises(Interrupted):
        run(alg.step, state, 3, callback=stop_at_eight, **kw)
    ran = []
    resumed = run(alg.step, state, 3, callback=lambda it, s, info: ran.append(it), **kw)
    assert stopped == [8]
    assert ran == [5, 6, 7, 8, 9, 10, 11, 12]   # from the checkpoint of iteration 4, not afresh
    np.testing.assert_array_equal(resumed.draws["mu"], whole.draws["mu"])
    np.testing.assert_array_equal(resumed.state.shard1.tau, whole.state.shard1.tau)


# --------------------------------------------------------------------------- the DP mixture's Gibbs sweep

def _mixture(xp, n=240, p=3, dtype=np.float64, k=5):
    rs = np.random.default_rng(2)
    X = np.concatenate([rs.normal(-2, 0.6, (n // 2, p)), rs.normal(2, 0.8, (n - n // 2, p))]).astype(dtype)
    return mxa.make_model(xp.asarray(X), k, dtype=dtype, chains=2)


def _sweeps(step, state, rng, n=4):
    out = []
    for _ in range(n):
        state, info = step(rng, state)
        s = state if isinstance(state, mxa.State) else state[0]
        # copies: z is drawn in place
        out.append([np.array(to_np(a)) for a in (s.z, s.mu, s.sigma, s.log_pi, s.alpha, s.loglik, info.n_active)])
    return out


def _mixture_one_shard_is_one_device(xp, shards, dtype):
    model = _mixture(xp, dtype=dtype)
    n = model.x.shape[0]
    backend = "numpy" if xp is np else "cupy"
    rng = default_rng(11, backend=backend)
    want = _sweeps(mxa.make_step(model), mxa.init(rng, model, 2), rng)
    alg = mxs.sharded_gibbs(shards)
    rng = default_rng(11, backend=backend)
    got = _sweeps(alg.step, alg.init(rng, mxs.gibbs_parts([model], shards, n), 2), rng)
    for a, b in zip(want, got):
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mixture_sharded_over_one_shard_is_make_step_bit_for_bit(dtype):
    # off any grid: one shard's statistics are not summed, so nothing rounds differently
    _mixture_one_shard_is_one_device(np, Shards(n_virtual=1), dtype)


def test_mixture_shards_give_make_steps_draws_on_a_dyadic_grid():
    rs = np.random.default_rng(4)
    X = np.round(np.concatenate([rs.normal(-2, 0.5, (128, 2)), rs.normal(2, 0.7, (128, 2))]) * 16) / 16
    model = mxa.make_model(X, 6, dtype=np.float64, chains=2)
    rng = default_rng(7, backend="numpy")
    want = _sweeps(mxa.make_step(model), mxa.init(rng, model, 2), rng)
    for world in (2, 3):
        shards = Shards(n_virtual=world)
        models = mxs.make_sharded_models(X, 6, shards, dtype=np.float64, chains=2)
        alg = mxs.sharded_gibbs(shards)
        rng = default_rng(7, backend="numpy")
        state = alg.init(rng, mxs.gibbs_parts(models, shards, X.shape[0]), 2)
        got = []
        for _ in range(4):
            state, info = alg.step(rng, state)
            s = state[0]
            for other in state[1:]:
                np.testing.assert_array_equal(other.params, s.params)
            got.append([np.concatenate([t.z for t in state], axis=1), s.mu, s.sigma, s.log_pi, s.alpha, s.loglik])
        for a, b in zip(want, got):
            for u, v in zip(a[:5], b[:5]):
                np.testing.assert_array_equal(u, v)
            # the rows' log-likelihoods are not on the grid: their sums over shards round differently
            np.testing.assert_allclose(b[5], a[5], rtol=1e-12)


def _bem_one_shard_is_one_device(xp, shards, dtype, iterates=6):
    model = _mixture(xp, dtype=dtype)
    backend = "numpy" if xp is np else "cupy"
    rng = default_rng(5, backend=backend)
    state, bem = mxa.init_bem(rng, model, 3), mxa.make_bem_step(model)
    alg = mxs.sharded_bem(shards)
    rng = default_rng(5, backend=backend)
    states = alg.init(rng, mxs.bem_parts([model], shards, model.x.shape[0]), 3)
    for _ in range(iterates):
        state = bem(state)
        states, info = alg.step(rng, states)
        assert info is None
        for f in ("mu", "sigma", "log_pi", "alpha", "counts", "loglik", "params"):
            np.testing.assert_array_equal(to_np(getattr(states[0], f)), to_np(getattr(state, f)), err_msg=f)
    assert rng.offset == default_rng(5).offset + 1   # the starts' one call; an iterate draws nothing


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_bem_sharded_over_one_shard_is_make_bem_step_bit_for_bit(dtype):
    _bem_one_shard_is_one_device(np, Shards(n_virtual=1), dtype)


@pytest.mark.parametrize("method", ["gibbs", "bem"])
def test_mixture_ranks_of_one_shard_each_give_two_virtual_shards_fit(method):
    # One local shard of a world of two (the layout of a Dask cluster, played by two threads): the step
    # sums over the ranks with the shard's own generator, no copies; every rank ends with the fit of
    # Shards(n_virtual=2), whose sums add the same two terms, bit for bit (data off any grid).
    from gpumcmc.models import DPGaussianMixture

    X = np.random.default_rng(6).normal(0, 1, (120, 2)) + np.repeat([[-3, 0], [3, 1]], 60, axis=0)
    kw = dict(n_components=4, method=method, n_iter=12, burn_in=3, n_init=2, relabel=False, progress=False,
              random_state=1)
    two = DPGaussianMixture(devices=Shards(n_virtual=2), **kw).fit(X)
    fits = fit_as_ranks(lambda sh: DPGaussianMixture(devices=sh, **kw).fit(X))
    for f in fits:
        for name in ("weights_", "means_", "covariances_", "alpha_"):
            np.testing.assert_array_equal(getattr(f, name), getattr(two, name), err_msg=name)
    if method == "gibbs":
        np.testing.assert_array_equal(np.concatenate([fits[0].z_, fits[1].z_]), two.z_)
    else:
        assert fits[0].n_iter_ == fits[1].n_iter_ == two.n_iter_


def test_the_old_mixture_names_say_where_they_went():
    for name, new in [("init_sharded", "sharded_gibbs"), ("make_sharded_step", "sharded_gibbs"),
                      ("init_bem_sharded", "sharded_bem"), ("make_sharded_bem_step", "sharded_bem")]:
        with pytest.raises(AttributeError, match=new):
            getattr(mxs, name)()


# --------------------------------------------------------------------------- a Collective

def _collective_step(rng, state, parts, shards, reduce):
    """The normal model's iteration written against ``reduce``: the same local part, sum and update."""
    stats = []
    for i, y in enumerate(parts):
        with shards.on(i):
            stats.append(np.concatenate(list(_local(rng, state[i], y))))
    stats = reduce(stats)
    out = []
    for i, st in enumerate(stats):
        with shards.on(i):
            s, _ = _update(copy.copy(rng) if i < len(stats) - 1 else rng, state[i], Stats(*st.reshape(3, 1)))
        out.append(s)
    return out, None


NORMAL_COLLECTIVE = Collective(_init, _collective_step)


@pytest.mark.parametrize("n_virtual", [1, 3])
def test_a_collective_step_gives_the_draws_of_local_and_update(n_virtual):
    # sharded supplies reduce (the all-reduce, the identity over one shard of one): the same model written
    # as a Collective draws what its DataParallel form draws, bit for bit, where the sums are exact.
    y = _grid()
    shards = Shards(n_virtual=n_virtual)
    alg = sharded(NORMAL_COLLECTIVE, shards)
    state = alg.init(default_rng(3, backend="numpy"), shards.scatter(y))
    got = run(alg.step, state, 3, n_iter=60, progress=False, collect=lambda s, info: {"mu": s[0].mu, "tau": s[0].tau})
    ref = _run(Shards(n_virtual=1), y)
    for name in ("mu", "tau"):
        np.testing.assert_array_equal(got.draws[name], ref.draws[name], err_msg=name)


def test_a_collective_gets_the_all_reduce_or_over_one_shard_of_one_the_identity():
    def init(rng, parts, shards):
        return "s"

    def step(rng, state, parts, shards, reduce):
        return reduce, None

    for shards in (Shards(n_virtual=1), Shards(n_virtual=2)):
        alg = sharded(Collective(init, step), shards)
        with pytest.raises(RuntimeError, match="call this algorithm's init"):
            alg.step(None, "s")
        with pytest.raises(ValueError, match="one part of the data per local shard"):
            alg.init(None, [1] * (len(shards) + 1))
        assert alg.init(None, [1] * len(shards)) == "s"
        reduce = alg.step(None, "s")[0]
        a = [np.ones(2) for _ in range(len(shards))]
        assert reduce(a)[0] is a[0]
        np.testing.assert_array_equal(a[0], np.full(2, float(len(shards))))


# --------------------------------------------------------------------------- GPUs

def test_gpu_mixture_sharded_over_one_shard_is_make_step_bit_for_bit(cp):
    _mixture_one_shard_is_one_device(cp, Shards(0), np.float32)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gpu_bem_sharded_over_one_shard_is_make_bem_step_bit_for_bit(cp, dtype):
    _bem_one_shard_is_one_device(cp, Shards(0), dtype)


@pytest.mark.parametrize("n", [1000, 32 * 4096 + 5])
def test_gpu_mean_rows_is_the_sum_over_n(cp, n):
    # One device's step computes its mean log-likelihood as the rows' sum over n (the statistic a shard
    # contributes), where it took _mean_rows before: the two are the same float64 numbers on the GPU, in
    # the one-pass (cupy.mean) and the two-pass range alike, so one device's draws stay what they were.
    from gpumcmc.models.mixture import ops

    a = cp.asarray(np.random.default_rng(0).normal(-3.0, 2.0, (3, n)).astype(np.float32))
    np.testing.assert_array_equal(to_np(ops._mean_rows(a)), to_np(ops._sum_rows(a) / n))


def test_gpu_normal_model_on_shards_of_one_gpu_is_one_shard(cp):
    y = _grid()
    one, three = _run(Shards(0), y), _run(one_device(3), y)
    for name in ("mu", "tau"):
        np.testing.assert_array_equal(three.draws[name], one.draws[name], err_msg=name)


def test_the_one_shard_the_docs_name_is_one_shard_on_numpy():
    """``Shards(1)`` is GPU 1, not one shard: the docstrings that speak of one shard name one that runs
    without a GPU (every ``Shards(...)`` they write makes a Shards of one local shard here)."""
    import re

    from gpumcmc.sampling import _protocol

    for doc in (_protocol.sharded.__doc__, mxs.__doc__):
        named = re.findall(r"``[^`]*?(Shards\([^)]*\))[^`]*``", doc)
        assert named
        for text in named:
            sh = eval(text, {"Shards": Shards})  # noqa: S307 (the docstring's own literal)
            assert sh.xp is np and len(sh) == 1, text


def test_a_sharded_state_pickles():
    """A sharded state (so a sharded fit's ``trace_``, which holds it) pickles and comes back as the same
    type, in a process that has not made that type yet: pickle finds ``ShardStates{n}`` by name."""
    import pickle
    import subprocess
    import sys

    state = shard_states(3)(np.arange(2.0), np.ones(2), np.zeros(2))
    back = pickle.loads(pickle.dumps(state))
    assert type(back) is shard_states(3)
    np.testing.assert_array_equal(back.shard1, state.shard1)
    code = ("import pickle, sys; s = pickle.loads(sys.stdin.buffer.read()); "
            "from gpumcmc.sampling import shard_states; assert type(s) is shard_states(3), type(s)")
    subprocess.run([sys.executable, "-c", code], input=pickle.dumps(state), check=True)


def test_bem_init_takes_its_starts_by_the_name_its_docstrings_give():
    """``sharded_bem(shards).init(rng, parts, starts)`` and ``bem().init(rng, parts, shards, starts=1)``, as
    documented: ``starts`` by keyword gives what it gives by position."""
    shards = Shards(n_virtual=2)
    model = _mixture(np)
    parts = mxs.bem_parts(mxs.make_sharded_models(to_np(model.x), 5, shards, chains=3), shards,
                          model.x.shape[0])
    by_place = mxs.sharded_bem(shards).init(default_rng(5), parts, 3)
    by_name = mxs.sharded_bem(shards).init(default_rng(5), parts, starts=3)
    direct = mxs.bem().init(default_rng(5), parts, shards, starts=3)
    for got in (by_name, direct):
        for a, b in zip(by_place, got):
            np.testing.assert_array_equal(a.mu, b.mu)
    assert by_name[0].mu.shape[0] == 3


def test_local_returning_python_numbers_fails_on_one_shard_too():
    """local returning Python floats ran on one NumPy part and failed on two with an AttributeError about
    dtype; it is refused on any count, naming local."""
    from typing import NamedTuple

    from gpumcmc.sampling import DataParallel, run, sharded
    from gpumcmc.shards import Shards

    class S(NamedTuple):
        mu: object

    def init(rng, parts, shards):
        return [S(np.zeros(1)) for _ in parts]

    def local(rng, s, part):
        return (float(part.sum()), float(len(part)))

    def update(rng, s, stats):
        return S(np.array([stats[0] / stats[1]])), None

    for parts in (1, 2):
        sh = Shards(n_virtual=parts)
        alg = sharded(DataParallel(init, local, update, ("mu",)), sh)
        st = alg.init(0, sh.scatter(np.arange(10.0)))
        with pytest.raises(TypeError, match="local must return an array"):
            run(alg.step, st, 0, 2, progress=False)


def test_statistics_of_other_shapes_on_a_shard_or_nested_in_lists_are_named():
    from gpumcmc.sampling._protocol import _check_stats, _sum_over_shards

    with pytest.raises(ValueError, match=r"statistic 0 is \(3,\) float64 on shard 0 and \(5,\) float64 on shard 1"):
        _sum_over_shards(Shards(n_virtual=2), [(np.ones(3), np.ones(5)), (np.ones(5), np.ones(3))])
    for bad in ([np.ones(1), np.ones(1)], ((np.ones(1), np.ones(1)), np.ones(1))):
        with pytest.raises(TypeError, match="tuple of arrays"):
            _check_stats(bad)
    _check_stats((np.ones(2), None))   # a None field is allowed


def test_statistics_present_on_one_shard_and_absent_on_another_are_named():
    from typing import NamedTuple

    from gpumcmc.sampling._protocol import _sum_over_shards

    class St(NamedTuple):
        n: object
        s: object

    with pytest.raises(ValueError, match="same fields"):
        _sum_over_shards(Shards(n_virtual=2), [St(np.ones(2), None), St(None, np.ones(2))])
