"""The sampler core: the run driver (burn-in, thinning, chains, monitors, checkpoints) and the estimator base."""

from typing import NamedTuple

import numpy as np
import pytest

import gpumcmc
from gpumcmc.sampling import Estimator, Monitor, NotFittedError, Stop, as_data, run


class AR(NamedTuple):
    x: object       # (chain,) current value of each chain
    steps: int      # iterations done, a plain number in the state


class Info(NamedTuple):
    accepted: object  # (chain,) a per-chain statistic


def ar_step(rng, s):
    z = rng.normal(size=s.x.shape)
    return AR(0.5 * s.x + z, s.steps + 1), Info(z > 0)


def _run(xp, **kw):
    rng = gpumcmc.random.default_rng(3, backend="numpy" if xp is np else "cupy")
    kw.setdefault("n_iter", 60)
    return run(ar_step, AR(xp.zeros(3), 0), rng, collect=lambda s, i: {"x": s.x}, progress=False, **kw)


def test_shapes_burn_in_and_thinning(xp):
    tr = _run(xp, burn_in=10, thin=4, monitors=[Monitor("m", lambda s: s.x, every=7)])
    assert tr.draws["x"].shape == (3, 15)
    assert tr.stats["accepted"].shape == (3, 15) and tr.stats["accepted"].dtype == bool
    its, vals = tr.monitors["m"]
    assert its.tolist() == [7, 14, 21, 28, 35, 42, 49, 56, 63, 70]
    assert vals.shape == (10, 3)
    assert tr.state.steps == 70
    # The kept draws are iterations 14, 18, ... of the same stream: rerun without thinning and compare.
    full = _run(xp, burn_in=0, n_iter=70)
    np.testing.assert_array_equal(tr.draws["x"], full.draws["x"][:, 13::4])
    # and the monitor's values are the states after iterations 7, 14, ... (not the state before them)
    np.testing.assert_array_equal(vals, full.draws["x"][:, its - 1].T)


@pytest.mark.parametrize("kw", [dict(n_iter=0, burn_in=5), dict(n_iter=3, thin=4)])
def test_a_run_that_keeps_no_draw_has_empty_arrays_of_each_name(xp, kw):
    tr = _run(xp, **kw)
    assert tr.draws["x"].shape == (3, 0) and tr.draws["x"].dtype == np.float64
    assert tr.stats["accepted"].shape == (3, 0) and tr.stats["accepted"].dtype == bool
    assert isinstance(tr.draws["x"], np.ndarray)


@pytest.mark.parametrize("kw", [dict(n_iter=0, burn_in=5), dict(n_iter=3, thin=4)])
def test_a_run_resumed_after_its_last_iteration_that_kept_no_draw_has_empty_arrays(tmp_path, xp, kw):
    # The second call runs no iteration (the checkpoint holds the finished run): its empty arrays come from
    # the checkpoint, not from a last (state, info) it never sees.
    path = tmp_path / "run.npz"
    first = _run(xp, checkpoint=path, **kw)
    again = _run(xp, checkpoint=path, **kw)
    assert again.iterations == first.iterations
    for part in ("draws", "stats"):
        a, b = getattr(first, part), getattr(again, part)
        assert set(a) == set(b) == ({"x"} if part == "draws" else {"accepted"})
        for name in a:
            assert b[name].shape == a[name].shape and b[name].dtype == a[name].dtype


def test_kept_draws_are_the_states_values(xp):
    # Each kept value is stored as it was after its iteration: C-ordered rows by a copy of their bytes on
    # the GPU, strided views and other dtypes by the general assignment.
    seen = []
    tr = run(ar_step, AR(xp.zeros((3, 4)), 0), gpumcmc.random.default_rng(2, backend="numpy" if xp is np else "cupy"),
             n_iter=20, collect=lambda s, i: {"x": s.x, "col": s.x[:, 1], "f": s.x.astype(xp.float32),
                                              "row": s.x[1], "tail": s.x[1:], "cell": s.x[0, 2]},
             callback=lambda n, s, i: seen.append(gpumcmc.backend.to_host(s.x)), progress=False)
    want = np.stack(seen, axis=1)  # (chain, draw, 4)
    np.testing.assert_array_equal(tr.draws["x"], want)
    np.testing.assert_array_equal(tr.draws["col"], want[:, :, 1])
    np.testing.assert_array_equal(tr.draws["f"], want.astype(np.float32))
    # views at an offset into the state (a row, the rows after the first, one cell): C-ordered, so copied as bytes
    np.testing.assert_array_equal(tr.draws["row"], want[1].T)  # read as (its 4 "chains", draw)
    np.testing.assert_array_equal(tr.draws["tail"], want[1:])
    np.testing.assert_array_equal(tr.draws["cell"], want[0, :, 2])
    assert len({float(v) for v in want.ravel()}) > 200  # the draws differ from iteration to iteration


@pytest.mark.slow
def test_ar1_stationary_moments():
    # AR(1) with coefficient 0.5 and unit noise: stationary variance 4/3. 4 chains x 5,000 draws; the
    # variance estimate's standard error is about 0.03 (with autocorrelation); a 6-sigma band: budget < 1e-8.
    rng = gpumcmc.random.default_rng(11, backend="numpy")
    tr = run(ar_step, AR(np.zeros(4), 0), rng, n_iter=5000, burn_in=50, collect=lambda s, i: {"x": s.x},
             progress=False)
    x = tr.draws["x"]
    assert abs(x.mean()) < 6 * 0.03
    assert abs(x.var() - 4 / 3) < 6 * 0.03


def test_checkpoint_resume_is_bit_for_bit(tmp_path, xp):
    path = tmp_path / "run.npz"
    whole = _run(xp, burn_in=5, thin=2, n_iter=40)

    class Stop(Exception):
        pass

    def interrupt(it, state, info):
        if it == 23:
            raise Stop

    with pytest.raises(Stop):
        _run(xp, burn_in=5, thin=2, n_iter=40, checkpoint=path, checkpoint_every=10, callback=interrupt)
    assert path.exists()
    # The resumed run makes only the iterations after the checkpoint of iteration 20 (a run that read the file
    # and then started afresh would give the same draws: the count is what shows it resumed).
    ran = []
    resumed = _run(xp, burn_in=5, thin=2, n_iter=40, checkpoint=path, checkpoint_every=10,
                   callback=lambda it, state, info: ran.append(it))
    assert ran == list(range(21, 46))
    np.testing.assert_array_equal(resumed.draws["x"], whole.draws["x"])
    np.testing.assert_array_equal(resumed.stats["accepted"], whole.stats["accepted"])
    assert resumed.state.steps == whole.state.steps == 45


class Parts(NamedTuple):
    x: tuple        # one array per shard, as a sharded (Collective) state holds them
    sizes: tuple    # plain numbers in a nested tuple


def parts_step(rng, s):
    x = tuple(0.5 * a + rng.normal(size=a.shape) for a in s.x)
    return Parts(x, s.sizes), None


def test_a_state_with_plain_tuples_of_arrays_checkpoints_and_resumes_bit_for_bit(tmp_path, xp):
    path = tmp_path / "parts.npz"
    start = Parts((xp.zeros(2), xp.zeros(3)), ((2, 3), 5))
    kw = dict(n_iter=30, collect=lambda s, i: {"x0": s.x[0]}, progress=False)
    whole = run(parts_step, start, 4, **kw)

    def interrupt(it, state, info):
        if it == 17:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(parts_step, start, 4, checkpoint=path, checkpoint_every=10, callback=interrupt, **kw)
    resumed = run(parts_step, start, 4, checkpoint=path, checkpoint_every=10, **kw)
    np.testing.assert_array_equal(resumed.draws["x0"], whole.draws["x0"])
    for a, b in zip(resumed.state.x, whole.state.x):
        assert type(a) is type(b)
        np.testing.assert_array_equal(gpumcmc.backend.to_host(a), gpumcmc.backend.to_host(b))
    assert resumed.state.sizes == ((2, 3), 5)
    # a state with another number of parts is refused, naming the fields
    with pytest.raises(ValueError, match="fields"):
        run(parts_step, Parts((xp.zeros(2),), ((2,), 5)), 4, checkpoint=path, **kw)


def test_checkpoint_with_other_settings_is_refused(tmp_path):
    path = tmp_path / "run.npz"
    _run(np, n_iter=20, checkpoint=path, checkpoint_every=5)
    with pytest.raises(ValueError, match="n_iter=20"):
        _run(np, n_iter=30, checkpoint=path)
    rng = gpumcmc.random.default_rng(4, backend="numpy")
    with pytest.raises(ValueError, match="seed"):
        run(ar_step, AR(np.zeros(3), 0), rng, n_iter=20, checkpoint=path, progress=False)


def test_checkpoint_path_is_checked_before_the_run(tmp_path):
    # a checkpoint in a missing folder, or a folder itself, fails before the first iteration, not at the first
    # save after checkpoint_every iterations of work
    calls = []

    def counted(rng, state):
        calls.append(1)
        return ar_step(rng, state)

    rng = gpumcmc.random.default_rng(0, backend="numpy")
    for bad, what in ((tmp_path / "missing" / "run.npz", "does not exist"), (tmp_path, "is a folder")):
        with pytest.raises(ValueError, match=what):
            run(counted, AR(np.zeros(3), 0), rng, n_iter=5, checkpoint=bad, progress=False)
    assert not calls


def test_random_state_types():
    # what random_state may be, the same for every estimator and for run: an int, None, a SeedSequence, a numpy
    # Generator or RandomState (scikit-learn's staple), a gpumcmc Generator; anything else a clear error
    from gpumcmc.models import LDA, BayesianNetwork, DPGaussianMixture
    from gpumcmc.random._stream import host_random_state, host_rng

    X = np.random.default_rng(0).poisson(1.0, (12, 8))
    kw = dict(n_components=2, n_iter=2, burn_in=0, backend="numpy", progress=False)
    a = LDA(random_state=np.random.RandomState(3), **kw).fit(X).components_
    b = LDA(random_state=np.random.RandomState(3), **kw).fit(X).components_
    np.testing.assert_array_equal(a, b)
    LDA(random_state=np.random.default_rng(3), **kw).fit(X)
    for bad, err in (("abc", TypeError), (1.5, TypeError), (True, TypeError), (-1, ValueError)):
        with pytest.raises(err, match="random_state must be"):
            LDA(random_state=bad, **kw).fit(X)
    gen = gpumcmc.random.default_rng(0, backend="numpy")
    assert BayesianNetwork.koller().sample(3, random_state=gen).shape == (3, 5)
    gm = DPGaussianMixture(n_components=2, n_iter=2, burn_in=0, backend="numpy", progress=False,
                           random_state=np.random.RandomState(0)).fit(np.random.default_rng(1).normal(size=(40, 2)))
    assert gm.sample(2, random_state=np.random.RandomState(1))[0].shape == (2, 2)
    # ints, sequences of ints and BitGenerators keep numpy's own streams
    assert host_rng(7).random() == np.random.default_rng(7).random()
    assert host_random_state(7).randint(100) == np.random.RandomState(7).randint(100)
    assert host_random_state([1, 2, 3]).randint(1000) == np.random.RandomState([1, 2, 3]).randint(1000)
    assert host_rng(np.random.PCG64(3)).random() == np.random.default_rng(np.random.PCG64(3)).random()
    assert BayesianNetwork.koller().sample(2, random_state=np.random.PCG64(3)).shape == (2, 5)
    for bad in ("abc", 1.5, -1):
        with pytest.raises((TypeError, ValueError), match="random_state must be"):
            host_random_state(bad)


def _truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _meta_garbled(data: bytes) -> bytes:
    import io

    arrays = dict(np.load(io.BytesIO(data)))
    arrays["meta"] = np.asarray("{'version': ")
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


# How a checkpoint file gets damaged: a full disk cuts it short, a tool empties
# it, another file lands at its path, its metadata is garbled.
DAMAGED = [
    pytest.param(_truncated, id="truncated"),
    pytest.param(lambda data: b"", id="empty"),
    pytest.param(lambda data: b"not a checkpoint\n" * 10, id="text"),
    pytest.param(_meta_garbled, id="garbled-metadata"),
    pytest.param(lambda data: data[:30] + bytes(len(data) - 30), id="zeroed-tail"),
]


@pytest.mark.parametrize("damage", DAMAGED)
def test_damaged_checkpoint_raises_saying_what_to_do(tmp_path, damage):
    path = tmp_path / "run.npz"
    _run(np, n_iter=20, checkpoint=path, checkpoint_every=5)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(ValueError, match="checkpoint .* is damaged .*resume=False"):
        _run(np, n_iter=20, checkpoint=path)
    # resume=False starts afresh and rewrites the file, which then resumes.
    fresh = _run(np, n_iter=20, checkpoint=path, resume=False)
    again = _run(np, n_iter=20, checkpoint=path)
    np.testing.assert_array_equal(again.draws["x"], fresh.draws["x"])


@pytest.mark.parametrize("kw, err, match", [
    ({"n_iter": -1}, ValueError, "n_iter must be at least 0, got -1"),
    ({"thin": 0}, ValueError, "thin must be at least 1, got 0"),
    ({"burn_in": 1.5}, TypeError, "burn_in must be an integer, got 1.5"),
    ({"monitors": [lambda s: 0]}, TypeError, r"monitors must be gpumcmc.sampling.Monitor\(name, fn, every\)"),
])
def test_bad_settings(kw, err, match):
    """Each bad setting is refused by name (without the message, burn_in=1.5 passed with no check at all:
    range() raises a TypeError of its own)."""
    with pytest.raises(err, match=match):
        _run(np, **kw)


def test_progress_bar_shows_monitor(capsys):
    rng = gpumcmc.random.default_rng(0, backend="numpy")
    run(ar_step, AR(np.zeros(2), 0), rng, n_iter=20, progress=True, desc="ar1",
        monitors=[Monitor("mean_x", lambda s: s.x, every=10)])
    err = capsys.readouterr().err
    assert "ar1" in err and "mean_x" in err


def test_to_arviz_has_chain_and_draw():
    """ArviZ gets the draws as (chain, draw), value for value, and the step's Info in sample_stats (a shape
    alone passed with the draws in another order, or the stats left out)."""
    pytest.importorskip("arviz")
    tr = _run(np, n_iter=10)
    idata = tr.to_arviz()
    post = idata.posterior if hasattr(idata, "posterior") else idata["posterior"]
    stats = idata.sample_stats if hasattr(idata, "sample_stats") else idata["sample_stats"]
    assert post["x"].dims == ("chain", "draw") and post["x"].shape == (3, 10)
    np.testing.assert_array_equal(post["x"].values, tr.draws["x"])
    np.testing.assert_array_equal(stats["accepted"].values, tr.stats["accepted"])


class Toy(Estimator):
    def __init__(self, n_components=2, random_state=None, backend=None):
        self.n_components = n_components
        self.random_state = random_state
        self.backend = backend

    def fit(self, X):
        self.mean_ = as_data(X, self._xp()).mean(0)
        return self


def test_estimator_params_clone_and_fitted_check():
    t = Toy(n_components=3, random_state=1)
    assert t.get_params() == {"backend": None, "n_components": 3, "random_state": 1}
    assert repr(t) == "Toy(n_components=3, random_state=1)"
    t.set_params(n_components=4)
    assert t.n_components == 4
    with pytest.raises(ValueError, match="parameter .k."):
        t.set_params(k=1)
    with pytest.raises(NotFittedError):
        t._check_fitted("mean_")
    sklearn_base = pytest.importorskip("sklearn.base")
    c = sklearn_base.clone(t)
    assert c.get_params() == t.get_params() and c is not t


def test_as_data_inputs_and_errors():
    sp = pytest.importorskip("scipy.sparse")
    X = sp.random(5, 4, density=0.5, format="csr", random_state=0)
    np.testing.assert_array_equal(as_data(X, np), X.toarray())
    assert sp.issparse(as_data(X, np, allow_sparse=True))
    with pytest.raises(ValueError, match="NaN"):
        as_data([[1.0, np.nan]], np)
    with pytest.raises(ValueError, match="reshape"):
        as_data([1.0, 2.0], np)
    with pytest.raises(TypeError):
        as_data([["a", "b"]], np)


# --- runs of unknown length: a stop condition and a store that grows ------------------------------------

class _Reads:
    """A stop condition that holds once the state has made ``at`` steps, and notes each iteration it was read
    at (the state's own count, so the record does not depend on the driver's bookkeeping)."""

    def __init__(self, at):
        self.at, self.seen = at, []

    def __call__(self, s, info):
        self.seen.append(s.steps)
        return s.steps >= self.at


@pytest.mark.parametrize("every, at, ends", [(1, 23, 23), (5, 23, 25), (7, 23, 28), (10, 500, 70)])
def test_stop_is_read_every_every_iterations_and_honoured(xp, every, at, ends):
    """The condition is read after iterations every, 2 every, ... (burn-in counted) and after the last one that
    n_iter allows, never otherwise; the run ends after the first read that holds."""
    cond = _Reads(at)
    tr = _run(xp, burn_in=10, n_iter=60, stop=Stop(cond, every))
    assert cond.seen == [n for n in range(1, ends + 1) if n % every == 0 or n == 70]
    assert tr.iterations == tr.state.steps == ends and tr.stopped == (at <= 70)
    assert tr.draws["x"].shape == (3, ends - 10) and tr.stats["accepted"].shape == (3, ends - 10)
    # the draws are those of a run that was never told to stop
    full = _run(xp, burn_in=10, n_iter=60)
    np.testing.assert_array_equal(tr.draws["x"], full.draws["x"][:, :ends - 10])


@pytest.mark.parametrize("by_reference", [False, True])
def test_growing_store_keeps_the_draws_of_a_preallocated_run(xp, by_reference):
    """A stop that never holds, n_iter well past the store's first size (so it doubles three times), thinned:
    the same draws, stats and state as the preallocated store's; and with no bound at all (n_iter=None) the
    draws up to the stop are the same too."""
    whole = _run(xp, burn_in=3, thin=2, n_iter=1000)
    grown = _run(xp, burn_in=3, thin=2, n_iter=1000, stop=Stop(lambda s, i: False, 50), by_reference=by_reference)
    assert grown.draws["x"].shape == (3, 500) and not grown.stopped and grown.iterations == 1003
    np.testing.assert_array_equal(grown.draws["x"], whole.draws["x"])
    np.testing.assert_array_equal(grown.stats["accepted"], whole.stats["accepted"])
    np.testing.assert_array_equal(grown.state.x if xp is np else xp.asnumpy(grown.state.x),
                                  whole.state.x if xp is np else xp.asnumpy(whole.state.x))
    open_ended = _run(xp, burn_in=3, thin=2, n_iter=None, stop=Stop(lambda s, i: s.steps >= 603, 1),
                      by_reference=by_reference)
    assert open_ended.iterations == 603 and open_ended.n_iter is None
    np.testing.assert_array_equal(open_ended.draws["x"], whole.draws["x"][:, :300])


def test_by_reference_holds_the_arrays_without_a_copy():
    """by_reference keeps the very arrays collect returns (no copy per kept iteration)."""
    held = []

    def collect(s, info):
        held.append(s.x)
        return {"x": s.x}

    rng = gpumcmc.random.default_rng(3, backend="numpy")
    tr = run(ar_step, AR(np.zeros(3), 0), rng, n_iter=5, collect=collect, progress=False, by_reference=True)
    np.testing.assert_array_equal(tr.draws["x"], np.stack(held, axis=1))
    rng = gpumcmc.random.default_rng(3, backend="numpy")
    ref = run(ar_step, AR(np.zeros(3), 0), rng, n_iter=5, collect=collect, progress=False)
    np.testing.assert_array_equal(tr.draws["x"], ref.draws["x"])


def test_named_stop_shows_and_keeps_its_value():
    cond = Stop(lambda s, info: (s.steps >= 12, None if s.steps < 5 else float(s.steps)), every=4, name="its")
    tr = _run(np, n_iter=100, stop=cond, monitors=[Monitor("m", lambda s: s.x, every=5)])
    its, vals = tr.monitors["its"]
    assert its.tolist() == [8, 12] and vals.tolist() == [8.0, 12.0]
    assert tr.monitors["m"][0].tolist() == [5, 10, 12]   # monitors read at the last iteration, the stop's
    with pytest.raises(ValueError, match="both named 'm'"):
        _run(np, n_iter=10, stop=Stop(lambda s, i: (False, 0.0), name="m"), monitors=[Monitor("m", lambda s: 0.0)])


@pytest.mark.parametrize("bound, by_reference", [(200, False), (None, True)])
def test_stopped_run_resumes_bit_for_bit(tmp_path, xp, bound, by_reference):
    """Interrupted at iteration 23 and resumed from the checkpoint of iteration 20, a run whose condition
    reads only the state stops where the uninterrupted run does, with the same draws (with a bound on n_iter
    and a growing store, and with none and the draws held by reference); and a run resumed from the
    checkpoint of a stopped run stays stopped."""
    path = tmp_path / "run.npz"
    kw = dict(burn_in=5, thin=2, n_iter=bound, by_reference=by_reference, stop=Stop(lambda s, i: s.steps >= 37, 4))
    whole = _run(xp, **kw)
    assert whole.iterations == 40

    class Interrupt(Exception):
        pass

    def interrupt(it, state, info):
        if it == 23:
            raise Interrupt

    with pytest.raises(Interrupt):
        _run(xp, checkpoint=path, checkpoint_every=10, callback=interrupt, **kw)
    resumed = _run(xp, checkpoint=path, checkpoint_every=10, **kw)
    assert resumed.iterations == 40 and resumed.stopped and resumed.state.steps == 40
    np.testing.assert_array_equal(resumed.draws["x"], whole.draws["x"])
    np.testing.assert_array_equal(resumed.stats["accepted"], whole.stats["accepted"])
    calls = []
    again = _run(xp, checkpoint=path, callback=lambda *a: calls.append(a), **kw)
    assert calls == [] and again.stopped and again.iterations == 40
    np.testing.assert_array_equal(again.draws["x"], whole.draws["x"])


@pytest.mark.parametrize("kw, err, match", [
    ({"n_iter": None}, ValueError, "needs a stop condition"),
    ({"stop": lambda s, i: True}, TypeError, "Stop"),
    ({"stop": Stop(lambda s, i: True, every=0)}, ValueError, "every"),
    ({"stop": Stop(3)}, TypeError, "callable"),
])
def test_bad_stop_settings(kw, err, match):
    with pytest.raises(err, match=match):
        _run(np, **kw)


def test_monitored_gate_includes_the_stop_reads():
    class Step:
        monitored = True

        def __init__(self):
            self.seen = []

        def __call__(self, rng, state):
            self.seen.append(self.monitored)
            return state + 1, None

    step = Step()
    tr = run(step, np.zeros(1), 0, 20, progress=False, stop=Stop(lambda s, i: s[0] >= 6, every=3),
             monitors=[Monitor("a", lambda s: 0.0, every=4)])
    assert tr.iterations == 6
    assert step.seen == [False, False, True, True, False, True]


# --- CUDA graphs: a sweep captured once and replayed ---------------------------------------------------

class G(NamedTuple):
    x: object   # (chain, n) float32
    z: object   # (chain, n // 16) int64
    it: object  # (1,) int64: an iteration counter kept on the device


def g_step(rng, s):
    """A step that draws from every kind of kernel that reads its offset from the device."""
    xp = gpumcmc.backend.get_array_module(s.x)
    g = rng.gamma(s.x + np.float32(0.5))
    n = rng.normal(size=s.x.shape, dtype=np.float32)
    u = rng.random(size=s.x.shape, dtype=np.float32)
    d = rng.dirichlet(g.reshape(-1, 8) + np.float32(0.1))
    b = rng.beta(g + np.float32(1), np.float32(2))
    z = gpumcmc.categorical(d, rng).reshape(s.z.shape)
    x = xp.abs(np.float32(0.5) * s.x + np.float32(0.1) * n + d.reshape(s.x.shape) + u * b)
    return G(x.astype(np.float32), z, s.it + 1), None


def _g_state(xp):
    x = xp.asarray(np.random.default_rng(3).random((2, 256), dtype=np.float32))
    return G(x, xp.zeros((2, 32), dtype=np.int64), xp.zeros(1, dtype=np.int64))


def test_graph_step_on_numpy_is_the_step():
    from gpumcmc.sampling import graph_step

    rng_a, rng_b = gpumcmc.random.default_rng(5, backend="numpy"), gpumcmc.random.default_rng(5, backend="numpy")
    a, b = _g_state(np), _g_state(np)
    stepped = graph_step(g_step)
    for _ in range(3):
        a, _ = g_step(rng_a, a)
        b, _ = stepped(rng_b, b)
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.z, b.z)


def test_graph_replays_give_the_eager_draws(cp):
    from gpumcmc.sampling import graph_step

    rng_a, rng_b = gpumcmc.random.default_rng(7), gpumcmc.random.default_rng(7)
    a, b = _g_state(cp), _g_state(cp)
    stepped = graph_step(g_step)
    for i in range(6):
        a, _ = g_step(rng_a, a)
        b, _ = stepped(rng_b, b)
        np.testing.assert_array_equal(cp.asnumpy(a.x), cp.asnumpy(b.x), err_msg=f"sweep {i}")
        np.testing.assert_array_equal(cp.asnumpy(a.z), cp.asnumpy(b.z), err_msg=f"sweep {i}")
        assert rng_a.advance(0) == rng_b.advance(0)
    assert stepped.graph is not None and int(b.it[0]) == 6
    # A draw made after the replays continues the stream where the eager run would.
    np.testing.assert_array_equal(cp.asnumpy(rng_a.random(10)), cp.asnumpy(rng_b.random(10)))


def test_graph_refuses_host_state_that_changes(cp):
    from gpumcmc.sampling import graph_step

    rng = gpumcmc.random.default_rng(1)
    s = AR(cp.zeros(4), 0)
    with pytest.raises(ValueError, match="'steps'"):
        graph_step(ar_step)(rng, s)


def test_run_with_graph_keeps_the_same_draws(cp):
    kw = dict(n_iter=8, burn_in=2, progress=False, collect=lambda s, info: {"x": s.x, "z": s.z})
    t1 = run(g_step, _g_state(cp), 11, **kw)
    t2 = run(g_step, _g_state(cp), 11, graph=True, **kw)
    np.testing.assert_array_equal(t1.draws["x"], t2.draws["x"])
    np.testing.assert_array_equal(t1.draws["z"], t2.draws["z"])


def test_run_tells_a_step_which_sweeps_a_monitor_reads():
    """A step with a ``monitored`` attribute learns before each sweep whether a monitor reads its state
    (every ``every``-th iteration, burn-in counted, and the last), so it can skip work only monitors need."""

    class Step:
        monitored = True

        def __init__(self):
            self.seen = []

        def __call__(self, rng, state):
            self.seen.append(self.monitored)
            return state, None

    step = Step()
    run(step, np.zeros(1), 0, 5, burn_in=2, progress=False,
        monitors=[Monitor("a", lambda s: 0.0, every=3), Monitor("b", lambda s: 0.0, every=5)])
    assert step.seen == [False, False, True, False, True, True, True]


def test_a_stopped_run_closes_its_bar_full(monkeypatch):
    """A run its stop condition ends early (BEM's convergence, nested sampling) closes its bar at its total,
    set to what was done: a notebook bar closed short of its total is drawn as failed (red)."""
    import tqdm.auto

    made = []

    class Bar(tqdm.auto.tqdm):
        def close(self):
            made.append((self.n, self.total))
            super().close()
    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    rng = gpumcmc.random.default_rng(0, backend="numpy")
    tr = run(ar_step, AR(np.zeros(2), 0), rng, n_iter=50, progress=True, stop=Stop(lambda s, i: s.steps >= 7))
    assert tr.iterations == 7 and made[0] == (7, 7)
    run(ar_step, AR(np.zeros(2), 0), rng, n_iter=5, progress=True)
    assert made[-1] == (5, 5)


def test_to_arviz_lets_arviz_errors_through():
    """A mistake in coords or dims raises ArviZ's own error. Any TypeError used to be taken for ArviZ 1.x's
    signature, and the retry returned one object variable holding the whole dict."""
    pytest.importorskip("arviz")
    from gpumcmc.sampling import to_arviz

    with pytest.raises(TypeError):
        to_arviz({"x": np.zeros((4, 100, 3))}, coords={"k": ["a", "b", "c"]}, dims={"x": "k"})
    ok = to_arviz({"x": np.zeros((4, 100, 3))}, coords={"k": ["a", "b", "c"]}, dims={"x": ["k"]})
    assert ok.posterior["x"].dims == ("chain", "draw", "k")


def test_resume_refuses_another_collect_or_another_state(tmp_path):
    """Resumed with a collect that gives other names (or none), the checkpoint's draws were left partly
    unwritten: uninitialised memory came back as draws. A state of other fields raised a bare KeyError, and
    one of other shapes was replaced silently. Each is now a ValueError naming what differs."""
    path = tmp_path / "run.npz"

    def crash(n, s, i):
        if n == 50:
            raise KeyboardInterrupt

    kw = dict(checkpoint=path, checkpoint_every=20, progress=False)
    with pytest.raises(KeyboardInterrupt):
        run(ar_step, AR(np.zeros(2), 0), 0, 100, callback=crash, collect=lambda s, i: {"x": s.x}, **kw)
    with pytest.raises(ValueError, match="collect now gives"):
        run(ar_step, AR(np.zeros(2), 0), 0, 100, collect=lambda s, i: {"x": s.x, "y": 2 * s.x}, **kw)
    with pytest.raises(ValueError, match="collect now gives"):
        run(ar_step, AR(np.zeros(2), 0), 0, 100, **kw)
    with pytest.raises(ValueError, match="shape"):
        run(ar_step, AR(np.zeros((2, 3)), 0), 0, 100, collect=lambda s, i: {"x": s.x}, **kw)

    class Other(NamedTuple):
        mu: object
        steps: int
    with pytest.raises(ValueError, match="fields"):
        run(lambda r, s: (s, None), Other(np.zeros(2), 0), 0, 100, **kw)
    tr = run(ar_step, AR(np.zeros(2), 0), 0, 100, collect=lambda s, i: {"x": s.x}, **kw)  # the same: resumes
    assert np.isfinite(tr.draws["x"]).all() and tr.draws["x"].shape == (2, 100)


def test_a_step_or_hooks_of_the_wrong_kind_are_named():
    """A step returning its state alone was unpacked as (field 0, field 1) and failed a sweep later; a
    non-callable collect failed after burn-in; two monitors of one name were merged; a dict Info was
    dropped. Each is caught at once, and a dict Info is kept."""
    with pytest.raises(TypeError, match=r"must return \(state, info\)"):
        run(lambda r, s: AR(s.x, s.steps + 1), AR(np.zeros(2), 0), 0, 5, progress=False)
    with pytest.raises(TypeError, match="collect must be a callable"):
        run(ar_step, AR(np.zeros(2), 0), 0, 5, collect={"x": 1}, progress=False)
    with pytest.raises(ValueError, match="Two monitors"):
        run(ar_step, AR(np.zeros(2), 0), 0, 5, progress=False,
            monitors=[Monitor("m", lambda s: 0.0, 1), Monitor("m", lambda s: 1.0, 2)])
    tr = run(lambda r, s: (AR(s.x, s.steps + 1), {"accepted": s.x > -1}), AR(np.zeros(2), 0), 0, 5, progress=False)
    assert tr.stats["accepted"].shape == (2, 5)
    # an int seed gives a generator on the state's backend (NumPy here), whatever the active backend
    tr = run(ar_step, AR(np.zeros(2), 0), 3, 5, collect=lambda s, i: {"x": s.x}, progress=False)
    assert isinstance(tr.draws["x"], np.ndarray)


def test_an_interrupted_run_says_what_it_lost_and_how_to_resume(tmp_path):
    def interrupt_at(k):
        def cb(it, state, info):
            if it == k:
                raise KeyboardInterrupt
        return cb

    with pytest.raises(KeyboardInterrupt) as e:
        _run(np, n_iter=50, callback=interrupt_at(7))
    assert "interrupted after 6 of 50 iterations" in " ".join(e.value.__notes__)  # the 7th not recorded
    with pytest.raises(KeyboardInterrupt) as e:
        _run(np, n_iter=50, callback=interrupt_at(23), checkpoint=tmp_path / "r.npz", checkpoint_every=10)
    assert "holds the first 20" in " ".join(e.value.__notes__)


def test_warnings_of_a_fit_point_at_the_callers_line_and_errors_undo_the_fit():
    import warnings as w

    from gpumcmc.models import DPGaussianMixture
    from gpumcmc.models.bayesnet import BayesianNetwork

    X = np.random.default_rng(0).normal(size=(60, 2))
    with pytest.warns(Warning) as caught:
        DPGaussianMixture(method="bem", n_iter=2, progress=False, backend="numpy").fit(X)
        BayesianNetwork.koller().fit(BayesianNetwork.koller().sample(50, random_state=0), n_iter=2, progress=False)
    assert {c.category.__name__ for c in caught} >= {"ConvergenceWarning", "DeprecationWarning"}
    assert all(c.filename == __file__ for c in caught), [(c.filename, c.lineno) for c in caught]
    m = DPGaussianMixture(n_iter=3, progress=False, backend="numpy").fit(X)
    means = m.means_
    with w.catch_warnings():
        w.simplefilter("error")            # a warning made an error fails the fit as a whole
        with pytest.raises(Warning, match="did not converge"):
            m.set_params(method="bem", n_iter=2).fit(X * 3)
    assert m.means_ is means


def test_fits_in_worker_threads_keep_their_warnings_where_they_come_from():
    import threading
    import warnings as w

    from gpumcmc.models import DPGaussianMixture

    X = np.random.default_rng(0).normal(size=(60, 2))
    caught = []

    def fit():
        with w.catch_warnings(record=True) as c:   # per-thread use, as a worker would
            w.simplefilter("always")
            DPGaussianMixture(method="bem", n_iter=2, progress=False, backend="numpy").fit(X)
        caught.extend(c)

    t = threading.Thread(target=fit)
    t.start()
    t.join()
    assert any("did not converge" in str(c.message) for c in caught)


def test_a_fit_in_the_main_thread_leaves_other_threads_warnings_where_they_come_from():
    # Another thread's warning during a main-thread fit is shown from its own line, not taken into the fit's
    # and re-issued at the fit's caller's line.
    import threading
    import warnings as w

    from gpumcmc.sampling._estimator import atomic_fit

    started, done, shown = threading.Event(), threading.Event(), []

    def other():
        started.wait(5)
        w.warn("from the other thread", UserWarning)
        done.set()

    class Slow:
        @atomic_fit
        def fit(self):
            started.set()
            done.wait(5)
            w.warn("from the fit", RuntimeWarning)
            return self

    t = threading.Thread(target=other)
    t.start()
    with w.catch_warnings():
        w.simplefilter("always")
        w.showwarning = lambda m, c, f, n, *a: shown.append((str(m), f, n))
        Slow().fit()
    t.join()
    fit_line = [n for m, f, n in shown if m == "from the fit"]
    other = [(f, n) for m, f, n in shown if m == "from the other thread"]
    assert len(fit_line) == 1 and len(other) == 1
    assert other[0][1] != fit_line[0]     # shown at its own line, in other(), not at Slow().fit()'s


def test_a_fit_that_warns_then_fails_shows_both():
    from gpumcmc.models import BayesianGLM

    X = np.random.default_rng(0).normal(size=(20, 2))
    y = np.r_[(X[:-1, 0] > 0) * 1.0, 2.0][:, None]             # a column (warns), and a 2 for bernoulli (fails)
    with pytest.warns(Warning, match="column-vector"), pytest.raises(ValueError):
        BayesianGLM(n_samples=2, n_warmup=2, progress=False, backend="numpy").fit(X, y)


def test_a_checkpointed_state_with_none_inside_a_tuple_resumes(tmp_path):
    class P(NamedTuple):
        x: object
        parts: tuple

    def st(rng, s):
        return P(s.x + rng.normal(size=s.x.shape), s.parts), None

    kw = dict(n_iter=12, collect=lambda s, i: {"x": s.x}, progress=False, checkpoint=tmp_path / "p.npz",
              checkpoint_every=5)
    whole = run(st, P(np.zeros(2), (np.zeros(3), None)), 3, **dict(kw, checkpoint=None))

    def stop(it, s, i):
        if it == 7:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(st, P(np.zeros(2), (np.zeros(3), None)), 3, callback=stop, **kw)
    back = run(st, P(np.zeros(2), (np.zeros(3), None)), 3, **kw)
    np.testing.assert_array_equal(back.draws["x"], whole.draws["x"])
    assert back.state.parts[1] is None


def test_warnings_of_fits_in_worker_threads_point_at_the_callers_line():
    # In a worker thread a fit's warnings are not re-issued (see atomic_fit): each must carry the stacklevel
    # of the caller's line itself, through atomic_fit's wrapper.
    import threading
    import warnings as w

    from gpumcmc.models import BayesianGLM, DPGaussianMixture

    rs = np.random.default_rng(0)
    X = rs.normal(size=(120, 2))
    y = (X[:, 0] > 0).astype(float)
    caught = []

    def work():
        with w.catch_warnings(record=True) as c:
            w.simplefilter("always")
            BayesianGLM(n_samples=10, n_warmup=10, n_chains=2, random_state=0, progress=False,
                        backend="numpy").fit(X, y[:, None])       # a column y; chains too short to mix
            DPGaussianMixture(n_components=3, n_iter=3, burn_in=1, progress=False, backend="numpy").fit(X + 1e6)
        caught.extend(c)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    kinds = {c.category.__name__ for c in caught}
    assert {"DataConversionWarning", "ConvergenceWarning", "UserWarning"} <= kinds, kinds
    assert all(c.filename == __file__ for c in caught), [(c.filename, c.lineno) for c in caught]
