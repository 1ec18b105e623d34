"""gpumcmc.categorical, categorical_logits and categorical_products.

Tests taking ``xp`` run on NumPy and, where a GPU is present, on CuPy; tests
taking ``cp`` compare the CUDA kernels with the NumPy twin and only run on a GPU.

False-failure budget (per backend): chi-square checks at ALPHA = 1e-4 each:
36 in test_chi_square_against_the_normalised_weights, 12 in
test_logits_chi_square, 2 in test_float64_dynamic_range_chi_square and, on the
GPU only, 6 in test_gpu_chi_square_with_many_draws; at most 56 checks, so a
correct sampler fails with probability below 6e-3 for seeds chosen blind. The
seeds are fixed: a pass is a pass forever.
"""


import numpy as np
import pytest
from scipy import stats

import gpumcmc
from conftest import ALPHA, to_np
from gpumcmc import categorical, categorical_logits, categorical_products
import butterfly_reference as _butterfly
from gpumcmc.discrete import METHODS, choose_method, prefix_draw, row_uniforms
from gpumcmc.random import default_rng, philox4x32

DTYPES = [np.float32, np.float64]
EDGE_K = [1, 2, 31, 32, 33, 1024, 1025]


def _rng(xp, seed):
    return default_rng(seed, backend="numpy" if xp is np else "cupy")


def _exact_weights(rng, n, K, dtype, zero_frac=0.3):
    """Small integers (sums exact in float32), some zeros, no zero row."""
    w = rng.integers(1, 8, (n, K)).astype(dtype)
    w[rng.random((n, K)) < zero_frac] = 0
    w[w.sum(axis=1) == 0, rng.integers(0, K)] = 1
    return w


def _float_weights(rng, n, K, dtype, zero_frac=0.3):
    w = rng.lognormal(0.0, 1.0, (n, K)).astype(dtype)
    w[rng.random((n, K)) < zero_frac] = 0
    w[w.sum(axis=1) == 0, 0] = 1
    return w


def _uniforms(n, dtype, seed, offset=0):
    return row_uniforms(0, n, dtype, default_rng(seed).key, offset)


def _assert_near_ties(w, u, a, b, slack):
    """Rows where the index arrays a and b differ must be ties within rounding."""
    diff = np.flatnonzero(a != b)
    if diff.size == 0:
        return 0
    p = np.cumsum(w[diff].astype(np.float64), axis=1)
    total = p[:, -1]
    k = np.minimum(a[diff], b[diff])
    gap = np.abs(p[np.arange(diff.size), k] - u[diff].astype(np.float64) * total)
    eps = np.finfo(w.dtype).eps
    assert np.all(gap <= slack * eps * total), (diff, gap / total)
    return diff.size


# -- the rule and the uniform ------------------------------------------------------

def test_a_seed_draws_on_the_inputs_array_module():
    # A stream made from a seed followed the default backend, so on a GPU machine NumPy weights gave a CuPy
    # result (and a NumPy out= raised a TypeError), against categorical's docstring: it follows the inputs.
    from gpumcmc import discrete

    assert discrete._stream_for(0, np.ones(3))._backend == "numpy"
    assert discrete._stream_for(None, np.ones(3), [0], [1])._backend == "numpy"
    g = default_rng(0, backend="numpy")
    assert discrete._stream_for(g, np.ones(3)) is g  # a Generator is taken as it is


def test_gpu_products_wide_indices_out_of_range_are_refused(cp):
    # int64 indices were cast to int32, so 2**32 + 1 became row 1 and was drawn from silently.
    theta, phi = cp.ones((5, 3)), cp.ones((4, 3))
    with pytest.raises(ValueError, match="rows"):
        categorical_products(theta, phi, cp.asarray([2**32 + 1], cp.int64), cp.asarray([0]), 0)
    with pytest.raises(ValueError, match="cols"):
        categorical_products(theta, phi, cp.asarray([0]), cp.asarray([-(2**32) + 2], cp.int64), 0)
    # narrower and unsigned index types are taken as before (a clip to -1 does not fit them)
    for dt in (np.uint32, np.int16, np.uint64):
        got = categorical_products(theta, phi, cp.asarray([4, 0], dt), cp.asarray([3, 1], dt), 0)
        np.testing.assert_array_equal(to_np(got), to_np(categorical_products(theta, phi, cp.asarray([4, 0]),
                                                                             cp.asarray([3, 1]), 0)))


def test_wide_indices_stay_out_of_range_in_the_int32_cast():
    # The GPU path's int32 cast of 64-bit token indices wrapped 2**32 + 1 to 1, a valid row; they are clipped to
    # [-1, bound] in the same pass (shown here with NumPy, whose clip CuPy mirrors).
    from gpumcmc import discrete

    got = discrete._index32(np, np.array([2**32 + 1, 3, -(2**32) + 2, -7], np.int64), 5)
    assert got.dtype == np.int32 and got.tolist() == [5, 3, -1, -1]


def test_gpu_seed_and_numpy_weights_give_numpy(cp):
    w = np.random.default_rng(1).random((50, 6))
    got = categorical(w, 7, out=np.empty(50, np.int64))
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, to_np(categorical(cp.asarray(w), 7)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_each_row_uses_the_philox_uniform_of_its_index(dtype):
    key = default_rng(11).key
    n = 70
    w0w1 = to_np(philox4x32(
        np.stack([np.arange(n), np.zeros(n), np.full(n, 3), np.zeros(n)], axis=1).astype(np.uint32),
        np.array(key, dtype=np.uint32)))
    u = row_uniforms(0, n, dtype, key, 3)
    w0, w1 = w0w1[:, 0].astype(np.uint64), w0w1[:, 1].astype(np.uint64)
    if dtype == np.float32:
        expect = ((w0 >> np.uint64(9)).astype(np.float32) + np.float32(0.5)) * np.float32(2.0**-23)
    else:
        expect = (((w0 << np.uint64(20)) | (w1 >> np.uint64(12))).astype(np.float64) + 0.5) * 2.0**-52
    assert u.dtype == dtype and np.array_equal(u, expect)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", METHODS)
def test_index_is_the_first_prefix_above_u_times_total(xp, dtype, method):
    rng = np.random.default_rng(1)
    n, K = 333, 45
    w = _exact_weights(rng, n, K, dtype)
    rg = _rng(xp, 11)
    for call in range(3):  # call c uses generator offset c
        got = to_np(categorical(xp.asarray(w), rng=rg, method=method))
        u = _uniforms(n, dtype, 11, offset=call)
        p = np.cumsum(w, axis=1)
        assert np.array_equal(got, np.argmax(p > (u * p[:, -1])[:, None], axis=1))
    assert rg.offset == 3


@pytest.mark.parametrize("K", [2, 3, 40, 1025])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", METHODS)
def test_an_exact_tie_goes_past_zero_weights_to_the_next_positive_one(xp, dtype, method, K):
    # Row r has weight u_r at j_r and 1 - u_r at k_r > j_r, zeros elsewhere: every
    # sum is exact, total = 1 and u * total = u_r equals the prefix from j_r up to
    # k_r - 1. The strict rule (prefix > u * total) must pick k_r, skipping the zeros.
    n = 32 * 4 + 1
    rng = np.random.default_rng(K)
    u = _uniforms(n, dtype, 21)
    j = rng.integers(0, K - 1, n)
    k = j + 1 + (rng.integers(0, K, n) % (K - 1 - j))
    w = np.zeros((n, K), dtype=dtype)
    w[np.arange(n), j] = u
    w[np.arange(n), k] = dtype(1) - u
    assert np.all(w.sum(axis=1, dtype=dtype) == 1)
    got = to_np(categorical(xp.asarray(w), rng=_rng(xp, 21), method=method))
    assert np.array_equal(got, k)


@pytest.mark.parametrize("K", EDGE_K)
@pytest.mark.parametrize("dtype", DTYPES)
def test_methods_agree_exactly_when_sums_are_exact(xp, dtype, K):
    rng = np.random.default_rng(K)
    n = 32 * 9 + 7
    w = xp.asarray(_exact_weights(rng, n, K, dtype))
    got = {m: to_np(categorical(w, rng=_rng(xp, 3), method=m)) for m in (*METHODS, "auto")}
    ref = prefix_draw(to_np(w), _uniforms(n, dtype, 3))
    for m, idx in got.items():
        assert idx.dtype == np.int64
        assert np.array_equal(idx, ref), m


@pytest.mark.parametrize("K", EDGE_K)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", METHODS)
def test_zero_weights_are_never_drawn(xp, dtype, method, K):
    rng = np.random.default_rng(100 + K)
    n = 32 * 6 + 3
    w = (rng.lognormal(0, 4, (n, K)) * (rng.random((n, K)) < 0.1)).astype(dtype)
    single = rng.integers(0, K, n)
    w[: n // 3] = 0
    w[np.arange(n // 3), single[: n // 3]] = rng.lognormal(0, 4, n // 3)  # one non-zero weight
    w[w.sum(axis=1) == 0, K - 1] = 1
    idx = to_np(categorical(xp.asarray(w), rng=_rng(xp, 5), method=method))
    assert np.all(w[np.arange(n), idx] > 0)
    assert np.array_equal(idx[: n // 3], single[: n // 3])


@pytest.mark.parametrize("K", [33, 257, 1025])
@pytest.mark.parametrize("dtype", DTYPES)
def test_methods_differ_only_near_ties(xp, dtype, K):
    rng = np.random.default_rng(7 * K)
    n = 4096
    w = _float_weights(rng, n, K, dtype)
    u = _uniforms(n, dtype, 9)
    idx = {m: to_np(categorical(xp.asarray(w), rng=_rng(xp, 9), method=m)) for m in METHODS}
    assert np.array_equal(idx["transpose"], idx["prefix"])  # same prefix values
    # The butterfly adds in pairs within a block, the others left to right: each
    # prefix value differs by at most ~K rounding steps of the total.
    ties = _assert_near_ties(w, u, idx["butterfly"], idx["prefix"], slack=2 * K)
    assert ties <= 3
    # "warp" adds chunk totals and lane prefixes by shuffles (its twin is "prefix").
    assert _assert_near_ties(w, u, idx["warp"], idx["prefix"], slack=2 * K) <= 3


# -- distribution ----------------------------------------------------------------------

def _chi_square(idx, w):
    counts = np.bincount(idx, minlength=w.size)
    expected = w.astype(np.float64) / w.sum(dtype=np.float64) * idx.size
    keep = expected > 0
    assert counts[~keep].sum() == 0  # zero weights never drawn
    return stats.chisquare(counts[keep], expected[keep]).pvalue


@pytest.mark.parametrize("K", [2, 31, 32, 33, 1024, 1025])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", METHODS)
def test_chi_square_against_the_normalised_weights(xp, dtype, method, K):
    # 36 checks at ALPHA. Weights 1..7 and zeros; at least 10 expected per category.
    w = (1 + np.arange(K) % 7).astype(dtype)
    w[3::11] = 0
    n = max(2000, 40 * K)
    idx = to_np(categorical(xp.broadcast_to(xp.asarray(w), (n, K)), rng=_rng(xp, 1000 + K), method=method))
    assert _chi_square(idx, w) > ALPHA


@pytest.mark.parametrize("method", METHODS)
def test_one_category_is_always_drawn(xp, method):
    for dtype in DTYPES:
        w = np.random.default_rng(0).lognormal(0, 5, (100, 1)).astype(dtype)
        assert np.array_equal(to_np(categorical(xp.asarray(w), rng=_rng(xp, 0), method=method)), np.zeros(100))


@pytest.mark.parametrize("method", METHODS)
def test_float64_dynamic_range(xp, method):
    rng = np.random.default_rng(3)
    n, K = 500, 300
    w = 10.0 ** rng.uniform(-30, 30, (n, K))
    base = to_np(categorical(xp.asarray(w), rng=_rng(xp, 8), method=method))
    # Scaling by a power of two is exact: same sums, same draws.
    for scale in (2.0**-99, 2.0**99):  # about 1.6e-30 and 6.3e29
        assert np.array_equal(to_np(categorical(xp.asarray(w * scale), rng=_rng(xp, 8), method=method)), base)
    tiny = np.full((n, K), 1e-30)
    tiny[:, 17] = 1e30
    assert np.all(to_np(categorical(xp.asarray(tiny), rng=_rng(xp, 8), method=method)) == 17)
    assert np.all(w[np.arange(n), base] > 0)


@pytest.mark.parametrize("method", ["prefix", "butterfly"])
def test_float64_dynamic_range_chi_square(xp, method):
    # 2 checks at ALPHA: 1e-30 weights are (almost) never drawn, 1e30 : 3e30 is 1 : 3.
    w = np.array([1e-30, 1e30, 1e-30, 3e30, 1e-30] + [1e-30] * 40)
    idx = to_np(categorical(xp.broadcast_to(xp.asarray(w), (4000, w.size)), rng=_rng(xp, 4), method=method))
    assert set(np.unique(idx)) <= {1, 3}
    counts = np.bincount(idx, minlength=4)[[1, 3]]
    assert stats.chisquare(counts, [1000, 3000]).pvalue > ALPHA


# -- logits -------------------------------------------------------------------------

@pytest.mark.parametrize("K", EDGE_K)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", METHODS)
def test_logits_are_weights_exp_of_logits_minus_max(dtype, method, K):
    rng = np.random.default_rng(K + 1)
    n = 100
    z = (rng.normal(0, 3, (n, K)) + rng.normal(0, 300, (n, 1))).astype(dtype)
    z[rng.random((n, K)) < 0.2] = -np.inf
    z[:, 0] = np.where(np.isinf(z).all(axis=1), 0, z[:, 0])
    got = categorical_logits(z, rng=default_rng(2, backend="numpy"), method=method)
    w = np.exp(z - z.max(axis=1, keepdims=True))
    assert np.array_equal(got, categorical(w, rng=default_rng(2, backend="numpy"), method=method))
    assert np.all(np.isfinite(z[np.arange(n), got]))  # -inf (zero weight) never drawn


@pytest.mark.parametrize("K", [33, 1025])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", METHODS)
def test_logits_chi_square(xp, dtype, method, K):
    # 12 checks at ALPHA.
    z = (np.log1p(np.arange(K) % 5) - 1000.0).astype(dtype)  # log 1 .. log 5, far from 0
    z[::7] = -np.inf
    n = max(4000, 30 * K)
    idx = to_np(categorical_logits(xp.broadcast_to(xp.asarray(z), (n, K)), rng=_rng(xp, 50 + K), method=method))
    assert _chi_square(idx, np.exp(z.astype(np.float64) + 1000.0)) > ALPHA


# -- products -----------------------------------------------------------------------

def _lda_like(rng, T, M, V, K, dtype, sort=True):
    theta = rng.gamma(0.3, 1.0, (M, K)).astype(dtype)
    phi = rng.gamma(0.3, 1.0, (V, K)).astype(dtype)
    theta[1, : K // 2] = 0
    phi[2, K // 3:] = 0
    theta[:, K - 1] += dtype(1e-3)  # every token keeps a positive weight
    phi[:, K - 1] += dtype(1e-3)
    rows = rng.integers(0, M, T)
    cols = rng.integers(0, V, T)
    if sort:
        order = np.lexsort((rows, cols))
        rows, cols = rows[order], cols[order]
    return theta, phi, rows, cols


@pytest.mark.parametrize("K", [1, 2, 31, 32, 33, 64, 1025])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", METHODS)
def test_products_are_categorical_of_the_products(xp, dtype, method, K):
    rng = np.random.default_rng(K + 7)
    theta, phi, rows, cols = _lda_like(rng, 32 * 11 + 9, 13, 17, K, dtype)
    got = to_np(categorical_products(xp.asarray(theta), xp.asarray(phi), xp.asarray(rows), xp.asarray(cols),
                                     rng=_rng(xp, 6), method=method))
    # theta * phi rounded once, then the same draw as from materialised weights.
    ref = categorical(theta[rows] * phi[cols], rng=default_rng(6, backend="numpy"), method=method)
    assert np.array_equal(got, ref)


def test_products_keep_the_shape_of_rows(xp):
    theta, phi, rows, cols = _lda_like(np.random.default_rng(0), 24, 5, 6, 9, np.float32, sort=False)
    got = categorical_products(xp.asarray(theta), xp.asarray(phi), xp.asarray(rows.reshape(4, 6)),
                               xp.asarray(cols.reshape(4, 6)), rng=_rng(xp, 1))
    flat = categorical_products(xp.asarray(theta), xp.asarray(phi), xp.asarray(rows), xp.asarray(cols),
                                rng=_rng(xp, 1))
    assert got.shape == (4, 6)
    assert np.array_equal(to_np(got).reshape(-1), to_np(flat))


# -- invalid input ---------------------------------------------------------------------

BAD_WEIGHT_ROWS = [
    ([0.0, 0.0, 0.0], "has no positive weight"),
    ([1.0, np.nan, 1.0], "contains NaN"),
    ([1.0, np.inf, 1.0], "contains inf"),
]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("row,message", BAD_WEIGHT_ROWS)
def test_bad_rows_raise_or_give_minus_one(xp, method, row, message):
    w = np.array([[1.0, 2.0, 3.0], row, [0.0, 0.0, 5.0]])
    with pytest.raises(ValueError, match=rf"weights row 1 {message}"):
        categorical(xp.asarray(w), rng=_rng(xp, 0), method=method)
    with gpumcmc.validation(False):
        got = to_np(categorical(xp.asarray(w), rng=_rng(xp, 0), method=method))
    assert got[1] == -1 and got[2] == 2


def test_bad_row_is_named_by_its_batch_index(xp):
    w = np.ones((2, 3, 4))
    w[1, 2] = 0
    with pytest.raises(ValueError, match=r"row \(1, 2\) has no positive weight"):
        categorical(xp.asarray(w), rng=_rng(xp, 0))


@pytest.mark.parametrize("method", METHODS)
def test_negative_row_is_named(xp, method):
    """A row with a negative weight: the error names it on both backends (NumPy's once said only "found
    values < 0"). With validation off such a row is not detected (both backends draw the same index)."""
    w = np.array([[1.0, 2.0, 3.0], [1.0, -1.0, 1.0], [0.0, 0.0, 5.0]])
    with pytest.raises(ValueError, match=r"weights must be non-negative; row 1 holds a value < 0"):
        categorical(xp.asarray(w), rng=_rng(xp, 0), method=method)
    with gpumcmc.validation(False):
        got = to_np(categorical(xp.asarray(w), rng=_rng(xp, 0), method=method))
    assert got[1] == 0 and got[2] == 2
    # the first bad row of any kind, and within a row NaN before inf before a negative weight, as the kernels
    for rows, message in (([[0.0, 0.0], [1.0, -1.0]], r"row 0 has no positive weight"),
                          ([[np.nan, -1.0], [1.0, 1.0]], r"row 0 contains NaN"),
                          ([[1.0, 1.0], [np.nan, 1.0], [1.0, -1.0]], r"row 1 contains NaN"),
                          ([[1.0, 1.0], [np.inf, -1.0]], r"row 1 contains \+?inf")):
        with pytest.raises(ValueError, match=message):
            categorical(xp.asarray(np.array(rows)), rng=_rng(xp, 0), method=method)


@pytest.mark.parametrize("dtype", DTYPES)
def test_negative_weights_raise(xp, dtype):
    for bad in (-1.0, -np.inf):
        w = np.array([[1.0, 2.0], [3.0, bad]], dtype=dtype)
        with pytest.raises(ValueError, match="non-negative"):
            categorical(xp.asarray(w), rng=_rng(xp, 0))


def test_a_sum_that_overflows_float32_raises(xp):
    w = np.array([[3e38, 3e38, 0.0], [1.0, 1.0, 1.0]], dtype=np.float32)
    with pytest.raises(ValueError, match="largest float32"):
        categorical(xp.asarray(w), rng=_rng(xp, 0))
    assert to_np(categorical(xp.asarray(w.astype(np.float64)), rng=_rng(xp, 0)))[0] in (0, 1)


@pytest.mark.parametrize("row,message", [([0.0, np.nan], "contains NaN"), ([np.inf, 0.0], r"contains \+inf"),
                                          ([-np.inf, -np.inf], "is -inf everywhere")])
def test_bad_logits_raise(xp, row, message):
    z = np.array([[0.0, 1.0], row])
    with pytest.raises(ValueError, match=rf"logits row 1 {message}"):
        categorical_logits(xp.asarray(z), rng=_rng(xp, 0))
    with gpumcmc.validation(False):
        assert to_np(categorical_logits(xp.asarray(z), rng=_rng(xp, 0)))[1] == -1


def test_bad_products_raise(xp):
    theta = np.array([[1.0, 0.0], [0.0, 1.0]])
    phi = np.array([[0.0, 1.0], [1.0, 1.0]])
    args = lambda th, ph, r, c: (xp.asarray(th), xp.asarray(ph), xp.asarray(r), xp.asarray(c))  # noqa: E731
    with pytest.raises(ValueError, match=r"of token t = 1 has no positive weight"):
        categorical_products(*args(theta, phi, [1, 0], [1, 0]), rng=_rng(xp, 0))
    with pytest.raises(ValueError, match=r"rows must lie in \[0, 2\)"):
        categorical_products(*args(theta, phi, [0, 2], [1, 1]), rng=_rng(xp, 0))
    with pytest.raises(ValueError, match=r"cols must lie in \[0, 2\)"):
        categorical_products(*args(theta, phi, [0, 0], [-1, 1]), rng=_rng(xp, 0))
    with pytest.raises(ValueError, match="theta must be non-negative"):
        categorical_products(*args(-theta, phi, [0, 0], [1, 1]), rng=_rng(xp, 0))
    with gpumcmc.validation(False):
        assert to_np(categorical_products(*args(theta, phi, [1, 0], [1, 0]), rng=_rng(xp, 0))).tolist() == [1, -1]


def test_argument_errors():
    w = np.ones((2, 3))
    with pytest.raises(ValueError, match="method must be"):
        categorical(w, rng=0, method="alias")
    with pytest.raises(TypeError, match="float32 or float64"):
        categorical(np.ones((2, 3), dtype=np.int64), rng=0)
    with pytest.raises(ValueError, match="at least one axis"):
        categorical(np.float64(1.0), rng=0)
    with pytest.raises(ValueError, match="out of range"):
        categorical(w, rng=0, axis=2)
    with pytest.raises(TypeError, match="share a dtype"):
        categorical_products(w, w.astype(np.float32), [0], [0], rng=0)
    with pytest.raises(ValueError, match="same K"):
        categorical_products(w, np.ones((2, 4)), [0], [0], rng=0)
    with pytest.raises(TypeError, match="integers"):
        categorical_products(w, w, [0.0], [0], rng=0)
    with pytest.raises(ValueError, match="one shape"):
        categorical_products(w, w, [0, 1], [0], rng=0)


# -- shapes, out, axis, empty input ----------------------------------------------------

def test_batch_shape_axis_and_empty_input(xp):
    w = np.random.default_rng(0).random((2, 3, 5))
    got = to_np(categorical(xp.asarray(w), rng=_rng(xp, 1)))
    assert got.shape == (2, 3)
    assert np.array_equal(got.reshape(-1), to_np(categorical(xp.asarray(w.reshape(6, 5)), rng=_rng(xp, 1))))
    moved = to_np(categorical(xp.asarray(np.moveaxis(w, -1, 0)), rng=_rng(xp, 1), axis=0))
    assert np.array_equal(moved, got)
    assert to_np(categorical(xp.asarray(w[0, 0]), rng=_rng(xp, 1))).shape == ()
    assert to_np(categorical(xp.zeros((0, 5)), rng=_rng(xp, 1))).shape == (0,)
    assert to_np(categorical(xp.zeros((2, 0, 5)), rng=_rng(xp, 1))).shape == (2, 0)
    assert to_np(categorical(xp.zeros((0, 0)), rng=_rng(xp, 1))).shape == (0,)
    assert to_np(categorical_logits(xp.zeros((0, 3)), rng=_rng(xp, 1))).shape == (0,)
    empty = xp.zeros(0, dtype=xp.int64)
    assert to_np(categorical_products(xp.ones((2, 3)), xp.ones((2, 3)), empty, empty, rng=_rng(xp, 1))).shape == (0,)
    with pytest.raises(ValueError, match="no categories"):
        categorical(xp.zeros((3, 0)), rng=_rng(xp, 1))


def test_out_is_filled_in_place(xp):
    w = xp.asarray(np.random.default_rng(0).random((40, 7)))
    ref = to_np(categorical(w, rng=_rng(xp, 2)))
    for dt in (np.int32, np.int64):
        out = xp.full(40, -5, dtype=dt)
        res = categorical(w, rng=_rng(xp, 2), out=out)
        assert res is out and np.array_equal(to_np(out), ref)
    with pytest.raises(ValueError, match="shape"):
        categorical(w, rng=_rng(xp, 2), out=xp.empty(39, dtype=np.int64))
    with pytest.raises(TypeError, match="int32 or int64"):
        categorical(w, rng=_rng(xp, 2), out=xp.empty(40, dtype=np.float64))
    with pytest.raises(ValueError, match="C-contiguous"):
        categorical(w, rng=_rng(xp, 2), out=xp.empty(80, dtype=np.int64)[::2])


def test_same_seed_same_draws_and_one_offset_per_call(xp):
    w = xp.asarray(np.random.default_rng(0).random((500, 40)))
    a = _rng(xp, 5)
    first, second = to_np(categorical(w, rng=a)), to_np(categorical(w, rng=a))
    assert a.offset == 2
    assert np.array_equal(first, to_np(categorical(w, rng=_rng(xp, 5))))
    assert (first != second).mean() > 0.5


def test_twin_does_not_depend_on_its_chunk_size(monkeypatch):
    """The NumPy twin's draws are the same in one chunk of rows and in chunks of 32 rows (the knob at 100
    elements: 32 rows, its least, of K = 70); the chunks are counted, so the knob reached the twin."""
    import gpumcmc.discrete as discrete
    from gpumcmc._config import config
    w = np.random.default_rng(0).random((1000, 70)).astype(np.float32)
    chunks = []
    real = discrete.counter_uniforms
    monkeypatch.setattr(discrete, "counter_uniforms", lambda c, *a: (chunks.append(c.size), real(c, *a))[1])
    ref = {m: categorical(w, rng=3, method=m) for m in METHODS}
    assert chunks == [1000] * len(METHODS)
    monkeypatch.setattr(config, "categorical_twin_chunk", 100)
    for m in METHODS:
        chunks.clear()
        assert np.array_equal(categorical(w, rng=3, method=m), ref[m])
        assert chunks == [32] * 31 + [8], m


# The rule the comment above discrete._AUTO_RULE gives, at K on both sides of each bound:
# (form, dtype) -> [(K, method), ...].
AUTO_RULE = {
    ("rows", np.float32): [(1, "prefix"), (16, "prefix"), (17, "butterfly"), (256, "butterfly"), (257, "warp"),
                           (5000, "warp")],
    ("rows", np.float64): [(1, "butterfly"), (33, "butterfly"), (1024, "butterfly"), (5000, "butterfly")],
    ("products", np.float32): [(1, "prefix"), (24, "prefix"), (25, "butterfly"), (96, "butterfly"), (97, "warp"),
                               (5000, "warp")],
    ("products", np.float64): [(1, "prefix"), (28, "prefix"), (29, "warp"), (1024, "warp")],
}


def test_auto_uses_the_rule_of_choose_method(monkeypatch):
    """choose_method gives the documented rule, and method="auto" draws with choose_method's method in
    categorical, categorical_logits and categorical_products (the method the draw is handed, seen by a spy:
    the methods' draws agree but near ties, so equal draws would not show which one ran)."""
    import gpumcmc.discrete as discrete

    for (form, dtype), cases in AUTO_RULE.items():
        for K, method in cases:
            assert choose_method(K, dtype, products=form == "products") == method, (form, dtype, K)
    used = []
    real = discrete._draw_numpy
    monkeypatch.setattr(discrete, "_draw_numpy", lambda wo, n, K, dt, method, *a, **k: (
        used.append(method), real(wo, n, K, dt, method, *a, **k))[1])
    rs = np.random.default_rng(0)
    for (form, dtype), cases in AUTO_RULE.items():
        for K, method in cases:
            used.clear()
            if form == "rows":
                w = rs.random((3, K)).astype(dtype)
                categorical(w, rng=1)
                categorical_logits(np.log(w), rng=1)
                assert used == [method, method], (form, dtype, K, used)
            else:
                theta, phi = rs.random((2, K)).astype(dtype), rs.random((3, K)).astype(dtype)
                categorical_products(theta, phi, [0, 1, 1], [2, 0, 1], rng=1)
                assert used == [method], (form, dtype, K, used)


def test_butterfly_twin_is_the_w32_emulation():
    w = np.random.default_rng(0).random((100, 77)).astype(np.float32)
    u = _uniforms(100, np.float32, 4)
    assert np.array_equal(categorical(w, rng=4, method="butterfly"), _butterfly.draw(w, u, 32))


# -- GPU against the twin ---------------------------------------------------------------

GPU_K = [1, 2, 31, 32, 33, 64, 1024, 1025]


def _messy_weights(rng, n, K, dtype):
    """Floats over many scales, zeros, zero rows, a NaN row and an inf row (validation off)."""
    w = _float_weights(rng, n, K, dtype, zero_frac=0.4) * (10.0 ** rng.integers(-3, 4, (n, 1))).astype(dtype)
    w[5] = 0
    w[6, K // 2] = np.nan
    w[7, K - 1] = np.inf
    return w


def _assert_twin(w, u, got, ref, method, K):
    """The twin's draws exactly, but for "warp", whose prefix sums are added in
    another order than its twin's cumsum: there, near ties only (at most 2 rows)."""
    if method != "warp":
        assert np.array_equal(got, ref)
        return
    bad = ~np.isfinite(w).all(axis=1)
    assert np.array_equal(got[bad], ref[bad])
    ok = ~bad
    assert _assert_near_ties(w[ok], u[ok], got[ok], ref[ok], slack=2 * K + 8) <= 2


@pytest.mark.parametrize("K", GPU_K)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", METHODS)
def test_gpu_weights_match_the_twin_exactly(cp, dtype, method, K):
    rng = np.random.default_rng(K)
    n = 32 * 37 + 5
    w = _messy_weights(rng, n, K, dtype)
    with gpumcmc.validation(False):
        got = categorical(cp.asarray(w), rng=default_rng(12, backend="cupy"), method=method)
        ref = categorical(w, rng=default_rng(12, backend="numpy"), method=method)
    assert got.dtype == np.int64
    _assert_twin(w, _uniforms(n, dtype, 12), to_np(got), ref, method, K)
    assert ref[5] == ref[6] == ref[7] == -1


@pytest.mark.parametrize("K", GPU_K)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", METHODS)
def test_gpu_products_match_the_twin_exactly(cp, dtype, method, K):
    rng = np.random.default_rng(K + 1)
    for sort in (True, False):
        theta, phi, rows, cols = _lda_like(rng, 32 * 29 + 3, 41, 23, K, dtype, sort=sort)
        got = categorical_products(cp.asarray(theta), cp.asarray(phi), cp.asarray(rows), cp.asarray(cols),
                                   rng=default_rng(13, backend="cupy"), method=method)
        ref = categorical_products(theta, phi, rows.astype(np.int32), cols, rng=default_rng(13, backend="numpy"),
                                   method=method)
        _assert_twin(theta[rows] * phi[cols], _uniforms(rows.size, dtype, 13), to_np(got), ref, method, K)


@pytest.mark.parametrize("K", GPU_K)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", METHODS)
def test_gpu_logits_match_the_twin_up_to_exp_rounding(cp, dtype, method, K):
    rng = np.random.default_rng(K + 2)
    n = 32 * 37 + 5
    z = (rng.normal(0, 2, (n, K)) + rng.normal(0, 100, (n, 1))).astype(dtype)
    z[rng.random((n, K)) < 0.3] = -np.inf
    z[:, K - 1] = np.where(np.isinf(z).all(axis=1), 0, z[:, K - 1])
    got = to_np(categorical_logits(cp.asarray(z), rng=default_rng(14, backend="cupy"), method=method))
    ref = categorical_logits(z, rng=default_rng(14, backend="numpy"), method=method)
    # CUDA's exp and NumPy's may differ in the last bit: only near ties may differ.
    w = np.exp(z.astype(np.float64) - z.max(axis=1, keepdims=True))
    ties = _assert_near_ties(w.astype(dtype), _uniforms(n, dtype, 14), got, ref, slack=4 * K + 8)
    assert ties <= 2
    assert np.all(np.isfinite(z[np.arange(n), got]))


@pytest.mark.parametrize("dtype,K", [(np.float32, 2944), (np.float32, 2945), (np.float32, 5000),
                                     (np.float64, 1472), (np.float64, 1473), (np.float64, 3000)])
@pytest.mark.parametrize("method", ["transpose", "butterfly"])
def test_gpu_block_prefixes_in_shared_or_global_memory(cp, dtype, method, K):
    # 48 KB of shared memory per block of 4 warps holds the block prefixes up to
    # K = 2944 (float32) / 1472 (float64); beyond, they go to global scratch.
    rng = np.random.default_rng(K)
    n = 32 * 5 + 1
    w = _float_weights(rng, n, K, dtype)
    got = categorical(cp.asarray(w), rng=default_rng(15, backend="cupy"), method=method)
    assert np.array_equal(to_np(got), categorical(w, rng=default_rng(15, backend="numpy"), method=method))
    theta, phi, rows, cols = _lda_like(rng, 100, 7, 9, K, dtype)
    got = categorical_products(cp.asarray(theta), cp.asarray(phi), cp.asarray(rows), cp.asarray(cols),
                               rng=default_rng(15, backend="cupy"), method=method)
    assert np.array_equal(to_np(got), categorical_products(theta, phi, rows, cols,
                                                           rng=default_rng(15, backend="numpy"), method=method))


# (dtype, K): vectors of 4, 2 and 1 elements, one segment up to 1024 (float32)
# or 512 (float64) categories, several beyond.
WARP_SHAPES = [(np.float32, K) for K in (1, 3, 6, 8, 100, 128, 129, 1000, 1024, 1026, 1027, 2048, 5003)] + \
              [(np.float64, K) for K in (1, 3, 64, 65, 512, 513, 514, 1024, 3001)]


@pytest.mark.parametrize("dtype,K", WARP_SHAPES)
def test_gpu_warp_method_vector_widths_and_segments(cp, dtype, K):
    from gpumcmc.discrete import warp_shape

    rng = np.random.default_rng(K)
    n = 32 * 13 + 5
    w = _messy_weights(rng, n, K, dtype)
    with gpumcmc.validation(False):  # _messy_weights has rows with no index
        got = to_np(categorical(cp.asarray(w), rng=default_rng(18, backend="cupy"), method="warp"))
        ref = categorical(w, rng=default_rng(18, backend="numpy"), method="prefix")
    _assert_twin(w, _uniforms(n, dtype, 18), got, ref, "warp", K)
    # Products from rows that start off the vector alignment: a narrower vector.
    theta, phi, rows, cols = _lda_like(rng, 32 * 7 + 1, 9, 11, K, dtype)
    flat = cp.zeros(theta.size + 1, dtype=dtype)
    flat[1:] = cp.asarray(theta.reshape(-1))
    theta_d = flat[1:].reshape(theta.shape)  # contiguous, one element past an aligned start
    if K % 2 == 0:
        assert warp_shape(K, dtype, theta_d)[0] == 1
    got = categorical_products(theta_d, cp.asarray(phi), cp.asarray(rows), cp.asarray(cols),
                               rng=default_rng(19, backend="cupy"), method="warp")
    ref = categorical_products(theta, phi, rows, cols, rng=default_rng(19, backend="numpy"), method="prefix")
    _assert_twin(theta[rows] * phi[cols], _uniforms(rows.size, dtype, 19), to_np(got), ref, "warp", K)


@pytest.mark.parametrize("method", METHODS)
def test_gpu_grid_stride_over_many_rows(cp, method):
    n, K = (1 << 20) + 3, 5  # more warps of rows than the grid launches
    w = _float_weights(np.random.default_rng(1), n, K, np.float32)
    got = categorical(cp.asarray(w), rng=default_rng(16, backend="cupy"), method=method, out=cp.empty(n, np.int32))
    assert np.array_equal(to_np(got), categorical(w, rng=default_rng(16, backend="numpy"), method=method))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", METHODS)
def test_gpu_chi_square_with_many_draws(cp, dtype, method):
    # 6 checks at ALPHA.
    K = 1000
    w = (1 + np.arange(K) % 13).astype(dtype) ** 2
    w[5::17] = 0
    n = 1 << 20
    idx = to_np(categorical(cp.broadcast_to(cp.asarray(w), (n, K)), rng=default_rng(17, backend="cupy"),
                            method=method))
    assert _chi_square(idx, w) > ALPHA


def test_gpu_draws_stay_on_the_device_and_need_no_sync_without_validation(cp):
    w = cp.asarray(np.random.default_rng(0).random((64, 9)))
    with gpumcmc.validation(False):
        got = categorical(w, rng=default_rng(1, backend="numpy"))  # CuPy weights win over the generator's backend
    assert isinstance(got, cp.ndarray)
