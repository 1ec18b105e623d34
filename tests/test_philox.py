"""Philox4x32-10 known answers, the uniform/normal conversions, and CPU/GPU identity.

False-failure budget (per backend): the KS tests below make 9 checks at
ALPHA = 1e-4 each (4 in test_uniform_and_normal_match_their_laws, 5 in
test_per_element_parameters_broadcast), so a correct generator fails with
probability below 9e-4 for a seed chosen blind; the seeds are fixed, so a pass
is a pass forever.
"""

import numpy as np
import pytest
from scipy import stats

from conftest import ALPHA, max_ulp_diff, to_np
from gpumcmc.random import _fill, _philox, default_rng, philox4x32

# Random123's kat_vectors for philox4x32_10.
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("ctr,key,expected", KAT)
def test_known_answers(xp, ctr, key, expected):
    out = philox4x32(xp.asarray(ctr, dtype=xp.uint32), xp.asarray(key, dtype=xp.uint32))
    assert to_np(out).tolist() == list(expected)


def test_broadcasting_and_batch(xp):
    ctr = xp.asarray([k[0] for k in KAT], dtype=xp.uint32)
    key = xp.asarray([k[1] for k in KAT], dtype=xp.uint32)
    out = to_np(philox4x32(ctr[:, None, :], key[:, None, :]))
    assert out.shape == (3, 1, 4)
    assert out[:, 0, :].tolist() == [list(k[2]) for k in KAT]
    shared_key = to_np(philox4x32(ctr[:1], key[0]))
    assert shared_key[0].tolist() == list(KAT[0][2])


def test_rejects_wrong_dtype_and_shape():
    with pytest.raises(TypeError, match="uint32"):
        philox4x32(np.zeros(4, np.int64), np.zeros(2, np.uint32))
    with pytest.raises(ValueError, match=r"\(\.\.\., 4\)"):
        philox4x32(np.zeros(3, np.uint32), np.zeros(2, np.uint32))


def test_uniforms_lie_strictly_inside_the_unit_interval():
    w = np.array([0, 1, 511, 512, 0xFFFFFFFF], dtype=np.uint64)
    f32 = _philox.u01_f32(w)
    assert f32.dtype == np.float32
    assert f32[0] == np.float32(2.0**-24) and f32[-1] == np.float32(1 - 2.0**-24)
    assert np.all((f32 > 0) & (f32 < 1))
    f64 = _philox.u01_f64(w, w)
    assert f64[0] == 2.0**-53 and f64[-1] == 1 - 2.0**-53
    assert np.all((f64 > 0) & (f64 < 1))


def test_sincospi_matches_the_exact_values():
    x = np.array([0.0, 0.25, 0.5, 1.0, 1.5, 1.75, 0.125])
    s, c = _philox.sincospi(x)
    np.testing.assert_allclose(s, np.sin(np.pi * x), atol=1e-15)
    np.testing.assert_allclose(c, np.cos(np.pi * x), atol=1e-15)
    assert s[2] == 1.0 and c[2] == 0.0 and s[3] == 0.0 and c[4] == 0.0


def test_same_seed_same_draws_and_calls_never_share_counters(xp):
    a = default_rng(7, backend=xp.__name__)
    b = default_rng(7, backend=xp.__name__)
    x1, x2 = a.random(1000), a.random(1000)
    assert np.array_equal(to_np(x1), to_np(b.random(1000)))
    assert not np.any(to_np(x1) == to_np(x2))
    assert a.offset == 2


def test_element_draws_do_not_depend_on_the_request_size():
    # Element i is keyed by its index, so a longer request extends a shorter one.
    for dtype in (np.float32, np.float64):
        for kind in ("uniform", "normal", "exponential"):
            short = _fill.fill_numpy(kind, 1001, dtype, (1, 2), 5)
            long = _fill.fill_numpy(kind, (1 << 18) * 4 + 7, dtype, (1, 2), 5)
            assert np.array_equal(short, long[:1001])


def test_spawn_gives_independent_streams():
    kids = default_rng(3, backend="numpy").spawn(3)
    draws = [k.random(64) for k in kids]
    assert len({d.tobytes() for d in draws}) == 3
    again = default_rng(3, backend="numpy").spawn(3)[1].random(64)
    assert np.array_equal(draws[1], again)


def test_default_rng_accepts_seed_kinds():
    g = default_rng(1)
    assert default_rng(g) is g
    ss = np.random.SeedSequence(1)
    assert default_rng(ss).key == g.key
    a = default_rng(np.random.default_rng(5))
    b = default_rng(np.random.default_rng(5))
    assert a.key == b.key
    assert default_rng().key != default_rng().key


def test_bad_arguments():
    rng = default_rng(0, backend="numpy")
    with pytest.raises(TypeError, match="float32 or float64"):
        rng.random(3, dtype=np.int32)
    with pytest.raises(ValueError, match="non-negative"):
        rng.random(-1)
    assert rng.random(0).shape == (0,)
    # spawn(-1) raised OverflowError from SeedSequence
    with pytest.raises(ValueError, match="n_children"):
        rng.spawn(-1)
    assert rng.spawn(0) == []


# A float size raised "'float' object is not iterable" (and a float inside a tuple, or a string, was read
# as an integer): every draw method checks size in one place, with NumPy's error types.
_SIZED = [lambda r, size: r.random(size), lambda r, size: r.uniform(0, 1, size), lambda r, size: r.normal(size=size),
          lambda r, size: r.standard_normal(size), lambda r, size: r.gamma(1.0, size=size),
          lambda r, size: r.beta(1.0, 2.0, size), lambda r, size: r.dirichlet([1.0, 2.0], size),
          lambda r, size: r.standard_exponential(size), lambda r, size: r.exponential(1.0, size),
          lambda r, size: r.wishart(3, np.eye(2), size), lambda r, size: r.invwishart(3, np.eye(2), size)]


@pytest.mark.parametrize("size", [2.5, 2.0, (2, 3.0), "3"])
def test_every_draw_method_checks_size_alike(size):
    rng = default_rng(0, backend="numpy")
    for draw in _SIZED:
        with pytest.raises(TypeError, match="size must be None, an integer or a sequence of integers"):
            draw(rng, size)
    assert rng.random(np.array([2, 3])).shape == (2, 3) and rng.gamma(1.0, size=np.int64(2)).shape == (2,)


# (call, error, words the message must hold). Parameters given as callables of
# ``xp`` are built on the backend under test; numbers are checked on the host.
BAD_PARAMETERS = [
    pytest.param(lambda r, xp: r.normal(0, -1, size=3), ValueError, "scale must be a finite number >= 0",
                 id="normal-negative-scale"),
    pytest.param(lambda r, xp: r.normal(0, float("nan"), size=3), ValueError, "scale", id="normal-nan-scale"),
    pytest.param(lambda r, xp: r.normal(0, xp.asarray([1.0, -1.0])), ValueError, "scale must be non-negative",
                 id="normal-negative-scale-array"),
    pytest.param(lambda r, xp: r.normal("0", 1.0, size=3), TypeError, "loc .*string", id="normal-str-loc"),
    pytest.param(lambda r, xp: r.normal(0, 1 + 2j, size=3), TypeError, "scale must be real", id="normal-complex"),
    pytest.param(lambda r, xp: r.uniform(0, "1", size=3), TypeError, "high .*string", id="uniform-str-high"),
    pytest.param(lambda r, xp: r.gamma(1 + 2j, size=3), TypeError, "shape must be real, got complex",
                 id="gamma-complex-shape"),
    pytest.param(lambda r, xp: r.gamma(np.array([1 + 2j, 2.0])), TypeError, "shape must be real",
                 id="gamma-complex-array"),
    pytest.param(lambda r, xp: r.gamma("2", size=3), TypeError, "shape .*the string '2'.*float",
                 id="gamma-str-shape"),
    pytest.param(lambda r, xp: r.gamma(["2", "3"]), TypeError, "shape must hold real numbers", id="gamma-str-list"),
    pytest.param(lambda r, xp: r.gamma(2.0, "1", size=3), TypeError, "scale .*string", id="gamma-str-scale"),
    pytest.param(lambda r, xp: r.gamma(np.array([1.0, None], dtype=object)), TypeError, "shape must hold real",
                 id="gamma-object-array"),
    pytest.param(lambda r, xp: r.beta(1j, 1.0, size=3), TypeError, "a must be real", id="beta-complex"),
    pytest.param(lambda r, xp: r.dirichlet(["1", "2"]), TypeError, "alpha must hold real", id="dirichlet-str"),
    pytest.param(lambda r, xp: r.exponential("1", size=3), TypeError, "scale .*string", id="exponential-str"),
    pytest.param(lambda r, xp: r.wishart(3 + 0j, np.eye(2)), TypeError, "df must be real", id="wishart-complex-df"),
]


@pytest.mark.parametrize("call,error,message", BAD_PARAMETERS)
def test_bad_parameters_raise_naming_the_argument(xp, call, error, message):
    rng = default_rng(0, backend=xp.__name__)
    with pytest.raises(error, match=message):
        call(rng, xp)


def test_good_parameters_of_every_real_kind_still_draw():
    rng = default_rng(0, backend="numpy")
    for shape in (2, 2.0, True, np.float32(2.0), np.int64(2), [2, 3], np.array([2, 3], dtype=np.int8)):
        assert np.all(np.isfinite(rng.gamma(shape, size=2)))
    assert np.all(rng.normal(0.0, 0.0, size=3) == 0.0)  # scale 0 is allowed, as in NumPy


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_uniform_and_normal_match_their_laws(xp, dtype):
    rng = default_rng(11, backend=xp.__name__)
    u = to_np(rng.random(200_000, dtype=dtype)).astype(np.float64)
    z = to_np(rng.standard_normal(200_000, dtype=dtype)).astype(np.float64)
    assert u.dtype == np.float64 and np.all((u > 0) & (u < 1))
    assert stats.kstest(u, "uniform").pvalue > ALPHA
    assert stats.kstest(z, "norm").pvalue > ALPHA


def test_parameters_keep_the_requested_dtype(xp):
    rng = default_rng(4, backend=xp.__name__)
    for loc in (1.0, 1, np.float64(1.0), xp.asarray(1.0)):
        assert rng.normal(loc, 2.0, size=3, dtype=np.float32).dtype == np.float32
        assert rng.uniform(loc, 5.0, size=3, dtype=np.float32).dtype == np.float32


def test_per_element_parameters_broadcast(xp):
    """Each column's draws follow its own law: KS of the standardised normals (loc per column, scale 0.5)
    against N(0, 1), and of the rescaled uniforms (low and high per column) against U(0, 1); 5 checks at
    ALPHA. Means alone passed with the scale ignored (unit normals have the same means)."""
    rng = default_rng(2, backend=xp.__name__)
    loc = np.array([0.0, 100.0, -100.0])
    x = to_np(rng.normal(xp.asarray(loc), 0.5, size=(4000, 3)))
    assert x.shape == (4000, 3)
    for j in range(3):
        assert stats.kstest((x[:, j] - loc[j]) / 0.5, "norm").pvalue > ALPHA, j
    low, high = np.array([0.0, 10.0]), np.array([1.0, 20.0])
    u = to_np(rng.uniform(xp.asarray(low), xp.asarray(high)))
    assert u.shape == (2,) and 0 < u[0] < 1 and 10 < u[1] < 20
    u = to_np(rng.uniform(xp.asarray(low), xp.asarray(high), size=(4000, 2)))
    for j in range(2):
        assert stats.kstest((u[:, j] - low[j]) / (high[j] - low[j]), "uniform").pvalue > ALPHA, j


# ---------------------------------------------------------------- GPU only
LAUNCH_SHAPES = [(1, 32), (7, 64), (132, 256), (4096, 1024)]


def test_gpu_philox_words_equal_the_twin_for_1e8_words_across_launch_shapes(cp):
    rows = 25_000_000 // len(LAUNCH_SHAPES) + 1  # 4 shapes x 4 words x rows >= 1e8 words
    from gpumcmc import _loader

    fn = _loader.get_function(_fill.FILE, "philox_words", _fill._NAMES)
    words = 0
    for s, (grid, block) in enumerate(LAUNCH_SHAPES):
        host_rng = np.random.default_rng(s)
        ctr = host_rng.integers(0, 2**32, size=(rows, 4), dtype=np.uint32)
        key = host_rng.integers(0, 2**32, size=(rows, 2), dtype=np.uint32)
        out = cp.empty((rows, 4), dtype=cp.uint32)
        fn((grid,), (block,), (cp.asarray(ctr), cp.asarray(key), out, _loader.i64(rows)))
        np.testing.assert_array_equal(out.get(), philox4x32(ctr, key))
        words += out.size
    assert words >= 10**8


@pytest.mark.parametrize("kind", ["uniform", "normal", "exponential"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 3, 4, 1001, 3_000_001])
def test_gpu_fills_equal_the_twin(cp, kind, dtype, n):
    key, off = (0xDEADBEEF, 0x12345678), (1 << 33) + 5
    gpu = _fill.fill_cupy(kind, n, dtype, key, off).get()
    cpu = _fill.fill_numpy(kind, n, dtype, key, off)
    if kind == "uniform":
        assert np.array_equal(gpu, cpu)  # exact conversions: the same bits
    elif dtype == np.float32:
        assert max_ulp_diff(gpu, cpu) <= 1  # float64 inside, rounded once
    else:
        # float64 log and sincospi differ by a few ulp between CUDA and NumPy's libm.
        np.testing.assert_allclose(gpu, cpu, rtol=4e-15, atol=1e-15)


def test_gpu_generator_equals_numpy_generator(cp):
    a = default_rng(123, backend="cupy")
    b = default_rng(123, backend="numpy")
    for dtype in (np.float32, np.float64):
        assert np.array_equal(a.random((100, 7), dtype=dtype).get(), b.random((100, 7), dtype=dtype))
    assert max_ulp_diff(a.standard_normal(10_000, dtype=np.float32), b.standard_normal(10_000, dtype=np.float32)) <= 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_uniform_at_is_the_fill_at_those_elements(xp, dtype):
    """uniform_at gives the elements of a larger uniform fill, exactly, in any shape and order, and
    across a change of the call offset's high word."""
    rs = np.random.default_rng(1)
    for offset in (0, 9, (1 << 33) + 5):
        whole = to_np(_fill.fill(xp, "uniform", 4097, dtype, (11, 22), offset))
        idx = rs.integers(0, 4097, size=(13, 7))
        got = _fill.uniform_at(xp, xp.asarray(idx), dtype, (11, 22), offset)
        assert got.dtype == dtype and got.shape == idx.shape
        np.testing.assert_array_equal(to_np(got), whole[idx])
