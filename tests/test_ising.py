"""The Ising model: exact results (Onsager, Kaufman, enumeration), path and backend agreement, bad input.

Statistical checks compare a chain average with an exact value; the error
estimate is the spread of the per-chain means (batch means over independent
chains, Student t with chains - 1 degrees of freedom), at significance ALPHA
per check (conftest), with fixed seeds.
"""

import hashlib
import itertools

import numpy as np
import pytest
from scipy import stats

from conftest import ALPHA
from gpumcmc.models import Ising
from gpumcmc.models import ising as I
from gpumcmc import backend as B
from gpumcmc.random import default_rng


def _within(values, exact, alpha=ALPHA, bias=0.0):
    """Chain means of ``values`` (chains, draws) agree with ``exact`` at level alpha (plus a known bias bound)."""
    means = values.mean(axis=1)
    se = means.std(ddof=1) / np.sqrt(len(means))
    tol = stats.t.ppf(1 - alpha / 2, len(means) - 1) * se + bias
    assert abs(means.mean() - exact) < tol, (means.mean(), exact, tol)
    return se


# --------------------------------------------------------------------------- exact references

def _enumerate(shape, beta, coupling, field, periodic):
    n = int(np.prod(shape))
    states = np.array(list(itertools.product([-1, 1], repeat=n)), dtype=np.int8).reshape(-1, *shape)
    bond = I.bond_sum(states, periodic).astype(np.float64)
    E = -coupling * bond - (states * np.asarray(field)).sum(axis=tuple(range(1, states.ndim)))
    w = np.exp(-beta * (E - E.min()))
    w /= w.sum()
    return states, E, w


def test_a_setting_assigned_directly_takes_effect():
    # Ising works its thresholds out from its settings; `model.beta = 2.0` (not set_params) left the old ones in
    # use, so the run sampled at the old temperature silently. The next call works them out again.
    m = Ising((8, 8), beta=0.1, backend="numpy")
    m.beta = 2.0
    got = m.sample(5, random_state=3, progress=False)
    want = Ising((8, 8), beta=2.0, backend="numpy").sample(5, random_state=3, progress=False)
    np.testing.assert_array_equal(got.magnetization, want.magnetization)
    np.testing.assert_array_equal(got.states, want.states)
    # a state made for another lattice is refused once the shape changed
    state = m.init(1, 0)
    m.shape = (8, 10)
    with pytest.raises(ValueError, match="init"):
        m.step(default_rng(0, backend="numpy"), state)
    assert m.n_sites == 80


@pytest.mark.parametrize("beta", [0.2, I.BETA_C, 0.6])
def test_kaufman_finite_lattice_energy_matches_enumeration(beta):
    for shape in ((4, 4), (2, 4), (4, 2)):
        _, E, w = _enumerate(shape, beta, 1.0, 0.0, True)
        assert abs(I.exact_energy_finite(beta, shape) - (w * E).sum() / 16 * 16 / (shape[0] * shape[1])) < 1e-6


def test_onsager_references():
    assert I.onsager_energy(I.BETA_C) == pytest.approx(-np.sqrt(2), abs=1e-12)
    # a large lattice approaches the infinite one away from T_c
    for beta in (0.3, 0.6):
        assert I.exact_energy_finite(beta, (128, 128)) == pytest.approx(I.onsager_energy(beta), abs=1e-6)
    assert I.onsager_magnetization(0.3) == 0.0
    assert I.onsager_magnetization(0.6) == pytest.approx((1 - np.sinh(1.2) ** -4) ** 0.125)


# --------------------------------------------------------------------------- the sampler against them

@pytest.mark.slow
@pytest.mark.parametrize("beta, shape, sweeps, burn", [
    (0.3, (32, 32), 1000, 100),      # above T_c
    (I.BETA_C, (16, 32), 2000, 300),  # at T_c: exact finite-lattice energy
    (0.6, (32, 32), 600, 100),       # below T_c
])
def test_energy_per_site_is_exact(beta, shape, sweeps, burn):
    res = Ising(shape, beta=beta, backend="numpy").sample(sweeps, burn_in=burn, n_chains=16, random_state=11,
                                                          progress=False, initial="up" if beta > 0.5 else "random")
    se = _within(res.energy, I.exact_energy_finite(beta, shape))
    assert se < 0.01  # the test can tell a wrong temperature apart


@pytest.mark.slow
def test_spontaneous_magnetisation_below_tc():
    beta = 0.6
    res = Ising((32, 32), beta=beta, backend="numpy").sample(600, burn_in=100, n_chains=16, random_state=5,
                                                             progress=False, initial="up")
    # finite-size corrections at beta = 0.6 (correlation length < 1 site) are far below 1e-3
    _within(np.abs(res.magnetization), float(I.onsager_magnetization(beta)), bias=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("boundary, shape", [("open", (3, 3)), ("periodic", (2, 4)), ("open", (3, 4)),
                                             ("open", (2, 2, 3)), ("periodic", (2, 2, 2))])
def test_field_per_site_matches_enumeration(boundary, shape):
    rs = np.random.default_rng(3)
    field = rs.normal(0, 0.7, shape)
    beta, J = 0.7, 0.8
    states, E, w = _enumerate(shape, beta, J, field, boundary == "periodic")
    n = int(np.prod(shape))
    model = Ising(shape, coupling=J, field=field, beta=beta, boundary=boundary, backend="numpy")
    res = model.sample(3000, burn_in=50, n_chains=16, random_state=2, progress=False)
    _within(res.energy, (w * E).sum() / n)
    _within(res.magnetization, (w * states.sum(axis=tuple(range(1, states.ndim)))).sum() / n)


@pytest.mark.slow
@pytest.mark.parametrize("boundary, shape", [("open", (3, 3)), ("periodic", (2, 4)), ("periodic", (4, 2))])
def test_couplings_per_bond_match_enumeration(boundary, shape):
    rs = np.random.default_rng(5)
    J = rs.normal(0.3, 0.8, (2, *shape))  # mixed signs: frustrated plaquettes too
    field = rs.normal(0, 0.3, shape)
    beta, periodic = 0.9, boundary == "periodic"
    n = int(np.prod(shape))
    states = np.array(list(itertools.product([-1, 1], repeat=n)), dtype=np.int8).reshape(-1, *shape)
    E = -I._weighted_bond_sum(states, J, periodic) - (states * field).sum(axis=(1, 2))
    w = np.exp(-beta * (E - E.min()))
    w /= w.sum()
    model = Ising(shape, coupling=J, field=field, beta=beta, boundary=boundary, backend="numpy")
    assert model.path == "byte"
    res = model.sample(3000, burn_in=50, n_chains=16, random_state=6, progress=False)
    np.testing.assert_allclose(res.energy[:, -1], model.energy(res.states), rtol=1e-12)
    _within(res.energy, (w * E).sum() / n)
    _within(res.magnetization, (w * states.sum(axis=(1, 2))).sum() / n)


def test_state_distribution_chi_square():
    # The whole distribution on a 2 x 4 periodic lattice with a uniform field: 256 states.
    # Draws thinned by 5 sweeps (integrated autocorrelation ~1 at beta 0.3); one chi-square test at ALPHA.
    shape, beta, h = (2, 4), 0.3, 0.2
    states, _, w = _enumerate(shape, beta, 1.0, h, True)
    model = Ising(shape, field=h, beta=beta, backend="numpy", method="byte")
    rng = default_rng(8, backend="numpy")
    st = model.init(64, rng)
    counts = np.zeros(256)
    code = 2 ** np.arange(8)
    for sweep in range(400):
        st, _ = model.step(rng, st, observe=False)
        if sweep % 5 == 4:
            idx = ((st.spins.reshape(64, 8) > 0) @ code)
            counts += np.bincount(idx, minlength=256)
    order = ((states.reshape(256, 8) > 0) @ code)
    p = np.empty(256)
    p[order] = w
    keep = p * counts.sum() >= 5
    exp_, obs = p[keep] * counts.sum(), counts[keep]
    if not keep.all():  # pool the rare states into one bin
        exp_, obs = np.append(exp_, p[~keep].sum() * counts.sum()), np.append(obs, counts[~keep].sum())
    assert stats.chisquare(obs, exp_).pvalue > ALPHA


# --------------------------------------------------------------------------- paths agree

def test_ties_of_the_high_halves_are_settled_by_the_low_ones():
    # U = a 2^16 + b with b from call | 2^63: thresholds built to tie with a on half the sites.
    key, off = (3, 4), 9
    calls = np.arange(10, dtype=np.uint64)
    a = I._halves16(I._words(key, off, np.zeros(1, np.uint64), 10)[0])  # (10, 8)
    b = I._halves16(I._words(key, off, np.array([1 << 63], np.uint64), 10)[0])
    rs = np.random.default_rng(0)
    T = np.where(rs.random(a.shape) < 0.5, (a << np.uint64(16)) + rs.integers(0, 2**16, a.shape).astype(np.uint64),
                 rs.integers(0, 2**32, a.shape).astype(np.uint64))
    up = I._decide(a, T, calls[:, None], np.arange(8)[None, :], key, off)
    np.testing.assert_array_equal(up, ((a << np.uint64(16)) | b) < T)


def test_multispin_and_byte_agree_over_many_ties():
    # ~30 ties of the 16-bit halves over 2 million site updates, settled the same way on both paths
    kw = dict(n_chains=8, random_state=7, progress=False)
    a = Ising((32, 64), beta=0.4, method="byte", backend="numpy").sample(120, **kw)
    b = Ising((32, 64), beta=0.4, method="multispin", backend="numpy").sample(120, **kw)
    assert np.array_equal(a.states, b.states)


def test_pack_roundtrip():
    s = np.where(np.random.default_rng(0).random((3, 6, 64)) < 0.5, 1, -1).astype(np.int8)
    assert np.array_equal(I.unpack(I.pack(s)), s)


@pytest.mark.parametrize("beta, shape", [(0.3, (6, 64)), (I.BETA_C, (4, 32)), (0.8, (8, 96))])
def test_multispin_and_byte_paths_give_the_same_states(beta, shape):
    kw = dict(n_chains=3, random_state=4, progress=False)
    a = Ising(shape, beta=beta, field=0.1, method="byte", backend="numpy").sample(25, **kw)
    b = Ising(shape, beta=beta, field=0.1, method="multispin", backend="numpy").sample(25, **kw)
    assert np.array_equal(a.states, b.states)
    np.testing.assert_array_equal(a.energy, b.energy)
    np.testing.assert_array_equal(a.magnetization, b.magnetization)


@pytest.mark.parametrize("boundary, field, shape", [("periodic", 0.0, (6, 10)), ("open", "sites", (6, 9)),
                                                    ("periodic", "sites", (6, 10)), ("open", 0.3, (3, 5, 7)),
                                                    ("periodic", "sites", (4, 6, 8))])
def test_energy_from_the_sweep_equals_recomputed(boundary, field, shape):
    if field == "sites":
        field = np.random.default_rng(1).normal(size=shape)
    model = Ising(shape, field=field, beta=0.5, boundary=boundary, backend="numpy")
    res = model.sample(5, n_chains=2, random_state=0, progress=False)
    np.testing.assert_allclose(res.energy[:, -1], model.energy(res.states), rtol=1e-12)
    np.testing.assert_allclose(res.magnetization[:, -1], res.states.reshape(2, -1).mean(axis=1), rtol=1e-12)


def test_result_exports_to_arviz():
    res = Ising((4, 4), backend="numpy").sample(10, n_chains=2, random_state=0, progress=False)
    idata = res.to_arviz()
    assert idata.posterior["energy"].shape == (2, 10)
    np.testing.assert_array_equal(idata.posterior["energy"].values, res.energy)
    np.testing.assert_array_equal(idata.posterior["magnetization"].values, res.magnetization)


def test_denoise_recovers_the_image():
    rs = np.random.default_rng(0)
    clean = np.zeros((40, 48), dtype=np.uint8)
    clean[8:32, 10:22] = 1
    clean[15:25, 28:44] = 1
    noisy = np.where(rs.random(clean.shape) < 0.1, 1 - clean, clean)
    post = I.denoise(noisy, n_sweeps=30, burn_in=10, n_chains=2, random_state=1, progress=False, backend="numpy")
    assert post.shape == clean.shape and 0 <= post.min() and post.max() <= 1
    err_before = (noisy != clean).mean()
    err_after = ((post > 0.5) != clean).mean()
    assert err_after < err_before / 3, (err_before, err_after)


# --------------------------------------------------------------------------- draws and figures of sample

# sha256 (first 16 hex digits) of the final spins (int8) of sample(7, random_state=5, progress=False,
# **call), recorded before sample counted its figures into per-sweep slots: the spins of a seed never change.
_FIELD = np.random.default_rng(1).normal(size=(6, 9))
_BONDS = np.random.default_rng(3).normal(0.4, 0.7, (2, 6, 8))
_SPINS = [
    pytest.param(dict(shape=(8, 64), beta=0.44), dict(n_chains=3), "af2888af3026318a", id="multispin"),
    pytest.param(dict(shape=(8, 64), beta=0.44, method="byte"), dict(n_chains=3), "af2888af3026318a", id="byte"),
    pytest.param(dict(shape=(6, 9), beta=0.5, boundary="open", field=_FIELD), dict(n_chains=2), "a64187407d2cac03",
                 id="open-field-per-site"),
    pytest.param(dict(shape=(4, 6, 8), beta=0.3, field=0.1), dict(n_chains=2), "fc7e8627561a299a", id="cubic"),
    pytest.param(dict(shape=(6, 8), beta=0.7, coupling=_BONDS, field=0.1), dict(n_chains=2), "55dba7737facb12c",
                 id="bonds"),
    pytest.param(dict(shape=(8, 32), beta=0.44), dict(n_chains=2, burn_in=3, thin=2), "43d43321c556fc25",
                 id="burn-in-thin"),
]


@pytest.mark.parametrize("model, call, digest", _SPINS)
def test_spins_of_a_seed_are_unchanged(xp, model, call, digest):
    res = Ising(backend=xp.__name__, **model).sample(7, random_state=5, progress=False, **call)
    spins = np.ascontiguousarray(B.to_host(res.states))
    assert hashlib.sha256(spins.tobytes()).hexdigest()[:16] == digest


def _second_pass(model, xp, n_sweeps, burn_in, thin, n_chains, seed):
    """Magnetisation and energy per site of every kept sweep, from the spins (observables off in the sweep)."""
    rng = default_rng(seed, backend=xp.__name__)
    st = model.init(n_chains, rng)
    mag, energy = [], []
    for j in range(burn_in + n_sweeps):
        st, _ = model.step(rng, st, observe=False)
        i = j - burn_in
        if i >= 0 and (i + 1) % thin == 0:
            s = model.spins(st)
            mag.append(B.to_host(s.reshape(n_chains, -1).astype(xp.float64).mean(axis=1)))
            energy.append(B.to_host(model.energy(s)))
    return np.stack(mag, axis=1), np.stack(energy, axis=1)


@pytest.mark.parametrize("kw, sweeps, burn_in, thin", [
    (dict(shape=(8, 64), field=0.0), 9, 0, 1),        # multispin, every sweep kept
    (dict(shape=(6, 32), field=0.15), 10, 3, 3),      # multispin, a field; the last sweep not kept
    (dict(shape=(6, 10)), 6, 2, 2),                   # byte path, periodic
    (dict(shape=(5, 7), boundary="open", field=-0.2), 5, 1, 1),
    (dict(shape=(4, 6, 8), field=0.1), 4, 0, 2),      # cubic
    (dict(shape=(6, 8), field=np.linspace(-1, 1, 48).reshape(6, 8)), 4, 1, 1),  # a field per site
])
def test_figures_counted_in_the_sweep_equal_a_second_pass(xp, kw, sweeps, burn_in, thin):
    model = Ising(beta=0.45, backend=xp.__name__, **kw)
    res = model.sample(sweeps, burn_in=burn_in, thin=thin, n_chains=3, random_state=12, progress=False)
    mag, energy = _second_pass(model, xp, sweeps, burn_in, thin, 3, 12)
    assert res.magnetization.shape == res.energy.shape == (3, sweeps // thin)
    np.testing.assert_array_equal(res.magnetization, mag)
    np.testing.assert_allclose(res.energy, energy, rtol=1e-12, atol=1e-14)
    # and the final state's counts are the last sweep's
    state = res.trace.state
    np.testing.assert_array_equal(B.to_host(state.counts[:, 0]), (B.to_host(res.states) > 0).reshape(3, -1).sum(1))
    # a test that can fail: another seed gives other figures
    other = model.sample(sweeps, burn_in=burn_in, thin=thin, n_chains=3, random_state=13, progress=False)
    assert not np.array_equal(other.magnetization, mag)


def test_step_figures_equal_a_second_pass(xp):
    for method in ("multispin", "byte"):
        model = Ising((6, 32), beta=0.4, field=0.2, method=method, backend=xp.__name__)
        rng = default_rng(3, backend=xp.__name__)
        st = model.init(2, rng)
        for _ in range(3):
            st, info = model.step(rng, st)
            s = model.spins(st)
            np.testing.assert_array_equal(B.to_host(info.magnetization),
                                          B.to_host(s.reshape(2, -1).astype(xp.float64).mean(axis=1)))
            np.testing.assert_allclose(B.to_host(info.energy), B.to_host(model.energy(s)), rtol=1e-12)


def test_sample_twice_with_one_seed_gives_the_same_draws(xp):
    model = Ising((8, 32), beta=0.4, backend=xp.__name__)
    a = model.sample(6, n_chains=2, random_state=4, progress=False)
    b = model.sample(6, n_chains=2, random_state=np.random.SeedSequence(4), progress=False)
    np.testing.assert_array_equal(a.magnetization, b.magnetization)
    assert np.array_equal(B.to_host(a.states), B.to_host(b.states))
    g = default_rng(4, backend=xp.__name__)  # a gpumcmc Generator is used, and moved on, as given
    np.testing.assert_array_equal(model.sample(6, n_chains=2, random_state=g, progress=False).energy, a.energy)
    assert not np.array_equal(model.sample(6, n_chains=2, random_state=g, progress=False).energy, a.energy)
    c = model.sample(6, n_chains=2, random_state=5, progress=False)
    assert not np.array_equal(B.to_host(a.states), B.to_host(c.states))


@pytest.mark.parametrize("method", ["multispin", "byte"])
def test_a_start_of_one_state_per_chain_runs_as_the_same_start_broadcast(xp, method):
    model = Ising((4, 32), beta=0.4, method=method, backend=xp.__name__)
    given = np.ones((2, 4, 32), dtype=np.int8)  # every chain's own start, already of the spins' dtype
    a = model.sample(3, n_chains=2, random_state=1, progress=False, initial=xp.asarray(given))
    b = model.sample(3, n_chains=2, random_state=1, progress=False, initial="up")
    np.testing.assert_array_equal(a.energy, b.energy)
    assert np.array_equal(B.to_host(a.states), B.to_host(b.states)) and (given == 1).all()


def test_sample_with_a_progress_bar_gives_the_same_draws():
    model = Ising((8, 32), beta=0.4, backend="numpy")
    a = model.sample(8, burn_in=2, n_chains=2, random_state=4, progress=False)
    b = model.sample(8, burn_in=2, n_chains=2, random_state=4, progress=True)
    np.testing.assert_array_equal(a.energy, b.energy)
    assert "|m|" in b.trace.monitors


@pytest.mark.parametrize("kw", [dict(), dict(field=np.zeros((4, 4)))], ids=["uniform", "field-per-site"])
def test_zero_sweeps_give_an_empty_result(kw):
    model = Ising((4, 4), beta=0.4, backend="numpy", **kw)
    res = model.sample(0, burn_in=3, n_chains=2, random_state=0, progress=False)
    assert res.magnetization.shape == res.energy.shape == (2, 0)
    assert res.states.shape == (2, 4, 4)
    after = model.sample(3, n_chains=2, random_state=0, progress=False)  # the same 3 sweeps, kept
    assert np.array_equal(res.states, after.states)


# --------------------------------------------------------------------------- bad input

_BAD = [
    pytest.param(lambda: Ising((5, 6)), ValueError, "even sides", id="odd-periodic"),
    pytest.param(lambda: Ising((8.5, 8)), ValueError, "shape", id="float-side"),
    pytest.param(lambda: Ising(("8", 8)), ValueError, "shape", id="string-side"),
    pytest.param(lambda: Ising((True, 8)), ValueError, "shape", id="bool-side"),
    pytest.param(lambda: Ising((4, 4), field=np.zeros((4, 5))), ValueError, "lattice's shape", id="field-shape"),
    pytest.param(lambda: Ising((4, 4), backend="numpy").init(1, 0, initial=np.zeros((4, 4))), ValueError,
                 r"\+1 and -1", id="initial-values"),
    pytest.param(lambda: Ising((4, 4), method="multispin"), ValueError, "method='byte'", id="multispin-width"),
    pytest.param(lambda: Ising((4, 4), boundary="helical"), ValueError, "boundary", id="boundary"),
    pytest.param(lambda: I.denoise(np.full((4, 4), 0.5), backend="numpy"), ValueError, "binary", id="denoise"),
    pytest.param(lambda: Ising((4, 4), field=np.full((4, 4), np.nan)), ValueError, "NaN", id="field-nan"),
    pytest.param(lambda: Ising((4, 4, 4, 4)), ValueError, "cubic", id="four-d"),
    pytest.param(lambda: Ising((4, 6), coupling=np.ones((4, 6))), ValueError, r"\(2, L, W\)", id="coupling-shape"),
    pytest.param(lambda: Ising((4, 4, 32), method="multispin"), ValueError, "2-D periodic", id="multispin-3d"),
    pytest.param(lambda: Ising((4, 4), backend="numpy").sample(-1, progress=False), ValueError, "n_sweeps",
                 id="negative-sweeps"),
    pytest.param(lambda: Ising((4, 4), backend="numpy").sample(2.5, progress=False), TypeError, "n_sweeps",
                 id="float-sweeps"),
    pytest.param(lambda: Ising((4, 4), backend="numpy").sample(2, burn_in=-1, progress=False), ValueError, "burn_in",
                 id="negative-burn-in"),
    pytest.param(lambda: Ising((4, 4), backend="numpy").sample(2, thin=0, progress=False), ValueError, "thin",
                 id="zero-thin"),
    pytest.param(lambda: Ising((4, 4), backend="numpy").sample(2, n_chains=0, progress=False), ValueError,
                 "n_chains", id="zero-chains"),
    # energy summed a smaller lattice and divided by the model's sites, and read 0/1 spins as -0.0
    pytest.param(lambda: Ising((8, 8), backend="numpy").energy(np.ones((4, 4))), ValueError, "lattice is",
                 id="energy-shape"),
    pytest.param(lambda: Ising((8, 8), backend="numpy").energy(np.ones(64)), ValueError, "lattice is",
                 id="energy-flat"),
    pytest.param(lambda: Ising((4, 4), backend="numpy").energy(np.zeros((4, 4))), ValueError, "2 \\* b - 1",
                 id="energy-zero-one"),
    pytest.param(lambda: Ising((4, 4), backend="numpy").energy(np.array([["a"] * 4] * 4)), TypeError, "spins",
                 id="energy-strings"),
    # n_sweeps=0 gave an all-NaN image (the mean of no sweeps)
    pytest.param(lambda: I.denoise(np.ones((4, 4)), n_sweeps=0, backend="numpy", progress=False), ValueError,
                 "n_sweeps", id="denoise-zero-sweeps"),
]


@pytest.mark.parametrize("call, error, match", _BAD)
def test_bad_input_says_what_to_do(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_energy_takes_a_list_as_an_array():
    # a list of spins raised AttributeError (no .ndim); it is read as an array on the model's backend
    model = Ising((4, 4), backend="numpy")
    spins = np.where(np.random.default_rng(0).random((2, 4, 4)) < 0.5, 1, -1).astype(np.int8)
    np.testing.assert_array_equal(model.energy(spins.tolist()), model.energy(spins))
    assert model.energy(spins[0].tolist()) == model.energy(spins[0])


def test_settings_are_parameters_that_clone_and_set_params_apply():
    from sklearn.base import clone

    model = Ising((8, 32), beta=0.4, field=0.1, backend="numpy")
    twin = clone(model)
    assert twin.get_params() == model.get_params() and twin is not model
    a = model.sample(5, n_chains=2, random_state=1, progress=False)
    np.testing.assert_array_equal(a.energy, twin.sample(5, n_chains=2, random_state=1, progress=False).energy)
    hot = clone(model).set_params(beta=0.1)
    assert hot.beta == 0.1 and model.beta == 0.4
    np.testing.assert_array_equal(hot.sample(5, n_chains=2, random_state=1, progress=False).energy,
                                  Ising((8, 32), beta=0.1, field=0.1, backend="numpy")
                                  .sample(5, n_chains=2, random_state=1, progress=False).energy)
    with pytest.raises(ValueError, match="boundary"):
        model.set_params(boundary="helical")
    assert model.boundary == "periodic"
    np.testing.assert_array_equal(model.sample(5, n_chains=2, random_state=1, progress=False).energy, a.energy)


def test_open_boundaries_take_odd_sides():
    assert Ising((5, 6), boundary="open").shape == (5, 6)
    assert Ising((np.int64(6), 8)).shape == (6, 8)


# --------------------------------------------------------------------------- GPU

@pytest.mark.parametrize("shape, boundary, field, method", [
    ((64, 64), "periodic", 0.0, "multispin"),
    ((64, 64), "periodic", 0.2, "byte"),
    ((30, 45), "open", "sites", "byte"),
    ((32, 34), "periodic", "sites", "byte"),
    ((6, 10, 12), "periodic", 0.1, "byte"),
    ((5, 7, 9), "open", "sites", "byte"),
    ((20, 26), "periodic", "bonds", "byte"),
    ((21, 17), "open", "bonds", "byte"),
])
def test_gpu_matches_numpy_twin(cp, shape, boundary, field, method):
    coupling = 1.0
    if field == "bonds":
        coupling = np.random.default_rng(3).normal(0.4, 0.7, (2, *shape))
        field = 0.1
    if field == "sites":
        field = np.random.default_rng(2).normal(size=shape)
    kw = dict(coupling=coupling, field=field, beta=0.45, boundary=boundary, method=method)
    a = Ising(shape, backend="numpy", **kw).sample(40, n_chains=5, random_state=9, progress=False)
    b = Ising(shape, backend="cupy", **kw).sample(40, n_chains=5, random_state=9, progress=False)
    assert np.array_equal(a.states, cp.asnumpy(b.states))
    np.testing.assert_array_equal(a.magnetization, b.magnetization)
    np.testing.assert_allclose(a.energy, b.energy, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(256, 512), (34, 96), (2, 32)])
def test_gpu_multispin_and_byte_agree(cp, shape):
    kw = dict(n_chains=4, random_state=3, progress=False)
    a = Ising(shape, beta=0.42, method="byte", backend="cupy").sample(50, **kw)
    b = Ising(shape, beta=0.42, method="multispin", backend="cupy").sample(50, **kw)
    assert bool((a.states == b.states).all())
    np.testing.assert_array_equal(a.energy, b.energy)


@pytest.mark.parametrize("beta, L, sweeps, burn", [(0.35, 128, 4000, 1000), (I.BETA_C, 64, 8000, 2000),
                                                   (0.55, 128, 4000, 1000)])
def test_gpu_onsager_large_lattice(cp, beta, L, sweeps, burn):
    shape = (L, L)
    res = Ising(shape, beta=beta, backend="cupy").sample(sweeps, burn_in=burn, n_chains=32, random_state=21,
                                                         progress=False, initial="up" if beta > 0.5 else "random")
    _within(res.energy, I.exact_energy_finite(beta, shape))
    if beta > I.BETA_C:
        _within(np.abs(res.magnetization), float(I.onsager_magnetization(beta)), bias=2e-3)


def test_gpu_denoise_matches_numpy(cp):
    img = np.zeros((50, 37), dtype=np.uint8)
    img[10:40, 5:30] = 1
    a = I.denoise(img, n_sweeps=10, burn_in=2, n_chains=3, random_state=0, progress=False, backend="numpy")
    b = I.denoise(img, n_sweeps=10, burn_in=2, n_chains=3, random_state=0, progress=False, backend="cupy")
    np.testing.assert_array_equal(a, cp.asnumpy(b))


def test_gpu_figures_of_the_general_multispin_loop(cp):
    # 600 chains of 2 x 16,384 sites: one block per chain, fewer threads than words in a row, so the
    # multispin kernel takes its general loop (not the row-pair fast path); figures and spins as elsewhere.
    model = Ising((2, 16384), beta=0.45, field=0.05, backend="cupy")
    res = model.sample(3, n_chains=600, random_state=8, progress=False)
    mag, energy = _second_pass(model, cp, 3, 0, 1, 600, 8)
    np.testing.assert_array_equal(res.magnetization, mag)
    np.testing.assert_allclose(res.energy, energy, rtol=1e-12, atol=1e-14)
    byte = Ising((2, 16384), beta=0.45, field=0.05, method="byte", backend="cupy")
    assert bool((byte.sample(3, n_chains=600, random_state=8, progress=False).states == res.states).all())


def test_set_params_with_an_unknown_name_changes_nothing():
    m = Ising((8, 8), beta=0.2)
    with pytest.raises(ValueError):
        m.set_params(beta=0.9, bogus=1)
    assert m.beta == 0.2 and m.get_params()["beta"] == 0.2


def test_settings_that_a_state_depends_on_are_checked_at_every_step():
    """set_params(shape=...) (or boundary) after init used to run on: the multispin path reported a
    magnetisation divided by the new lattice's sites, the byte path failed in a reshape. Now step says to call
    init() again; a change of beta keeps the state (annealing)."""
    rng = default_rng(0, backend="numpy")
    m = Ising((8, 32), beta=0.3, backend="numpy")
    st = m.init(2, rng, initial="up")
    m.set_params(beta=0.4)
    st, info = m.step(rng, st)
    for change in (dict(shape=(16, 32)), dict(shape=(8, 32), boundary="open")):
        m.set_params(**change)
        with pytest.raises(ValueError, match=r"call init\(\) again"):
            m.step(rng, st)


def test_arrays_are_copied_and_beta_is_one_number():
    """An array edited in place after it was set changed the energies the model reported but not the
    sampler's thresholds; both now keep the values set. beta=None or an array named nothing useful."""
    J = np.ones((2, 4, 4))
    m = Ising((4, 4), coupling=J, beta=1.0, backend="numpy")
    J *= -1
    r = m.sample(50, n_chains=2, random_state=0, progress=False, initial="up")
    assert r.energy[:, -1].mean() < -1.5  # ferromagnetic, as set: not +1.97 with the edited J
    for bad in (None, np.array([0.3, 0.4]), "0.5", True):
        with pytest.raises(TypeError, match="beta must be one number"):
            Ising((4, 4), beta=bad, backend="numpy")
    with pytest.raises(TypeError, match="field must be real"):
        Ising((4, 4), field=1j, backend="numpy")


def test_exact_energies_at_the_ends_of_the_temperature_range():
    """beta = 0 gave NaN (it is 0), beta J of 1e-5 the wrong sign (cancellation in Kaufman's form), beta of
    400 NaN (cosh overflows; it is -2 J), a negative coupling NaN (the lattice is bipartite: as |J|). Against
    every state counted on 4 x 4 and the high-temperature series t = tanh(beta) on 16 x 16."""
    from gpumcmc.models.ising.exact import exact_energy_finite, onsager_energy

    def _mean_bonds(K, rows, cols):  # every state counted
        n = rows * cols
        s = (2 * ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1) - 1).reshape(-1, rows, cols)
        b = (s * np.roll(s, 1, 1)).sum((1, 2)) + (s * np.roll(s, 1, 2)).sum((1, 2))
        w = np.exp(K * (b - b.max()))
        return float((b * w).sum() / w.sum())

    assert exact_energy_finite(0.0, (16, 16)) == 0.0 and float(onsager_energy(0.0)) == 0.0
    assert exact_energy_finite(400.0, (16, 16)) == -2.0 and float(onsager_energy(400.0)) == -2.0
    for b in (1e-6, 1e-5, 1e-3, 0.3, 0.6):
        t = np.tanh(b)
        for shape in ((4, 4), (2, 8), (2, 2), (4, 2)):
            want = -_mean_bonds(b, *shape) / (shape[0] * shape[1])
            assert exact_energy_finite(b, shape) == pytest.approx(want, rel=1e-9), (b, shape)
        if b < 0.01:
            assert exact_energy_finite(b, (16, 16)) == pytest.approx(-2 * t - 4 * t ** 3, rel=1e-9)
    assert exact_energy_finite(0.3, (8, 8), coupling=-1.0) == pytest.approx(exact_energy_finite(0.3, (8, 8)))
    assert float(onsager_energy(0.3, coupling=-1.0)) == pytest.approx(float(onsager_energy(0.3)))
    # the series and Kaufman's form agree where they meet
    assert exact_energy_finite(0.0099999, (16, 16)) == pytest.approx(exact_energy_finite(0.0100001, (16, 16)),
                                                                     abs=1e-6)


def test_an_ising_run_checkpoints(tmp_path):
    """The state's lattice record is a string, which a checkpoint stores (a tuple was refused)."""
    from gpumcmc.sampling import run

    m = Ising((16, 16), beta=0.3, backend="numpy")
    rng = default_rng(0, backend="numpy")
    path = tmp_path / "ising.npz"
    tr = run(m.step, m.init(4, rng), rng, 20, checkpoint=path, progress=False)
    assert path.exists() and tr.iterations == 20
